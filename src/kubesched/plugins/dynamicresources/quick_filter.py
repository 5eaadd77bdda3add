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
* ``matching_devices`` gives, per node and selection, the ids of the devices that match, in the
  allocator's order, kept in the slice index's ``derived`` (recomputed when a slice changes) and
  judged through the shared selector cache (None when a device or pool is not plain, or a selector
  fails: the trial allocation then says what upstream says);
* ``quick_verdict`` counts the matching devices not allocated: too few for some selection is
  ``cannot allocate all claims`` (the answer the search would give); enough for the only
  selection is success, and the allocation itself is made by the search on the node the pod gets
  (Reserve), where it picks what upstream picks. Anything else: None, the trial allocation decides.
"""

from __future__ import annotations

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


def matching_devices(index: SliceIndex, node_name: str, selection: Selection,
                     cache: SelectorCache) -> tuple[DeviceID, ...] | None:
    """The node's devices the selection matches, in the search's order; None when the node is not
    plain (slices for several nodes, an invalid or incomplete pool, counters, a device that is not
    plain) or a selector fails on one of its devices."""
    if index.several_nodes:
        return None
    key = ("quick", node_name, selection)
    if key in index.derived:
        cache.hits += 1  # the node's selector results, reused at once
        found: tuple[DeviceID, ...] | None = index.derived[key]
        return found
    found = _matching(index, node_name, selection, cache)
    index.derived[key] = found
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
            driver, device = cand.id[0], cand.device
            try:
                if all(cache.matches(c, cand.slice, cand.id[2], lambda: device_variable(driver, device))
                       for c in compiled):
                    out.append(cand.id)
            except CelError:
                return None
    return tuple(out)


def quick_verdict(need: Need, index: SliceIndex, node_name: str, state: AllocatedState,
                  cache: SelectorCache) -> bool | None:
    """False: the node cannot hold the claims; True: it can (``need.sufficient`` only); None: ask
    the search."""
    allocated = state.devices
    for selection, count in need.counts:
        devices = matching_devices(index, node_name, selection, cache)
        if devices is None:
            return None
        free = 0
        for device in devices:
            if device not in allocated:
                free += 1
        if free < count:
            return False
    return True if need.sufficient else None
