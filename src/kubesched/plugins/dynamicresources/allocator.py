"""The structured allocator: devices from a node's ResourceSlices for a pod's unallocated claims.

Port of k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go and, for
what v1.37 runs beyond it (DRAConsumableCapacity and DRADeviceBindingConditions are beta and on, so
upstream picks the ``incubating`` allocator), internal/incubating/allocator_incubating.go (v0.37.1):
``ExactCount`` and ``All`` requests, ``firstAvailable`` subrequests (prioritized list, GA in 1.37),
DeviceClass and request CEL selectors, devices already allocated to other claims, ``matchAttribute``
and ``distinctAttribute`` constraints (constraints.py), admin access, device taints and request
tolerations (taints.py, DeviceTaintRules applied to the slices), partitionable devices (shared
counters: pools.py, counters.py), consumable capacity (capacity.py: devices with
``allowMultipleAllocations`` shared by several claims, request ``capacity``, request policies), the
claim's and the classes' configuration, binding conditions (a device's ``bindingConditions`` and
``bindingFailureConditions`` copied into its result, ``bindsToNode`` pinning the allocation to the
node, pools with such devices tried last: pools.py), and the allocation's node selector. The search is
upstream's: claims, requests and devices in order, depth first, first full solution wins; a
constraint, a taint, an exhausted counter or capacity or an allocated device makes it backtrack.

Errors: ``AllocationError`` is what upstream returns as an error from Allocate (a broken claim or
class: the pod's attempt ends with an Error status), with upstream's text; ``FailedOnNodeError`` is
upstream's ``ErrFailedAllocationOnNode`` (only this node fails).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.plugins.dynamicresources.capacity import (
    AllocatedState,
    Capacity,
    CapacityError,
    consumed_capacity,
    fits,
    format_quantity,
    quantity,
    share_id,
)
from kubesched.plugins.dynamicresources.cel import CelError, compile_selector, device_variable, enhance_runtime_error
from kubesched.plugins.dynamicresources.constraints import Constraint, DistinctAttribute, MatchAttribute
from kubesched.plugins.dynamicresources.counters import CounterLedger, PoolKey
from kubesched.plugins.dynamicresources.pools import (
    Candidate,
    CounterSets,
    NodeRef,
    Pool,
    gather_pools,
    slice_spec,
)
from kubesched.plugins.dynamicresources.requests import DeviceRequest as _Request

# claim_requests is the plugin's too (PreFilter checks the classes before any node is tried).
from kubesched.plugins.dynamicresources.requests import claim_ref
from kubesched.plugins.dynamicresources.requests import claim_requests as claim_requests
from kubesched.plugins.dynamicresources.results import UnsupportedNodeSelectorError, claim_config, node_selector
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache
from kubesched.plugins.dynamicresources.slice_index import SliceIndex
from kubesched.plugins.dynamicresources.taints import taint_prevents_allocation

if TYPE_CHECKING:  # celpy is imported by the first selector (cel.py says why)
    from celpy import celtypes

#: resourceapi.AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32

DeviceID = tuple[str, str, str]  # driver, pool, device


class AllocationError(Exception):
    """Allocation cannot proceed for this claim or class on any node (upstream: an error)."""


class FailedOnNodeError(AllocationError):
    """ErrFailedAllocationOnNode: not fatal, other nodes may succeed."""


class FilterTimeoutError(AllocationError):
    """The search on a node took longer than ``filterTimeout`` (upstream: the allocator's context
    expired, ``filter operation aborted: context deadline exceeded``)."""


@dataclass(slots=True)
class _RequestData:
    request: _Request
    cls: dict[str, Any] | None
    num_devices: int
    all_devices: list[Candidate] = field(default_factory=list)
    capacity: Capacity | None = None


@dataclass(slots=True)
class _Result:
    request: _Request
    candidate: Candidate
    share_id: str | None = None
    consumed: Capacity = field(default_factory=dict)


class Allocator:
    """NewAllocator: built once per pod (PreFilter) and asked once per node (Filter)."""

    def __init__(self, allocated: set[DeviceID] | AllocatedState, classes: Mapping[str, dict[str, Any]],
                 slices: SliceIndex | Sequence[dict[str, Any]], taint_rules: Sequence[dict[str, Any]] = (),
                 selector_cache: SelectorCache | None = None) -> None:
        self.state = allocated if isinstance(allocated, AllocatedState) else AllocatedState(set(allocated))
        #: Devices given whole to a claim (upstream AllocatedDevices).
        self.allocated = self.state.devices
        #: Selector results, shared across pods when the plugin passes its own (selector_cache.py).
        self.selector_cache = selector_cache or SelectorCache()
        self.classes = classes
        #: The slices as the scheduler sees them, DeviceTaintRules' taints on their devices, by node
        #: (the plugin passes the index it keeps in step with the shell; a list is indexed here).
        self.slices = slices if isinstance(slices, SliceIndex) else SliceIndex.of(slices, taint_rules)
        #: Per pool: its counters less what allocated devices consume (counters.py).
        self.available_counters: dict[PoolKey, CounterSets] = {}
        self._device_vars: dict[int, celtypes.MapType] = {}

    def allocate(self, node: NodeRef, claims: Sequence[dict[str, Any]],
                 deadline: tuple[Callable[[], float], float] | None = None) -> list[dict[str, Any]] | None:
        """AllocationResults, one per claim, or None when this node cannot satisfy them all.
        ``deadline`` is (the clock's ``now``, the time by which the search must be done): each step
        of the search looks at it, as upstream's allocateOne looks at its context, and raises
        FilterTimeoutError once it has passed."""
        run = _Run(self, node, claims, deadline)
        return run.allocate()

    def device_var(self, cand: Candidate) -> celtypes.MapType:
        key = id(cand.device)
        v = self._device_vars.get(key)
        if v is None:
            v = self._device_vars[key] = device_variable(cand.id[0], cand.device)
        return v


class _Run:
    """The per-node ``allocator``: one search."""

    def __init__(self, alloc: Allocator, node: NodeRef, claims: Sequence[dict[str, Any]],
                 deadline: tuple[Callable[[], float], float] | None = None) -> None:
        self.a = alloc
        self.deadline = deadline
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = []
        self.requests: list[list[list[_Request]]] = []
        self.data: dict[tuple[int, int, int], _RequestData] = {}
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.counters = CounterLedger(alloc.available_counters, alloc.state)
        #: Per shared device: the capacity each share picked in this search consumes.
        self.allocating_capacity: dict[DeviceID, list[Capacity]] = {}

    def allocate(self) -> list[dict[str, Any]] | None:
        self.pools = gather_pools(self.a.slices, self.node)
        for ci, claim in enumerate(self.claims):
            ref = claim_ref(claim)
            reqs = claim_requests(claim)
            self.requests.append(reqs)
            min_devices = 0
            for ri, alternatives in enumerate(reqs):
                least = None
                for si, req in enumerate(alternatives):
                    rd = self._validate(ci, ri, si, req, ref)
                    self.data[(ci, ri, si)] = rd
                    least = rd.num_devices if least is None else min(least, rd.num_devices)
                least = least or 0
                if least > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                    name = alternatives[0].parent or alternatives[0].name
                    raise AllocationError(
                        f"claim {ref}, request {name}: adding {least} devices exceeds the claim limit of "
                        f"{ALLOCATION_RESULTS_MAX_SIZE}, with {min_devices} already accounted for")
                min_devices += least
            constraints: list[Constraint] = []
            for i, c in enumerate(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []):
                if c.get("matchAttribute"):
                    constraints.append(MatchAttribute(c.get("requests") or (), str(c["matchAttribute"])))
                elif c.get("distinctAttribute"):
                    constraints.append(DistinctAttribute(c.get("requests") or (), str(c["distinctAttribute"])))
                else:
                    raise AllocationError(
                        f"claim {ref}, constraint #{i}: empty constraint (unsupported constraint type?)")
            self.constraints.append(constraints)
        try:
            done = self._one(0, 0, 0, 0, False)
        except _MaxSizeExceededError:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise FailedOnNodeError("invalid resource pools were encountered")
            return None
        return [self._result(ci, claim) for ci, claim in enumerate(self.claims)]

    # -- validateDeviceRequest ---------------------------------------------------------------------
    def _validate(self, ci: int, ri: int, si: int, req: _Request, ref: str) -> _RequestData:
        for i, sel in enumerate(req.selectors):
            if not (sel or {}).get("cel"):
                raise AllocationError(f"claim {ref}, request {req.name}, selector #{i}: "
                                      "CEL expression empty (unsupported selector type?)")
        if not req.class_name:
            raise AllocationError(
                f"claim {ref}, request {req.name}: missing device class name (unsupported request type?)")
        cls = self.a.classes.get(req.class_name)
        if cls is None:
            raise AllocationError(
                f"claim {ref}, request {req.name}: could not retrieve device class {req.class_name}: "
                f'deviceclass.resource.k8s.io "{req.class_name}" not found')
        rd = _RequestData(req, cls, 0)
        if req.capacity is not None:
            try:
                rd.capacity = {k: quantity(v, f"capacity request {k}") for k, v in req.capacity}
            except CapacityError as e:
                raise AllocationError(f"claim {ref}, request {req.name}: {e}") from None
        if req.mode == "ExactCount":
            rd.num_devices = req.count
        elif req.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(f"claim {ref}, request {req.name}: asks for all devices, but resource pool "
                                          f"{pool.pool_id} is currently being updated")
                if pool.invalid:
                    raise AllocationError(f"claim {ref}, request {req.name}: asks for all devices, but resource pool "
                                          f"{pool.pool_id} is currently invalid")
                for cand in pool.candidates():
                    if self._selectable(ci, ri, si, rd, cand) and self._fits(ci, rd, cand, (), cand.id[2]):
                        rd.all_devices.append(cand)
            rd.num_devices = len(rd.all_devices)
        else:
            raise AllocationError(f"claim {ref}, request {req.name}: unsupported count mode {req.mode}")
        return rd

    # -- allocateOne -----------------------------------------------------------------------------
    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int] = (0, 0)) -> bool:
        """allocateOne. ``start`` (pool index, device index in the pool) is where the search for the
        request's next device begins: after the previous one, so one request never gets a device
        twice (a device allowing multiple allocations is not marked in use) and no permutation of a
        set of devices is tried twice."""
        if self.deadline is not None and self.deadline[0]() > self.deadline[1]:
            raise FilterTimeoutError("filter operation aborted: context deadline exceeded")
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            try:
                return self._one(ci + 1, 0, 0, 0, False)
            except _MaxSizeExceededError:
                return False
        alternatives = self.requests[ci][ri]
        if not in_sub and alternatives[0].parent:
            all_exceeded = True
            for sub in range(len(alternatives)):
                try:
                    ok = self._one(ci, ri, sub, di, True)
                except _MaxSizeExceededError:
                    continue
                all_exceeded = False
                if ok:
                    self.selected_sub[(ci, ri)] = sub
                    return True
            if all_exceeded:
                raise _MaxSizeExceededError
            return False
        rd = self.data[(ci, ri, si)]
        if rd.request.mode == "All" and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self._one(ci, ri + 1, 0, 0, False)
        if rd.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[ci]):
            raise _MaxSizeExceededError
        if rd.request.mode == "All":
            undo = self._allocate_device(ci, ri, si, rd.all_devices[di], must=True)
            if undo is None:
                return False
            return self._one_after(undo, ci, ri, si, di + 1, in_sub)
        for pool_index in range(start[0], len(self.pools)):
            pool = self.pools[pool_index]
            if pool.incomplete or pool.invalid:
                continue
            candidates = pool.candidates()
            for cand_index in range(start[1] if pool_index == start[0] else 0, len(candidates)):
                cand = candidates[cand_index]
                # Checking for "in use" is cheap and thus gets done first; admin access may
                # use a device allocated elsewhere, only not twice in one claim.
                if rd.request.admin_access:
                    if ci in self.allocating.get(cand.id, ()):
                        continue
                elif self._in_use(cand.id):
                    continue
                if not self._selectable(ci, ri, si, rd, cand):
                    continue
                if not self._fits(ci, rd, cand):
                    continue
                undo = self._allocate_device(ci, ri, si, cand, must=False)
                if undo is None:
                    continue
                if self._one_after(undo, ci, ri, si, di + 1, in_sub, (pool_index, cand_index + 1)):
                    return True
        return False

    def _one_after(
        self, undo: Callable[[], None], ci: int, ri: int, si: int, di: int, in_sub: bool,
        start: tuple[int, int] = (0, 0),
    ) -> bool:
        """Continue ``_one`` with a device just allocated; ``undo`` that allocation unless the search
        succeeds (also when it gives up on the result size, before the error goes on)."""
        try:
            found = self._one(ci, ri, si, di, in_sub, start)
        except _MaxSizeExceededError:
            undo()
            raise
        if not found:
            undo()
        return found

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.a.allocated or bool(self.allocating.get(device_id))

    # -- consumable capacity (capacity.py) ---------------------------------------------------------
    def _consumed(self, device_id: DeviceID) -> list[Capacity]:
        """What allocated shares and the shares picked in this search consume of the device."""
        return [self.a.state.consumed.get(device_id, {}), *self.allocating_capacity.get(device_id, ())]

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """deviceCapacityInUse: a share of the device is allocated or picked."""
        return (device_id in self.a.state.consumed or device_id in self.a.state.shared
                or bool(self.allocating_capacity.get(device_id)))

    def _fits(self, ci: int, rd: _RequestData, cand: Candidate,
              consumed: Sequence[Capacity] | None = None, name: str | None = None) -> bool:
        """CmpRequestOverCapacity with ``consumed`` (default: what the device's shares consume) for
        the device called ``name`` in an error (default: driver/pool/device)."""
        if consumed is None:
            if (rd.capacity is None and cand.plain_capacity and cand.id not in self.a.state.consumed
                    and not self.allocating_capacity.get(cand.id)):
                return True  # what fits() answers: nothing asked, nothing consumed, no policy
            consumed = self._consumed(cand.id)
        try:
            return fits(rd.capacity, cand.device, consumed)
        except CapacityError as e:
            raise AllocationError(f"claim {claim_ref(self.claims[ci])}, request {rd.request.name}: checking capacity "
                                  f"for device {name or '/'.join(cand.id)}: {e}") from None

    # -- isSelectable / selectorsMatch -------------------------------------------------------------
    def _selectable(self, ci: int, ri: int, si: int, rd: _RequestData, cand: Candidate) -> bool:
        key = (cand.id, ci, ri, si)
        hit = self.matches.get(key)
        if hit is not None:
            return hit
        ok = True
        if rd.cls is not None:
            selectors = (rd.cls.get("spec") or {}).get("selectors") or []
            ok = self._selectors_match(ci, cand, selectors, str((rd.cls.get("metadata") or {}).get("name", "")))
        if ok:
            ok = self._selectors_match(ci, cand, rd.request.selectors, None)
        if ok and slice_spec(cand.slice).get("perDeviceNodeSelection"):
            d = cand.device
            ok = self.node.matches(str(d.get("nodeName") or ""), bool(d.get("allNodes")), d.get("nodeSelector"))
        self.matches[key] = ok
        return ok

    def _selectors_match(self, ci: int, cand: Candidate, selectors: Sequence[Any], class_name: str | None) -> bool:
        def owner() -> str:  # only for an error: formatting it for every device judged costs
            return f"class {class_name}" if class_name is not None else f"claim {claim_ref(self.claims[ci])}"

        for i, sel in enumerate(selectors):
            expression = str(((sel or {}).get("cel") or {}).get("expression", ""))
            compiled = compile_selector(expression)
            if compiled.error is not None:
                raise AllocationError(f"{owner()}: selector #{i}: CEL compile error: {compiled.error}")
            try:
                if not self.a.selector_cache.matches(compiled, cand.slice, cand.id[2], lambda: self.a.device_var(cand)):
                    return False
            except CelError as e:
                raise AllocationError(f"{owner()}: selector #{i} on device {'/'.join(cand.id)}: CEL runtime error: "
                                      f"{enhance_runtime_error(str(e))}") from None
        return True

    # -- allocateDevice ----------------------------------------------------------------------------
    def _allocate_device(self, ci: int, ri: int, si: int, cand: Candidate, must: bool) -> Callable[[], None] | None:
        """Mark the device as allocated for the claim if it is free (admin access: not yet in this
        claim; a device allowing multiple allocations: its capacity suffices), its counters suffice,
        its taints are tolerated and no constraint objects; the returned function undoes it (None:
        not usable). Each rejection undoes what was done so far, in reverse order."""
        rd = self.data[(ci, ri, si)]
        req = rd.request
        multiple = cand.device.get("allowMultipleAllocations") is True
        if req.admin_access:
            if not multiple and ci in self.allocating.get(cand.id, ()):
                return None
        elif self._in_use(cand.id):
            return None
        undo_steps: list[Callable[[], None]] = []

        def rollback() -> None:
            for step in reversed(undo_steps):
                step()
            undo_steps.clear()

        device_name = cand.id[2]
        # A further share of a shared device does not consume its counters again.
        if not (multiple and self._capacity_in_use(cand.id)):
            if not self.counters.reserve(cand.pool, device_name):
                return None
            undo_steps.append(lambda: self.counters.release(cand.pool, device_name))
        if taint_prevents_allocation(cand.device, req.tolerations):
            rollback()
            return None
        base, sub = (req.parent, req.name) if req.parent else (req.name, "")
        for c in self.constraints[ci]:
            if not c.add(base, sub, cand.id[0], cand.device):
                rollback()
                if must:
                    raise AllocationError(f"claim {claim_ref(self.claims[ci])}, request {req.name}: cannot add device "
                                          f"{'/'.join(cand.id)} because a claim constraint would not be satisfied")
                return None
            undo_steps.append(functools.partial(c.remove, base, sub))
        if not multiple:
            self.allocating.setdefault(cand.id, set()).add(ci)
            undo_steps.append(lambda: self.allocating[cand.id].discard(ci))
        if not self._fits(ci, rd, cand):
            rollback()
            return None
        result = _Result(req, cand)
        if multiple:
            try:
                result.consumed = consumed_capacity(rd.capacity, cand.device)
            except CapacityError as e:
                rollback()
                raise AllocationError(f"claim {claim_ref(self.claims[ci])}, request {req.name}: computing consumed "
                                      f"capacity for device {'/'.join(cand.id)}: {e}") from None
            shares = self.allocating_capacity.setdefault(cand.id, [])
            shares.append(result.consumed)
            undo_steps.append(lambda: _drop_last(shares))
            claim_uid = str((self.claims[ci].get("metadata") or {}).get("uid") or claim_ref(self.claims[ci]))
            result.share_id = share_id(claim_uid, req.full_name, cand.id, len(self.results[ci]))
        self.results[ci].append(result)
        undo_steps.append(lambda: _drop_last(self.results[ci]))
        return rollback

    # -- the AllocationResult ------------------------------------------------------------------------
    def _result(self, ci: int, claim: Mapping[str, Any]) -> dict[str, Any]:
        results = []
        for r in self.results[ci]:
            entry: dict[str, Any] = {"request": r.request.full_name, "driver": r.candidate.id[0],
                                     "pool": r.candidate.id[1], "device": r.candidate.id[2]}
            if r.request.admin_access:
                entry["adminAccess"] = True
            if r.request.tolerations:
                entry["tolerations"] = list(r.request.tolerations)
            if r.share_id is not None:
                entry["shareID"] = r.share_id
            if r.consumed:
                entry["consumedCapacity"] = {k: format_quantity(v) for k, v in r.consumed.items()}
            for key in ("bindingConditions", "bindingFailureConditions"):
                if r.candidate.device.get(key):
                    entry[key] = list(r.candidate.device[key])
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        config = self._config(ci, claim)
        if config:
            devices["config"] = config
        out: dict[str, Any] = {"devices": devices}
        selector = self._node_selector(self.results[ci])
        if selector is not None:
            out["nodeSelector"] = selector
        return out

    def _chosen(self, ci: int, ri: int) -> _RequestData:
        return self.data[(ci, ri, self.selected_sub.get((ci, ri), 0))]

    def _config(self, ci: int, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
        chosen = [self._chosen(ci, ri) for ri in range(len(self.requests[ci]))]
        return claim_config([(rd.request.full_name, rd.request.parent or rd.request.name, rd.cls) for rd in chosen],
                            claim)

    def _node_selector(self, results: Sequence[_Result]) -> dict[str, Any] | None:
        try:
            return node_selector([(r.candidate.slice, r.candidate.device) for r in results], self.node.name)
        except UnsupportedNodeSelectorError as e:
            raise AllocationError(str(e)) from None


def _drop_last(items: list[Any]) -> None:
    items.pop()


class _MaxSizeExceededError(Exception):
    """errAllocationResultMaxSizeExceeded: backtrack further, another subrequest may need fewer."""
