"""The structured allocator: devices from a node's ResourceSlices for a pod's unallocated claims.

Port of k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go
(v0.37.1) for ``ExactCount`` and ``All`` requests, ``firstAvailable`` subrequests (prioritized
list, GA in 1.37), DeviceClass and request CEL selectors, devices already allocated to other
claims, ``matchAttribute`` constraints, the claim's and the classes' configuration, and the
allocation's node selector. The search is upstream's: claims, requests and devices in order,
depth first, first full solution wins; a constraint or an allocated device makes it backtrack.

Features of v1.37 not implemented here never pass silently: a request asking for one
(``adminAccess``, ``capacity``, ``tolerations``) raises ``UnsupportedFeatureError``; devices that
need one (``taints``, ``bindingConditions``, ``consumesCounters``, ``allowMultipleAllocations``)
and slices of partitionable pools are not allocated, and when no allocation is found the features
that were skipped are reported (``Allocation.skipped``) so the plugin names them.

Errors: ``AllocationError`` is what upstream returns as an error from Allocate (a broken claim or
class: the pod's attempt ends with an Error status), with upstream's text; ``FailedOnNodeError`` is
upstream's ``ErrFailedAllocationOnNode`` (only this node fails).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes

from kubesched.plugins.dynamicresources.cel import CelError, compile_selector, device_variable
from kubesched.plugins.dynamicresources.pools import (
    ADMIN_ACCESS,
    BINDING_CONDITIONS,
    CONSUMABLE_CAPACITY,
    DEVICE_TAINTS,
    PARTITIONABLE,
    NodeRef,
    Pool,
    UnsupportedFeatureError,
    gather_pools,
    slice_spec,
    unsupported_message,
)
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache

#: resourceapi.AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32

DeviceID = tuple[str, str, str]  # driver, pool, device


class AllocationError(Exception):
    """Allocation cannot proceed for this claim or class on any node (upstream: an error)."""


class FailedOnNodeError(AllocationError):
    """ErrFailedAllocationOnNode: not fatal, other nodes may succeed."""


def claim_ref(claim: Mapping[str, Any]) -> str:
    """klog.KObj: ``namespace/name``."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


@dataclass(frozen=True, slots=True)
class _Request:
    """requestAccessor: a request with ``exactly``, or one subrequest of ``firstAvailable``."""

    name: str
    parent: str  # the request's name for a subrequest, else ""
    class_name: str
    mode: str
    count: int
    selectors: tuple[dict[str, Any], ...]
    tolerations: tuple[dict[str, Any], ...]

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


def _request(raw: Mapping[str, Any], parent: str, where: str) -> _Request:
    if raw.get("adminAccess") is not None:
        raise UnsupportedFeatureError(f"{where}: {unsupported_message(ADMIN_ACCESS)}")
    if raw.get("capacity"):
        raise UnsupportedFeatureError(f"{where}: {unsupported_message(CONSUMABLE_CAPACITY)}")
    if raw.get("tolerations"):
        raise UnsupportedFeatureError(f"{where}: {unsupported_message(DEVICE_TAINTS)}")
    return _Request(
        name=str(raw.get("name", "")), parent=parent, class_name=str(raw.get("deviceClassName") or ""),
        mode=str(raw.get("allocationMode") or "ExactCount"), count=int(raw.get("count") or 1),
        selectors=tuple(raw.get("selectors") or ()), tolerations=tuple(raw.get("tolerations") or ()),
    )


def claim_requests(claim: Mapping[str, Any]) -> list[list[_Request]]:
    """Per request of the claim: ``[request]`` for ``exactly``, the subrequests for ``firstAvailable``.
    Raises UnsupportedFeatureError for fields of features kubesched does not implement."""
    out: list[list[_Request]] = []
    ref = claim_ref(claim)
    for raw in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = str(raw.get("name", ""))
        if raw.get("firstAvailable"):
            out.append([_request(sub, name, f"claim {ref}, request {name}/{sub.get('name', '')}")
                        for sub in raw["firstAvailable"]])
        else:
            exactly = {**(raw.get("exactly") or {}), "name": name}
            out.append([_request(exactly, "", f"claim {ref}, request {name}")])
    return out


@dataclass(slots=True)
class _Candidate:
    id: DeviceID
    device: dict[str, Any]
    slice: dict[str, Any]


@dataclass(slots=True)
class _RequestData:
    request: _Request
    cls: dict[str, Any] | None
    num_devices: int
    all_devices: list[_Candidate] = field(default_factory=list)


@dataclass(slots=True)
class _Result:
    request: _Request
    candidate: _Candidate


