"""Filter's answer for the common claim without a trial allocation.

A pod's Filter visits hundreds of nodes (adaptive percentageOfNodesToScore: ~230 of 500), and a
trial allocation (allocator.py) costs tens of microseconds in Python even when it finds its device
at once. Most claims are simple: ``exactly`` requests in ExactCount mode, no constraints, no admin
access, no capacity requests, on nodes whose devices have no taints, counters, shares, binding
conditions nor per-device node selection. For such a claim upstream's depth-first search
(allocator_incubating.go, v0.37.1) succeeds exactly when the node has, for each selection (device
class and request selectors), at least as many free matching devices as the requests of that
selection ask for together, and there is only one selection (with several, the same device could
be wanted by two selections, and only the search tells). So:

* ``simple_need`` reads the pod's claims once: per selection, how many devices (None: not simple);
* ``_matching`` gives, per node and selection, the ids of the devices that match, in the
  allocator's order, judged through the shared selector cache (None when a device or pool is not
  plain, or a selector fails: the trial allocation then says what upstream says);
  ``_FreeDevices`` keeps them, in the slice index's ``derived`` (emptied when a slice changes),
  with how many are free on each node, from the change of the allocated devices since the last pod;
* ``quick_verdicts`` compares the free matching devices with the need: too few for some selection is
  ``cannot allocate all claims`` (the answer the search would give); enough for the only
  selection is success, and the allocation itself is made by the search on the node the pod gets
  (Reserve), where it picks what upstream picks. Anything else: None, the trial allocation decides.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.plugins.dynamicresources.capacity import AllocatedState
from kubesched.plugins.dynamicresources.cel import CelError, compile_selector, device_variable
from kubesched.plugins.dynamicresources.pools import NodeRef, gather_pools, slice_spec
from kubesched.plugins.dynamicresources.requests import claim_requests
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache
from kubesched.plugins.dynamicresources.slice_index import SliceIndex

#: resourceapi.AllocationResultsMaxSize (the search's error above it is left to the search).
_MAX_RESULTS = 32

#: (class name, the class's selector expressions, the request's selector expressions)
Selection = tuple[str, tuple[str, ...], tuple[str, ...]]
DeviceID = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Need:
    """Per selection, the devices the claims ask for together."""

    counts: tuple[tuple[Selection, int], ...]

    @property
    def sufficient(self) -> bool:
        """Enough free matching devices is also enough for the search (one selection only)."""
        return len(self.counts) == 1


def _expressions(selectors: Sequence[Any]) -> tuple[str, ...] | None:
    """The selectors' CEL expressions; None when one is empty or does not compile (the search's error)."""
    out = []
    for sel in selectors:
        expression = str(((sel or {}).get("cel") or {}).get("expression", ""))
        if not expression or compile_selector(expression).error is not None:
            return None
        out.append(expression)
    return tuple(out)


def simple_need(claims: Sequence[Mapping[str, Any]], classes: Mapping[str, Mapping[str, Any]]) -> Need | None:
    """The claims' needs, or None when one of them is not simple (see the module's docstring)."""
    counts: dict[Selection, int] = {}
    for claim in claims:
        if ((claim.get("spec") or {}).get("devices") or {}).get("constraints"):
            return None
        total = 0
        for alternatives in claim_requests(claim):
            if len(alternatives) != 1:
                return None
            req = alternatives[0]
            if req.parent or req.mode != "ExactCount" or req.admin_access or req.capacity is not None:
                return None
            cls = classes.get(req.class_name)
            if cls is None:
                return None
            class_expressions = _expressions((cls.get("spec") or {}).get("selectors") or ())
            request_expressions = _expressions(req.selectors)
            if class_expressions is None or request_expressions is None:
                return None
            key = (req.class_name, class_expressions, request_expressions)
            counts[key] = counts.get(key, 0) + req.count
            total += req.count
        if total > _MAX_RESULTS:
            return None
    return Need(tuple(counts.items()))


def _plain(device: Mapping[str, Any], plain_capacity: bool) -> bool:
    """Nothing but being free decides whether the search may take the device."""
    return (plain_capacity and not device.get("taints") and not device.get("consumesCounters")
            and device.get("allowMultipleAllocations") is not True and device.get("bindingConditions") is None)


class _FreeDevices:
    """One selection's matching devices per node (filled as nodes are asked), and how many of them
    are free, kept in step with the allocated devices by their difference from one call to the
    next (a pod or two's devices), not recounted per node."""

    __slots__ = ("allocated", "by_node", "device_node", "free")

    def __init__(self) -> None:
        self.by_node: dict[str, tuple[DeviceID, ...] | None] = {}
        self.device_node: dict[DeviceID, str] = {}
        self.free: dict[str, int] = {}
        self.allocated: set[DeviceID] = set()

    def catch_up(self, allocated: set[DeviceID]) -> None:
        if allocated == self.allocated:
            return
        for devices, step in ((allocated - self.allocated, -1), (self.allocated - allocated, 1)):
            for device in devices:
                node = self.device_node.get(device)
                if node is not None:
                    self.free[node] += step
        self.allocated = set(allocated)

    def add_node(self, name: str, devices: tuple[DeviceID, ...] | None) -> None:
        self.by_node[name] = devices
        if devices is not None:
            self.free[name] = len(devices) - len(self.allocated.intersection(devices))
            for device in devices:
                self.device_node[device] = name


def _free_devices(index: SliceIndex, selection: Selection) -> _FreeDevices:
    """The selection's _FreeDevices, kept in the slice index's ``derived``: emptied when a slice changes."""
    key = ("quick", selection)
    found: _FreeDevices | None = index.derived.get(key)
    if found is None:
        found = index.derived[key] = _FreeDevices()
    return found


def _matching(index: SliceIndex, node_name: str, selection: Selection,
              cache: SelectorCache) -> tuple[DeviceID, ...] | None:
    compiled = [compile_selector(e) for e in (*selection[1], *selection[2])]
    out: list[DeviceID] = []
    for pool in gather_pools(index, NodeRef(node_name)):
        if pool.incomplete or pool.invalid or pool.counter_sets or pool.consumption:
            return None
        for cand in pool.candidates():
            if not _plain(cand.device, cand.plain_capacity) or slice_spec(cand.slice).get("perDeviceNodeSelection"):
                return None
            variable = functools.partial(device_variable, cand.id[0], cand.device)
            try:
                if all(cache.matches(c, cand.slice, cand.id[2], variable) for c in compiled):
                    out.append(cand.id)
            except CelError:
                return None
    return tuple(out)


def quick_verdicts(need: Need, index: SliceIndex, node_names: Sequence[str], state: AllocatedState,
                   cache: SelectorCache) -> list[bool | None]:
    """Per node: False, it cannot hold the claims; True, it can (``need.sufficient`` only); None,
    ask the search. The free devices are the matching ones not allocated (``state.devices``: the
    caller leaves shared devices, which capacity decides, to the search)."""
    selections = []
    for selection, count in need.counts:
        free = _free_devices(index, selection)
        free.catch_up(state.devices)
        selections.append((free, selection, count))
    fits: bool | None = True if need.sufficient else None
    out: list[bool | None] = []
    for name in node_names:
        verdict = fits
        for free, selection, count in selections:
            have = free.free.get(name)
            if have is None:
                if name not in free.by_node:
                    free.add_node(name, None if index.several_nodes else _matching(index, name, selection, cache))
                    have = free.free.get(name)
                if have is None:
                    verdict = None  # not plain: the search decides
                    break
            else:
                cache.hits += 1  # the node's selector results, reused at once
            if have < count:
                verdict = False
                break
        out.append(verdict)
    return out
