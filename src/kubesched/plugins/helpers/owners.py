"""A pod's controller: metav1.GetControllerOfNoCopy
(staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.snapshot.pod import PodInfo


def controller_of(pod: PodInfo) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (pod.raw.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None
