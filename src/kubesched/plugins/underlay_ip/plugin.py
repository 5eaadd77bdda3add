"""UnderlayIP: underlay IPs per node or from pools (reference design 000, BlueKing ip-scheduler).

Without pools (the zero-configuration default), each node can host only N pods that need an
underlay IP. Filter rejects nodes with no free IP, Score prefers the node with the most free IPs
(the reference's rule), Reserve re-checks the budget so concurrent binds never over-commit. Counts
are a plugin column of the node table: the sum over the pods on each node of the IPs each
consumes, so a restarted scheduler counts right and a node that leaves and returns is not counted
twice — the reference's in-memory counter did none of this.

With UnderlayIPPool objects (kinds.py; BlueKing bcs-k8s-custom-scheduler v3's BCSNetPool and
BCSNetIPClaim), every node's IPs come from the pools that serve it, and the address is assigned,
not only counted (tracker.py): Reserve picks a concrete address deterministically, PreBind puts it
on the Binding as the pod annotation ``annotationKey`` (the apiserver copies a Binding's annotations
onto the pod: pkg/registry/core/pod/storage/storage.go, ``BindingREST.Create``), so it lands with
the bind, and the pool's status records it (status.py). A pod of an UnderlayIPClaim returns to its
claim's address; PreFilter narrows it to the nodes its pool serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle, add_binding_annotations
from kubesched.framework.interfaces import (
    FilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.underlay_ip.args import UnderlayIPArgs
from kubesched.plugins.underlay_ip.kinds import CLAIM, CLAIM_KIND, POOL, POOL_KIND, Claim
from kubesched.plugins.underlay_ip.status import StatusReports
from kubesched.plugins.underlay_ip.tracker import PoolTracker
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
REASON_NO_FREE_IP = "node(s) had no free underlay IP"
REASON_CONTROL_PLANE = "node(s) were control-plane nodes without underlay IPs"
REASON_NO_POOL = "node(s) were not served by any underlay IP pool"
_STATE_KEY = "UnderlayIP/need"
#: CycleState: the pod's claim when it is bound to (or names) a pool: (claim key, pool, whether
#: it has its addresses already).
_CLAIM_KEY = "UnderlayIP/claim"


def claim_pool_reason(claim: str, pool: str) -> str:
    return f"underlay IP claim {claim} is bound to pool {pool} which does not serve this node"


def quota_reason(quota: int) -> str:
    return f"underlay IP quota {quota} is full"


class UnderlayIP(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = "UnderlayIP"
    args_model = UnderlayIPArgs
    object_kinds = (POOL_KIND, CLAIM_KIND)

    def __init__(self, args: UnderlayIPArgs | None, handle: Handle) -> None:
        super().__init__(args or UnderlayIPArgs(), handle)
        self.args: UnderlayIPArgs = self.args
        self._profile = handle.profile_name
        # One column pair per profile: two profiles may budget differently.
        self._used = f"UnderlayIP/{self._profile}/used"
        self._budget = f"UnderlayIP/{self._profile}/budget"
        handle.table.register_pod_column(self._used, self.ips_needed)
        handle.table.register_node_column(self._budget, self.node_budget)
        self.pools = PoolTracker(handle, self.ips_needed, self.args.annotation_key,
                                 stateful_set_keep=self.args.stateful_set_keep_seconds)
        self.reports = StatusReports(self.pools)

    # -- who consumes what ----------------------------------------------------------------------
    def ips_needed(self, pod: PodInfo) -> int:
        a = self.args
        if a.resource_name is not None:
            n = pod.requests.scalar.get(a.resource_name, 0)
            if n and (a.pod_selector is None or a.pod_selector.matches(pod.labels)):
                return int(n)
            return 0
        if a.pod_selector is not None:
            return int(a.pod_selector.matches(pod.labels))
        return int(pod.scheduler_name == self._profile)

    def node_budget(self, node: dict[str, Any]) -> int:
        """The node's IP budget; -1 marks a control-plane node that gets none."""
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if self.args.exclude_control_plane and any(k in labels for k in CONTROL_PLANE_LABELS):
            return -1
        raw = labels.get(self.args.capacity_key, (meta.get("annotations") or {}).get(self.args.capacity_key))
        if raw is not None:
            try:
                return max(int(raw), 0)
            except ValueError:
                pass  # a malformed override falls back to the default, never crashes scheduling
        return self.args.ips_per_node

    def free_ips(self, table: NodeTable, rows: Rows) -> Scores:
        budget = table.node_column(self._budget)[rows]
        free: Scores = np.maximum(budget, 0) - table.pod_column(self._used)[rows]
        return free

    # -- extension points ---------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        objects = ActionType.ADD | ActionType.UPDATE | ActionType.DELETE
        return (
            ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ANNOTATION),
            ClusterEvent(POOL, objects, f"{POOL}Change"),
            ClusterEvent(CLAIM, objects, f"{CLAIM}Change"),
        )

    def used_ips(self, table: NodeTable) -> int:
        """Underlay IPs pods of this profile hold now, cluster-wide (the quota's count)."""
        if self.pools.active:
            return self.pools.book.active_count
        return int(table.pod_column(self._used)[table.alive_rows()].sum())

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        need = self.ips_needed(pod)
        if need == 0:
            return None, Status.skip()
        state.write(_STATE_KEY, need)
        self.pools.cycle_uid = pod.uid
        quota = self.args.quota
        if quota is not None and self.used_ips(table) + need > quota:
            return None, Status.unschedulable(quota_reason(quota))
        self.pools.refresh()
        if not self.pools.active:
            return None, SUCCESS
        return self._pre_filter_claim(state, pod)

    def _pre_filter_claim(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """A pod of a claim: refused if the claim is invalid, expired or its address is still held;
        else narrowed to the nodes of the claim's pool."""
        tracker = self.pools
        error = tracker.claim_error(pod.key)
        if error is not None:
            return None, Status.unresolvable(error)
        claim = tracker.claim_of(pod)
        if claim is None:
            return None, SUCCESS
        if tracker.is_expired(claim):
            return None, Status.unresolvable(self._expired_reason(claim))
        holders = tracker.claim_holders(claim)
        if holders:
            bound = tracker.claim_addresses(claim)
            assert bound is not None
            book = tracker.book
            others = sorted(book.assignments[u].pod_key if u in book.assignments else u for u in holders)
            return None, Status.unschedulable(
                f"underlay IP claim {claim.key}: address {','.join(bound[1])} of pool {bound[0]} is still held by "
                f"pod {', '.join(others)}")
        bound = tracker.claim_addresses(claim)
        pool = bound[0] if bound is not None else claim.pool
        if pool is None:
            return None, SUCCESS
        state.write(_CLAIM_KEY, (claim.key, pool, bound is not None))
        nodes = tracker.nodes_of(pool)
        if not nodes:
            return None, Status.unresolvable(claim_pool_reason(claim.key, pool))
        return PreFilterResult(nodes), SUCCESS

    def _expired_reason(self, claim: Claim) -> str:
        gone = self.pools.book.expired.get(claim.key)
        had = f": its address {','.join(gone[1])} of pool {gone[0]} was released" if gone else ""
        return f"underlay IP claim {claim.key} expired{had}; delete and recreate the claim for a new address"

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        need = int(state.get(_STATE_KEY) or self.ips_needed(pod))
        codes = np.zeros(len(rows), dtype=np.int32)
        if not self.pools.active:
            budget = table.node_column(self._budget)[rows]
            codes[self.free_ips(table, rows) < need] = 1
            codes[budget < 0] = 2
            return Verdicts(codes, [Status.unschedulable(REASON_NO_FREE_IP), Status.unresolvable(REASON_CONTROL_PLANE)])
        statuses = [Status.unschedulable(REASON_NO_FREE_IP), Status.unschedulable(REASON_NO_POOL)]
        claimed = state.get(_CLAIM_KEY)
        if claimed is not None:
            # A bound claim's addresses are its own (PreFilter checked no other pod holds them):
            # only whether the claim's pool serves the node matters. A claim naming a pool takes
            # free addresses of that pool.
            key, pool, bound = claimed
            if not bound and self.pools.book.pools[pool].free_count < need:
                codes[:] = 1
            codes[~self.pools.served_mask(rows, pool)] = 3
            statuses.append(Status.unresolvable(claim_pool_reason(key, pool)))
            return Verdicts(codes, statuses)
        codes[self.pools.free_by_row(rows, best=need > 1) < need] = 1
        codes[~self.pools.served_mask(rows)] = 2
        return Verdicts(codes, statuses)

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        return SUCCESS if self.ips_needed(pod) else Status.skip()

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        if self.pools.active:
            return np.maximum(self.pools.free_by_row(rows), 0)
        return np.maximum(self.free_ips(table, rows), 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=False)
        return SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        # The assumed pod is already counted: over budget (or quota) means a race was lost.
        row = self.handle.table.row_of(node_name)
        if row is None or not self.ips_needed(pod):
            return SUCCESS
        quota = self.args.quota
        if quota is not None and self.used_ips(self.handle.table) > quota:
            return Status.unschedulable(quota_reason(quota))
        if self.pools.active:
            if self.pools.reserve(pod):
                return SUCCESS
            claimed = state.get(_CLAIM_KEY)
            if claimed is not None and node_name not in self.pools.nodes_of(claimed[1]):
                return Status.unresolvable(claim_pool_reason(claimed[0], claimed[1]))
            return Status.unschedulable(REASON_NO_FREE_IP)
        rows = np.array([row], dtype=np.intp)
        if int(self.free_ips(self.handle.table, rows)[0]) < 0:
            return Status.unschedulable(REASON_NO_FREE_IP)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Nothing to undo: forgetting the assumed pod removes its IPs from the column, and its
        addresses return to the pool as the table drops it, or, for a pod of a claim, stay kept
        for it while it retries (tracker.RETRY_KEEP_SECONDS at least)."""
        self.pools.unreserving = pod.uid

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Put the assigned addresses on the Binding, so the pod carries them once bound."""
        a = self.pools.book.assignments.get(pod.uid)
        if a is not None:
            add_binding_annotations(state, {self.args.annotation_key: ",".join(a.addresses)})
        return SUCCESS

    # -- status and reports -------------------------------------------------------------------
    def status_updates(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Pool and claim status that changed (status.py); the live leader merge-patches it."""
        self.pools.refresh()
        return self.reports.changes()

    def object_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per-pool usage (total, active, reserved, free) for the simulator's summary and report."""
        self.pools.refresh(force=True)
        pools = self.reports.pool_status(with_allocations=False)
        return {POOL: pools} if pools else {}
