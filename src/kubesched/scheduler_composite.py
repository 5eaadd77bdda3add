"""The CompositePodGroup cycle: a hierarchy of groups placed all-or-nothing as one entity.

Port of the composite half of pkg/scheduler/schedule_one_podgroup.go (Kubernetes v1.37.1, gates
GenericWorkload, TopologyAwareWorkloadScheduling and CompositePodGroup on; upstream refuses the
last without the other two). A PodGroup whose ``spec.parentCompositePodGroupName`` leads to a
root CompositePodGroup (framework/workload_forest.py) is scheduled with every queued member of
every PodGroup under that root:

1. ``podGroupSchedulingRecursiveAlgorithm``: a PodGroup is tried as in the PodGroup cycle with
   placements (scheduler_podgroup.py), and the members of its best placement stay assumed so the
   groups tried after it see them (``assumeSubtreeWithRevert``); a CompositePodGroup is tried on
   each placement its PlacementGenerate plugin makes (``compositePodGroupSchedulingPlacementAlgorithm``),
   and on each one its children are tried in turn, asking the PlacementFeasible plugins
   (GangScheduling: ``minGroupCount`` children placed, 1 for ``basic``) before and after each
   child (``compositePodGroupSchedulingDefaultAlgorithm``); an Unschedulable answer stops the loop
   and reverts what the composite's children assumed;
2. every assumption is undone; a root that placed nothing is Unschedulable;
3. ``completeCompositePodGroupAlgorithmResult``: a group that fitted under a parent that did not,
   or that was never tried, takes its parent's status; its members never tried get it too;
4. an Unschedulable root goes to the PodGroupPostFilter plugins (DefaultPreemption for the
   whole hierarchy, ``reschedule`` running the hierarchy again) and their outcome is appended to
   every group's status (``applyPodGroupPostFilterResult``);
5. each PodGroup's members are submitted as in the PodGroup cycle.

Where kubesched differs: children are tried in name order (upstream: Go map order, random);
upstream appends the PodGroupPostFilter's message once per result sharing a parent's status
object (visible only in the PodGroups' ``PodGroupInitiallyScheduled`` messages), kubesched once
per group.
"""

from __future__ import annotations

from collections.abc import Callable

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.podgroup import (
    COMPOSITE_POD_GROUP_OBJECTS,
    POD_GROUP_OBJECTS,
    POD_GROUP_UNSCHEDULABLE,
    Placement,
    PlacementProgress,
    PodGroupAssignments,
    PodGroupInfo,
    ProposedAssignment,
    group_key,
)
from kubesched.framework.podgroup_condition import error_condition, result_condition
from kubesched.framework.podgroup_points import (
    run_placement_feasible,
    run_placement_generate,
    run_placement_score,
    run_pod_group_post_filter,
)
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Code, Status
from kubesched.framework.types import QueuedPodInfo
from kubesched.framework.workload_forest import build_tree, root_composite_of
from kubesched.scheduler import ScheduleFailure, ScheduleResult
from kubesched.scheduler_podgroup import GroupAttempt, PodGroupCycle, _as_error, member_order

#: Leaf entity key → its queued members in member order (QueuedPodGroupInfo.QueuedPodInfos).
Members = dict[str, list[QueuedPodInfo]]
#: Entity key → the result of its group (podGroupAlgorithmResult map).
Results = dict[str, GroupAttempt]
Reverts = list[Callable[[], None]]


