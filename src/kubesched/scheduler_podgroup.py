"""The PodGroup scheduling cycle: a Workload API group's queued members placed together.

Port of pkg/scheduler/schedule_one_podgroup.go (Kubernetes v1.37.1, GenericWorkload on,
TopologyAwareWorkloadScheduling on or off; with CompositePodGroup on, a PodGroup under a
CompositePodGroup goes to scheduler_composite.py, which reuses this cycle per PodGroup). When the
scheduler pops a pod that names a PodGroup (``spec.schedulingGroup.podGroupName``), it takes the
group's other queued members with it (upstream queues a group as one entity) and:

1. asks the PlacementFeasible plugins (GangScheduling: ``minCount``) whether the group can
   succeed at all (``PlacementProgress``: members to try, members already assumed or bound);
2. tries the members one by one in upstream's member order (priority, attempts, timestamp, name)
   — Filter and Score, no PostFilter — assuming and reserving each placed member so the next one
   sees it, and asks the PlacementFeasible plugins again after each; an Unschedulable answer
   stops the loop;
3. undoes every assumption (upstream reverts the snapshot), then, if the group is Unschedulable,
   runs the PodGroupPostFilter plugins (DefaultPreemption: evict for the whole group or not at
   all), which may run the algorithm again (``reschedule``);
4. submits: on success each placed member is assumed and reserved again and goes through Permit
   and its binding cycle; otherwise every member is requeued with upstream's message — a member
   Filter refused gets its own FitError, a member placed before the group failed gets
   ``pod group is unschedulable, <group message>``, a member never tried gets the group's
   message as it stood before the PodGroupPostFilter ran.

Where kubesched differs: a failed group's members wait in the unschedulable queue for an event
one of the rejecting plugins registered (or the 5-minute flush) where upstream backs the group
off and retries it.

Each attempt's outcome is also the PodGroup's ``PodGroupInitiallyScheduled`` condition
(framework/podgroup_condition.py), handed to the shell through ``SchedulerObserver.object_status``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.podgroup import (
    COMPOSITE_POD_GROUP,
    POD_GROUP_OBJECTS,
    POD_GROUP_PREEMPTION_POLICY,
    POD_GROUP_UNSCHEDULABLE,
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING,
    Placement,
    PlacementProgress,
    PodGroupAssignments,
    PodGroupInfo,
    ProposedAssignment,
    group_key,
    group_preemption_policy,
    pod_group_priority,
    pod_preemption_policy,
    record_member_cycle_state,
)
from kubesched.framework.podgroup_condition import PodGroupConditions, error_condition, result_condition
from kubesched.framework.podgroup_points import (
    run_placement_feasible,
    run_placement_generate,
    run_placement_score,
    run_pod_group_post_filter,
)
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Code, Status
from kubesched.framework.types import QueuedPodInfo
from kubesched.scheduler import ScheduleFailure, Scheduler, ScheduleResult
from kubesched.snapshot.pod import PodInfo


@dataclass(slots=True)
class PodAttempt:
    qpi: QueuedPodInfo
    state: CycleState
    outcome: ScheduleResult | ScheduleFailure


@dataclass(slots=True)
class GroupAttempt:
    """podGroupAlgorithmResult: the group's status and the attempts made, in member order."""

    status: Status
    attempts: list[PodAttempt] = field(default_factory=list)
    any_scheduled: bool = False
    waiting_on_preemption: bool = False
    nominations: dict[str, str] = field(default_factory=dict)


def _as_error(status: Status) -> str:
    """Status.AsError().Error(): a status upstream built WithError(errPodGroupUnschedulable) (kubesched:
    that text as its first reason) reads as the error alone, any other as its message."""
    return POD_GROUP_UNSCHEDULABLE if status.reasons[:1] == (POD_GROUP_UNSCHEDULABLE,) else status.message


def member_order(qpi: QueuedPodInfo) -> tuple[int, int, float, str]:
    """PodGroupMemberPodsOrderingFunc: priority (high first), attempts (more first), timestamp
    (earlier first), name."""
    return (-qpi.pod.priority, -qpi.attempts, qpi.timestamp, qpi.pod.name)


