"""Coscheduling: gang scheduling of PodGroups (kubernetes-sigs/scheduler-plugins, pkg/coscheduling).

A PodGroup (``scheduling.x-k8s.io/v1alpha1``) says that at least ``spec.minMember`` of its pods
must run together, or none. Pods join with the label ``scheduling.x-k8s.io/pod-group: <name>``.

* QueueSort: priority, then the group's creation time (a pod's own without a group) — a group that
  failed goes after the groups that did not (upstream's lastFailedSchedulePG, against head-of-line
  blocking) —, then the group's name, then the pod's, so a group's pods leave the queue together;
* PreFilter: refuses a pod whose group is backing off, has fewer than minMember pods, whose
  minResources exceed the free resources of the whole cluster, or whose **remaining members could
  not all be placed now** (the gang-fit check below); waits while a rejected gang's reservations
  are being released;
* PostFilter: when a member fits nowhere, rejects the members waiting at Permit (unless the group
  misses its quorum by at most 10 % and could still fit) and backs the group off;
* Permit: members wait until minMember of the group are assumed or bound; the one that completes
  the quorum allows all of them;
* Unreserve: a member that is rejected or times out rejects every waiting sibling, so no partial
  gang ever binds and every reservation of a failed gang is released at once.

The gang-fit check (fit.py) refuses a gang whose missing members could not all be placed by
resources now, before they reserve anything; younger gangs that block an older one give way to it
(give_way.py). PodGroup status (status.py) and Events (events.py)
are reported to the live shell; a gang waiting at Permit is one preemption victim
(``eviction_group``).

PodGroups come from ``handle.objects("PodGroup")``. Members are counted by a per-group index
(plugins/helpers/gang_members.py, shared with GangScheduling): assigned members from the node
table, pending ones from what the plugin sees, resynchronised from ``handle.pending_pods()`` now
and then — O(members of the group) per count.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    PermitPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
)
from kubesched.framework.objects import ObjectEvent
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import (
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from kubesched.plugins.coscheduling.args import CoschedulingArgs
from kubesched.plugins.coscheduling.events import GroupEvents
from kubesched.plugins.coscheduling.fit import GangFit
from kubesched.plugins.coscheduling.give_way import GiveWay, rejected
from kubesched.plugins.coscheduling.podgroup import (
    KIND,
    POD_GROUP_KIND,
    POD_GROUP_LABEL,
    PodGroup,
    PodGroupSpecError,
    group_key,
    parse_pod_group,
)
from kubesched.plugins.coscheduling.status import GroupStatus
from kubesched.plugins.helpers.gang_members import MemberIndex, waiting_note
from kubesched.plugins.helpers.pod_group_specs import ParsedPodGroups
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

log = logging.getLogger(__name__)

NAME = "Coscheduling"
#: CycleState key: this pod waited at Permit in this attempt.
_WAITED = "Coscheduling/waited"
#: Upstream: a group that misses its quorum by at most this fraction is not rejected in PostFilter.
_SMALL_GAP = 0.1

EVENT_POD_GROUP = ClusterEvent(KIND, ActionType.ADD | ActionType.UPDATE, "PodGroupAddOrUpdate")

__all__ = ["NAME", "POD_GROUP_LABEL", "Coscheduling"]


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, ReservePlugin, PermitPlugin):
    name = NAME
    args_model = CoschedulingArgs
    object_kinds = (POD_GROUP_KIND,)

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        super().__init__(args or CoschedulingArgs(), handle)
        self.args: CoschedulingArgs = self.args
        self.members = MemberIndex(handle.table, handle.pending_pods, group_key)
        #: Group key → clock time until which its pods are refused at PreFilter.
        self._backoff: dict[str, float] = {}
        #: Group key → clock time until which its minResources check stays passed (upstream permittedPG).
        self._permitted: dict[str, float] = {}
        self._parsed_groups = ParsedPodGroups(handle, KIND, parse_pod_group)
        self.status = GroupStatus(self.members, handle.waiting_pods)
        #: Group key → order of its last failure: failed groups sort after the others (QueueSort).
        self._failed_seq: dict[str, int] = {}
        self._fail_counter = itertools.count(1)
        #: Group key → why the gang is not placed (gang level), until it reaches its quorum.
        self._reason: dict[str, str] = {}
        #: Events on PodGroups (gang-level failures, admission) for the live shell.
        self.events = GroupEvents(handle.clock, handle.profile_name)
        self.fit = GangFit(self.members, self.pod_group)
        #: Younger gangs giving way to older ones (give_way.py).
        self.give_way = GiveWay(handle, self.members, self.pod_group)

    # -- PodGroups ---------------------------------------------------------------------------------
    def pod_group(self, key: str) -> PodGroup | PodGroupSpecError | None:
        """The parsed PodGroup ``namespace/name`` (parsed once per object version), None if absent."""
        return self._parsed_groups.get(key)

    def _group_of(self, pod: PodInfo) -> tuple[str | None, PodGroup | PodGroupSpecError | None]:
        key = group_key(pod)
        return key, (self.pod_group(key) if key is not None else None)

    # -- members ---------------------------------------------------------------------------------
    def assigned_members(self) -> dict[str, list[PodInfo]]:
        """Group key → its members in the node table (assumed or bound)."""
        return {k: list(v.values()) for k, v in self.members.assigned.items()}

    def _pending_members(self, key: str) -> list[PodInfo]:
        return list(self.members.pending_of(key).values())

    def member_count(self, pod: PodInfo, key: str) -> int:
        """Pods of the group that exist and are not terminal: placed, pending, and this one."""
        return self.members.count(key, pod)

    def pod_terminated(self, pod: PodInfo) -> None:
        """A pod reached Succeeded/Failed (the scheduler reports it; the cache drops such pods)."""
        self.members.note_terminated(pod)

    def finished_pod_deleted(self, pod: PodInfo) -> None:
        self.members.forget_finished(pod.uid)

    def _reject_waiting(self, key: str, message: str) -> int:
        n = 0
        for wp in self.handle.waiting_pods:
            if not wp.decided and group_key(wp.pod) == key:
                wp.reject(self.name, message)
                n += 1
        return n

    def _waiting_groups(self) -> tuple[set[str], dict[str, int]]:
        """Groups with members rejected at Permit whose reservations are not released yet, and
        groups with members still waiting (in progress) → how many wait."""
        releasing: set[str] = set()
        waiting: dict[str, int] = {}
        for wp in self.handle.waiting_pods:
            key = group_key(wp.pod)
            if key is None:
                continue
            if not wp.decided:
                waiting[key] = waiting.get(key, 0) + 1
            elif wp.deadlines:
                releasing.add(key)
        return releasing, waiting

    def _mark_failed(self, key: str, reason: str) -> None:
        self._failed_seq[key] = next(self._fail_counter)
        self._reason[key] = reason
        pg = self.pod_group(key)
        if isinstance(pg, PodGroup):
            self.events.failed(pg, reason)

    # -- QueueSort -------------------------------------------------------------------------------
    def _order(self, pod: PodInfo) -> tuple[int, tuple[int, float], str, str]:
        key = group_key(pod)
        if key is not None:
            pg = self.pod_group(key)
            if isinstance(pg, PodGroup):
                seq = self._failed_seq.get(key)
                return -pod.priority, ((1, float(seq)) if seq is not None else (0, pg.creation_ts)), key, pod.key
        return -pod.priority, (0, pod.creation_ts), pod.key, pod.key

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self._order(a.pod) < self._order(b.pod)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, tuple[int, float], str, str]:
        """The same order as ``less``. Every pod the queue pushes passes here: the member index
        learns of pending members without scanning the queue."""
        self.members.note_pending(qpi.pod)
        return self._order(qpi.pod)

    # -- PreFilter -------------------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream: Pod Add and PodGroup Add|Update. The gang-fit check adds what frees or adds
        # resources: an assigned pod leaving or shrinking (a rejected gang released included), a
        # node added or grown.
        return (
            ClusterEvent(POD, ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN, "AssignedPod"),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE, "NodeAddOrGrow"),
            EVENT_POD_GROUP,
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        key, pg = self._group_of(pod)
        if key is None:
            return None, SUCCESS
        if pg is None:
            return None, Status.unresolvable(f"PodGroup {key} not found")
        if isinstance(pg, PodGroupSpecError):
            return None, Status.unresolvable(str(pg))
        now = self.handle.clock.now()
        self.members.maybe_resync(now)
        self.members.note_pending(pod)
        until = self._backoff.get(key)
        if until is not None:
            if now < until:
                return None, Status.unresolvable(f"podGroup {key} failed recently")
            del self._backoff[key]
        winner = self.give_way.winner(key)
        if winner is not None:
            return None, Status.unresolvable(f"podGroup {key} gives way to podGroup {winner}")
        releasing, waiting = self._waiting_groups()
        if releasing:
            # A rejected gang still holds its reservations for a moment (its binding cycles have
            # not run yet): wait for them to be released (an AssignedPodDelete brings this pod
            # back) instead of failing against them.
            return None, Status.unschedulable(
                f"waiting for the reservations of rejected podGroup {', '.join(sorted(releasing))} to be released"
            )
        count = self.members.count(key, pod)
        if count < pg.min_member and self.members.maybe_resync(now, short=True):
            self.members.note_pending(pod)
            count = self.members.count(key, pod)
        if count < pg.min_member:
            return None, Status.unresolvable(
                f"pre-filter pod {pod.name} cannot find enough sibling pods, current pods number: {count}, "
                f"minMember of group: {pg.min_member}"
            )
        short = self.fit_shortfall(pg, table, waiting)
        if short:
            self._gang_cannot_fit(key, short, bool(waiting.get(key)))
            return None, Status.unresolvable(f"podGroup {key}: {short}")
        if not pg.min_resources:
            return None, SUCCESS
        if self._permitted.get(key, float("-inf")) > now:
            return None, SUCCESS
        gap = self.resource_gap(pg, table)
        if gap:
            return None, Status.unresolvable(f"resource gap: {gap}")
        self._permitted[key] = now + self.args.permit_waiting_time_seconds
        return None, SUCCESS

    def _gang_cannot_fit(self, key: str, short: str, has_waiting: bool) -> None:
        """The gang-fit check failed: the whole gang is refused (members still waiting are
        rejected together and the group backs off, as after a PostFilter rejection)."""
        if has_waiting:
            self._reject_waiting(key, f"rejection in PreFilter: {short}")
            self._back_off(key)
            self.give_way.release(key)
            self._permitted.pop(key, None)
        if self._reason.get(key) != short or key not in self._failed_seq:
            self._mark_failed(key, short)
        else:  # the same refusal again: only the event (rate-limited), the queue order stays
            pg = self.pod_group(key)
            if isinstance(pg, PodGroup):
                self.events.failed(pg, short)

    def fit_shortfall(self, pg: PodGroup, table: NodeTable, waiting: dict[str, int] | None = None) -> str:
        """The gang-fit check (fit.py): why the members the group still needs could not all be
        placed now (``1/5 members could not be placed: Insufficient cpu``), or "" when they may fit."""
        return self.fit.shortfall(pg, table, self._waiting_groups()[1] if waiting is None else waiting)

    def resource_gap(self, pg: PodGroup, table: NodeTable) -> str:
        """What the cluster lacks for the group's minResources (fit.py); "" when it fits."""
        return self.fit.resource_gap(pg, table)

    # -- PostFilter ------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        if diagnosis.pre_filter_msg and self.name in diagnosis.unschedulable_plugins:
            # Refused by this plugin's own PreFilter (backoff, missing members or PodGroup, the
            # gang-fit check, minResources): nothing more to reject here.
            return None, Status.unschedulable()
        key, pg = self._group_of(pod)
        if key is None or not isinstance(pg, PodGroup):
            return None, Status.unschedulable("can not find pod group")
        assigned = len(self.members.assigned_of(key))
        if assigned >= pg.min_member:
            return None, Status.unschedulable()
        if (pg.min_member - assigned) / pg.min_member <= _SMALL_GAP and not self.fit_shortfall(pg, self.handle.table):
            # Close to quorum, and the rest may still fit: later members may complete it.
            return None, Status.unschedulable()
        blockers = self.give_way.blockers(pg, diagnosis)
        if blockers:
            # Younger gangs still short of quorum hold resources this pod could use: they give way
            # (and keep out of the way until this group completes, fails or times out), so two
            # gangs that each hold part of the cluster cannot starve each other.
            for other in blockers:
                self._reject_waiting(other, f"rejected to make room for PodGroup {key}")
            self.give_way.give_way(blockers, key, self.handle.clock.now() + self._timeout(pg))
            return None, Status.unschedulable(
                f"PodGroup {key}: younger PodGroup(s) {', '.join(blockers)} waiting at Permit were rejected to "
                "make room"
            )
        self._reject_waiting(key, "optimistic rejection in PostFilter")
        self.give_way.release(key)
        if self.member_count(pod, key) >= pg.min_member:
            self._back_off(key)
        self._permitted.pop(key, None)
        reasons = [r for r, _ in diagnosis.node_to_status.reason_histogram().most_common()]
        self._mark_failed(
            key,
            f"{pg.min_member - assigned}/{pg.min_member} members could not be placed: "
            f"{', '.join(reasons) or 'no node fits'}",
        )
        return None, Status.unschedulable(
            f"PodGroup {key} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"
        )

    def _timeout(self, pg: PodGroup) -> int:
        return pg.schedule_timeout_seconds or self.args.permit_waiting_time_seconds

    # -- Reserve / Permit ------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """A member was rejected, timed out or failed to bind: reject every waiting sibling."""
        key, pg = self._group_of(pod)
        if key is None or not isinstance(pg, PodGroup):
            return
        # The member goes back to the queue (the scheduler forgets it right after).
        self.members.note_pending(pod, leaving_table=True)
        rejected = self._reject_waiting(key, "rejection in Unreserve")
        self._permitted.pop(key, None)
        # A gang that failed before quorum (this member waited, or siblings were still waiting)
        # backs off like one rejected in PostFilter (the older deniedPGExpirationTimeSeconds).
        if rejected > 0 or state.get(_WAITED):
            self._back_off(key)
            self.give_way.release(key)
            if key not in self._reason or key not in self._failed_seq:
                waited = len(self.members.assigned_of(key))
                self._mark_failed(
                    key,
                    f"{max(pg.min_member - waited, 0)}/{pg.min_member} members could not be placed before the "
                    "others were rejected at Permit (timeout or rejection)",
                )

    def _back_off(self, key: str) -> None:
        """Refuse the group's pods at PreFilter for podGroupBackoffSeconds; a backoff in force is
        not extended (upstream adds to an expiring cache only when absent)."""
        seconds = self.args.pod_group_backoff_seconds
        now = self.handle.clock.now()
        if seconds > 0 and self._backoff.get(key, float("-inf")) <= now:
            self._backoff[key] = now + seconds

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        key, pg = self._group_of(pod)
        if key is None:
            return SUCCESS, 0.0
        if not isinstance(pg, PodGroup):
            return Status.unschedulable("PodGroup not found"), 0.0
        self.status.started(key)
        # The pod itself is assumed already, so it is among the assigned members.
        assigned = len(self.members.assigned_of(key))
        waiting = [wp for wp in self.handle.waiting_pods if group_key(wp.pod) == key]
        if any(rejected(wp) for wp in waiting):
            # A sibling was just rejected (timeout, deletion) and is about to be unreserved: the
            # quorum counted with it is not real.
            self._reject_waiting(key, "rejection in Permit: a member of the group was rejected")
            return Status.unschedulable(f"PodGroup {key}: a member was rejected while waiting"), 0.0
        if assigned >= pg.min_member:
            for wp in waiting:
                wp.allow(self.name)
            # Upstream ClearPodGroupScheduleFailure: the group sorts by its creation time again.
            self._failed_seq.pop(key, None)
            self._reason.pop(key, None)
            if assigned == pg.min_member:  # this member completes the quorum
                self.events.scheduled(pg, assigned)
                self.status.quorum(key)
            return SUCCESS, 0.0
        if assigned == 1:
            # The group's first member to wait brings its siblings back from backoff and
            # unschedulable (upstream ActivateSiblings).
            self.handle.activate(list(self.members.pending_of(key)))
        state.write(_WAITED, True)
        timeout = self._timeout(pg)
        return Status.wait(f"waiting for {pg.min_member - assigned} more member(s) of PodGroup {key}"), float(timeout)

    # -- preemption ------------------------------------------------------------------------------
    def eviction_group(self, pod: PodInfo) -> list[PodInfo] | None:
        """A member of a gang still waiting at Permit is evicted with the whole gang or not at all:
        rejecting one waiting member releases all of them (Unreserve), so a preemptor that picks
        it evicts the gang — the evaluator must count every member as a victim (and may not pick
        it when another member outranks the preemptor). A gang that has its quorum (bound or
        allowed) has no such tie: its members are preempted one by one, as upstream."""
        key = group_key(pod)
        if key is None:
            return None
        waiting = self.handle.waiting_pods
        wp = waiting.get(pod.uid)
        if wp is None or wp.decided:
            return None
        members: list[PodInfo] = []
        for uid, member in self.members.assigned_of(key).items():
            other = waiting.get(uid)
            if other is not None and not other.decided:
                members.append(member)
        return members

    # -- PodGroup status (status.py), events (events.py), reports ---------------------------------
    def pod_group_status(self, key: str) -> dict[str, Any] | None:
        """The PodGroup ``status`` as scheduler-plugins keeps it (status.py), None without the group."""
        pg = self.pod_group(key)
        return self.status.of(pg) if isinstance(pg, PodGroup) else None

    def _pod_groups(self) -> dict[str, PodGroup]:
        groups: dict[str, PodGroup] = {}
        for key in self.handle.objects(KIND):
            pg = self.pod_group(key)
            if isinstance(pg, PodGroup):
                groups[key] = pg
        return groups

    def status_updates(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{"PodGroup": PodGroup key → the ``status`` fields that changed since the previous call};
        the live leader merge-patches each into the PodGroup's ``status`` subresource."""
        groups = self._pod_groups()
        self.events.retain(groups)
        out = self.status.changes(groups)
        return {KIND: out} if out else {}

    def object_events(self) -> list[ObjectEvent]:
        """PodGroup Events since the last call (events.py): gang-level failures and admissions."""
        return self.events.drain()

    def object_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{"PodGroup": key → full status plus, for a gang not placed, ``reason`` (gang level) and
        ``pending`` members}: what a simulation reports about the groups it leaves behind."""
        out: dict[str, dict[str, Any]] = {}
        for key in sorted(self.handle.objects(KIND)):
            status = self.pod_group_status(key)
            if status is None:
                continue
            report = dict(status)
            report.pop("scheduleStartTime", None)  # wall clock: not part of a deterministic replay
            pending = len(self.members.pending_of(key))
            report["pending"] = pending
            if status["phase"] in ("Pending", "PreScheduling", "Scheduling"):
                reason = self._reason.get(key)
                pg = self.pod_group(key)
                if reason is None and isinstance(pg, PodGroup):
                    total = len(self.members.assigned_of(key)) + pending
                    if total < pg.min_member:
                        reason = f"{total}/{pg.min_member} members exist"
                if reason:
                    report["reason"] = reason
            out[key] = report
        return {KIND: out} if out else {}

    def explain_wait(self, pod: PodInfo) -> str | None:
        """For ``explain``: the gang ``pod`` waits for while fewer than minMember are placed (a
        missing or invalid PodGroup is PreFilter's rejection, which explain shows already)."""
        key, pg = self._group_of(pod)
        if key is None or not isinstance(pg, PodGroup) or len(self.members.assigned_of(key)) >= pg.min_member:
            return None
        exist = self.members.count(key, pod)
        if exist < pg.min_member:
            return waiting_note(key, pg.min_member, exist)
        reason = self._reason.get(key)
        return f"waiting for PodGroup {key}: {reason}" if reason else None
