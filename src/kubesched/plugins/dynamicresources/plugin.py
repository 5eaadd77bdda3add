"""DynamicResources: place a pod where its ResourceClaims can be allocated, then allocate them.

Port of pkg/scheduler/framework/plugins/dynamicresources (dynamicresources.go, dra_manager.go,
allocateddevices.go; Kubernetes v1.37.1), structured parameters only:

* PreEnqueue: every claim of ``spec.resourceClaims`` exists (a template's claim is named in
  ``status.resourceClaimStatuses``, and owned by the pod), and is not being deleted;
* PreFilter: Skip for a pod without claims; an allocated claim restricts the nodes to its
  allocation's ``nodeSelector``; an unallocated one needs its DeviceClasses (``request <r>: device
  class <c> does not exist``) and must not be in the middle of another pod's allocation
  (``resource claim <ns/name> is in the process of being allocated``); the allocator is set up
  with every device already allocated or in flight;
* Filter: ``resourceclaim not available on the node`` where an allocation's node selector does
  not match; else a trial allocation of the unallocated claims from the node's ResourceSlices
  (allocator.py): ``cannot allocate all claims`` when there is none, an Error status when a claim
  or class is broken (e.g. a CEL error), as upstream;
* Reserve keeps the node's allocation in flight (the next pods' PreFilter sees those devices
  taken, and a second pod sharing the claim waits for it); Unreserve drops it;
* PreBind writes each claim not yet reserved for the pod, as bindClaim does: the finalizer
  (``update``), then ``status.allocation`` (with ``allocationTimestamp``) and the pod in
  ``status.reservedFor`` (``update`` on the status subresource, framework/objects.py
  ``StatusWriter``), re-reading the claim on a conflict; the written claim is assumed until the
  shell's copy catches up;
* PostFilter deallocates an allocated claim that kept a node out and that no other pod uses
  (``deallocation of ResourceClaim completed``) instead of evicting;
* Score: a prioritized list's earlier subrequests score higher (score.py), normalised to 0-100.

Features of v1.37's DRA this port lacks are refused, never ignored (README.md lists them).
Not ported: queueing hints (every registered event retries), extended resources backed by DRA, PodGroup claims
(DRAWorkloadResourceClaims, alpha), the filter timeout.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    FilterPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.objects import ObjectWriter, StatusWriter
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PostFilterResult, PreFilterResult
from kubesched.plugins.dynamicresources.allocator import AllocationError, Allocator, FailedOnNodeError, claim_requests
from kubesched.plugins.dynamicresources.args import DynamicResourcesArgs
from kubesched.plugins.dynamicresources.claims import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    FINALIZER,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ClaimError,
    allocated_devices,
    allocation,
    claim_key,
    claim_uid,
    is_reserved_for,
    pod_claims,
    resource_version,
)
from kubesched.plugins.dynamicresources.explain import node_note
from kubesched.plugins.dynamicresources.pools import (
    EXTENDED_RESOURCES,
    NodeRef,
    UnsupportedFeatureError,
    unsupported_message,
)
from kubesched.plugins.dynamicresources.score import ScoreError, compute_score
from kubesched.plugins.dynamicresources.selector_cache import SelectorCache
from kubesched.plugins.helpers.node_selector import NodeSelector, compile_node_selector
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

NAME = "DynamicResources"
STATE_KEY = NAME
#: retry.DefaultRetry: five tries on a conflict.
_CONFLICT_TRIES = 5


@dataclass(slots=True)
class _State:
    """stateData. Shared by clones, as upstream's (its Clone returns itself)."""

    claims: list[dict[str, Any]] = field(default_factory=list)
    #: Per claim: the allocation's node selector (allocated claims only).
    available_on: list[NodeSelector | None] = field(default_factory=list)
    #: Indexes of the claims the scheduler allocates.
    to_allocate: list[int] = field(default_factory=list)
    allocator: Allocator | None = None
    #: node name -> the allocations found there, one per claim in ``to_allocate``.
    node_allocations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Per claim: the allocation made in Reserve (None: already allocated).
    reserved: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Indexes of allocated claims whose node selector excluded some node (PostFilter's candidates).
    unavailable: set[int] = field(default_factory=set)

    def clone(self) -> _State:
        return self


class DynamicResources(PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, PostFilterPlugin, ScorePlugin, ReservePlugin,
                       PreBindPlugin):
    name: ClassVar[str] = NAME
    object_kinds = (RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, RESOURCE_SLICE, DEVICE_CLASS, DEVICE_TAINT_RULE)
    args_model = DynamicResourcesArgs

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.args: DynamicResourcesArgs = args or DynamicResourcesArgs()
        #: claim uid -> the claim with the allocation Reserve made, until PreBind wrote it or
        #: Unreserve dropped it (upstream inFlightAllocations), with the pods sharing it.
        self._in_flight: dict[str, tuple[dict[str, Any], set[str]]] = {}
        #: claim key -> the claim as PreBind wrote it, until the shell's copy is as new (upstream's
        #: assume cache: AssumeClaimAfterAPICall).
        self._assumed: dict[str, dict[str, Any]] = {}
        #: PostFilter's claim status writes in flight (kept referenced until done).
        self._deallocations: set[asyncio.Future[Any]] = set()
        #: Selector results across cycles and pods (selector_cache.py).
        self._selector_cache = SelectorCache()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE),
            ClusterEvent(RESOURCE_CLAIM.kind, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
            ClusterEvent(DEVICE_CLASS.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(RESOURCE_SLICE.kind, ActionType.ADD | ActionType.UPDATE),
            # A rule's taints are its slices' (upstream's slice tracker reports them as slice updates).
            ClusterEvent(DEVICE_TAINT_RULE.kind, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
        )

    # -- the claims as the scheduler sees them (dra_manager.go claimTracker) -----------------------
    def _claims(self) -> dict[str, dict[str, Any]]:
        """Every claim, PreBind's writes first while the shell has not caught up."""
        objects = self.handle.objects(RESOURCE_CLAIM.kind)
        if not self._assumed:
            return dict(objects)
        out = dict(objects)
        for key, written in list(self._assumed.items()):
            latest = objects.get(key)
            if latest is None or _newer_or_same(latest, written):
                del self._assumed[key]
            else:
                out[key] = written
        return out

    def _claim(self, key: str) -> dict[str, Any] | None:
        written = self._assumed.get(key)
        latest = self.handle.objects(RESOURCE_CLAIM.kind).get(key)
        if written is None:
            return latest
        if latest is None or _newer_or_same(latest, written):
            del self._assumed[key]
            return latest
        return written

    # -- PreEnqueue -----------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.spec.get("resourceClaims"):
            return SUCCESS
        try:
            pod_claims(pod, self._claim)
        except ClaimError as e:
            return Status.unresolvable(str(e))
        return SUCCESS

    # -- PreFilter ------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        s = _State()
        state.write(STATE_KEY, s)
        if not pod.spec.get("resourceClaims"):
            return None, Status.skip()
        try:
            claims = pod_claims(pod, self._claim)
        except ClaimError as e:
            return None, Status.unresolvable(str(e))
        if not claims:
            return None, Status.skip()
        classes = self.handle.objects(DEVICE_CLASS.kind)
        if _requests_dra_extended_resource(pod, classes):
            return None, Status.unresolvable(unsupported_message(EXTENDED_RESOURCES))
        s.claims = claims
        s.available_on = [None] * len(claims)
        for index, claim in enumerate(claims):
            alloc = allocation(claim)
            if alloc is not None:
                # CanBeReserved: no restriction on sharing, so an allocated claim is usable by
                # any pod; it restricts the nodes to those of its allocation.
                if alloc.get("nodeSelector"):
                    s.available_on[index] = compile_node_selector(alloc["nodeSelector"])
                continue
            s.to_allocate.append(index)
            if claim_uid(claim) in self._in_flight:
                return None, Status.unresolvable(
                    f"resource claim {claim_key(claim)} is in the process of being allocated")
            try:
                requests = claim_requests(claim)
            except UnsupportedFeatureError as e:
                return None, Status.unresolvable(str(e))
            for alternatives in requests:
                for req in alternatives:
                    if not req.class_name:
                        return None, Status.error(f"request {req.full_name}: unsupported request type")
                    if req.class_name not in classes:
                        return None, Status.unresolvable(
                            f"request {req.full_name}: device class {req.class_name} does not exist")
        if s.to_allocate:
            all_claims = self._claims()
            devices = allocated_devices(all_claims)
            devices |= allocated_devices({uid: c for uid, (c, _) in self._in_flight.items()})
            s.allocator = Allocator(devices, classes, list(self.handle.objects(RESOURCE_SLICE.kind).values()),
                                    list(self.handle.objects(DEVICE_TAINT_RULE.kind).values()),
                                    selector_cache=self._selector_cache)
        return None, SUCCESS

    def _state(self, state: CycleState) -> _State | None:
        s = state.get(STATE_KEY)
        return s if isinstance(s, _State) else None

    # -- Filter ---------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = self._state(state)
        if s is None:
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')
        if not s.claims:
            return SUCCESS
        name, labels = node.name, node.labels
        unavailable = [i for i, selector in enumerate(s.available_on)
                       if selector is not None and not selector.match_node(labels, name)]
        if s.allocator is None:
            return self._unavailable(s, unavailable)
        try:
            results = s.allocator.allocate(NodeRef(name, dict(labels)), [s.claims[i] for i in s.to_allocate])
        except UnsupportedFeatureError as e:
            return Status.unresolvable(str(e))
        except FailedOnNodeError as e:
            return Status.unresolvable(str(e))
        except AllocationError as e:
            return Status.error(str(e))
        if results is None or len(results) != len(s.to_allocate):
            if s.allocator.skipped:
                features = "; ".join(unsupported_message(f) for f in sorted(s.allocator.skipped))
                return Status.unresolvable(f"cannot allocate all claims ({features})")
            return Status.unresolvable("cannot allocate all claims")
        if unavailable:
            return self._unavailable(s, unavailable)
        s.node_allocations[name] = results
        return SUCCESS

    @staticmethod
    def _unavailable(s: _State, unavailable: list[int]) -> Status:
        """Filter's end, as upstream's: the allocated claims an allocation's node selector keeps off
        this node are remembered for PostFilter (the allocator runs first: its failure wins)."""
        if not unavailable:
            return SUCCESS
        s.unavailable.update(unavailable)
        return Status.unresolvable("resourceclaim not available on the node")

    def explain_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Sequence[str] | None:
        """Per node, the devices the pod got there, or why each device was not usable (explain.py)."""
        s = self._state(state)
        if s is None or s.allocator is None:
            return None
        claims = [s.claims[i] for i in s.to_allocate]
        notes = []
        for row in rows.tolist():
            node = table.node_info(int(row))
            notes.append(node_note(s.allocator, NodeRef(node.name, dict(node.labels)), claims,
                                   s.node_allocations.get(node.name)))
        return notes

    # -- PostFilter -----------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        """deallocateOrDeletePodClaims: an allocated claim that kept some node out and that no other
        pod uses (reservedFor empty, or only this pod) is deallocated, so the next attempt may
        allocate it anew, instead of evicting pods. Upstream picks such a claim at random (Go map
        order); kubesched takes the first in ``spec.resourceClaims`` order, so a simulation stays
        reproducible. The write (``status`` without allocation, reservedFor and devices, through the
        status subresource) is sent at once and awaited in the background: the claim's update event
        brings the pod back."""
        s = self._state(state)
        if s is None:
            # This plugin's PreFilter never ran: an earlier PreFilter refused the pod as
            # unresolvable (a missing PVC, say) and upstream's RunPreFilterPlugins stops there.
            # Upstream's PostFilter then fails to read its state and returns an Error ("not
            # found"), which ends the PostFilter phase before DefaultPreemption and adds that text
            # to the pod's message; kubesched answers "nothing to deallocate" instead, so the
            # message stays the PreFilter's (README: differences from upstream).
            return None, Status.unschedulable()
        if not s.claims:
            return None, Status.unschedulable()
        for index in sorted(s.unavailable):
            claim = s.claims[index]
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                client = self.handle.client
                if not isinstance(client, StatusWriter):
                    return None, Status.error("deallocating a claim: this shell's client cannot update ResourceClaims")
                status = {k: v for k, v in (claim.get("status") or {}).items()
                          if k not in ("reservedFor", "allocation", "devices")}
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    return None, Status.error("deallocating a claim: no event loop to send the update from")
                task = loop.create_task(client.update_object_status(RESOURCE_CLAIM, {**claim, "status": status}))
                self._deallocations.add(task)
                task.add_done_callback(self._deallocations.discard)
                return None, Status.unschedulable("deallocation of ResourceClaim completed")
        return None, Status.unschedulable()

    # -- Score ----------------------------------------------------------------------------------
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s = self._state(state)
        if s is None:
            return 0, Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')
        if not s.claims:
            return 0, SUCCESS
        allocations = s.node_allocations.get(node.name)
        if allocations is None:
            return 0, SUCCESS
        try:
            return compute_score(s.claims, allocations), SUCCESS
        except ScoreError as e:
            return 0, Status.error(str(e))

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores)
        return SUCCESS

    # -- Reserve / Unreserve --------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = self._state(state)
        if s is None or not s.to_allocate:
            return SUCCESS
        results = s.node_allocations.get(node_name)
        if results is None:
            return Status.error("claim allocation not found for node")
        if len(results) != len(s.to_allocate):
            return Status.error(f"internal error, have {len(results)} allocations, {len(s.to_allocate)} claims to "
                                f"allocate, want {len(s.to_allocate)} claims")
        for index, alloc in zip(s.to_allocate, results, strict=True):
            claim = s.claims[index]
            s.reserved[index] = alloc
            pending = {**claim, "status": {**(claim.get("status") or {}), "allocation": alloc}}
            uid = claim_uid(claim)
            entry = self._in_flight.get(uid)
            if entry is None:
                self._in_flight[uid] = (pending, {pod.uid})
            else:
                entry[1].add(pod.uid)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = self._state(state)
        if s is None:
            return
        for index in list(s.reserved):
            self._release(claim_uid(s.claims[index]), pod.uid)
        s.reserved.clear()

    def _release(self, uid: str, pod_uid: str) -> None:
        entry = self._in_flight.get(uid)
        if entry is not None:
            entry[1].discard(pod_uid)
            if not entry[1]:
                del self._in_flight[uid]

    # -- PreBind --------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = self._state(state)
        if s is None or not s.claims:
            return SUCCESS
        client = self.handle.client
        if not isinstance(client, StatusWriter) or not isinstance(client, ObjectWriter):
            return Status.error("binding claims: this shell's client cannot update ResourceClaims")
        for index, claim in enumerate(s.claims):
            if is_reserved_for(claim, pod):
                continue
            try:
                s.claims[index] = await self._bind_claim(client, claim, s.reserved.get(index), pod)
            except Exception as e:  # the API's refusal, as upstream's bindClaim returns it
                return Status.error(str(e))
        for index in list(s.reserved):
            self._release(claim_uid(s.claims[index]), pod.uid)
        s.reserved.clear()
        return SUCCESS

    async def _bind_claim(self, client: Any, claim: dict[str, Any], alloc: dict[str, Any] | None,
                          pod: PodInfo) -> dict[str, Any]:
        key = claim_key(claim)
        for attempt in range(_CONFLICT_TRIES):
            if attempt:
                fresh = self._claim(key)
                if fresh is None:
                    raise ClaimError(f"get updated claim {key} after conflict: not found")
                claim = fresh
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                raise ClaimError(f"claim {key} got deleted in the meantime")
            try:
                if alloc is not None:
                    if allocation(claim) is not None:
                        raise ClaimError(f"claim {key} got allocated elsewhere in the meantime")
                    finalizers = list((claim.get("metadata") or {}).get("finalizers") or [])
                    if FINALIZER not in finalizers:
                        claim = {**claim, "metadata": {**(claim.get("metadata") or {}),
                                                        "finalizers": [*finalizers, FINALIZER]}}
                        try:
                            claim = await client.update_object(RESOURCE_CLAIM, claim)
                        except Exception as e:
                            raise _Retry(e, f"add finalizer to claim {key}: {_error_text(e)}") from e
                status = dict(claim.get("status") or {})
                if alloc is not None:
                    status["allocation"] = alloc
                if status.get("allocation") is None:
                    raise ClaimError(f"claim {key} got deallocated elsewhere in the meantime")
                if not status["allocation"].get("allocationTimestamp"):
                    # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on in v1.37:
                    # every claim PreBind reserves gets the timestamp, already allocated ones too.
                    status["allocation"] = {**status["allocation"],
                                            "allocationTimestamp": _now_rfc3339(self.handle.clock.wall())}
                status["reservedFor"] = [*(status.get("reservedFor") or []),
                                         {"resource": "pods", "name": pod.name, "uid": pod.uid}]
                try:
                    update = {**claim, "status": status}
                    written: dict[str, Any] = await client.update_object_status(RESOURCE_CLAIM, update)
                except Exception as e:
                    what = "add allocation and reservation to" if alloc is not None else "add reservation to"
                    raise _Retry(e, f"{what} claim {key}: {_error_text(e)}") from e
            except _Retry as r:
                if _is_conflict(r.cause) and attempt + 1 < _CONFLICT_TRIES:
                    continue
                raise ClaimError(r.message) from None
            self._assumed[key] = written
            return written
        raise ClaimError(f"claim {key}: too many conflicts")  # not reached: the last try raises


class _Retry(Exception):
    def __init__(self, cause: BaseException, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


def _error_text(e: BaseException) -> str:
    """The exception's message, or its type where it has none: a request that timed out (an
    ``asyncio.TimeoutError``, e.g. while the event loop was busy scheduling) left the pod's message
    ending in "add finalizer to claim ns/x: " with nothing after it."""
    return str(e) or type(e).__name__


def _is_conflict(e: BaseException) -> bool:
    status = getattr(e, "status", None)
    return status == 409 or "the object has been modified" in str(e)


def _now_rfc3339(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _newer_or_same(latest: Mapping[str, Any], written: Mapping[str, Any]) -> bool:
    """Whether the shell's copy has caught up with what PreBind wrote (resourceVersions compared as
    numbers, as upstream's assume cache does; otherwise: equal means caught up)."""
    a, b = resource_version(latest), resource_version(written)
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return a == b


def _requests_dra_extended_resource(pod: PodInfo, classes: Mapping[str, dict[str, Any]]) -> bool:
    """Whether the pod asks for an extended resource a DeviceClass maps (DRAExtendedResource)."""
    mapped = {str((c.get("spec") or {}).get("extendedResourceName")) for c in classes.values()
              if (c.get("spec") or {}).get("extendedResourceName")}
    if not mapped:
        return False
    for container in [*(pod.spec.get("containers") or []), *(pod.spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        if mapped & {*(resources.get("requests") or {}), *(resources.get("limits") or {})}:
            return True
    return False
