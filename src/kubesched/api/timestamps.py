"""The apiserver's timestamp formats, for every layer (metav1.Time and metav1.MicroTime as it prints
them). Pure and light: the leader elector imports it before the framework when ``kubesched run``
starts."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
#: datetime's upper bound (year 10000) in seconds: past it ``datetime`` raises, as it should.
_DATETIME_END = 253402300800


def rfc3339(seconds: float | None = None) -> str:
    """metav1.Time: RFC 3339 in whole seconds, UTC (a fraction is dropped); None: now."""
    if seconds is None:
        seconds = time.time()
    if float(seconds).is_integer() and 0 <= seconds < _DATETIME_END:
        # Whole seconds (a replay's arrivals): no fraction to mind, and a third of datetime's time
        # (one per arriving pod).
        return time.strftime(_RFC3339, time.gmtime(int(seconds)))
    return datetime.fromtimestamp(seconds, UTC).strftime(_RFC3339)


def micro_time(seconds: float | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC; None: now."""
    return datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
