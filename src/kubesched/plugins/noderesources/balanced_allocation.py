"""NodeResourcesBalancedAllocation: prefer nodes whose resource usage stays balanced.

Port of ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`` as released up to
Kubernetes v1.35: score = ``(1 - std) * MaxNodeScore`` where std is the standard deviation of the
requested/allocatable fractions (node Requested + the pod's requests, not the non-zero defaults) of
the configured resources. PreScore returns Skip for a pod that requests none of them
(kubernetes#129138: best-effort pods would otherwise pile onto the most balanced node).

Not ported: DRA-backed extended resources; and kubernetes#135573 (merged Dec 2025, after v1.35),
which scores the *change* in balance (``50 + (50 + withPod - withoutPod) / 2``) — see README.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import PreScorePlugin, ScorePlugin, Scores
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from kubesched.plugins.noderesources.resource_allocation import ResourceAllocation, balanced_resource_scorer
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows

__all__ = ["NodeResourcesBalancedAllocation"]

NAME: Final = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: IntArray

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    """Score: favours nodes whose cpu/memory (or configured resources) fractions stay close."""

    name = NAME
    args_model = NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesBalancedAllocationArgs()
        super().__init__(args, handle)
        # useRequested: true — balance is judged on what pods really request, so pods without
        # requests do not count as 100m/200Mi here (unlike NodeResourcesFit's scoring).
        self.allocation = ResourceAllocation(tuple(args.resources), use_requested=True)

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        pod_requests = self.allocation.pod_request_list(pod)
        if not np.count_nonzero(pod_requests):  # a C call; ndarray.any() costs several times more
            return Status.skip(self.name)  # isBestEffortPod
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(pod_requests))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, _PreScoreState):
            pod_requests = s.pod_requests
        else:
            # PreScore did not run: recompute, and score best-effort pods 0 as upstream's Score does.
            pod_requests = self.allocation.pod_request_list(pod)
            if not pod_requests.any():
                return np.zeros(len(rows), dtype=np.int64)
        alloc, requested, known_nonzero = self.allocation.allocatable_requested(table, rows, pod_requests)
        return balanced_resource_scorer(requested, alloc, known_nonzero)
