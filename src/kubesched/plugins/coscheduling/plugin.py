"""Coscheduling: gang scheduling of PodGroups (kubernetes-sigs/scheduler-plugins, pkg/coscheduling).

A PodGroup (``scheduling.x-k8s.io/v1alpha1``) says that at least ``spec.minMember`` of its pods
must run together, or none. Pods join with the label ``scheduling.x-k8s.io/pod-group: <name>``.

* QueueSort: priority, then the group's creation time (a pod's own without a group), then the
  group's name, then the pod's, so a group's pods leave the queue together;
* PreFilter: refuses a pod whose group is backing off, has fewer than minMember pods, or whose
  minResources exceed the free resources of the whole cluster;
* PostFilter: when a member fits nowhere, rejects the members waiting at Permit (unless the group
  has quorum or misses it by at most 10 %) and backs the group off;
* Permit: members wait until minMember of the group are assumed or bound; the one that completes
  the quorum allows all of them;
* Unreserve: a member that is rejected or times out rejects every waiting sibling, so no partial
  gang ever binds.

PodGroups come from ``handle.objects("PodGroup")`` (the simulator loads them from the cluster
input; the live shell keeps an informer). Assigned members are counted in the node table (assumed
and bound pods, as upstream's snapshot), pending members in the scheduling queue
(``handle.pending_pods()``; upstream lists them with the pod informer).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from kubesched.api.quantity import format_milli_cpu
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
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import POD, ActionType, ClusterEvent, PostFilterResult, PreFilterResult, QueuedPodInfo
from kubesched.framework.waiting import WaitingPod
from kubesched.plugins.coscheduling.args import CoschedulingArgs
from kubesched.plugins.coscheduling.podgroup import (
    KIND,
    POD_GROUP_KIND,
    POD_GROUP_LABEL,
    PodGroup,
    PodGroupSpecError,
    group_key,
    parse_pod_group,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import PODS, NodeTable

log = logging.getLogger(__name__)

NAME = "Coscheduling"
#: Per-row count of pods that carry the pod-group label (lets the member count skip other rows).
_MEMBER_COLUMN = "Coscheduling/members"
#: CycleState key: this pod waited at Permit in this attempt.
_WAITED = "Coscheduling/waited"
#: Upstream: a group that misses its quorum by at most this fraction is not rejected in PostFilter.
_SMALL_GAP = 0.1

EVENT_POD_GROUP = ClusterEvent(KIND, ActionType.ADD | ActionType.UPDATE, "PodGroupAddOrUpdate")


def _has_group(pod: PodInfo) -> int:
    return int(POD_GROUP_LABEL in pod.labels)


def _rejected(wp: WaitingPod) -> bool:
    # Allowing pops a plugin's deadline, rejecting does not: a decided pod with deadlines left was
    # rejected (by a plugin, a timeout or its deletion).
    return wp.decided and bool(wp.deadlines)


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, ReservePlugin, PermitPlugin):
    name = NAME
    args_model = CoschedulingArgs
    object_kinds = (POD_GROUP_KIND,)

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        super().__init__(args or CoschedulingArgs(), handle)
        self.args: CoschedulingArgs = self.args
        handle.table.register_pod_column(_MEMBER_COLUMN, _has_group)
        #: Group key → clock time until which its pods are refused at PreFilter.
        self._backoff: dict[str, float] = {}
        #: Group key → clock time until which its minResources check stays passed (upstream permittedPG).
        self._permitted: dict[str, float] = {}
        self._parsed: dict[str, tuple[dict[str, Any], PodGroup | PodGroupSpecError]] = {}
        self._assigned_gen = -1
        self._assigned_index: dict[str, list[PodInfo]] = {}
        #: Group key → wall-clock time its first member reached Permit (status.scheduleStartTime).
        self._schedule_start: dict[str, str] = {}
        self._reported: dict[str, dict[str, Any]] = {}
        #: Group key → (the older group it gives way to, until when at the latest).
        self._yield_to: dict[str, tuple[str, float]] = {}

    # -- PodGroups ---------------------------------------------------------------------------------
    def pod_group(self, key: str) -> PodGroup | PodGroupSpecError | None:
        raw = self.handle.objects(KIND).get(key)
        if raw is None:
            self._parsed.pop(key, None)
            return None
        cached = self._parsed.get(key)
        if cached is not None and cached[0] is raw:
            return cached[1]
        parsed: PodGroup | PodGroupSpecError
        try:
            parsed = parse_pod_group(raw)
        except PodGroupSpecError as e:
            parsed = e
        self._parsed[key] = (raw, parsed)
        return parsed

    def _group_of(self, pod: PodInfo) -> tuple[str | None, PodGroup | PodGroupSpecError | None]:
        key = group_key(pod)
        return key, (self.pod_group(key) if key is not None else None)

    # -- members ---------------------------------------------------------------------------------
    def assigned_members(self) -> dict[str, list[PodInfo]]:
        """Group key → its members in the node table (assumed or bound), rebuilt per table change."""
        table = self.handle.table
        if self._assigned_gen != table.generation:
            rows = table.alive_rows()
            rows = rows[table.pod_column(_MEMBER_COLUMN)[rows] > 0]
            index: dict[str, list[PodInfo]] = {}
            for row in rows:
                for p in table.pods[row].values():
                    key = group_key(p)
                    if key is not None:
                        index.setdefault(key, []).append(p)
            self._assigned_index = index
            self._assigned_gen = table.generation
        return self._assigned_index

    def _pending_members(self, key: str) -> list[PodInfo]:
        return [p for p in self.handle.pending_pods() if group_key(p) == key]

    def member_count(self, pod: PodInfo, key: str) -> int:
        """Pods of the group that exist and are not terminal: placed, pending, and this one."""
        uids = {p.uid for p in self.assigned_members().get(key, ())}
        uids.update(p.uid for p in self._pending_members(key))
        uids.add(pod.uid)
        return len(uids)

    def _reject_waiting(self, key: str, message: str) -> int:
        n = 0
        for wp in self.handle.waiting_pods:
            if not wp.decided and group_key(wp.pod) == key:
                wp.reject(self.name, message)
                n += 1
        return n

    # -- QueueSort -------------------------------------------------------------------------------
    def _sort_key(self, pod: PodInfo) -> tuple[float, str, str]:
        key = group_key(pod)
        if key is not None:
            pg = self.pod_group(key)
            if isinstance(pg, PodGroup):
                return pg.creation_ts, key, pod.key
        return pod.creation_ts, pod.key, pod.key

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod, b.pod
        if pa.priority != pb.priority:
            return pa.priority > pb.priority
        return self._sort_key(pa) < self._sort_key(pb)

    # -- PreFilter -------------------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream: Pod Add and PodGroup Add|Update (pods it refused otherwise wait for the
        # periodic unschedulable flush).
        return (ClusterEvent(POD, ActionType.ADD, "AssignedPodAdd"), EVENT_POD_GROUP)

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        key, pg = self._group_of(pod)
        if key is None:
            return None, SUCCESS
        if pg is None:
            return None, Status.unresolvable(f"PodGroup {key} not found")
        if isinstance(pg, PodGroupSpecError):
            return None, Status.unresolvable(str(pg))
        now = self.handle.clock.now()
        until = self._backoff.get(key)
        if until is not None:
            if now < until:
                return None, Status.unresolvable(f"podGroup {key} failed recently")
            del self._backoff[key]
        winner = self._yielding(key)
        if winner is not None:
            return None, Status.unresolvable(f"podGroup {key} gives way to podGroup {winner}")
        count = self.member_count(pod, key)
        if count < pg.min_member:
            return None, Status.unresolvable(
                f"pre-filter pod {pod.name} cannot find enough sibling pods, current pods number: {count}, "
                f"minMember of group: {pg.min_member}"
            )
        if not pg.min_resources:
            return None, SUCCESS
        if self._permitted.get(key, float("-inf")) > now:
            return None, SUCCESS
        gap = self.resource_gap(pg, table)
        if gap:
            return None, Status.unresolvable(f"resource gap: {gap}")
        self._permitted[key] = now + self.args.permit_waiting_time_seconds
        return None, SUCCESS

    def resource_gap(self, pg: PodGroup, table: NodeTable) -> str:
        """What the whole cluster lacks for the group's minResources (with minMember pods), counting
        the group's own placed pods as free (upstream CheckClusterResource); "" when it fits."""
        rows = table.alive_rows()
        free = table.free(rows).sum(axis=0) if len(rows) else np.zeros(len(table.resource_names), dtype=np.int64)
        for p in self.assigned_members().get(pg.key, ()):
            vec = table.request_vector(p)
            free[: len(vec)] += vec
            free[PODS] += 1
        want = dict(pg.min_resources)
        want["pods"] = pg.min_member
        missing: list[str] = []
        for res, amount in sorted(want.items()):
            col = table.resource_index.get(res)
            have = int(free[col]) if col is not None and col < len(free) else 0
            if amount > have:
                short = amount - have
                missing.append(f"{res}: {format_milli_cpu(short) if res == 'cpu' else short}")
        return ", ".join(missing)

    # -- PostFilter ------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        if diagnosis.pre_filter_msg and self.name in diagnosis.unschedulable_plugins:
            # Refused by this plugin's own PreFilter (backoff, missing members or PodGroup,
            # minResources): nothing was tried, so there is nothing more to reject.
            return None, Status.unschedulable()
        key, pg = self._group_of(pod)
        if key is None or not isinstance(pg, PodGroup):
            return None, Status.unschedulable("can not find pod group")
        assigned = len(self.assigned_members().get(key, ()))
        if assigned >= pg.min_member:
            return None, Status.unschedulable()
        if (pg.min_member - assigned) / pg.min_member <= _SMALL_GAP:
            # Close to quorum: later members may still complete it.
            return None, Status.unschedulable()
        blockers = self._lower_ranked_blockers(pg, diagnosis)
        if blockers:
            # Younger gangs still short of quorum hold resources this pod could use: they give way
            # (and keep out of the way until this group completes, fails or times out), so two
            # gangs that each hold part of the cluster cannot starve each other.
            deadline = self.handle.clock.now() + self._timeout(pg)
            for other in blockers:
                self._reject_waiting(other, f"rejected to make room for PodGroup {key}")
                self._yield_to[other] = (key, deadline)
            return None, Status.unschedulable(
                f"PodGroup {key}: younger PodGroup(s) {', '.join(blockers)} waiting at Permit were rejected to "
                "make room"
            )
        self._reject_waiting(key, "optimistic rejection in PostFilter")
        self._clear_yields(key)
        if self.member_count(pod, key) >= pg.min_member:
            self._back_off(key)
        self._permitted.pop(key, None)
        return None, Status.unschedulable(
            f"PodGroup {key} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"
        )

    def rank(self, pg: PodGroup) -> tuple[float, str]:
        """Between gangs competing for the same resources, the older PodGroup goes first."""
        return pg.creation_ts, pg.key

    def _lower_ranked_blockers(self, pg: PodGroup, diagnosis: Diagnosis) -> list[str]:
        """Groups ranked after ``pg``, short of quorum, with members waiting at Permit on nodes
        that rejected this pod for a reason that freeing them may resolve."""
        mine = self.rank(pg)
        nodes_of: dict[str, list[str]] = {}
        for wp in self.handle.waiting_pods:
            other = group_key(wp.pod)
            # Members already rejected but not yet released count: their resources are on the way.
            if other is not None and other != pg.key and (not wp.decided or _rejected(wp)):
                nodes_of.setdefault(other, []).append(wp.node_name)
        blockers: list[str] = []
        table = self.handle.table
        for other, nodes in sorted(nodes_of.items()):
            opg = self.pod_group(other)
            if not isinstance(opg, PodGroup) or self.rank(opg) <= mine:
                continue
            if len(self.assigned_members().get(other, ())) >= opg.min_member:
                continue
            for node in nodes:
                row = table.row_of(node)
                st = diagnosis.node_to_status.get(row) if row is not None else None
                if st is not None and st.code == Code.UNSCHEDULABLE:
                    blockers.append(other)
                    break
        return blockers

    def _yielding(self, key: str) -> str | None:
        """The group this one gives way to, while that group is still assembling."""
        entry = self._yield_to.get(key)
        if entry is None:
            return None
        winner, deadline = entry
        pg = self.pod_group(winner)
        if (
            self.handle.clock.now() >= deadline
            or not isinstance(pg, PodGroup)
            or len(self.assigned_members().get(winner, ())) >= pg.min_member
        ):
            del self._yield_to[key]
            return None
        return winner

    def _clear_yields(self, winner: str) -> None:
        """``winner`` failed: the groups that gave way to it may go again."""
        for key in [k for k, (w, _) in self._yield_to.items() if w == winner]:
            del self._yield_to[key]

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
        rejected = self._reject_waiting(key, "rejection in Unreserve")
        self._permitted.pop(key, None)
        # A gang that failed before quorum (this member waited, or siblings were still waiting)
        # backs off like one rejected in PostFilter (the older deniedPGExpirationTimeSeconds).
        if rejected > 0 or state.get(_WAITED):
            self._back_off(key)
            self._clear_yields(key)

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
        self._schedule_start.setdefault(key, _rfc3339_now())
        # The pod itself is assumed already, so it is among the assigned members.
        members = self.assigned_members().get(key, [])
        waiting = [wp for wp in self.handle.waiting_pods if group_key(wp.pod) == key]
        if any(_rejected(wp) for wp in waiting):
            # A sibling was just rejected (timeout, deletion) and is about to be unreserved: the
            # quorum counted with it is not real.
            self._reject_waiting(key, "rejection in Permit: a member of the group was rejected")
            return Status.unschedulable(f"PodGroup {key}: a member was rejected while waiting"), 0.0
        if len(members) >= pg.min_member:
            for wp in waiting:
                wp.allow(self.name)
            return SUCCESS, 0.0
        if len(members) == 1:
            # The group's first member to wait brings its siblings back from backoff and
            # unschedulable (upstream ActivateSiblings).
            self.handle.activate([p.uid for p in self._pending_members(key)])
        state.write(_WAITED, True)
        timeout = self._timeout(pg)
        return Status.wait(f"waiting for {pg.min_member - len(members)} more member(s) of PodGroup {key}"), float(
            timeout
        )

    # -- PodGroup status (live shells) -----------------------------------------------------------
    def pod_group_status(self, key: str) -> dict[str, Any] | None:
        """The ``status`` this scheduler can tell for a PodGroup: phase, running and
        scheduleStartTime. Succeeded/failed counts (and the Finished/Failed phases) need terminal
        pods, which leave the scheduler's view: a PodGroup controller owns those."""
        pg = self.pod_group(key)
        if not isinstance(pg, PodGroup):
            return None
        members = self.assigned_members().get(key, [])
        waiting = {wp.pod.uid for wp in self.handle.waiting_pods}
        scheduled = sum(1 for p in members if p.uid not in waiting)
        running = sum(1 for p in members if p.phase == "Running")
        if pg.min_member and running >= pg.min_member:
            phase = "Running"
        elif pg.min_member and scheduled >= pg.min_member:
            phase = "Scheduled"
        elif members:
            phase = "Scheduling"
        else:
            phase = "Pending"
        status: dict[str, Any] = {"phase": phase, "running": running}
        start = self._schedule_start.get(key)
        if start is not None:
            status["scheduleStartTime"] = start
        return status

    def status_updates(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{"PodGroup": PodGroup key → the ``status`` fields that changed since the previous call}.

        A live shell calls this periodically (and after binds) and merge-patches each PodGroup's
        ``status`` subresource with the result; the simulator does not need it.
        """
        out: dict[str, dict[str, Any]] = {}
        keys = set(self.handle.objects(KIND))
        for key in sorted(keys):
            status = self.pod_group_status(key)
            if status is None:
                continue
            before = self._reported.get(key, {})
            changed = {k: v for k, v in status.items() if before.get(k) != v}
            if changed:
                out[key] = changed
                self._reported[key] = status
        for gone in set(self._reported) - keys:
            del self._reported[gone]
            self._schedule_start.pop(gone, None)
        return {KIND: out} if out else {}


def _rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
