"""UnderlayIP: a per-node budget of underlay IPs (reference design 000, BlueKing ip-scheduler).

Each node can host only N pods that need an underlay IP. Filter rejects nodes with no free IP,
Score prefers the node with the most free IPs (the reference's rule), Reserve re-checks the budget
so concurrent binds never over-commit.

Counts are a plugin column of the node table: the sum over the pods on each node of the IPs each
consumes. Assumed, bound, forgotten and deleted pods update it, and it is rebuilt from bound pods at
start, so a restarted scheduler counts right and a node that leaves and returns is not counted
twice — the reference's in-memory counter did none of this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    FilterPlugin,
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
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
REASON_NO_FREE_IP = "node(s) had no free underlay IP"
REASON_CONTROL_PLANE = "node(s) were control-plane nodes without underlay IPs"
_STATE_KEY = "UnderlayIP/need"


class UnderlayIP(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin):
    name = "UnderlayIP"
    args_model = UnderlayIPArgs

    def __init__(self, args: UnderlayIPArgs | None, handle: Handle) -> None:
        super().__init__(args or UnderlayIPArgs(), handle)
        self.args: UnderlayIPArgs = self.args
        self._profile = handle.profile_name
        # One column pair per profile: two profiles may budget differently.
        self._used = f"UnderlayIP/{self._profile}/used"
        self._budget = f"UnderlayIP/{self._profile}/budget"
        handle.table.register_pod_column(self._used, self.ips_needed)
        handle.table.register_node_column(self._budget, self.node_budget)

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
        return (
            ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ANNOTATION),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        need = self.ips_needed(pod)
        if need == 0:
            return None, Status.skip()
        state.write(_STATE_KEY, need)
        return None, SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        need = int(state.get(_STATE_KEY) or self.ips_needed(pod))
        budget = table.node_column(self._budget)[rows]
        codes = np.zeros(len(rows), dtype=np.int32)
        codes[self.free_ips(table, rows) < need] = 1
        codes[budget < 0] = 2
        return Verdicts(codes, [Status.unschedulable(REASON_NO_FREE_IP), Status.unresolvable(REASON_CONTROL_PLANE)])

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        return SUCCESS if self.ips_needed(pod) else Status.skip()

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        return np.maximum(self.free_ips(table, rows), 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=False)
        return SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        # The assumed pod is already counted in the column: over budget means a race was lost.
        row = self.handle.table.row_of(node_name)
        if row is None or not self.ips_needed(pod):
            return SUCCESS
        rows = np.array([row], dtype=np.intp)
        if int(self.free_ips(self.handle.table, rows)[0]) < 0:
            return Status.unschedulable(REASON_NO_FREE_IP)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Nothing to undo: forgetting the assumed pod removes its IPs from the column."""
