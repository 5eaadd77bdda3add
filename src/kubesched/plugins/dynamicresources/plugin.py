"""DynamicResources: place a pod where its ResourceClaims can be allocated, then allocate them.

Port of pkg/scheduler/framework/plugins/dynamicresources (dynamicresources.go, dra_manager.go,
allocateddevices.go; Kubernetes v1.37.1), structured parameters only:

* PreEnqueue: every claim of ``spec.resourceClaims`` exists (a template's claim is named in
  ``status.resourceClaimStatuses``, and owned by the pod), and is not being deleted;
* PreFilter: Skip for a pod without claims (nor an extended resource a DeviceClass backs: then
  the claim of extended.py is one more, last); an allocated claim restricts the nodes to its
  allocation's ``nodeSelector``; an unallocated one needs its DeviceClasses (``request <r>: device
  class <c> does not exist``) and must not be in the middle of another pod's allocation
  (``resource claim <ns/name> is in the process of being allocated``); the allocator is set up
  with every device already allocated or in flight;
* Filter: ``resourceclaim not available on the node`` where an allocation's node selector does
  not match; else a trial allocation of the unallocated claims from the node's ResourceSlices
  (allocator.py): ``cannot allocate all claims`` when there is none, an Error status when a claim
  or class is broken (e.g. a CEL error) or the search outlasts ``filterTimeout`` on the injected
  clock (``node <n>: timed out trying to allocate devices``), as upstream; for simple claims
  (quick_filter.py) the free matching devices per node answer first, in one pass over the rows,
  and the search runs only on the node the pod gets (same devices, same messages);
* Reserve keeps the node's allocation in flight (the next pods' PreFilter sees those devices
  taken, and a second pod sharing the claim waits for it); Unreserve drops it;
* PreBind writes each claim not yet reserved for the pod, as bindClaim does: the finalizer
  (``update``), then ``status.allocation`` (with ``allocationTimestamp``) and the pod in
  ``status.reservedFor`` (``update`` on the status subresource, framework/objects.py
  ``StatusWriter``), re-reading the claim on a conflict (binding.py); the written claim is assumed
  until the shell's copy catches up (assumed.py); the extended resources' claim is created first
  and the pod's ``status.extendedResourceClaimStatus`` set after;
* PostFilter (post_filter.py) deallocates an allocated claim that kept a node out and that no other pod uses
  (``deallocation of ResourceClaim completed``) instead of evicting, or deletes an extended
  resources' claim an earlier attempt created (``deletion of ResourceClaim completed``);
* Score: a prioritized list's earlier subrequests score higher (score.py), normalised to 0-100.

PodGroupPostFilter (GenericWorkload): group_post_filter.py.

Not ported: queueing hints (every registered event retries), PodGroup claims
(DRAWorkloadResourceClaims, alpha).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    FilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.objects import POD_KIND, ObjectEvent
from kubesched.framework.plugin_metrics import MetricFamily
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.dynamicresources.allocator import (
    AllocationError,
    Allocator,
    FailedOnNodeError,
    FilterTimeoutError,
    claim_requests,
)
from kubesched.plugins.dynamicresources.args import DynamicResourcesArgs
from kubesched.plugins.dynamicresources.batch_filter import filter_rows
from kubesched.plugins.dynamicresources.binding import (
    bind_claim,
    create_extended_claim,
    delete_claim,
    patch_extended_status,
    unreserve_claim,
)
from kubesched.plugins.dynamicresources.binding_conditions import (
    POLL_SECONDS,
    BindingError,
    bindable,
    has_binding_conditions,
    wait_until_ready,
)
from kubesched.plugins.dynamicresources.binding_metrics import STATUS_SUCCESS, BindingConditionsMetrics
from kubesched.plugins.dynamicresources.claims import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ClaimError,
    allocation,
    claim_key,
    claim_uid,
    is_reserved_for,
    pod_claims,
)
from kubesched.plugins.dynamicresources.explain import node_note
from kubesched.plugins.dynamicresources.extended import (
    NodeClaim,
    find_extended_claim,
    has_requests,
    in_memory_claim,
    is_special,
    mapped_resources,
    node_claim,
)
from kubesched.plugins.dynamicresources.group_post_filter import GroupClaimRelease
from kubesched.plugins.dynamicresources.manager import DRAManager
from kubesched.plugins.dynamicresources.pools import NodeRef
from kubesched.plugins.dynamicresources.post_filter import ClaimDeallocation
from kubesched.plugins.dynamicresources.quick_filter import Need, quick_verdicts, simple_need
from kubesched.plugins.dynamicresources.score import ScoreError, compute_score
from kubesched.plugins.dynamicresources.state import STATE_KEY, StateData, read_state
from kubesched.plugins.helpers.device_classes import extended_resource_classes
from kubesched.plugins.helpers.node_selector import compile_node_selector
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

NAME = STATE_KEY
#: Pod Events kept for the live shell (a shell that posts none, e.g. the simulator, never drains them).
MAX_PENDING_EVENTS = 1000


class DynamicResources(GroupClaimRelease, ClaimDeallocation, PreEnqueuePlugin, PreFilterPlugin, FilterPlugin,
                       ScorePlugin, ReservePlugin, PreBindPlugin):
    name: ClassVar[str] = NAME
    object_kinds = (RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, RESOURCE_SLICE, DEVICE_CLASS, DEVICE_TAINT_RULE)
    args_model = DynamicResourcesArgs

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (dynamicresources.go): a pod with resource claims is not signable."""
        return None if pod.spec.get("resourceClaims") else ()

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.args: DynamicResourcesArgs = args or DynamicResourcesArgs()
        #: Claims, in-flight allocations, slices (manager.py); the handle's DRA manager.
        self.manager = DRAManager(handle.objects, RESOURCE_CLAIM.kind, RESOURCE_SLICE.kind, DEVICE_CLASS.kind,
                                  DEVICE_TAINT_RULE.kind)
        handle.dra_manager = self.manager
        #: PostFilter's claim status writes in flight (kept referenced until done).
        self._deallocations: set[asyncio.Future[Any]] = set()
        #: How often PreBind looks at binding conditions (upstream: 5 s).
        self.binding_poll_seconds = POLL_SECONDS
        #: Events regarding pods, until the live shell posts them (``object_events``).
        self._pod_events: deque[ObjectEvent] = deque(maxlen=MAX_PENDING_EVENTS)
        #: PreBind's waits for binding conditions, as kube-scheduler's metrics (binding_metrics.py).
        self.binding_metrics = BindingConditionsMetrics()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE),
            ClusterEvent(RESOURCE_CLAIM.kind, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
            ClusterEvent(DEVICE_CLASS.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(RESOURCE_SLICE.kind, ActionType.ADD | ActionType.UPDATE),
            # A rule's taints are its slices' (upstream's slice tracker reports them as slice updates).
            ClusterEvent(DEVICE_TAINT_RULE.kind, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
        )

    def metric_families(self) -> Sequence[MetricFamily]:
        return self.binding_metrics.families()

    def object_events(self) -> list[ObjectEvent]:
        out = list(self._pod_events)
        self._pod_events.clear()
        return out

    def _claims(self) -> dict[str, dict[str, Any]]:
        return self.manager.claims()

    def _claim(self, key: str) -> dict[str, Any] | None:
        return self.manager.claim(key)

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
        s = StateData()
        state.write(STATE_KEY, s)
        claims: list[dict[str, Any]] = []
        if pod.spec.get("resourceClaims"):
            try:
                claims = pod_claims(pod, self._claim)
            except ClaimError as e:
                return None, Status.unresolvable(str(e))
        classes = self.handle.objects(DEVICE_CLASS.kind)
        if pod.requests.scalar and classes:
            # preFilterExtendedResources: one claim for the extended resources DeviceClasses back.
            s.resolver = extended_resource_classes(classes)
            s.extended_resources = mapped_resources(pod, s.resolver)
            if s.extended_resources:
                s.extended = len(claims)
                claims.append(find_extended_claim(pod, self._claims()) or in_memory_claim(pod))
        if not claims:
            return None, Status.skip()
        s.claims = claims
        s.available_on = [None] * len(claims)
        for index, claim in enumerate(claims):
            alloc = allocation(claim)
            if alloc is not None:
                # CanBeReserved: no restriction on sharing, so an allocated claim is usable by
                # any pod; it restricts the nodes to those of its allocation.
                if alloc.get("nodeSelector"):
                    s.available_on[index] = compile_node_selector(alloc["nodeSelector"])
                if not bindable(claim, self.args.binding_timeout, self.handle.clock.wall()):
                    s.not_bindable.append(index)
                continue
            s.to_allocate.append(index)
            if claim_uid(claim) in self.manager.in_flight:
                return None, Status.unresolvable(
                    f"resource claim {claim_key(claim)} is in the process of being allocated")
            if index == s.extended:
                continue  # its requests depend on the node (Filter)
            for alternatives in claim_requests(claim):
                for req in alternatives:
                    if not req.class_name:
                        return None, Status.error(f"request {req.full_name}: unsupported request type")
                    if req.class_name not in classes:
                        return None, Status.unresolvable(
                            f"request {req.full_name}: device class {req.class_name} does not exist")
        if s.to_allocate:
            s.allocator = Allocator(self.manager.allocated_state(), classes, self.manager.slices(),
                                    selector_cache=self.manager.selector_cache)
        return None, SUCCESS

    # -- Filter ---------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = read_state(state)
        if s is None:
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')
        if not s.claims:
            return SUCCESS
        name, labels = node.name, node.labels
        node_ext = NodeClaim()
        if s.extended is not None:
            node_ext = node_claim(s.claims[s.extended], pod, s.extended_resources, s.resolver, node,
                                  has_user_claims=s.extended > 0, memo=s.extended_requests)
            if node_ext.refusal:
                return Status.unresolvable(node_ext.refusal)
            if node_ext.claim is None and s.extended == 0:
                return SUCCESS  # only extended resources, all from device plugins here
        unavailable = [i for i, selector in enumerate(s.available_on)
                       if selector is not None and not selector.match_node(labels, name)]
        unavailable += [i for i in s.not_bindable if i not in unavailable]
        if s.allocator is None:
            return self._unavailable(s, unavailable)
        quick = (self._quick_verdicts(s, (name,), node_ext) or [None])[0]
        if quick is False:
            return Status.unresolvable("cannot allocate all claims")
        results: list[dict[str, Any]] | None = None
        if quick is None:
            trial = self._trial(s, NodeRef(name, dict(labels)), node_ext, self.args.filter_timeout)
            if isinstance(trial, Status):
                return trial
            results = trial
        if unavailable:
            return self._unavailable(s, unavailable)
        if results is not None:
            s.node_allocations[name] = results
        else:
            s.quick_nodes.add(name)  # the search runs on the node the pod gets (Reserve)
        if node_ext.claim is not None:
            s.node_extended[name] = node_ext
        return SUCCESS

    def _need(self, s: StateData, node_ext: NodeClaim) -> Need | None:
        """quick_filter.py's needs for the claims to allocate on a node (None: the search decides)."""
        assert s.allocator is not None
        if s.allocator.state.shared or s.allocator.state.consumed:
            return None  # shared devices: capacity decides (capacity.py)
        key = (node_ext.claim is None, node_ext.requests_key)
        if key not in s.needs:
            s.needs[key] = simple_need(self._to_allocate(s, node_ext), s.allocator.classes)
        return s.needs[key]

    def _quick_verdicts(self, s: StateData, names: Sequence[str], node_ext: NodeClaim) -> list[bool | None] | None:
        need = self._need(s, node_ext)
        if need is None:
            return None
        assert s.allocator is not None
        return quick_verdicts(need, s.allocator.slices, names, s.allocator.state, s.allocator.selector_cache)

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        """Filter over many nodes: when no allocated claim restricts the nodes, quick_filter.py
        judges the rows asked the same claims in one pass (for extended resources, nodes alike:
        the same node claim) and only the nodes it cannot judge go through Filter (and its search)."""
        s = read_state(state)
        if (s is None or s.allocator is None or s.not_bindable
                or any(selector is not None for selector in s.available_on)):
            return super().filter_batch(state, pod, table, rows)
        return filter_rows(s, pod, table, rows, lambda names, node_ext: self._quick_verdicts(s, names, node_ext),
                           lambda node: self.filter(state, pod, node))

    @staticmethod
    def _to_allocate(s: StateData, node_ext: NodeClaim) -> list[dict[str, Any]]:
        return [node_ext.claim if i == s.extended and node_ext.claim is not None else s.claims[i]
                for i in s.to_allocate]

    def _trial(self, s: StateData, node: NodeRef, node_ext: NodeClaim, timeout: float) -> list[dict[str, Any]] | Status:
        """The search (allocator.py) on one node: an allocation per claim to allocate, or Filter's status."""
        assert s.allocator is not None
        now = self.handle.clock.now
        try:
            results = s.allocator.allocate(node, self._to_allocate(s, node_ext),
                                           (now, now() + timeout) if timeout > 0 else None)
        except FilterTimeoutError:
            # Potentially transient: an Error, so the pod retries through backoff (upstream).
            return Status.error(f"node {node.name}: timed out trying to allocate devices")
        except FailedOnNodeError as e:
            return Status.unresolvable(str(e))
        except AllocationError as e:
            return Status.error(str(e))
        if results is None or len(results) != len(s.to_allocate):
            return Status.unresolvable("cannot allocate all claims")
        return results

    def _allocations(self, s: StateData, node_name: str) -> list[dict[str, Any]] | None:
        """The node's allocations: Filter's, or, for a node quick_filter.py let through, the search's
        now (it succeeds there; the node's labels matter only for slices quick_filter.py leaves to
        Filter's search)."""
        found = s.node_allocations.get(node_name)
        if found is None and node_name in s.quick_nodes:
            results = self._trial(s, NodeRef(node_name), s.node_extended.get(node_name, NodeClaim()), 0)
            if isinstance(results, Status):
                return None
            found = s.node_allocations[node_name] = results
        return found

    @staticmethod
    def _unavailable(s: StateData, unavailable: list[int]) -> Status:
        """Filter's end, as upstream's: the allocated claims an allocation's node selector keeps off
        this node are remembered for PostFilter (the allocator runs first: its failure wins)."""
        if not unavailable:
            return SUCCESS
        s.unavailable.update(unavailable)
        return Status.unresolvable("resourceclaim not available on the node")

    def explain_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Sequence[str] | None:
        """Per node, the devices the pod got there, or why each device was not usable (explain.py)."""
        s = read_state(state)
        if s is None or s.allocator is None:
            return None
        claims = [s.claims[i] for i in s.to_allocate]
        notes = []
        for row in rows.tolist():
            node = table.node_info(int(row))
            notes.append(node_note(s.allocator, NodeRef(node.name, dict(node.labels)), claims,
                                   self._allocations(s, node.name)))
        return notes

    # -- Score ----------------------------------------------------------------------------------
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s = read_state(state)
        if s is None:
            return 0, Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')
        if not s.claims:
            return 0, SUCCESS
        allocations = s.node_allocations.get(node.name)
        if allocations is None and node.name in s.quick_nodes:
            allocations = [{}] * len(s.to_allocate)  # no prioritized list to allocate: nothing scores
        if allocations is None:
            return 0, SUCCESS
        try:
            return compute_score(s.claims, allocations), SUCCESS
        except ScoreError as e:
            return 0, Status.error(str(e))

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        """Score's answers for many rows: a pod without claims (nearly every pod) scores 0 on each
        node, given at once instead of through a Score call per node; so does a pod whose nodes
        quick_filter.py let through (no prioritized list to allocate: the score is the same on each)."""
        s = read_state(state)
        if s is not None and not s.claims:
            return np.zeros(len(rows), dtype=np.int64)
        if s is not None and s.quick_nodes and not s.node_allocations and len(rows):
            names = table.node_names(rows.tolist())
            if all(name in s.quick_nodes for name in names):
                score, status = self.score(state, pod, NodeInfo(table, int(rows[0])))  # the same on each
                return np.full(len(rows), score, dtype=np.int64) if status.is_success else status
        return super().score_batch(state, pod, table, rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores)
        return SUCCESS

    # -- Reserve / Unreserve --------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = read_state(state)
        if s is None or not s.to_allocate:
            return SUCCESS
        results = self._allocations(s, node_name)
        if results is None:
            if s.to_allocate == [s.extended]:
                return SUCCESS  # only extended resources, all from device plugins on this node
            return Status.error("claim allocation not found for node")
        if len(results) != len(s.to_allocate):
            return Status.error(f"internal error, have {len(results)} allocations, {len(s.to_allocate)} claims to "
                                f"allocate, want {len(s.to_allocate)} claims")
        node_ext = s.node_extended.get(node_name)
        for index, alloc in zip(s.to_allocate, results, strict=True):
            claim = s.claims[index]
            uid = claim_uid(claim)
            if index == s.extended and node_ext is not None and node_ext.claim is not None:
                claim = node_ext.claim  # this node's requests
            s.reserved[index] = alloc
            s.in_flight_uid[index] = uid
            pending = {**claim, "status": {**(claim.get("status") or {}), "allocation": alloc}}
            self.manager.signal_pending(uid, pending, pod.uid)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = read_state(state)
        if s is None:
            return
        for index in list(s.reserved):
            self.manager.release(s.in_flight_uid.pop(index, claim_uid(s.claims[index])), pod.uid)
        s.reserved.clear()
        for index, claim in enumerate(s.claims):
            if index != s.extended and allocation(claim) is not None and is_reserved_for(claim, pod):
                self._in_background(unreserve_claim(self.handle.client, claim, pod, self._claim))
        if s.extended is not None and not is_special(s.claims[s.extended]):
            # unreserveExtendedResourceClaim: a claim this attempt's PreBind created is deleted
            # (in the background; without an event loop there was no PreBind to create it).
            self._in_background(delete_claim(self.handle.client, s.claims[s.extended], self._claim))

    # -- PreBind --------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = read_state(state)
        if s is None or not s.claims:
            return SUCCESS
        for index, claim in enumerate(s.claims):
            if is_reserved_for(claim, pod):
                continue
            alloc = s.reserved.get(index)
            try:
                if index == s.extended:
                    if alloc is None and not has_requests(claim):
                        continue  # extended resources from device plugins: nothing to allocate
                    if is_special(claim):
                        node_ext = s.node_extended.get(node_name)
                        if node_ext is None or node_ext.claim is None:
                            return Status.error(f"extended resource claim not found for node {node_name}")
                        try:
                            claim = await create_extended_claim(self.handle.client, node_ext.claim)
                        except Exception:
                            self.binding_metrics.claim_created(False)
                            raise
                        self.binding_metrics.claim_created(True)
                        self.manager.tracker.assume(claim, created=True)
                        s.claims[index] = claim  # Unreserve deletes it from now on
                written = await bind_claim(self.handle.client, claim, alloc, pod, self.handle.clock.wall(), self._claim)
                self.manager.tracker.assume(written)
                s.claims[index] = written
                if index == s.extended:
                    node_ext = s.node_extended.get(node_name)
                    await patch_extended_status(self.handle.client, pod, written,
                                                node_ext.mappings if node_ext is not None else ())
            except Exception as e:  # the API's refusal, as upstream's bindClaim returns it
                return Status.error(str(e))
        if has_binding_conditions(s.claims):
            # Wait for the drivers to prepare the devices (the in-flight allocations stay until
            # this succeeds, or Unreserve drops them), telling the user as upstream's PreBind does.
            self._pod_events.append(ObjectEvent(
                POD_KIND.name, pod.key, pod.uid, "BindingConditionsPending",
                f"waiting for binding conditions for device on node {node_name}", "Normal", "Scheduling",
                self.handle.profile_name))
            def claims_now() -> list[dict[str, Any]]:
                s.claims[:] = [self._claim(claim_key(c)) or c for c in s.claims]
                return s.claims
            started = self.handle.clock.now()
            try:
                await wait_until_ready(claims_now, self.handle.clock, self.args.binding_timeout,
                                       self.binding_poll_seconds)
            except BindingError as e:
                self.binding_metrics.record(self.handle.profile_name, s.claims, e.status,
                                            self.handle.clock.now() - started)
                return Status.error(str(e))
            self.binding_metrics.record(self.handle.profile_name, s.claims, STATUS_SUCCESS,
                                        self.handle.clock.now() - started)
        for index in list(s.reserved):
            self.manager.release(s.in_flight_uid.pop(index, claim_uid(s.claims[index])), pod.uid)
        s.reserved.clear()
        return SUCCESS