class _MatchAttribute:
    """matchAttributeConstraint: every device of the named requests (all, when none are named) has
    the same value of the attribute."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = set(requests)
        self.attribute = attribute
        self.value: tuple[str, Any] | None = None
        self.num = 0

    def _applies(self, req: _Request) -> bool:
        if not self.requests:
            return True
        return req.full_name in self.requests or (req.parent or req.name) in self.requests

    def add(self, req: _Request, cand: _Candidate) -> bool:
        if not self._applies(req):
            return True
        value = _lookup_attribute(cand, self.attribute)
        if value is None:
            return False
        if self.num == 0:
            self.value, self.num = value, 1
            return True
        if value != self.value:
            return False
        self.num += 1
        return True

    def remove(self, req: _Request) -> None:
        if self._applies(req):
            self.num -= 1


def _lookup_attribute(cand: _Candidate, name: str) -> tuple[str, Any] | None:
    """lookupAttribute: the fully qualified name, or the short name when the domain is the driver's."""
    attrs = cand.device.get("attributes") or {}
    attr = attrs.get(name)
    if attr is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != cand.id[0]:
            return None
        attr = attrs.get(ident)
    if not attr:
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return kind, attr[kind]
    return None


#: Device fields of features not implemented: such a device is not allocated (see module doc).
_DEVICE_FEATURES = (
    ("taints", DEVICE_TAINTS),
    ("bindingConditions", BINDING_CONDITIONS),
    ("consumesCounters", PARTITIONABLE),
    ("allowMultipleAllocations", CONSUMABLE_CAPACITY),
)