class CompositeCycle:
    def __init__(self, groups: PodGroupCycle) -> None:
        self.groups = groups
        self.sched = groups.sched

    def tree_for(self, fwk: Framework, pod_group_key: str) -> PodGroupInfo | None:
        """The hierarchy of the root CompositePodGroup above PodGroup ``pod_group_key``; None
        for a PodGroup that is a root (or whose chain of parents is incomplete: GangScheduling's
        PreEnqueue holds such members)."""
        pod_groups = fwk.handle.objects(POD_GROUP_OBJECTS)
        composites = fwk.handle.objects(COMPOSITE_POD_GROUP_OBJECTS)
        root = root_composite_of(pod_groups, composites, pod_group_key)
        return build_tree(pod_groups, composites, root) if root is not None else None

    # -- the cycle -----------------------------------------------------------------------------------
    def run(self, fwk: Framework, first: QueuedPodInfo, root: PodGroupInfo) -> None:
        """scheduleOnePodGroup for a root CompositePodGroup: ``first`` was popped; the queued
        members of every PodGroup under the root come along."""
        sched = self.sched
        table = sched.cache.table
        first_key = group_key(first.pod)
        members: Members = {}
        leaves = root.leaves()
        for leaf in leaves:
            taken = sched.queue.take_group(leaf.key, first.pod.scheduler_name)
            if leaf.key == first_key:
                taken.insert(0, first)
            # skipPodGroupPodSchedule: members being deleted or already placed are dropped.
            kept = sorted((q for q in taken if not q.pod.deleting and table.pod(q.pod.uid) is None), key=member_order)
            members[leaf.entity_key] = kept
        _fill_unscheduled(root, members)
        everyone = [q for leaf in leaves for q in members[leaf.entity_key]]
        if not everyone:
            return
        cycle = sched.queue.scheduling_cycle
        for q in everyone:
            sched.in_flight[q.pod.uid] = False
        invalid = self._validate(root, leaves)
        if invalid is not None:
            # handlePodGroupFailureBeforeScheduling: every member fails with the error (backoff).
            st = Status.error(invalid)
            for q in everyone:
                sched.fail(fwk, q, ScheduleFailure(st, invalid), cycle)
            # updatePodGroupConditionWithError: a composite has no condition of its own here; its
            # PodGroups each get the error.
            for leaf in leaves:
                if leaf.pod_group is not None:
                    self.groups._report_condition(leaf.key, leaf.pod_group, error_condition(invalid))
            return
        try:
            results = self.root_algorithm(fwk, root, members)
            root_status = results[root.entity_key].status
            not_tried = _complete(root, results)
            if root_status.code == Code.UNSCHEDULABLE:
                post, st = run_pod_group_post_filter(fwk, CycleState(), root, self._rescheduler(fwk, root, members))
                _apply_post_filter(results, st, dict(post.nominations) if post is not None else {})
        except Exception as e:  # a bug outside the plugins' calls: fail the hierarchy (with backoff)
            st = Status.from_exception(e)
            failed = Status(st.code, (f"scheduling cycle: {st.message}",), "", e)
            results = {leaf.entity_key: GroupAttempt(failed) for leaf in leaves}
            not_tried = {key: failed for key in results}
        rejectors = frozenset(_rejectors(results))
        for leaf in leaves:
            key = leaf.entity_key
            self.groups._submit(fwk, members[key], results[key], not_tried[key], cycle, rejectors)
            if leaf.pod_group is not None:  # submitPodGroupAlgorithmResult: each PodGroup's own result
                self.groups._report_condition(leaf.key, leaf.pod_group, result_condition(results[key].status))

    def _validate(self, root: PodGroupInfo, leaves: list[PodGroupInfo]) -> str | None:
        """validatePodGroup over the hierarchy: every member, queued or placed, checked against the
        root CompositePodGroup (PodGroupCycle.validate_members)."""
        pods = [pod for leaf in leaves for pod in (*leaf.unscheduled_pods, *self.groups.placed_pods(leaf.key))]
        return self.groups.validate_members(pods, root.composite_pod_group)

    def root_algorithm(self, fwk: Framework, root: PodGroupInfo, members: Members) -> Results:
        """runRootSchedulingAlgorithm for a root CompositePodGroup: the result of every group
        tried; every assumption made is undone before returning."""
        results: Results = {}
        reverts: Reverts = []
        try:
            result = self._recursive(fwk, root, members, results, reverts)
            if result.status.is_success and not result.any_scheduled:
                # The framework requires at least one member placed for a Success.
                result.status = Status.unschedulable(POD_GROUP_UNSCHEDULABLE)
        finally:
            for revert in reversed(reverts):
                revert()
        return results

    def _recursive(
        self, fwk: Framework, group: PodGroupInfo, members: Members, results: Results, reverts: Reverts
    ) -> GroupAttempt:
        """podGroupSchedulingRecursiveAlgorithm: the reverts of what stays assumed go to ``reverts``."""
        if group.is_composite:
            return self._composite_placements(fwk, group, members, results, reverts)
        # podGroupSchedulingPlacementAlgorithm (the gate needs TopologyAwareWorkloadScheduling).
        result = self.groups._placement_algorithm(fwk, group, members[group.entity_key])
        if result.status.is_success:
            error = self._assume(fwk, result, reverts)
            if error is not None:
                result = GroupAttempt(Status.error(f"failed to assume the subtree: {error}"))
        results[group.entity_key] = result
        return result

    def _assume(self, fwk: Framework, result: GroupAttempt, reverts: Reverts) -> str | None:
        """assumeSubtreeWithRevert for one PodGroup: its placed members assumed and reserved
        again; on a failure what this call assumed is undone and the error returned."""
        mine: Reverts = []
        for a in result.attempts:
            if not isinstance(a.outcome, ScheduleResult) or not a.outcome.node_name:
                continue
            outcome, revert = self.groups.assume_and_reserve(fwk, a.state, a.qpi.pod, a.outcome)
            if revert is not None:
                mine.append(revert)
            if isinstance(outcome, ScheduleFailure):
                for undo in reversed(mine):
                    undo()
                return outcome.message
        reverts.extend(mine)
        return None

    def _composite_placements(
        self, fwk: Framework, group: PodGroupInfo, members: Members, results: Results, reverts: Reverts
    ) -> GroupAttempt:
        """compositePodGroupSchedulingPlacementAlgorithm: the composite's children tried on each
        placement its PlacementGenerate plugin makes; the best fitting one stays assumed."""
        sched = self.sched
        key = group.entity_key
        outer = sched.placement_rows
        parent = Placement("", outer if outer is not None else sched.cache.table.search_rows())
        placements, st = run_placement_generate(fwk, CycleState(), group, parent)
        if not st.is_success:
            results[key] = result = GroupAttempt(st)
            return result
        first: Results | None = None
        fitting: list[tuple[Placement, Results]] = []
        try:
            for placement in placements:
                sched.placement_rows = placement.rows
                subtree: Results = {}
                tried: Reverts = []
                try:
                    result = self._composite_children(fwk, group, members, subtree, tried)
                finally:
                    for revert in reversed(tried):
                        revert()
                if result.status.is_error:
                    results[key] = result
                    return result
                if first is None:
                    first = subtree
                if result.status.is_success:
                    fitting.append((placement, subtree))
        finally:
            sched.placement_rows = outer
        if not fitting:
            assert first is not None
            failed = first[key]
            failed.status = Status.unschedulable(
                POD_GROUP_UNSCHEDULABLE,
                f"0/{len(placements)} placements are available, first placement status: {_as_error(failed.status)}")
            # The whole subtree: its members keep their own failures (and rejecting plugins).
            results.update(first)
            return failed
        best = fitting[0][1]
        if len(fitting) > 1:
            candidates = [PodGroupAssignments(_proposed(group, subtree), placement) for placement, subtree in fitting]
            totals, st = run_placement_score(fwk, CycleState(), group, candidates)
            if not st.is_success:
                results[key] = result = GroupAttempt(st)
                return result
            top = max(totals)
            ties = [i for i, total in enumerate(totals) if total == top]
            # findBestPlacement: ties broken at random (the scheduler's seeded RNG).
            best = fitting[ties[0] if len(ties) == 1 else ties[fwk.handle.rng.randrange(len(ties))]][1]
        mine: Reverts = []
        for leaf in _successful_leaves(group, best):
            error = self._assume(fwk, leaf, mine)
            if error is not None:
                for revert in reversed(mine):
                    revert()
                results[key] = result = GroupAttempt(Status.error(f"failed to assume the subtree: {error}"))
                return result
        reverts.extend(mine)
        results.update(best)
        return best[key]

    def _composite_children(
        self, fwk: Framework, group: PodGroupInfo, members: Members, results: Results, reverts: Reverts
    ) -> GroupAttempt:
        """compositePodGroupSchedulingDefaultAlgorithm: the children one by one, PlacementFeasible
        (``remaining`` children to try, ``scheduled`` that fitted) before and after each."""
        placement_state = CycleState()
        progress = PlacementProgress(len(group.children), 0)
        st = run_placement_feasible(fwk, placement_state, group, progress)
        mine: Reverts = []
        result: GroupAttempt | None = None
        any_scheduled = False
        if st.code == Code.UNSCHEDULABLE or st.is_error:
            result = GroupAttempt(st)
        else:
            for child in group.children:
                child_result = self._recursive(fwk, child, members, results, mine)
                if child_result.status.is_error:
                    result = GroupAttempt(Status.error(
                        f"composite pod group evaluation failed due to child error: {_as_error(child_result.status)}"))
                    break
                any_scheduled = any_scheduled or child_result.any_scheduled
                progress = PlacementProgress(
                    progress.remaining - 1, progress.scheduled + (1 if child_result.status.is_success else 0))
                st = run_placement_feasible(fwk, placement_state, group, progress)
                if st.code == Code.UNSCHEDULABLE or st.is_error:
                    break
            if result is None:
                if st.is_wait:
                    st = Status.unschedulable(POD_GROUP_UNSCHEDULABLE, *st.reasons, plugin=st.plugin)
                result = GroupAttempt(st)
                result.any_scheduled = any_scheduled
        results[group.entity_key] = result
        if result.status.is_success:
            reverts.extend(mine)
        else:
            for revert in reversed(mine):
                revert()
            result.any_scheduled = False
        return result

    def _rescheduler(
        self, fwk: Framework, root: PodGroupInfo, members: Members
    ) -> Callable[[], tuple[PodGroupAssignments, Status]]:
        """The PodGroupSchedulingFunc: the hierarchy tried again; every group's placed members."""
        def reschedule() -> tuple[PodGroupAssignments, Status]:
            results = self.root_algorithm(fwk, root, members)
            proposed = tuple(p for result in results.values() for p in _placed(result))
            return PodGroupAssignments(proposed), results[root.entity_key].status

        return reschedule


