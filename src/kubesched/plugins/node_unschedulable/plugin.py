"""NodeUnschedulable: filter out cordoned nodes (spec.unschedulable) unless the pod tolerates them.

Port of pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin
from kubesched.framework.status import Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, Verdicts
from kubesched.plugins.helpers.taints import (
    TAINT_EFFECT_NO_SCHEDULE,
    TAINT_NODE_UNSCHEDULABLE,
    pod_tolerations,
    tolerations_key,
    tolerations_tolerate_taint,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows, Taint

#: ErrReasonUnschedulable
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
#: The taint a pod must tolerate to land on a cordoned node ({node.kubernetes.io/unschedulable, NoSchedule}).
UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", TAINT_EFFECT_NO_SCHEDULE)


_STATUS_UNSCHEDULABLE = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin="NodeUnschedulable")


class NodeUnschedulable(FilterPlugin):
    name: ClassVar[str] = "NodeUnschedulable"
    #: Feature gate TaintTolerationComparisonOperators (alpha, off by default upstream).
    enable_taint_toleration_comparison_operators: ClassVar[bool] = False

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (node_unschedulable.go): the pod's tolerations."""
        return ((signers.TOLERATIONS, signers.tolerations_signer(pod)),)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream (queueing hints on): Node Add | UpdateNodeTaint (a spec.unschedulable change is
        # reported as UpdateNodeTaint), plus the pod's own toleration update, which our queue
        # handles by requeueing an updated unschedulable pod anyway.
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT, "NodeAdd|UpdateNodeTaint"),)

    def _tolerates(self, pod: PodInfo) -> bool:
        # Cached on the pod: a pod's tolerations do not change between its attempts.
        cached = pod.memo.get("NodeUnschedulable")
        if cached is None:
            cached = pod.memo["NodeUnschedulable"] = tolerations_tolerate_taint(
                pod_tolerations(pod), UNSCHEDULABLE_TAINT, self.enable_taint_toleration_comparison_operators
            )
        return bool(cached)

    def filter_signature(self, state: CycleState, pod: PodInfo) -> Hashable:
        # The verdict reads only the tolerations (and the nodes' spec.unschedulable).
        return tolerations_key(pod)

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        cordoned = table.unschedulable[rows]
        # If the pod tolerates the unschedulable taint it also tolerates spec.unschedulable.
        if not cordoned.any() or self._tolerates(pod):
            return Verdicts.all_pass(len(rows))
        return Verdicts.from_mask(~cordoned, _STATUS_UNSCHEDULABLE)