class PodGroupCycle:
    def __init__(self, sched: Scheduler, gates: Mapping[str, bool]) -> None:
        self.sched = sched
        #: TopologyAwareWorkloadScheduling: try the group on each placement PlacementGenerate makes.
        self.placements = bool(gates.get(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING))
        #: PodGroupPreemptionPolicy: the group's ``spec.preemptionPolicy`` is the one its pods must have.
        self.group_policy = bool(gates.get(POD_GROUP_PREEMPTION_POLICY))
        #: Group key → uids of its members in the node table (assumed or bound): ScheduledPodsCount.
        self._placed: dict[str, set[str]] = {}
        self.conditions = PodGroupConditions()
        sched.cache.table.observe_pods(self._observe)
        #: CompositePodGroup: a PodGroup under a CompositePodGroup is scheduled with its whole
        #: hierarchy (scheduler_composite.py; imported here, it imports this module).
        from kubesched.scheduler_composite import CompositeCycle

        self.composite = CompositeCycle(self) if gates.get(COMPOSITE_POD_GROUP) else None

    def _observe(self, _row: int, pod: PodInfo, sign: int) -> None:
        key = group_key(pod)
        if key is None:
            return
        if sign > 0:
            self._placed.setdefault(key, set()).add(pod.uid)
        elif (placed := self._placed.get(key)) is not None:
            placed.discard(pod.uid)
            if not placed:
                del self._placed[key]

    def scheduled_count(self, key: str) -> int:
        return len(self._placed.get(key, ()))

    def placed_pods(self, key: str) -> list[PodInfo]:
        """The group's members in the node table (assumed or bound): PodGroupState.ScheduledPods."""
        table = self.sched.cache.table
        return [p for uid in sorted(self._placed.get(key, ())) if (p := table.pod(uid)) is not None]

    # -- the cycle -----------------------------------------------------------------------------------
    def run(self, fwk: Framework, first: QueuedPodInfo, key: str) -> None:
        """scheduleOnePodGroup: ``first`` was popped; its queued siblings come along."""
        sched = self.sched
        pod = first.pod
        if self.composite is not None and (root := self.composite.tree_for(fwk, key)) is not None:
            self.composite.run(fwk, first, root)
            return
        siblings = sched.queue.take_group(key, pod.scheduler_name)
        table = sched.cache.table
        # skipPodGroupPodSchedule: members being deleted or already placed are dropped.
        members = sorted(
            (q for q in (first, *siblings) if not q.pod.deleting and table.pod(q.pod.uid) is None), key=member_order
        )
        if not members:
            return
        cycle = sched.queue.scheduling_cycle
        for q in members:
            sched.in_flight[q.pod.uid] = False
        raw_group = fwk.handle.objects(POD_GROUP_OBJECTS).get(key)
        group = PodGroupInfo(pod.namespace, key.split("/", 1)[1], [q.pod for q in members], raw_group)
        # Without the PodGroup object (a profile without GangScheduling reads none) there is no
        # priority to check against; upstream would not schedule the pods at all.
        invalid = self._validate(group) if raw_group is not None else None
        if invalid is not None:
            # handlePodGroupFailureBeforeScheduling: every member fails with the error (backoff).
            st = Status.error(invalid)
            for q in members:
                sched.fail(fwk, q, ScheduleFailure(st, invalid), cycle)
            if raw_group is not None:
                self._report_condition(key, raw_group, error_condition(invalid))
            return
        try:
            # The PodGroup cycle state: the PodGroupPostFilter plugins read the members' states in it.
            group_state = CycleState()
            result = self.algorithm(fwk, group, members, group_state)
            not_tried = result.status  # completePodGroupAlgorithmResult: cloned before PodGroupPostFilter
            if result.status.code == Code.UNSCHEDULABLE:
                reschedule = self._rescheduler(fwk, group, members)
                post, st = run_pod_group_post_filter(fwk, group_state, group, reschedule)
                if st.is_success:
                    result.waiting_on_preemption = True
                    result.nominations = dict(post.nominations) if post is not None else {}
                if st.is_error:
                    result.status = st
                else:  # applyPodGroupPostFilterResult: the outcome is appended to the group's reasons
                    failed = result.status
                    result.status = Status(failed.code, (*failed.reasons, st.message), failed.plugin)
        except Exception as e:  # a bug outside the plugins' calls: fail the group (with backoff), never the scheduler
            st = Status.from_exception(e)
            result = GroupAttempt(Status(st.code, (f"scheduling cycle: {st.message}",), "", e))
            not_tried = result.status
        self._submit(fwk, members, result, not_tried, cycle)
        if raw_group is not None:
            self._report_condition(key, raw_group, result_condition(result.status))

    def _report_condition(self, key: str, raw_group: Mapping[str, Any], condition: dict[str, Any]) -> None:
        """updatePodGroupCondition: the shell writes the condition when it changed."""
        new = self.conditions.update(raw_group, condition, self.sched.clock.wall())
        if new is not None:
            uid = str((raw_group.get("metadata") or {}).get("uid") or "")
            self.sched.observer.object_status(POD_GROUP_OBJECTS, key, uid, {"conditions": [new]})

    def _validate(self, group: PodGroupInfo) -> str | None:
        """validatePodGroup for a PodGroup: its members, queued or placed (validate_members). The
        scheduler name needs no check: only members of the popped pod's profile are taken."""
        return self.validate_members((*group.unscheduled_pods, *self.placed_pods(group.key)), group.pod_group)

    def validate_members(self, pods: Iterable[PodInfo], root: dict[str, Any] | None) -> str | None:
        """validatePodGroup's per-pod check against the root group (a PodGroup, or a hierarchy's
        root CompositePodGroup): every pod has the root's priority, and the root's preemption
        policy (PodGroupPreemptionPolicy on) or the first pod's (off)."""
        root_priority = pod_group_priority(root)
        policy = group_preemption_policy(root) if self.group_policy else ""
        for pod in pods:
            if pod.priority != root_priority:
                return ("all pods in a single pod group should have the same priority as the pod group's priority, "
                        f"got {pod.priority} and {root_priority}")
            own = pod_preemption_policy(pod)
            if self.group_policy and own != policy:
                return ("all pods in a single pod group should have the same preemption policy as the pod group's "
                        f"preemption policy, got {own} and {policy}")
            if policy and own != policy:
                return f"all pods in a single pod group should have the same preemption policy, got {own} and {policy}"
            policy = own
        return None

    def algorithm(
        self, fwk: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], group_state: CycleState | None = None
    ) -> GroupAttempt:
        """runRootSchedulingAlgorithm + podGroupSchedulingDefaultAlgorithm; every assumption made
        is undone before returning. ``group_state``: the PodGroup cycle state (a fresh one when
        None, as upstream's rerun for a PodGroupPostFilter)."""
        group_state = CycleState() if group_state is None else group_state
        if self.placements:
            result = self._placement_algorithm(fwk, group, members, group_state)
        else:
            result = self._reverted_default_algorithm(fwk, group, members, group_state)
        if result.status.is_success and not result.any_scheduled:
            # The framework requires at least one member placed for a Success.
            result.status = Status.unschedulable(POD_GROUP_UNSCHEDULABLE)
        return result

    def _reverted_default_algorithm(
        self, fwk: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], group_state: CycleState
    ) -> GroupAttempt:
        reverts: list[Callable[[], None]] = []
        try:
            return self._default_algorithm(fwk, group, members, reverts, group_state)
        finally:
            for revert in reversed(reverts):
                revert()

    def _placement_algorithm(
        self, fwk: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], group_state: CycleState | None = None
    ) -> GroupAttempt:
        """podGroupSchedulingPlacementAlgorithm: the group tried on each placement the
        PlacementGenerate plugin makes (the nodes outside it hidden), the placements where it fits
        scored by the PlacementScore plugins; the best one's attempts are the result."""
        sched = self.sched
        group_state = CycleState() if group_state is None else group_state
        # ListNodesInPlacement: inside a CompositePodGroup's placement, only its nodes.
        outer_rows = sched.placement_rows
        parent = Placement("", outer_rows if outer_rows is not None else sched.cache.table.search_rows())
        placements, st = run_placement_generate(fwk, CycleState(), group, parent)
        if not st.is_success:
            return GroupAttempt(st)
        first: GroupAttempt | None = None
        fitting: list[tuple[Placement, GroupAttempt]] = []
        outer = sched.placement_rows
        try:
            for placement in placements:
                sched.placement_rows = placement.rows
                result = self._reverted_default_algorithm(fwk, group, members, group_state)
                if result.status.is_error:
                    return result
                first = first or result
                if result.status.is_success:
                    fitting.append((placement, result))
        finally:
            sched.placement_rows = outer
        if not fitting:
            assert first is not None
            first.status = Status.unschedulable(
                POD_GROUP_UNSCHEDULABLE,
                f"0/{len(placements)} placements are available, first placement status: {_as_error(first.status)}")
            return first
        if len(fitting) == 1:
            return fitting[0][1]
        candidates = [PodGroupAssignments(self._proposed(result), placement) for placement, result in fitting]
        totals, st = run_placement_score(fwk, CycleState(), group, candidates)
        if not st.is_success:
            return GroupAttempt(st)
        best = max(totals)
        ties = [i for i, total in enumerate(totals) if total == best]
        # findBestPlacement: ties broken at random (the scheduler's seeded RNG).
        pick = ties[0] if len(ties) == 1 else ties[fwk.handle.rng.randrange(len(ties))]
        return fitting[pick][1]

    @staticmethod
    def _proposed(result: GroupAttempt) -> tuple[ProposedAssignment, ...]:
        """makeProposedAssignments: the members placed."""
        return tuple(
            ProposedAssignment(a.qpi.pod, a.outcome.node_name, a.state)
            for a in result.attempts
            if isinstance(a.outcome, ScheduleResult)
        )

    def _default_algorithm(
        self, fwk: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], reverts: list[Callable[[], None]],
        group_state: CycleState,
    ) -> GroupAttempt:
        placement_state = CycleState()
        result = GroupAttempt(Status.unschedulable(POD_GROUP_UNSCHEDULABLE))
        remaining, scheduled = len(members), self.scheduled_count(group.key)
        st = run_placement_feasible(fwk, placement_state, group, PlacementProgress(remaining, scheduled))
        if st.is_error:
            result.status = Status.error(f"failed to evaluate placement feasibility: {st.message}", st.plugin)
            return result
        if st.code == Code.UNSCHEDULABLE:
            result.status = Status.unschedulable(POD_GROUP_UNSCHEDULABLE, *st.reasons, plugin=st.plugin)
            return result
        any_scheduled = False
        for q in members:
            state = CycleState()
            record_member_cycle_state(group_state, q.pod, state)
            outcome, revert = self._place(fwk, state, q.pod)
            result.attempts.append(PodAttempt(q, state, outcome))
            if revert is not None:
                reverts.append(revert)
            failed = isinstance(outcome, ScheduleFailure)
            if isinstance(outcome, ScheduleFailure) and not outcome.status.is_rejected:
                result.status = Status.error(f"failed to schedule other pod from a pod group: {outcome.message}")
                break
            remaining -= 1
            scheduled += 0 if failed else 1
            st = run_placement_feasible(fwk, placement_state, group, PlacementProgress(remaining, scheduled))
            if st.is_error:
                result.status = Status.error(f"failed to evaluate placement feasibility: {st.message}", st.plugin)
                break
            result.status = st
            if st.code == Code.UNSCHEDULABLE:
                break
            any_scheduled = any_scheduled or not failed
        if result.status.is_wait:
            waiting = result.status
            result.status = Status.unschedulable(POD_GROUP_UNSCHEDULABLE, *waiting.reasons, plugin=waiting.plugin)
        if not result.status.is_success:
            for revert in reversed(reverts):
                revert()
            reverts.clear()
            any_scheduled = False
        result.any_scheduled = any_scheduled
        return result

    def _place(
        self, fwk: Framework, state: CycleState, pod: PodInfo
    ) -> tuple[ScheduleResult | ScheduleFailure, Callable[[], None] | None]:
        """podGroupPodSchedulingAlgorithm: Filter and Score (no PostFilter), then assume and
        Reserve; the revert function unreserves and forgets."""
        sched = self.sched
        try:
            outcome = sched.schedule_pod(fwk, state, pod)
        except Exception as e:
            st = Status.from_exception(e)
            st = Status(st.code, (f"scheduling cycle: {st.message}",), "", e)
            return ScheduleFailure(st, st.message), None
        if isinstance(outcome, ScheduleFailure):
            return outcome, None
        return self.assume_and_reserve(fwk, state, pod, outcome)

    def assume_and_reserve(
        self, fwk: Framework, state: CycleState, pod: PodInfo, outcome: ScheduleResult
    ) -> tuple[ScheduleResult | ScheduleFailure, Callable[[], None] | None]:
        """assumeAndReserveWithRevert: the revert function unreserves and forgets."""
        sched = self.sched
        node = outcome.node_name
        assumed = sched.cache.assume(pod, node)
        st = fwk.run_reserve(state, assumed, node)
        if not st.is_success:
            fwk.run_unreserve(state, assumed, node)
            sched.cache.forget(pod.uid)
            return sched.single_node_failure(node, st), None

        def revert() -> None:
            fwk.run_unreserve(state, assumed, node)
            sched.cache.forget(pod.uid)

        return outcome, revert

    def _rescheduler(
        self, fwk: Framework, group: PodGroupInfo, members: list[QueuedPodInfo]
    ) -> Callable[[], tuple[PodGroupAssignments, Status]]:
        def reschedule() -> tuple[PodGroupAssignments, Status]:
            result = self.algorithm(fwk, group, members)
            return PodGroupAssignments(self._proposed(result)), result.status

        return reschedule

    # -- submitting -----------------------------------------------------------------------------
    def _submit(
        self, fwk: Framework, members: list[QueuedPodInfo], result: GroupAttempt, not_tried: Status, cycle: int,
        hierarchy_rejectors: frozenset[str] = frozenset(),
    ) -> None:
        """submitPodGroupAlgorithmResult (for one PodGroup; ``hierarchy_rejectors``: the plugins
        that rejected any group of its CompositePodGroup hierarchy)."""
        sched = self.sched
        group_status = result.status
        rejectors = ({group_status.plugin} - {""}) | hierarchy_rejectors
        for a in result.attempts:
            if isinstance(a.outcome, ScheduleFailure):
                rejectors |= a.outcome.diagnosis.unschedulable_plugins
        for i, q in enumerate(members):
            attempt = result.attempts[i] if i < len(result.attempts) else None
            nominated = result.nominations.get(q.pod.uid) if result.waiting_on_preemption else None
            own = attempt.outcome if attempt is not None else None
            if group_status.is_error:
                if isinstance(own, ScheduleFailure) and own.status.is_error:
                    sched.fail(fwk, q, own, cycle)
                else:
                    sched.fail(fwk, q, ScheduleFailure(group_status, group_status.message), cycle)
                continue
            if attempt is not None and isinstance(own, ScheduleResult):
                if group_status.is_success:
                    sched.start_binding(fwk, attempt.state, q, own, cycle)
                    continue
                message = group_status.message if result.waiting_on_preemption else (
                    f"{POD_GROUP_UNSCHEDULABLE}, {group_status.message}")
                sched.fail(fwk, q, self._group_failure(message, rejectors, nominated), cycle)
                continue
            if isinstance(own, ScheduleFailure):
                own.diagnosis.unschedulable_plugins.update(rejectors)
                own.nominated_node_name = nominated
                sched.fail(fwk, q, own, cycle)
                continue
            sched.fail(fwk, q, self._group_failure(not_tried.message, rejectors, nominated), cycle)

    def _group_failure(self, message: str, rejectors: set[str], nominated: str | None) -> ScheduleFailure:
        """A member that failed with its group: requeued as rejected by the plugins that rejected
        the group or any of its members (so the events they registered bring it back)."""
        diagnosis = Diagnosis()
        diagnosis.unschedulable_plugins.update(rejectors)
        return ScheduleFailure(Status.unschedulable(message), message, diagnosis, nominated_node_name=nominated)

