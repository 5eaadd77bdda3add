"""PodGroupPodsCount: a placement scores the PodGroup members it holds.

Port of pkg/scheduler/framework/plugins/podgrouppodscount/podgroup_pods_count.go (Kubernetes
v1.37.1): ScorePlacement is the group's members already assumed or bound (a CompositePodGroup's:
every PodGroup's under it, helper.GetPodGroupStates) plus those the placement proposes;
NormalizePlacementScore scales them to 0–100 by the highest
(all zero is an error, as upstream: GangScheduling lets no group through with none placed).
"""

from __future__ import annotations

from typing import ClassVar

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, PlacementScorePlugin
from kubesched.framework.podgroup import PodGroupAssignments, PodGroupInfo, group_key
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.helpers.gang_members import MemberIndex

NAME = "PodGroupPodsCount"


class PodGroupPodsCount(PlacementScorePlugin):
    name: ClassVar[str] = NAME

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.members = MemberIndex(handle.table, handle.pending_pods, group_key)

    def score_placement(
        self, state: CycleState, group: PodGroupInfo, assignments: PodGroupAssignments
    ) -> tuple[int, Status]:
        placed = sum(len(self.members.assigned_of(leaf.key)) for leaf in group.leaves())
        return placed + len(assignments.proposed), SUCCESS

    def normalize_placement_scores(self, state: CycleState, group: PodGroupInfo, scores: list[int]) -> Status | None:
        highest = max(scores, default=0)
        if highest == 0:
            return Status.error("no pods from pod group are assigned to any of the candidate placements")
        for i, score in enumerate(scores):
            scores[i] = MIN_NODE_SCORE + score * (MAX_NODE_SCORE - MIN_NODE_SCORE) // highest
        return SUCCESS