class Allocator:
    """NewAllocator: built once per pod (PreFilter) and asked once per node (Filter)."""

    def __init__(self, allocated: set[DeviceID], classes: Mapping[str, dict[str, Any]],
                 slices: Sequence[dict[str, Any]], selector_cache: SelectorCache | None = None) -> None:
        self.allocated = allocated
        #: Selector results, shared across pods when the plugin passes its own.
        self.selector_cache = selector_cache or SelectorCache()
        self.classes = classes
        self.slices = slices
        self._device_vars: dict[int, celtypes.MapType] = {}
        #: Features skipped on the last allocate() (for the failure message).
        self.skipped: set[str] = set()

    def allocate(self, node: NodeRef, claims: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """AllocationResults, one per claim, or None when this node cannot satisfy them all."""
        self.skipped = set()
        run = _Run(self, node, claims)
        return run.allocate()

    def device_var(self, cand: _Candidate) -> celtypes.MapType:
        key = id(cand.device)
        v = self._device_vars.get(key)
        if v is None:
            v = self._device_vars[key] = device_variable(cand.id[0], cand.device)
        return v


class _Run:
    """The per-node ``allocator``: one search."""

    def __init__(self, alloc: Allocator, node: NodeRef, claims: Sequence[dict[str, Any]]) -> None:
        self.a = alloc
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = []
        self.requests: list[list[list[_Request]]] = []
        self.data: dict[tuple[int, int, int], _RequestData] = {}
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_MatchAttribute]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]

    def allocate(self) -> list[dict[str, Any]] | None:
        self.pools = gather_pools(self.a.slices, self.node, self.a.skipped.add)
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
            constraints: list[_MatchAttribute] = []
            for i, c in enumerate(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []):
                if c.get("matchAttribute"):
                    constraints.append(_MatchAttribute(c.get("requests") or (), str(c["matchAttribute"])))
                elif c.get("distinctAttribute"):
                    raise UnsupportedFeatureError(
                        f"claim {ref}, constraint #{i}: {unsupported_message(CONSUMABLE_CAPACITY)}")
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
                for cand in self._candidates(pool):
                    if self._selectable(ci, ri, si, rd, cand):
                        rd.all_devices.append(cand)
            rd.num_devices = len(rd.all_devices)
        else:
            raise AllocationError(f"claim {ref}, request {req.name}: unsupported count mode {req.mode}")
        return rd

    @staticmethod
    def _candidates(pool: Pool) -> list[_Candidate]:
        out = []
        for s in pool.slices:
            for device in slice_spec(s).get("devices") or []:
                out.append(_Candidate((pool.driver, pool.pool, str(device.get("name", ""))), device, s))
        return out

    # -- allocateOne -----------------------------------------------------------------------------
    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool) -> bool:
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
            try:
                if self._one(ci, ri, si, di + 1, in_sub):
                    return True
            except _MaxSizeExceededError:
                undo()
                raise
            undo()
            return False
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for cand in self._candidates(pool):
                if self._in_use(cand.id):
                    continue
                if not self._selectable(ci, ri, si, rd, cand):
                    continue
                undo = self._allocate_device(ci, ri, si, cand, must=False)
                if undo is None:
                    continue
                try:
                    if self._one(ci, ri, si, di + 1, in_sub):
                        return True
                except _MaxSizeExceededError:
                    undo()
                    raise
                undo()
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.a.allocated or bool(self.allocating.get(device_id))

    # -- isSelectable / selectorsMatch -------------------------------------------------------------
    def _selectable(self, ci: int, ri: int, si: int, rd: _RequestData, cand: _Candidate) -> bool:
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
        if ok:
            for fieldname, feature in _DEVICE_FEATURES:
                if cand.device.get(fieldname):
                    self.a.skipped.add(feature)
                    ok = False
                    break
        self.matches[key] = ok
        return ok

    def _selectors_match(self, ci: int, cand: _Candidate, selectors: Sequence[Any], class_name: str | None) -> bool:
        owner = f"class {class_name}" if class_name is not None else f"claim {claim_ref(self.claims[ci])}"
        for i, sel in enumerate(selectors):
            expression = str(((sel or {}).get("cel") or {}).get("expression", ""))
            compiled = compile_selector(expression)
            if compiled.error is not None:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {compiled.error}")
            try:
                if not self.a.selector_cache.matches(compiled, cand.slice, cand.id[2], lambda: self.a.device_var(cand)):
                    return False
            except CelError as e:
                raise AllocationError(f"{owner}: selector #{i} on device {'/'.join(cand.id)}: CEL runtime error: "
                                      f"{_enhance_runtime_error(str(e))}") from None
        return True

    # -- allocateDevice ----------------------------------------------------------------------------
    def _allocate_device(self, ci: int, ri: int, si: int, cand: _Candidate, must: bool) -> Callable[[], None] | None:
        """Mark the device as allocated for the claim if no constraint objects; the returned function
        undoes it (None: not usable)."""
        if self._in_use(cand.id):
            return None
        req = self.data[(ci, ri, si)].request
        added: list[_MatchAttribute] = []
        for c in self.constraints[ci]:
            if not c.add(req, cand):
                for done in reversed(added):
                    done.remove(req)
                if must:
                    raise AllocationError(f"claim {claim_ref(self.claims[ci])}, request {req.name}: cannot add device "
                                          f"{'/'.join(cand.id)} because a claim constraint would not be satisfied")
                return None
            added.append(c)
        self.allocating.setdefault(cand.id, set()).add(ci)
        self.results[ci].append(_Result(req, cand))

        def undo() -> None:
            self.results[ci].pop()
            self.allocating[cand.id].discard(ci)
            for done in reversed(added):
                done.remove(req)
        return undo

    # -- the AllocationResult ------------------------------------------------------------------------
    def _result(self, ci: int, claim: Mapping[str, Any]) -> dict[str, Any]:
        results = []
        for r in self.results[ci]:
            entry: dict[str, Any] = {"request": r.request.full_name, "driver": r.candidate.id[0],
                                     "pool": r.candidate.id[1], "device": r.candidate.id[2]}
            if r.request.tolerations:
                entry["tolerations"] = list(r.request.tolerations)
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
        config: list[dict[str, Any]] = []
        by_class: dict[str, tuple[int, int]] = {}
        for ri in range(len(self.requests[ci])):
            rd = self._chosen(ci, ri)
            cls = rd.cls
            if cls is None:
                continue
            name = str((cls.get("metadata") or {}).get("name", ""))
            if name in by_class:
                start, end = by_class[name]
                for i in range(start, end):
                    config[i]["requests"].append(rd.request.full_name)
                continue
            start = len(config)
            for c in (cls.get("spec") or {}).get("config") or []:
                config.append({"source": "FromClass", "requests": [rd.request.full_name], **c})
            by_class[name] = (start, len(config))
        spec_requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        for c in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
            wanted = list(c.get("requests") or [])
            body = {k: v for k, v in c.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **body})
                continue
            for ri, raw in enumerate(spec_requests):
                full = self._chosen(ci, ri).request.full_name
                if raw.get("name") in wanted or full in wanted:
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    break
        names = [self._chosen(ci, ri).request for ri in range(len(self.requests[ci]))]
        for entry in config:
            reqs = entry.get("requests")
            if reqs and all(r.full_name in reqs or (r.parent or r.name) in reqs for r in names):
                del entry["requests"]  # applies to all: "empty means all"
        return config

    def _node_selector(self, results: Sequence[_Result]) -> dict[str, Any] | None:
        """createNodeSelector: a node name pins the allocation to that node, else the slices' node
        selectors' requirements are merged into one term; nothing when available everywhere."""
        fields: list[dict[str, Any]] = []
        expressions: list[dict[str, Any]] = []
        for r in results:
            spec = slice_spec(r.candidate.slice)
            if spec.get("nodeName"):
                return {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [str(spec["nodeName"])]}]}]}
            terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _merge(terms[0].get("matchFields") or [], fields)
                _merge(terms[0].get("matchExpressions") or [], expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _enhance_runtime_error(message: str) -> str:
    """cel.EnhanceRuntimeError (k8s.io/dynamic-resource-allocation/cel/errors.go, v0.37.1): the hint
    upstream adds to a "no such key" error, word for word."""
    if "no such key:" not in message:
        return message
    return (f"{message}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
            "with has() for optional fields")


def _merge(source: Sequence[dict[str, Any]], into: list[dict[str, Any]]) -> None:
    for req in source:
        values = set(req.get("values") or [])
        if not any(r.get("key") == req.get("key") and r.get("operator") == req.get("operator")
                   and set(r.get("values") or []) == values for r in into):
            into.append(req)


class _MaxSizeExceededError(Exception):
    """errAllocationResultMaxSizeExceeded: backtrack further, another subrequest may need fewer."""
