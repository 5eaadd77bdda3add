"""NodeResourcesBalancedAllocation: prefer nodes whose resource usage the pod makes more balanced.

Port of ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`` (v1.37): the
balance of a node is ``(1 - std) * MaxNodeScore`` where std is the standard deviation of the
requested/allocatable fractions (node Requested, not the non-zero defaults) of the configured
resources; the score is the *change* the pod makes to it, ``50 + (50 + withPod - withoutPod) / 2``
(75: no change; upstream balancedResourceScorer since kubernetes#135573). Before v1.36 the score
was the balance with the pod alone, which made kubesched place pods differently from kube-scheduler
v1.37 (issue 32: the openb trace). PreScore returns Skip for a pod that requests none of the
resources (kubernetes#129138: best-effort pods would otherwise pile onto the most balanced node).

Extended resources backed by DRA are scored as in NodeResourcesFit (``draPreScoreState``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import DRAResourceCounter, Handle
from kubesched.framework.interfaces import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Scores
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.helpers.device_classes import DEVICE_CLASS_KIND, extended_resource_classes
from kubesched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from kubesched.plugins.noderesources.resource_allocation import ResourceAllocation, balance_with_and_without
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows

__all__ = ["NodeResourcesBalancedAllocation"]

NAME: Final = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: IntArray
    #: draPreScoreState: the devices behind DRA-backed resources of ``resources``, or None.
    dra: DRAResourceCounter | None = None

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    """Score: favours nodes whose cpu/memory (or configured resources) fractions stay close."""

    name = NAME
    args_model = NodeResourcesBalancedAllocationArgs

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (balanced_allocation.go): as NodeResourcesFit's."""
        scalar = pod.requests.scalar
        if scalar and self.handle.objects(DEVICE_CLASS_KIND):
            resolver = extended_resource_classes(self.handle.objects(DEVICE_CLASS_KIND))
            if any(name in resolver for name in scalar):
                return None
        return ((signers.RESOURCES, list(pod.requests.key)),)

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
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(pod_requests, self.allocation.dra_counter(self.handle)))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            # PreScore did not run: recompute, and score best-effort pods 0 as upstream's Score does.
            pod_requests = self.allocation.pod_request_list(pod)
            if not pod_requests.any():
                return np.zeros(len(rows), dtype=np.int64)
            s = _PreScoreState(pod_requests, self.allocation.dra_counter(self.handle))
        pod_requests = s.pod_requests
        alloc, requested, known_nonzero = self.allocation.allocatable_requested(table, rows, pod_requests)
        if s.dra is not None and not known_nonzero:
            self.allocation.add_dra_backed(table, rows, pod_requests, s.dra, alloc, requested)
        with_pod, without_pod = balance_with_and_without(requested, alloc, pod_requests, known_nonzero)
        # Both balances lie in [50, 100] (std <= 0.5 for fractions in [0, 1]), so the numerator is
        # never negative and floor division is Go's truncation.
        half = MAX_NODE_SCORE // 2
        with_pod -= without_pod
        with_pod += half
        with_pod //= 2
        with_pod += half
        return with_pod
