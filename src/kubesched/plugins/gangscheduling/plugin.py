"""GangScheduling: all-or-nothing scheduling of the Workload API's PodGroups (kube-scheduler v1.37).

Port of pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go (v1.37.1) with the
CompositePodGroup gate off. A pod joins a PodGroup (``scheduling.k8s.io/v1beta1``) through
``spec.schedulingGroup.podGroupName``; a group with ``schedulingPolicy.gang.minCount`` is a gang:

* PreEnqueue: a member stays out of the active queue until its PodGroup exists and ``minCount``
  members of the group exist (pending, assumed or bound); a ``basic`` group, and a pod in no
  group, pass;
* Permit: a member waits (5 minutes, upstream's permitTimeoutDuration) until ``minCount`` members
  are assumed or bound; the member that completes the quorum allows every waiting sibling. A
  member that starts waiting activates the group's unscheduled members.

Members are counted by the gang member index Coscheduling uses too (plugins/helpers/gang_members.py,
upstream's PodGroupState of the scheduler cache): assigned members from the node table, pending
ones from every pod that passes PreEnqueue, resynchronised from ``handle.pending_pods()``.

* PlacementFeasible: in the PodGroup cycle (scheduler_podgroup.py), ``minCount`` placed is a
  Success, reachable with the members left a Wait, out of reach Unschedulable (the cycle stops:
  ``minCount (N) cannot be satisfied: S scheduled, R remaining``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import PermitPlugin, PlacementFeasiblePlugin, PreEnqueuePlugin
from kubesched.framework.podgroup import PlacementProgress, PodGroupInfo
from kubesched.framework.podgroup_condition import INITIALLY_SCHEDULED, find_condition
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import POD, ActionType, ClusterEvent
from kubesched.plugins.gangscheduling.podgroup import (
    POD_GROUP,
    POD_GROUP_KIND,
    WORKLOAD_KIND,
    PodGroup,
    PodGroupSpecError,
    group_key,
    group_name,
    parse_pod_group,
)
from kubesched.plugins.helpers.gang_members import MemberIndex, waiting_note
from kubesched.plugins.helpers.pod_group_specs import ParsedPodGroups
from kubesched.snapshot.pod import PodInfo

NAME = "GangScheduling"
#: permitTimeoutDuration: how long gang members wait at Permit for the quorum.
PERMIT_TIMEOUT_SECONDS = 300.0

__all__ = ["NAME", "PERMIT_TIMEOUT_SECONDS", "GangScheduling"]


class GangScheduling(PreEnqueuePlugin, PermitPlugin, PlacementFeasiblePlugin):
    name = NAME
    object_kinds = (POD_GROUP_KIND, WORKLOAD_KIND)

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.members = MemberIndex(handle.table, handle.pending_pods, group_key)
        self._parsed_groups = ParsedPodGroups(handle, POD_GROUP, parse_pod_group)
        #: Group key → uids of its members this plugin's PreEnqueue refused (short of minCount):
        #: the ones upstream's UnscheduledPod Add event requeues once the group is complete.
        self._held: dict[str, set[str]] = {}
        #: Group key → the PlacementFeasible rejection of its last PodGroup cycle (the message
        #: its members got), until a cycle places the gang: for reports and ``explain``.
        self._failure: dict[str, str] = {}

    def pod_group(self, key: str) -> PodGroup | PodGroupSpecError | None:
        """The parsed PodGroup ``namespace/name`` (parsed once per object version), None if absent."""
        return self._parsed_groups.get(key)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream: UnscheduledPod Add, AssignedPod Add, PodGroup Add and Update. An unscheduled
        # pod's Add is handled in PreEnqueue instead: the pod that completes a group's minCount
        # activates the members waiting there (kubesched's queue has no queueing hints, and a
        # queue-wide event on every pod added would cost O(gated pods) per pod).
        return (
            ClusterEvent(POD, ActionType.ADD, "AssignedPodAdd"),
            ClusterEvent(POD_GROUP, ActionType.ADD | ActionType.UPDATE, "PodGroupAddOrUpdate"),
        )

    # -- PreEnqueue --------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status:
        name = group_name(pod)
        if name is None:
            return SUCCESS
        key = f"{pod.namespace}/{name}"
        pg = self.pod_group(key)
        if pg is None:
            # The pod is unschedulable until its PodGroup object is created.
            self._held.setdefault(key, set()).add(pod.uid)
            return Status.unresolvable(f'waiting for pods\'s pod group "{name}" to appear in scheduling queue')
        if isinstance(pg, PodGroupSpecError):
            self._held.setdefault(key, set()).add(pod.uid)
            return Status.unresolvable(str(pg))
        if pg.gang_min_count is None:
            self._held.pop(key, None)
            return SUCCESS  # this plugin only cares about pods with a gang policy
        now = self.handle.clock.now()
        self.members.maybe_resync(now)
        self.members.note_pending(pod)
        count = self.members.count(key, pod)
        if count < pg.gang_min_count and self.members.maybe_resync(now, short=True):
            self.members.note_pending(pod)
            count = self.members.count(key, pod)
        if count < pg.gang_min_count:
            self._held.setdefault(key, set()).add(pod.uid)
            return Status.unresolvable("waiting for minCount pods from a gang to appear in scheduling queue")
        held = self._held.pop(key, None)
        if held:
            # The quorum is met: the members held here until now may enter the queue too
            # (upstream: the UnscheduledPod Add event of this pod requeues them). Popped first:
            # their own PreEnqueue runs inside the activation and finds nothing more to do.
            held.discard(pod.uid)
            self.handle.activate(sorted(held))
        return SUCCESS

    # -- Permit ------------------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        name = group_name(pod)
        if name is None:
            return SUCCESS, 0.0
        key = f"{pod.namespace}/{name}"
        pg = self.pod_group(key)
        if pg is None:
            return Status.error(f'failed to get podGroup {key}: podgroup.scheduling.k8s.io "{name}" not found'), 0.0
        if isinstance(pg, PodGroupSpecError):
            return Status.error(str(pg)), 0.0
        if pg.gang_min_count is None:
            return SUCCESS, 0.0
        # ScheduledPodsCount: assumed or bound members; this pod is assumed already.
        assigned = self.members.assigned_of(key)
        if len(assigned) < pg.gang_min_count:
            # Activate the unscheduled members in case they were waiting for this pod.
            self.handle.activate(list(self.members.pending_of(key)))
            return Status.wait("waiting for minCount pods from a gang to be scheduled"), PERMIT_TIMEOUT_SECONDS
        # The quorum is met: allow this pod and every member waiting at Permit.
        waiting = self.handle.waiting_pods
        for uid in list(assigned):
            wp = waiting.get(uid)
            if wp is not None:
                wp.allow(self.name)
        return SUCCESS, 0.0

    # -- PlacementFeasible -------------------------------------------------------------------------
    def placement_feasible(self, state: CycleState, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        pg = self.pod_group(group.key)
        if pg is None:
            return Status.error(
                f'failed to get podGroup {group.key}: podgroup.scheduling.k8s.io "{group.name}" not found')
        if isinstance(pg, PodGroupSpecError):
            return Status.error(str(pg))
        min_count, remaining, scheduled = pg.min_count, progress.remaining, progress.scheduled
        if remaining + scheduled < min_count:
            # minCount can't be satisfied because there are not enough remaining pods.
            message = f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            self._failure[group.key] = message
            return Status.unschedulable(message)
        if scheduled < min_count:
            return Status.wait(
                f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining")
        self._failure.pop(group.key, None)
        return SUCCESS

    # -- reports (simulator) and explain -----------------------------------------------------------
    def _wait_reason(self, key: str, pg: PodGroup, exist: int, placed: int) -> str | None:
        """Why the gang ``key`` is not placed: short of members (held at PreEnqueue), or the
        rejection of its last PodGroup cycle; None once ``minCount`` members are placed."""
        if pg.gang_min_count is None or placed >= pg.gang_min_count:
            return None
        if exist < pg.gang_min_count:
            return waiting_note(key, pg.gang_min_count, exist)
        failure = self._failure.get(key)
        return f"waiting for PodGroup {key}: {failure}" if failure else None

    def object_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{POD_GROUP: key → policy, minCount, members (existing, not terminal), placed (bound),
        waiting (assumed, at Permit), pending, for a gang not placed ``reason``, and the
        ``PodGroupInitiallyScheduled`` condition once the PodGroup cycle wrote one}."""
        out: dict[str, dict[str, Any]] = {}
        self.members.resync(self.handle.clock.now())  # exact counts: a report is made once
        waiting = self.handle.waiting_pods
        for key in sorted(self.handle.objects(POD_GROUP)):
            pg = self.pod_group(key)
            if not isinstance(pg, PodGroup):
                if pg is not None:
                    out[key] = {"reason": str(pg)}
                continue
            assigned = self.members.assigned_of(key)
            at_permit = sum(1 for uid in assigned if waiting.get(uid) is not None)
            pending = len(self.members.pending_of(key))
            report: dict[str, Any] = {
                "policy": "basic" if pg.gang_min_count is None else "gang",
                "minCount": pg.min_count,
                "members": len(assigned) + pending,
                "placed": len(assigned) - at_permit,
                "waiting": at_permit,
                "pending": pending,
            }
            reason = self._wait_reason(key, pg, len(assigned) + pending, len(assigned) - at_permit)
            if reason:
                report["reason"] = reason
            # What the PodGroup cycle wrote on the object (framework/podgroup_condition.py).
            condition = find_condition((self.handle.objects(POD_GROUP)[key].get("status") or {}).get("conditions"),
                                       INITIALLY_SCHEDULED)
            if condition is not None:
                report["condition"] = {f: condition.get(f, "") for f in ("type", "status", "reason", "message")}
            out[key] = report
        return {POD_GROUP: out} if out else {}

    def explain_wait(self, pod: PodInfo) -> str | None:
        name = group_name(pod)
        if name is None:
            return None
        key = f"{pod.namespace}/{name}"
        pg = self.pod_group(key)
        if pg is None:
            return f"waiting for PodGroup {key}: it does not exist"
        if isinstance(pg, PodGroupSpecError):
            return f"waiting for PodGroup {key}: {pg}"
        self.members.resync(self.handle.clock.now())  # exact counts: explain is a one-off
        return self._wait_reason(key, pg, self.members.count(key, pod), len(self.members.assigned_of(key)))
