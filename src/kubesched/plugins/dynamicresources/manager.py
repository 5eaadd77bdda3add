"""The DRA state DynamicResources keeps between pods and shares with other plugins.

Port of pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go (v1.37.1,
``DefaultDRAManager``): the claims as the scheduler sees them (the assume cache, assumed.py), the
allocations Reserve made that PreBind has not written (``inFlightAllocations``), the ResourceSlices
with the DeviceTaintRules' taints (slice_index.py) and, kubesched's own, the selector results kept
across pods (selector_cache.py). It is the handle's ``dra_manager`` (framework ``SharedDRAManager``):
NodeResourcesFit and NodeResourcesBalancedAllocation score DRA-backed extended resources with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubesched.framework.handle import DRAResourceCounter
from kubesched.plugins.dynamicresources.allocated_tally import AllocatedTally
from kubesched.plugins.dynamicresources.assumed import AssumedClaims
from kubesched.plugins.dynamicresources.capacity import AllocatedState
from kubesched.plugins.dynamicresources.claims import allocated_devices
from kubesched.plugins.dynamicresources.extended_scoring import ExtendedResourceCounter
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache
from kubesched.plugins.dynamicresources.slice_index import SliceIndex
from kubesched.plugins.helpers.device_classes import extended_resource_classes

#: ``objects(kind)``: the shell's objects of a kind, by key (``handle.objects``).
Objects = Callable[[str], Mapping[str, dict[str, Any]]]


class DRAManager:
    def __init__(self, objects: Objects, claim_kind: str, slice_kind: str, class_kind: str, rule_kind: str) -> None:
        self._objects = objects
        self._kinds = (slice_kind, class_kind, rule_kind)
        #: The claims as the scheduler sees them (assumed.py: PreBind's writes until the shell has them).
        self.tracker = AssumedClaims(lambda: objects(claim_kind))
        #: claim uid -> the claim with the allocation Reserve made, until PreBind wrote it or
        #: Unreserve dropped it (upstream inFlightAllocations), with the pods sharing it.
        self.in_flight: dict[str, tuple[dict[str, Any], set[str]]] = {}
        #: Selector results across cycles and pods (selector_cache.py).
        self.selector_cache = SelectorCache()
        #: The ResourceSlices by node, brought in step with the shell's by ``slices`` (slice_index.py).
        self._slices = SliceIndex()
        #: What the claims' allocations hold, recounted only for claims that changed (allocated_tally.py).
        self._allocated = AllocatedTally()

    def claims(self) -> dict[str, dict[str, Any]]:
        return self.tracker.all()

    def claim(self, key: str) -> dict[str, Any] | None:
        return self.tracker.get(key)

    def signal_pending(self, uid: str, claim: dict[str, Any], pod_uid: str) -> None:
        """SignalClaimPendingAllocation: ``claim`` (with its allocation) is in flight for the pod."""
        entry = self.in_flight.get(uid)
        if entry is None:
            self.in_flight[uid] = (claim, {pod_uid})
        else:
            entry[1].add(pod_uid)

    def release(self, uid: str, pod_uid: str) -> None:
        """RemoveClaimPendingAllocation for one pod sharing the claim; gone with its last pod."""
        entry = self.in_flight.get(uid)
        if entry is not None:
            entry[1].discard(pod_uid)
            if not entry[1]:
                del self.in_flight[uid]

    def allocated_state(self) -> AllocatedState:
        """GatherAllocatedState: what the claims' allocations hold, those in flight included."""
        self._allocated.sync(self.claims())
        devices = self._allocated.state()
        devices |= allocated_devices({uid: c for uid, (c, _) in self.in_flight.items()})
        return devices

    def slices(self) -> SliceIndex:
        """ListWithDeviceTaintRules: the slices, in step with the shell's."""
        slice_kind, _, rule_kind = self._kinds
        self._slices.sync(self._objects(slice_kind), self._objects(rule_kind).values())
        return self._slices

    def extended_resource_counter(self, resources: Sequence[str]) -> DRAResourceCounter | None:
        """For NodeResourcesFit's and NodeResourcesBalancedAllocation's scoring (extended_scoring.py)."""
        classes = self._objects(self._kinds[1])
        if not classes:
            return None
        resolver = extended_resource_classes(classes)
        if not any(r in resolver for r in resources):
            return None
        return ExtendedResourceCounter.for_resources(resources, resolver, self.allocated_state(), self.slices(),
                                                     self.selector_cache)
