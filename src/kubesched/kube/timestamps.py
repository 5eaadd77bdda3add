"""The apiserver's timestamp formats (kept apart from kube/events.py so that the leader elector,
imported before the framework when ``kubesched run`` starts, does not import it)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def micro_time(ts: float | None = None) -> str:
    """metav1.MicroTime as the apiserver prints it: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(ts: float | None = None) -> str:
    """metav1.Time as the apiserver prints it: RFC 3339 in whole seconds, UTC."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