# -- results ---------------------------------------------------------------------------------------
def _fill_unscheduled(group: PodGroupInfo, members: Members) -> list[QueuedPodInfo]:
    """UnscheduledPods of every group of the hierarchy: a PodGroup's queued members, a
    composite's every member under it."""
    if not group.is_composite:
        queued = members.get(group.entity_key, [])
    else:
        queued = [q for child in group.children for q in _fill_unscheduled(child, members)]
    group.unscheduled_pods = [q.pod for q in queued]
    return queued


def _placed(result: GroupAttempt) -> list[ProposedAssignment]:
    """makeProposedAssignments."""
    return [ProposedAssignment(a.qpi.pod, a.outcome.node_name, a.state)
            for a in result.attempts if isinstance(a.outcome, ScheduleResult) and a.outcome.node_name]


def _successful_leaves(group: PodGroupInfo, results: Results) -> list[GroupAttempt]:
    """successfulLeafResults: the PodGroups whose result and every ancestor's is a Success."""
    result = results.get(group.entity_key)
    if result is None or not result.status.is_success:
        return []
    if not group.is_composite:
        return [result] if result.attempts else []
    return [leaf for child in group.children for leaf in _successful_leaves(child, results)]


def _proposed(group: PodGroupInfo, results: Results) -> tuple[ProposedAssignment, ...]:
    """makeCompositePodGroupAssignments: the placed members of the successful PodGroups."""
    return tuple(p for leaf in _successful_leaves(group, results) for p in _placed(leaf))


