"""VolumeBinding: place a pod where its PersistentVolumeClaims can be bound, then bind them.

Port of pkg/scheduler/framework/plugins/volumebinding (volume_binding.go, binder.go, scorer.go;
Kubernetes v1.37.1; the batch decisions are in binder.py):

* PreFilter: Skip for a pod without claims (``persistentVolumeClaim`` or generic ``ephemeral``
  volumes); a missing, lost or deleting claim, or an ephemeral claim the pod does not own, is
  UnschedulableAndUnresolvable with upstream's error text; unbound claims of an ``Immediate``
  class: ``pod has unbound immediate PersistentVolumeClaims``;
* Filter: bound claims' PV node affinity; unbound ``WaitForFirstConsumer`` claims matched to the
  smallest available PV that fits (size, access modes, volume mode, class, selector, node
  affinity), else dynamically provisioned where the class's ``allowedTopologies`` reach the node
  and, with a CSIDriver tracking capacity, a CSIStorageCapacity has room. Reasons, as upstream:
  ``node(s) didn't match PersistentVolume's node affinity``, ``node(s) didn't find available
  persistent volumes to bind``, ``node(s) did not have enough free storage``, ``node(s)
  unavailable due to one or more pvc(s) bound to non-existent pv(s)`` (all
  UnschedulableAndUnresolvable);
* Score (StorageCapacityScoring, beta and on in 1.37): the args' shape over the share of the
  chosen PVs' capacity the claims request (static bindings), else of the CSIStorageCapacity
  (dynamic provisioning); the default shape prefers the least used node;
* Reserve assumes the bindings (assume_cache.py) so the next pods see the PVs taken; Unreserve
  restores them;
* PreBind updates each chosen PV's ``claimRef`` and each claim to provision with the
  ``volume.kubernetes.io/selected-node`` annotation through the shell's client
  (framework/objects.py ``ObjectWriter``), then waits, checking every second up to
  ``bindTimeoutSeconds``, for the PersistentVolume controller to complete the bindings (the
  simulator completes them at once, simulate/engine/volumes.py).

Not ported: in-tree volume plugins translated to CSI (``tryTranslatePVToCSI``: the migrated
in-tree sources of removed cloud providers), queueing hints (every registered event retries),
the InPlacePodVerticalScalingSchedulerPreemption alpha check, metrics.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.objects import ObjectWriter
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.volumebinding.args import MAX_CUSTOM_PRIORITY_SCORE, VolumeBindingArgs
from kubesched.plugins.volumebinding.assume_cache import AssumeCache
from kubesched.plugins.volumebinding.binder import (
    REASONS,
    AffinityMatcher,
    BinderError,
    ClaimChoice,
    StorageView,
    capacity_value,
    check_provision,
    match_claim,
    selected_node,
)
from kubesched.plugins.volumebinding.storage import (
    ANN_SELECTED_NODE,
    CSI_DRIVER_KIND,
    CSI_NODE_KIND,
    CSI_STORAGE_CAPACITY_KIND,
    PV_KIND,
    PVC_KIND,
    PVC_RESOURCE,
    STORAGE_CLASS_KIND,
    WAIT_FOR_FIRST_CONSUMER,
    bind_volume_to_claim,
    capacity_storage,
    check_node_affinity,
    claim_class,
    is_fully_bound,
    name_of,
    namespace_of,
    not_found,
    pod_volumes,
    requested_storage,
    resource_version,
    volume_class,
    volume_is_for_pod,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "VolumeBinding"
STATE_KEY = NAME
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
#: upstream: PollUntilContextTimeout(ctx, time.Second, bindTimeout, ...)
_POLL_SECONDS = 1.0


@dataclass(slots=True)
class _Reserved:
    node: str
    bindings: list[tuple[dict[str, Any], dict[str, Any]]]  # (claim, PV with claimRef)
    provisions: list[dict[str, Any]]  # claims with the selected-node annotation


@dataclass(slots=True)
class _State:
    """stateData. Shared by clones, as upstream (its Clone returns itself)."""

    has_claims: bool = False
    bound: list[dict[str, Any]] = field(default_factory=list)
    #: Unbound delayed-binding claims that already carry a selected node.
    annotated: list[dict[str, Any]] = field(default_factory=list)
    #: The other unbound delayed-binding claims, smallest request first.
    to_match: list[ClaimChoice] = field(default_factory=list)
    view: StorageView | None = None
    #: Per table row: passed the Filter (upstream podVolumesByNode has the node).
    passed: np.ndarray | None = None
    #: Per annotated claim, per table row: CSIStorageCapacity index (-1: none).
    annotated_capacity: list[np.ndarray] = field(default_factory=list)
    all_bound: bool = False
    reserved: _Reserved | None = None

    def clone(self) -> _State:
        return self


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


class VolumeBinding(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name: ClassVar[str] = NAME
    args_model = VolumeBindingArgs
    #: PreBind updates PVs (claimRef) and claims (selected node), as upstream's binder does.
    object_kinds = (
        replace(PVC_KIND, writes=("update",)),
        replace(PV_KIND, writes=("update",)),
        STORAGE_CLASS_KIND,
        CSI_NODE_KIND,
        CSI_DRIVER_KIND,
        CSI_STORAGE_CAPACITY_KIND,
    )

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (volume_binding.go): the pod's volume sources."""
        return ((signers.VOLUMES, signers.volumes_signer(pod)),)

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.args: VolumeBindingArgs = args or VolumeBindingArgs()
        self.pvcs = AssumeCache(lambda: handle.objects(PVC_KIND.kind))
        self.pvs = AssumeCache(lambda: handle.objects(PV_KIND.kind))
        self._affinity = AffinityMatcher()
        # buildScorerFunction: shape scores 0..10 scaled to 0..MaxNodeScore.
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self._shape = [(p.utilization, p.score * scale) for p in self.args.shape]

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(STORAGE_CLASS_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(PVC_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(PV_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            ClusterEvent(CSI_NODE_KIND.kind, ActionType.ADD | ActionType.UPDATE),
            ClusterEvent(CSI_DRIVER_KIND.kind, ActionType.UPDATE),
            ClusterEvent(CSI_STORAGE_CAPACITY_KIND.kind, ActionType.ADD | ActionType.UPDATE),
        )

    # -- PreFilter ----------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        vols = pod_volumes(pod)
        if not vols.claims:
            state.write(STATE_KEY, _State())
            return None, Status.skip()
        classes = self.handle.objects(STORAGE_CLASS_KIND.kind)
        s = _State(has_claims=True)
        immediate = False
        delayed: list[dict[str, Any]] = []
        for claim_name, ephemeral in vols.claims:
            pvc = self.pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None:
                if ephemeral:
                    return None, Status.unresolvable(
                        f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim_name}"')
                return None, Status.unresolvable(not_found(PVC_RESOURCE, claim_name))
            spec = pvc.get("spec") or {}
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return None, Status.unresolvable(
                    f'persistentvolumeclaim "{claim_name}" bound to non-existent persistentvolume '
                    f'"{spec.get("volumeName", "")}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status.unresolvable(f'persistentvolumeclaim "{claim_name}" is being deleted')
            if ephemeral:
                err = volume_is_for_pod(pod, pvc)
                if err:
                    return None, Status.unresolvable(err)
            if is_fully_bound(pvc):
                s.bound.append(pvc)
                continue
            class_name = claim_class(pvc)
            sc = classes.get(class_name) if class_name else None
            if sc is not None and not sc.get("volumeBindingMode"):
                return None, Status.error(f'VolumeBindingMode not set for StorageClass "{class_name}"')
            if sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER and not spec.get("volumeName"):
                delayed.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE)
        if delayed:
            wanted = {claim_class(p) for p in delayed}
            by_class: dict[str, list[dict[str, Any]]] = {c: [] for c in wanted}
            for _, pv in self.pvs.items():
                pvs = by_class.get(volume_class(pv))
                if pvs is not None:
                    pvs.append(pv)
            size = len(table.names)
            for pvc in delayed:
                if selected_node(pvc) is not None:
                    s.annotated.append(pvc)
                    s.annotated_capacity.append(np.full(size, -1, dtype=np.int32))
                else:
                    s.to_match.append(ClaimChoice(pvc, by_class[claim_class(pvc)],
                                                  np.full(size, -2, dtype=np.int32), np.full(size, -1, dtype=np.int32)))
            s.to_match.sort(key=lambda c: requested_storage(c.pvc))  # byPVCSize (stable here)
            s.view = StorageView(classes, self.handle.objects(CSI_DRIVER_KIND.kind),
                                 list(self.handle.objects(CSI_STORAGE_CAPACITY_KIND.kind).values()))
        s.passed = np.zeros(len(table.names), dtype=np.bool_)
        state.write(STATE_KEY, s)
        return None, SUCCESS

    def _state(self, state: CycleState) -> _State:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            raise BinderError(f'error reading "{STATE_KEY}" from cycleState: not found')
        return s

    # -- Filter -------------------------------------------------------------------------------
    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        try:
            return self._filter(self._state(state), table, rows)
        except BinderError as e:
            return Verdicts(np.ones(len(rows), dtype=np.int32), [Status.error(str(e))])

    def _filter(self, s: _State, table: NodeTable, rows: Rows) -> Verdicts:
        n = len(rows)
        node_conflict = np.zeros(n, dtype=np.bool_)
        pv_missing = np.zeros(n, dtype=np.bool_)
        # checkBoundClaims: stops at the first claim whose PV is missing or does not fit the node.
        alive = np.ones(n, dtype=np.bool_)
        for pvc in s.bound:
            pv = self.pvs.get(str((pvc.get("spec") or {}).get("volumeName", "")))
            if pv is None:
                pv_missing |= alive
                break
            fits = self._affinity(pv, table, rows)
            node_conflict |= alive & ~fits
            alive &= fits
        bind_conflict = np.zeros(n, dtype=np.bool_)
        no_space = np.zeros(n, dtype=np.bool_)
        if s.annotated or s.to_match:
            bind_conflict, no_space = self._unbound(s, table, rows)
        codes = (node_conflict.astype(np.int32) | (bind_conflict.astype(np.int32) << 1)
                 | (no_space.astype(np.int32) << 2) | (pv_missing.astype(np.int32) << 3))
        assert s.passed is not None
        s.passed[rows[codes == 0]] = True
        if not codes.any():
            return Verdicts.all_pass(n)
        statuses: list[Status] = []
        out = np.zeros(n, dtype=np.int32)
        for combo in sorted(set(codes[codes > 0].tolist())):  # np.unique would import numpy.ma
            reasons = [r for bit, r in enumerate(REASONS) if combo & (1 << bit)]
            statuses.append(Status.unresolvable(*reasons))
            out[codes == combo] = len(statuses)
        return Verdicts(out, statuses)

    def _unbound(self, s: _State, table: NodeTable, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """The delayed-binding claims (FindPodVolumes' second half): bind conflicts, no space."""
        n = len(rows)
        bind_conflict = np.zeros(n, dtype=np.bool_)
        no_space = np.zeros(n, dtype=np.bool_)
        names = np.array(table.node_names(rows.tolist()), dtype=object)
        active = np.ones(n, dtype=np.bool_)
        for pvc in s.annotated:  # selected for another node: nothing else is checked there
            elsewhere = names != selected_node(pvc)
            bind_conflict |= active & elsewhere
            active &= ~elsewhere
        taken: dict[int, np.ndarray] = {}  # id(PV list of a class) -> PVs × rows already chosen
        for cc in s.to_match:
            key = id(cc.pvs)
            if key not in taken:
                taken[key] = np.zeros((len(cc.pvs), n), dtype=np.bool_)
            chosen = match_claim(cc.pvc, cc.pvs, table, rows, taken[key], self._affinity)
            hit = np.flatnonzero(chosen >= 0)
            taken[key][chosen[hit], hit] = True
            assert cc.choice is not None
            cc.choice[rows] = chosen
        # checkVolumeProvisions over the claims to provision, in upstream's order.
        plan: list[tuple[dict[str, Any], np.ndarray, np.ndarray]] = [
            (pvc, np.ones(n, dtype=np.bool_), caps) for pvc, caps in zip(s.annotated, s.annotated_capacity, strict=True)
        ]
        for cc in s.to_match:
            assert cc.choice is not None and cc.capacity is not None
            plan.append((cc.pvc, cc.choice[rows] == -1, cc.capacity))
        assert s.view is not None
        for pvc, needed, caps in plan:
            need = active & needed
            if not need.any():
                continue
            check = check_provision(pvc, s.view, table, rows)
            if check.error:
                raise BinderError(check.error)
            assert check.reachable is not None
            unreachable = need & ~check.reachable
            bind_conflict |= unreachable
            active &= ~unreachable
            if check.sufficient is not None and check.capacity is not None:
                short = need & check.reachable & ~check.sufficient
                no_space |= short
                active &= ~short
                ok = need & check.reachable & check.sufficient
                caps[rows[ok]] = check.capacity[ok]
        return bind_conflict, no_space

    # -- PreScore / Score ---------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, _State):
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found')
        return SUCCESS if s.has_claims else Status.skip()

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = self._state(state)
        out = np.zeros(len(rows), dtype=np.int64)
        if not (s.annotated or s.to_match) or s.passed is None:
            return out  # every claim bound: no class to score
        for i, row in enumerate(rows.tolist()):
            if s.passed[row]:
                out[i] = self._score_row(s, row)
        return out

    def _score_row(self, s: _State, row: int) -> int:
        classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
        static = [(cc.pvc, cc.pvs[int(cc.choice[row])]) for cc in s.to_match
                  if cc.choice is not None and cc.choice[row] >= 0]
        if static:
            for pvc, pv in static:
                acc = classes.setdefault(str((pv.get("spec") or {}).get("storageClassName") or ""), [0, 0])
                acc[0] += requested_storage(pvc)
                acc[1] += capacity_storage(pv)
        else:
            assert s.view is not None
            provisions = list(zip(s.annotated, s.annotated_capacity, strict=True))
            provisions += [(cc.pvc, cc.capacity) for cc in s.to_match
                           if cc.choice is not None and cc.capacity is not None and cc.choice[row] == -1]
            for pvc, caps in provisions:
                idx = int(caps[row])
                if idx < 0:
                    continue
                acc = classes.setdefault(claim_class(pvc), [0, 0])
                acc[1] = capacity_value(s.view.capacities[idx])  # not +=: one pool per class
                acc[0] += requested_storage(pvc)
        if not classes:
            return 0
        total = sum(self._class_score(req, cap) for req, cap in classes.values())
        return math.floor(total / len(classes) + 0.5)  # math.Round (non-negative)

    def _class_score(self, requested: int, capacity: int) -> int:
        utilization = 100 if capacity == 0 or requested > capacity else requested * 100 // capacity
        shape = self._shape
        for i, (u, score) in enumerate(shape):
            if utilization <= u:
                if i == 0:
                    return score
                u0, s0 = shape[i - 1]
                return s0 + _trunc_div((score - s0) * (utilization - u0), u - u0)
        return shape[-1][1]

    # -- Reserve / Unreserve ------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = self._state(state)
        row = self.handle.table.index.get(node_name) if s.has_claims else None
        if row is None or s.passed is None or not s.passed[row]:
            s.all_bound = True
            return SUCCESS
        if self._pod_volumes_bound(pod):
            s.all_bound = True
            return SUCCESS
        reserved = _Reserved(node_name, [], [])
        try:
            for cc in s.to_match:
                assert cc.choice is not None
                idx = int(cc.choice[row])
                if idx < 0:
                    continue
                pv, dirty = bind_volume_to_claim(cc.pvs[idx], cc.pvc)
                if dirty:
                    self.pvs.assume(name_of(pv), pv)
                reserved.bindings.append((cc.pvc, pv))
            to_provision = list(s.annotated) + [cc.pvc for cc in s.to_match
                                                if cc.choice is not None and cc.choice[row] == -1]
            for pvc in to_provision:
                meta = dict(pvc.get("metadata") or {})
                meta["annotations"] = {**(meta.get("annotations") or {}), ANN_SELECTED_NODE: node_name}
                claim = {**pvc, "metadata": meta}
                self.pvcs.assume(f"{namespace_of(claim)}/{name_of(claim)}", claim)
                reserved.provisions.append(claim)
        except KeyError as e:
            self._revert(reserved)
            return Status.error(f"could not find {e.args[0]}")
        s.all_bound = False
        s.reserved = reserved
        return SUCCESS

    def _pod_volumes_bound(self, pod: PodInfo) -> bool:
        for claim_name, _ in pod_volumes(pod).claims:
            pvc = self.pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None or not is_fully_bound(pvc):
                return False
        return True

    def _revert(self, reserved: _Reserved) -> None:
        for _, pv in reserved.bindings:
            self.pvs.restore(name_of(pv))
        for claim in reserved.provisions:
            self.pvcs.restore(f"{namespace_of(claim)}/{name_of(claim)}")

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if isinstance(s, _State) and s.reserved is not None and s.reserved.node == node_name:
            self._revert(s.reserved)

    # -- PreBind ------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = self._state(state)
        if s.all_bound:
            return SUCCESS
        reserved = s.reserved
        if reserved is None or reserved.node != node_name:
            return Status.error(f'no pod volume found for node "{node_name}"')
        client = self.handle.client
        if not isinstance(client, ObjectWriter):
            return Status.error("binding volumes: this shell's client cannot update PersistentVolumes")
        try:
            for i, (pvc, pv) in enumerate(reserved.bindings):
                reserved.bindings[i] = (pvc, await client.update_object(PV_KIND, pv))
            for i, claim in enumerate(reserved.provisions):
                reserved.provisions[i] = await client.update_object(PVC_KIND, claim)
        except Exception as e:  # the API's refusal, as upstream's bindAPIUpdate returns it
            self._revert(reserved)
            return Status.error(str(e))
        clock = self.handle.clock
        deadline = clock.now() + self.args.bind_timeout_seconds
        while True:
            try:
                done = self._check_bindings(node_name, reserved)
            except BinderError as e:
                return Status.error(f"binding volumes: {e}")
            if done:
                return SUCCESS
            if clock.now() >= deadline:
                return Status.error("binding volumes: context deadline exceeded")
            await asyncio.sleep(_POLL_SECONDS)

    def _check_bindings(self, node_name: str, reserved: _Reserved) -> bool:
        """checkBindings: True once the PV controller has bound every claim; BinderError when a
        binding was undone or can no longer work."""
        row = self.handle.table.index.get(node_name)
        if row is None:
            raise BinderError(f'failed to get node "{node_name}": node "{node_name}" not found')
        labels = self.handle.table.labels[row]
        for pvc, pv in reserved.bindings:
            name = name_of(pv)
            latest_pv = self.pvs.get_api_obj(name)
            if latest_pv is None:
                raise BinderError(f"failed to check binding: {not_found('persistentvolume', name)}")
            latest_pvc = self.pvcs.get_api_obj(f"{namespace_of(pvc)}/{name_of(pvc)}")
            if latest_pvc is None:
                raise BinderError(f"failed to check binding: {not_found(PVC_RESOURCE, name_of(pvc))}")
            if resource_version(pv) > resource_version(latest_pv):
                return False
            if not check_node_affinity(latest_pv, labels):
                raise BinderError(f'pv "{name}" node affinity doesn\'t match node "{node_name}": '
                                  "no matching NodeSelectorTerms")
            ref = (latest_pv.get("spec") or {}).get("claimRef")
            if not ref or not ref.get("uid"):
                raise BinderError(f'ClaimRef got reset for pv "{name}"')
            if not is_fully_bound(latest_pvc):
                return False
        for claim in reserved.provisions:
            latest = self.pvcs.get_api_obj(f"{namespace_of(claim)}/{name_of(claim)}")
            if latest is None:
                raise BinderError(f"failed to check provisioning pvc: {not_found(PVC_RESOURCE, name_of(claim))}")
            if resource_version(claim) > resource_version(latest):
                return False
            ann = (latest.get("metadata") or {}).get("annotations")
            if not ann:
                raise BinderError(f'selectedNode annotation reset for PVC "{name_of(claim)}"')
            if ann.get(ANN_SELECTED_NODE) != node_name:
                raise BinderError(f'provisioning failed for PVC "{name_of(claim)}"')
            volume_name = (latest.get("spec") or {}).get("volumeName")
            if volume_name:
                provisioned = self.pvs.get_api_obj(str(volume_name))
                if provisioned is None:
                    return False
                if not check_node_affinity(provisioned, labels):
                    raise BinderError(f'pv "{volume_name}" node affinity doesn\'t match node "{node_name}": '
                                      "no matching NodeSelectorTerms")
            if not is_fully_bound(latest):
                return False
        return True
