"""No device given twice, judged from every ResourceClaim event, not only from the end state.

``ClaimLedger`` replays ResourceClaim events (ADDED/MODIFIED/DELETED, in the apiserver's order) and
after each one looks at the devices the changed claim holds: a device (driver, pool, device) may be
held by several allocation results only where DRA allows sharing, as the structured allocator
decides it (k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go,
``isAllocatedDevice``; consumable capacity in allocator_incubating's ``CapacityAllocation``):

* a result with ``adminAccess: true`` does not count as an allocation;
* results with a ``shareID`` share a device of ``allowMultipleAllocations`` — as long as the sum of
  their ``consumedCapacity`` stays within the device's capacity (checked when the capacities are
  given, from the ResourceSlices);
* any other result holds its device alone (two in one claim included).

``ClaimWatch`` records the events of one namespace from the real control plane on a thread (LIST, then
WATCH from its resourceVersion, resumed after each server timeout) and feeds a ledger."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import parse_quantity
from kubesched.testing.controlplane import ControlPlane

#: (driver, pool, device)
DeviceKey = tuple[str, str, str]

RESOURCE = "/apis/resource.k8s.io/v1"


@dataclass(frozen=True)
class Overlap:
    """A moment (the claim event's resourceVersion) when a device was held more than allowed."""

    resource_version: str
    device: DeviceKey
    claims: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"rv {self.resource_version}: {'/'.join(self.device)} {self.why}: {', '.join(self.claims)}"


def device_capacities(slices: Iterable[Mapping[str, Any]]) -> dict[DeviceKey, dict[str, Fraction]]:
    """Each device's capacity (name -> amount) from ResourceSlice objects."""
    out: dict[DeviceKey, dict[str, Fraction]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        for d in spec.get("devices") or []:
            key = (str(spec.get("driver")), str((spec.get("pool") or {}).get("name")), str(d.get("name")))
            out[key] = {name: parse_quantity(c.get("value"))
                        for name, c in (d.get("capacity") or {}).items()}
    return out


@dataclass
class ClaimLedger:
    """The claims' allocations as the events say, and every overlap seen on the way."""

    capacities: Mapping[DeviceKey, Mapping[str, Fraction]] = field(default_factory=dict)
    #: "namespace/name" -> the claim's allocation results
    holding: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: "namespace/name" -> the last resourceVersion seen
    versions: dict[str, str] = field(default_factory=dict)
    overlaps: list[Overlap] = field(default_factory=list)
    events: int = 0
    #: the most claims that held devices at one moment (so a test can tell the ledger saw allocations)
    most_allocated: int = 0
    #: "namespace/name" -> each change of the devices the claim holds: (resourceVersion, devices),
    #: () once deallocated or deleted; for ``held_at``
    changes: dict[str, list[tuple[int, tuple[DeviceKey, ...]]]] = field(default_factory=dict)

    def apply(self, event_type: str, claim: Mapping[str, Any]) -> None:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self.events += 1
        version = str(meta.get("resourceVersion") or "")
        if event_type == "DELETED":
            self.holding.pop(key, None)
            self.versions.pop(key, None)
            self._changed(key, version, ())
            return
        self.versions[key] = version
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = [r for r in (allocation.get("devices") or {}).get("results") or []
                   if r.get("adminAccess") is not True]
        self._changed(key, version, tuple(sorted(_device(r) for r in results)))
        if not results:
            self.holding.pop(key, None)
            return
        self.holding[key] = results
        self.most_allocated = max(self.most_allocated, len(self.holding))
        for device in {_device(r) for r in results}:
            self._check(device, self.versions[key])

    def _changed(self, key: str, version: str, devices: tuple[DeviceKey, ...]) -> None:
        history = self.changes.setdefault(key, [])
        if version.isdigit() and (not history or history[-1][1] != devices):
            history.append((int(version), devices))

    def held_at(self, key: str, resource_version: str) -> tuple[DeviceKey, ...]:
        """The devices claim ``key`` held just before ``resource_version`` (of any object: the
        apiserver's resourceVersions are one etcd revision counter, so a pod's bind and a claim's
        allocation are ordered by them)."""
        held: tuple[DeviceKey, ...] = ()
        for version, devices in self.changes.get(key, []):
            if version >= int(resource_version):
                break
            held = devices
        return held

    def _check(self, device: DeviceKey, resource_version: str) -> None:
        holders = [(name, r) for name, results in sorted(self.holding.items()) for r in results if _device(r) == device]
        if len(holders) < 2:
            return
        names = tuple(name for name, _ in holders)
        if any(not r.get("shareID") for _, r in holders):
            self.overlaps.append(Overlap(resource_version, device, names, f"held by {len(holders)} results"))
            return
        capacity = self.capacities.get(device)
        if capacity is None:
            return
        consumed: dict[str, Fraction] = {}
        for _, r in holders:
            for name, amount in (r.get("consumedCapacity") or {}).items():
                consumed[name] = consumed.get(name, Fraction(0)) + parse_quantity(amount)
        for name, total in sorted(consumed.items()):
            if name in capacity and total > capacity[name]:
                self.overlaps.append(Overlap(resource_version, device, names,
                                             f"shares consume {name} {total} > capacity {capacity[name]}"))


def _device(result: Mapping[str, Any]) -> DeviceKey:
    return str(result.get("driver")), str(result.get("pool")), str(result.get("device"))


class ClaimWatch:
    """Every ResourceClaim event of ``namespace`` from ``start()`` to ``stop()``, into a ``ClaimLedger``.

    ``stop()`` returns once the ledger has caught up with the claims as a LIST after the stop request
    shows them, so no event before the stop is missed; it raises what the watching thread met (an
    ERROR event, e.g. 410 Gone, or a failed request)."""

    def __init__(self, cp: ControlPlane, namespace: str, capacities: Mapping[DeviceKey, Mapping[str, Fraction]]
                 | None = None, window: float = 2.0) -> None:
        self.cp, self.namespace, self.window = cp, namespace, window
        self.ledger = ClaimLedger(capacities=dict(capacities or {}))
        self._path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"claim-watch-{namespace}", daemon=True)
        self._rv = ""

    def start(self) -> ClaimWatch:
        listed = self.cp.get(self._path)
        for claim in listed["items"]:
            claim.setdefault("metadata", {}).setdefault("namespace", self.namespace)
            self.ledger.apply("ADDED", claim)
        self._rv = str(listed["metadata"]["resourceVersion"])
        self._thread.start()
        return self

    def _caught_up(self) -> bool:
        listed = {f"{self.namespace}/{c['metadata']['name']}": str(c["metadata"]["resourceVersion"])
                  for c in self.cp.get(self._path)["items"]}
        return listed == self.ledger.versions

    def _run(self) -> None:
        try:
            while True:
                for event in self.cp.watch(self._path, timeout=self.window, resourceVersion=self._rv,
                                           allowWatchBookmarks="true"):
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        raise RuntimeError(f"watch of {self._path} failed: {obj.get('message') or obj}")
                    self._rv = str((obj.get("metadata") or {}).get("resourceVersion") or self._rv)
                    if kind != "BOOKMARK":
                        self.ledger.apply(str(kind), obj)
                if self._stop.is_set() and self._caught_up():
                    return
        except BaseException as e:  # reported by stop(), in the test's thread
            self._error = e

    def stop(self) -> ClaimLedger:
        self._stop.set()
        self._thread.join(timeout=120)
        if self._error is not None:
            raise self._error
        if self._thread.is_alive():
            raise TimeoutError(f"the watch of {self._path} did not catch up within 120 s")
        return self.ledger