def _complete(root: PodGroupInfo, results: Results) -> dict[str, Status]:
    """completeCompositePodGroupAlgorithmResult: a group missing a result, or that fitted under a
    parent that did not, takes the parent's status (and no attempts, so none of its members
    binds). Returns each PodGroup's status for its members never tried, as it stands before the
    PodGroupPostFilter plugins add to it."""
    not_tried: dict[str, Status] = {}

    def walk(group: PodGroupInfo, parent: Status) -> None:
        result = results.get(group.entity_key)
        if result is None or (not parent.is_success and result.status.is_success):
            results[group.entity_key] = result = GroupAttempt(parent)
        for child in group.children:
            walk(child, result.status)
        if not group.is_composite:
            not_tried[group.entity_key] = result.status

    walk(root, Status(Code.SUCCESS))
    return not_tried


def _apply_post_filter(results: Results, st: Status, nominations: dict[str, str]) -> None:
    """applyPodGroupPostFilterResult: on Success every group waits on the preemption (its
    members nominated); an Error replaces every group's status, anything else is appended to it."""
    for result in results.values():
        if st.is_success:
            result.waiting_on_preemption = True
            result.nominations = dict(nominations)
        if st.is_error:
            result.status = st
        else:
            failed = result.status
            result.status = Status(failed.code, (*failed.reasons, st.message), failed.plugin)


def _rejectors(results: Results) -> set[str]:
    """The plugins that rejected any group of the hierarchy or any member tried."""
    out: set[str] = set()
    for result in results.values():
        if result.status.plugin:
            out.add(result.status.plugin)
        for a in result.attempts:
            if isinstance(a.outcome, ScheduleFailure):
                out |= a.outcome.diagnosis.unschedulable_plugins
    return out
