"""A claim's device requests, as the allocator reads them (upstream's ``requestAccessor``:
``exactDeviceRequestAccessor`` and ``deviceSubRequestAccessor`` of
k8s.io/dynamic-resource-allocation/structured/internal/incubating/allocator_incubating.go, v0.37.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def claim_ref(claim: Mapping[str, Any]) -> str:
    """klog.KObj: ``namespace/name``."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """requestAccessor: a request with ``exactly``, or one subrequest of ``firstAvailable``."""

    name: str
    parent: str  # the request's name for a subrequest, else ""
    class_name: str
    mode: str
    count: int
    selectors: tuple[dict[str, Any], ...]
    tolerations: tuple[dict[str, Any], ...]
    admin_access: bool
    #: ``capacity.requests``, as written (parsed by the search, where an error is the pod's).
    capacity: tuple[tuple[str, Any], ...] | None

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


def _request(raw: Mapping[str, Any], parent: str) -> DeviceRequest:
    return DeviceRequest(
        name=str(raw.get("name", "")), parent=parent, class_name=str(raw.get("deviceClassName") or ""),
        mode=str(raw.get("allocationMode") or "ExactCount"), count=int(raw.get("count") or 1),
        selectors=tuple(raw.get("selectors") or ()), tolerations=tuple(raw.get("tolerations") or ()),
        admin_access=raw.get("adminAccess") is True,
        capacity=(None if (raw.get("capacity") or {}).get("requests") is None
                  else tuple(raw["capacity"]["requests"].items())),
    )


def claim_requests(claim: Mapping[str, Any]) -> list[list[DeviceRequest]]:
    """Per request of the claim: ``[request]`` for ``exactly``, the subrequests for ``firstAvailable``."""
    out: list[list[DeviceRequest]] = []
    for raw in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = str(raw.get("name", ""))
        if raw.get("firstAvailable"):
            out.append([_request(sub, name) for sub in raw["firstAvailable"]])
        else:
            exactly = {**(raw.get("exactly") or {}), "name": name}
            out.append([_request(exactly, "")])
    return out
