"""GangScheduling: all-or-nothing scheduling of the Workload API's PodGroups (kube-scheduler v1.37).

Port of pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go (v1.37.1). A pod joins a
PodGroup (``scheduling.k8s.io/v1beta1``) through
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

With the CompositePodGroup gate (``handle.feature_gates``), a PodGroup under a CompositePodGroup
(``spec.parentCompositePodGroupName``) is judged with its whole hierarchy: PreEnqueue holds its
members until the root's tree meets its quorum (a PodGroup is ready with ``minCount`` members, 1
for ``basic``; a CompositePodGroup with ``minGroupCount`` ready children, 1 for ``basic``:
``waiting for composite pod group "<root>" tree to meet quorum``), Permit waits until the tree
meets it with members assumed or bound and then allows every member of the tree waiting there,
and PlacementFeasible counts a CompositePodGroup's children placed against ``minGroupCount``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import PermitPlugin, PlacementFeasiblePlugin, PreEnqueuePlugin
from kubesched.framework.podgroup import COMPOSITE_POD_GROUP as COMPOSITE_POD_GROUP_GATE
from kubesched.framework.podgroup import PlacementProgress, PodGroupInfo, parent_composite_name
from kubesched.framework.podgroup_condition import INITIALLY_SCHEDULED, find_condition
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import POD, ActionType, ClusterEvent
from kubesched.framework.workload_forest import build_tree, root_of_composite
from kubesched.plugins.gangscheduling.composite_report import composite_reports, hierarchy_lines
from kubesched.plugins.gangscheduling.podgroup import (
    COMPOSITE_POD_GROUP,
    COMPOSITE_POD_GROUP_KIND,
    POD_GROUP,
    POD_GROUP_KIND,
    WORKLOAD_KIND,
    CompositePodGroup,
    PodGroup,
    PodGroupSpecError,
    group_key,
    group_name,
    parse_composite_pod_group,
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
    object_kinds = (POD_GROUP_KIND, WORKLOAD_KIND, COMPOSITE_POD_GROUP_KIND)

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.members = MemberIndex(handle.table, handle.pending_pods, group_key)
        self._parsed_groups = ParsedPodGroups(handle, POD_GROUP, parse_pod_group)
        self._parsed_composites = ParsedPodGroups(handle, COMPOSITE_POD_GROUP, parse_composite_pod_group)
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
            # CompositePodGroup gate: a CompositePodGroup being added can complete a hierarchy.
            ClusterEvent(COMPOSITE_POD_GROUP, ActionType.ADD, "CompositePodGroupAdd"),
        )

    # -- PreEnqueue --------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status:
        name = group_name(pod)
        if name is None:
            return SUCCESS
        key = f"{pod.namespace}/{name}"
        now = self.handle.clock.now()
        if self.members.maybe_resync(now) and self.handle.knows_pending_pods():
            self._forget_gone_held()
        pg = self.pod_group(key)
        if pg is None:
            # The pod is unschedulable until its PodGroup object is created.
            self._held.setdefault(key, set()).add(pod.uid)
            return Status.unresolvable(f'waiting for pods\'s pod group "{name}" to appear in scheduling queue')
        if isinstance(pg, PodGroupSpecError):
            self._held.setdefault(key, set()).add(pod.uid)
            return Status.unresolvable(str(pg))
        if self._hierarchies() and (parent := parent_composite_name(self._raw_group(key))) is not None:
            return self._pre_enqueue_hierarchy(pod, key, parent)
        if pg.gang_min_count is None:
            self._held.pop(key, None)
            return SUCCESS  # this plugin only cares about pods with a gang policy
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
        if self._hierarchies() and (parent := parent_composite_name(self._raw_group(key))) is not None:
            return self._permit_hierarchy(pod, parent)
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
        pg: PodGroup | CompositePodGroup | PodGroupSpecError | None
        pg = self._parsed_composites.get(group.key) if group.is_composite else self.pod_group(group.key)
        if group.is_composite and pg is None:
            return Status.error(f'failed to get compositePodGroup {group.key}: '
                                f'compositepodgroup.scheduling.k8s.io "{group.name}" not found')
        if pg is None:
            return Status.error(
                f'failed to get podGroup {group.key}: podgroup.scheduling.k8s.io "{group.name}" not found')
        if isinstance(pg, PodGroupSpecError):
            return Status.error(str(pg))
        min_count, remaining, scheduled = pg.min_count, progress.remaining, progress.scheduled
        # A PodGroup's by its key, a CompositePodGroup's by its entity key (the names may clash).
        failure_key = group.entity_key if group.is_composite else group.key
        if remaining + scheduled < min_count:
            # minCount can't be satisfied because there are not enough remaining pods.
            message = f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            self._failure[failure_key] = message
            return Status.unschedulable(message)
        if scheduled < min_count:
            return Status.wait(
                f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining")
        self._failure.pop(failure_key, None)
        return SUCCESS

    # -- CompositePodGroup hierarchies ---------------------------------------------------------------
    def _forget_gone_held(self) -> None:
        """Drop held members that are no longer pending (deleted while their group was short):
        without this a gang that never completes keeps its deleted members' uids for the life of
        the scheduler. Run after a full resync of the pending members (every few seconds)."""
        for key in list(self._held):
            kept = {uid for uid in self._held[key] if self.members.is_pending(uid)}
            if kept:
                self._held[key] = kept
            else:
                del self._held[key]

    def _hierarchies(self) -> bool:
        return bool(self.handle.feature_gates.get(COMPOSITE_POD_GROUP_GATE))

    def _raw_group(self, key: str) -> dict[str, Any] | None:
        return self.handle.objects(POD_GROUP).get(key)

    def _tree(self, namespace: str, parent: str) -> tuple[PodGroupInfo | None, str]:
        """GetRootKeyForGroup + the hierarchy under the root (None when the chain of parents from
        ``parent`` does not reach a root), and the error upstream gives then."""
        missing = (f"failed to build hierarchy snapshot: composite pod group object not found in state for "
                   f"compositepodgroup/{namespace}/{parent}")
        pod_groups, composites = self.handle.objects(POD_GROUP), self.handle.objects(COMPOSITE_POD_GROUP)
        root = root_of_composite(composites, namespace, parent)
        tree = build_tree(pod_groups, composites, root) if root is not None else None
        return tree, missing

    def _ready(self, group: PodGroupInfo, count: Callable[[str], int]) -> bool:
        """isCPGTreeReady / isPGReady: ``count`` members (existing, or placed) of each PodGroup."""
        if not group.is_composite:
            pg = self.pod_group(group.key)
            return isinstance(pg, PodGroup) and count(group.key) >= pg.min_count
        cpg = self._parsed_composites.get(group.key)
        if not isinstance(cpg, CompositePodGroup):
            return False
        return sum(1 for child in group.children if self._ready(child, count)) >= cpg.min_count

    def _invalid_composite(self, group: PodGroupInfo) -> str | None:
        """The spec error of the first CompositePodGroup of the tree that cannot be used."""
        if not group.is_composite:
            return None
        cpg = self._parsed_composites.get(group.key)
        if isinstance(cpg, PodGroupSpecError):
            return str(cpg)
        return next((e for child in group.children if (e := self._invalid_composite(child)) is not None), None)

    def _pre_enqueue_hierarchy(self, pod: PodInfo, key: str, parent: str) -> Status:
        """preEnqueueWithHierarchies for a PodGroup with a parent: checkCPGHierarchyReadiness
        (AllPodsCount)."""
        self._held.setdefault(key, set()).add(pod.uid)
        tree, missing = self._tree(pod.namespace, parent)
        if tree is None:
            return Status.unresolvable(missing)
        if (invalid := self._invalid_composite(tree)) is not None:
            return Status.unresolvable(invalid)
        self.members.maybe_resync(self.handle.clock.now())
        self.members.note_pending(pod)
        if not self._ready(tree, lambda k: self.members.count(k, pod if k == key else None)):
            return Status.unresolvable(f'waiting for composite pod group "{tree.name}" tree to meet quorum')
        # The tree is ready: the members of every PodGroup of it held here may enter the queue too.
        held = [uid for leaf in tree.leaves() for uid in self._held.pop(leaf.key, ())]
        self.handle.activate(sorted(set(held) - {pod.uid}))
        return SUCCESS

    def _permit_hierarchy(self, pod: PodInfo, parent: str) -> tuple[Status, float]:
        """permitPodForHierarchy: wait until the root's tree meets its quorum with members assumed
        or bound (ScheduledPodsCount), then allow every member of the tree waiting at Permit."""
        tree, missing = self._tree(pod.namespace, parent)
        if tree is None:
            return Status.error(missing), 0.0
        leaves = tree.leaves()
        if not self._ready(tree, lambda k: len(self.members.assigned_of(k))):
            self.handle.activate([uid for leaf in leaves for uid in self.members.pending_of(leaf.key)])
            return (Status.wait(f'waiting for composite pod group "{tree.name}" tree to meet quorum'),
                    PERMIT_TIMEOUT_SECONDS)
        waiting = self.handle.waiting_pods
        for leaf in leaves:
            for uid in list(self.members.assigned_of(leaf.key)):
                wp = waiting.get(uid)
                if wp is not None:
                    wp.allow(self.name)
        return SUCCESS, 0.0

    # -- reports (simulator) and explain -----------------------------------------------------------
    def _wait_reason(self, key: str, pg: PodGroup, exist: int, placed: int) -> str | None:
        """Why the gang ``key`` is not placed: short of members (held at PreEnqueue), or the
        rejection of its last PodGroup cycle; None once ``minCount`` members are placed."""
        if placed >= pg.min_count:
            return None
        if pg.gang_min_count is not None:
            if exist < pg.gang_min_count:
                return waiting_note(key, pg.gang_min_count, exist)
            failure = self._failure.get(key)
            if failure:
                return f"waiting for PodGroup {key}: {failure}"
        return self._hierarchy_wait_reason(key)

    def _hierarchy_wait_reason(self, key: str) -> str | None:
        """Why a PodGroup under a CompositePodGroup waits for its hierarchy: the tree short of its
        quorum, or the last failure of the nearest CompositePodGroup above it that failed."""
        parent = parent_composite_name(self._raw_group(key)) if self._hierarchies() else None
        if parent is None:
            return None
        namespace = key.split("/", 1)[0]
        tree, missing = self._tree(namespace, parent)
        if tree is None:
            return f"waiting for PodGroup {key}: {missing}"
        if not self._ready(tree, lambda k: self.members.count(k)):
            return f'waiting for PodGroup {key}: waiting for composite pod group "{tree.name}" tree to meet quorum'
        composites = self.handle.objects(COMPOSITE_POD_GROUP)
        seen: set[str] = set()
        name: str | None = parent
        while name is not None and name not in seen:
            seen.add(name)
            failure = self._failure.get(f"compositepodgroup/{namespace}/{name}")
            if failure:
                return f"waiting for CompositePodGroup {namespace}/{name}: {failure}"
            name = parent_composite_name(composites.get(f"{namespace}/{name}"))
        return None

    def object_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{POD_GROUP: key → policy, minCount, members (existing, not terminal), placed (bound),
        waiting (assumed, at Permit), pending, for a gang not placed ``reason``, and the
        ``PodGroupInitiallyScheduled`` condition once the PodGroup cycle wrote one; with the
        CompositePodGroup gate, COMPOSITE_POD_GROUP: composite_report.py}."""
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
        reports = {POD_GROUP: out} if out else {}
        if self._hierarchies() and (composites := composite_reports(self)):
            reports[COMPOSITE_POD_GROUP] = composites
        return reports

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
        reason = self._wait_reason(key, pg, self.members.count(key, pod), len(self.members.assigned_of(key)))
        if reason is None or not self._hierarchies():
            return reason
        # Under a CompositePodGroup: how far each one above it got (composite_report.py).
        return "\n".join([reason, *hierarchy_lines(self, key)])
