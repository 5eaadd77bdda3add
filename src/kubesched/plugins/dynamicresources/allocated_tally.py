"""What the claims' allocations hold, kept up to date claim by claim instead of recounted per pod.

GatherAllocatedState (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go,
v1.37.1) walks every allocated claim; upstream keeps that walk cheap with an informer-driven
``allocatedDevices`` tracker. Recounting every claim's results for every pod made PreFilter
O(claims) in Python. The tally instead remembers, per claim key, the object it last counted and
what that claim holds: ``sync`` recounts only claims whose object is new (the shells store a new
object per version, as for slices: slice_index.py), so an unchanged claim costs one identity check
(a new object equal to the one counted is not recounted).
Devices are counted per claim, so a device two claims hold (admin access aside, which counts as
nothing) stays held until both let it go.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from itertools import compress
from operator import is_not
from typing import Any

from kubesched.plugins.dynamicresources.capacity import AllocatedState, Capacity, DeviceID, add_capacity
from kubesched.plugins.dynamicresources.claims import allocated_devices, resource_version


class AllocatedTally:
    def __init__(self) -> None:
        #: claim key -> (the object counted, its resourceVersion, what its allocation holds).
        self._seen: dict[str, tuple[dict[str, Any], str, AllocatedState]] = {}
        self._devices: dict[DeviceID, int] = {}
        self._shared: dict[DeviceID, int] = {}
        self._consumed: dict[DeviceID, Capacity] = {}
        #: The keys and objects of the last sync, in the shell's order.
        self._keys: list[str] = []
        self._values: list[dict[str, Any]] = []

    def sync(self, claims: Mapping[str, dict[str, Any]]) -> None:
        """Bring the tally in step with ``claims`` (by key)."""
        keys, values = list(claims), list(claims.values())
        known = len(self._keys)
        if keys[:known] == self._keys:
            # The same claims in the same order, maybe more at the end (the shells keep a key's
            # place when its object is replaced): the replaced ones are found by identity at C
            # speed, instead of a Python step per claim.
            changed = [*compress(range(known), map(is_not, values, self._values)), *range(known, len(keys))]
            for i in changed:
                self._update(keys[i], values[i])
        else:
            for key, claim in zip(keys, values, strict=True):
                self._update(key, claim)
            if len(self._seen) != len(claims):  # every key of ``claims`` is in ``seen`` now: some are gone
                for key in [k for k in self._seen if k not in claims]:
                    self._count(self._seen.pop(key)[2], -1)
        self._keys, self._values = keys, values

    def _update(self, key: str, claim: dict[str, Any]) -> None:
        have = self._seen.get(key)
        if have is not None and have[0] is claim:
            return
        version = resource_version(claim)
        if have is not None:
            if have[1] == version and have[0] == claim:
                self._seen[key] = (claim, version, have[2])  # an equal copy: nothing to recount
                return
            self._count(have[2], -1)
        held = allocated_devices({key: claim})
        self._seen[key] = (claim, version, held)
        self._count(held, 1)

    def state(self) -> AllocatedState:
        """A copy the caller may extend (the allocator's AllocatedState)."""
        return AllocatedState(set(self._devices), set(self._shared),
                              {device: dict(capacity) for device, capacity in self._consumed.items()})

    def _count(self, held: AllocatedState, sign: int) -> None:
        for devices, counts in ((held.devices, self._devices), (held.shared, self._shared)):
            for device in devices:
                n = counts.get(device, 0) + sign
                if n:
                    counts[device] = n
                else:
                    del counts[device]
        for device, capacity in held.consumed.items():
            total = self._consumed.setdefault(device, {})
            add_capacity(total, capacity, sign)
            if all(v == Fraction(0) for v in total.values()) and device not in self._shared:
                del self._consumed[device]
