"""NodeDeclaredFeatures: a pod whose spec uses a node-declared feature runs only on nodes that
declare it in ``status.declaredFeatures``.

Port of pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures.go (v1.37.1,
where the NodeDeclaredFeatures gate is GA and locked on, so the plugin is in the default profile).
PreFilter infers the pod's requirements (features.py) and returns Skip when there are none, which
is nearly always; Filter compares them with a per-node bit set kept as a node column. The
InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off in 1.37) that would skip pods with a
deferred resize is not followed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.nodedeclaredfeatures.features import feature_bits, infer_for_scheduling
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: errReasonUnsatisfiedRequirements
ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"
_STATE_KEY = "PreFilterNodeDeclaredFeatures"
_COLUMN = "NodeDeclaredFeatures"
_UNSATISFIED = Status.unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS, plugin="NodeDeclaredFeatures")


def node_feature_bits(node: dict[str, Any]) -> int:
    declared = (node.get("status") or {}).get("declaredFeatures") or ()
    return feature_bits(declared) if isinstance(declared, list) else 0


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin):
    name: ClassVar[str] = "NodeDeclaredFeatures"

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (nodedeclaredfeatures.go): the features the pod needs."""
        return ((signers.FEATURES, infer_for_scheduling(pod.spec)),)

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        handle.table.register_node_column(_COLUMN, node_feature_bits)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream: Node Add | UpdateNodeDeclaredFeature, and the pod's own update (the queue
        # retries an updated unschedulable pod anyway).
        return (
            ClusterEvent(
                NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE, "NodeAdd|UpdateNodeDeclaredFeature"
            ),
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        # Inferred from the spec alone, which a PodInfo never changes (an update is a new
        # PodInfo with an empty memo), so once per pod object rather than per attempt.
        required = pod.memo.get(_STATE_KEY)
        if required is None:
            required = pod.memo[_STATE_KEY] = infer_for_scheduling(pod.spec)
        if not required:
            return None, Status.skip()
        state.write(_STATE_KEY, required)
        return None, SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        required = state.get(_STATE_KEY)
        if required is None:
            return Verdicts(np.ones(len(rows), dtype=np.int32), [Status.error(
                f'error reading "{_STATE_KEY}" from cycle-state: not found'
            )])
        ok = (table.node_column(_COLUMN)[rows] & required) == required
        return Verdicts.from_mask(ok, _UNSATISFIED)
