"""Preemption for a whole PodGroup: evict for the gang or not at all.

Port of pkg/scheduler/framework/preemption/podgrouppreemption.go (``PodGroupEvaluator``,
Kubernetes v1.37.1, GenericWorkload on, CompositePodGroup and PodGroupPreemptionPolicy off), the
PodGroupPostFilter half of DefaultPreemption:

1. the preemptor is the group (the PodGroup's priority, its first member's preemption policy:
   PodGroupPreemptionPolicy off, the members all share it); ``Never`` is not
   eligible; a member nominated to a node where a lower-priority pod is terminating because of
   preemption means a preemption is under way (Success, the nominations kept);
2. the domain is the whole cluster. Its possible victims are the pods below the group's priority
   — a pod of a PodGroup counts with its placed siblings as one victim (evicted together) — and
   without any: ``No preemption victims found for incoming preemptor``;
3. every possible victim is taken off the node table and the group algorithm runs again
   (``reschedule``); if the group still does not fit, its status is the answer;
4. the victims are reprieved one by one, PDB-violating ones first, most important first
   (``MoreImportantVictim``: priority, groups before pods, bigger groups, earliest start): a
   victim put back stays if every placed member still passes Filter on its node (the members
   placed before it included); the others are evicted (``handle.preempt`` per node, the first
   member standing for the group) and each placed member is nominated to its node.

The table is edited in place and restored before returning, as the single-pod evaluator does
(framework/preemption.py explains why). Reserve is not run for the members put on the table
during a reprieve (upstream runs it; it only matters to plugins holding their own reservations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubesched.framework.handle import Handle, Preemptor
from kubesched.framework.podgroup import (
    POD_GROUP_API_VERSION,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    group_key,
    pod_group_priority,
)
from kubesched.framework.preemption_order import (
    PodDisruptionBudget,
    PriorityFn,
    filter_victims_with_pdb_violation,
    pod_start_time,
    pod_terminating_by_preemption,
)
from kubesched.framework.status import Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo

NO_VICTIMS_MSG = "No preemption victims found for incoming preemptor"


@dataclass(frozen=True, slots=True)
class DomainVictim:
    """A pod, or the placed pods of one PodGroup, evicted together (upstream DomainVictim)."""

    pods: tuple[PodInfo, ...]
    priority: int
    is_group: bool

    def earliest_start(self) -> float:
        return min(pod_start_time(p) for p in self.pods)


def importance(v: DomainVictim) -> tuple[int, int, int, float]:
    """MoreImportantVictim as a sort key (most important first)."""
    return (-v.priority, -(2 if v.is_group else 1), -len(v.pods), v.earliest_start())


def domain_victims(handle: Handle, below: int, priority: PriorityFn, exclude: str | None) -> list[DomainVictim]:
    """The cluster's pods below ``below``: pods of a PodGroup grouped (GetAllPossibleVictims)."""
    singles: list[DomainVictim] = []
    groups: dict[str, list[PodInfo]] = {}
    for pod in handle.table.all_pods():
        key = group_key(pod)
        if key is not None and key != exclude:
            groups.setdefault(key, []).append(pod)
        elif key is None and priority(pod) < below:
            singles.append(DomainVictim((pod,), priority(pod), False))
    for pods in groups.values():
        prio = max(priority(p) for p in pods)
        if prio < below:
            singles.append(DomainVictim(tuple(pods), prio, True))
    return singles


def group_preemptor(group: PodGroupInfo, scheduler_name: str) -> Preemptor | None:
    """podGroupExecutorPreemptor: the victims are told the PodGroup preempted them, on the
    group's one candidate, ``cluster`` (podgrouppreemption.go). Without the PodGroup object:
    the first member (None)."""
    if group.pod_group is None:
        return None
    meta = group.pod_group.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    related = {"apiVersion": POD_GROUP_API_VERSION, "kind": "PodGroup",
               "namespace": group.namespace, "name": group.name, "uid": uid}
    return Preemptor("podgroup", uid, "cluster", scheduler_name, related)


class PodGroupEvaluator:
    def __init__(self, handle: Handle, priority: PriorityFn, pdbs: Sequence[PodDisruptionBudget]) -> None:
        self.handle = handle
        self.priority = priority
        self.pdbs = list(pdbs)

    def preempt(
        self, group: PodGroupInfo, reschedule: PodGroupSchedulingFunc
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        members = group.unscheduled_pods
        if not members:
            return None, Status.unschedulable(NO_VICTIMS_MSG)
        first = members[0]
        if first.spec.get("preemptionPolicy") == "Never":
            return None, Status.unschedulable("not eligible due to preemptionPolicy=Never.")
        prio = pod_group_priority(group.pod_group) if group.pod_group is not None else self.priority(first)
        if self._ongoing(members, prio):
            nominations = {p.uid: n for p in members if (n := self._nominated_node(p.uid))}
            ongoing = Status(Code.SUCCESS, ("ongoing preemption on nominated nodes",))
            return PodGroupPostFilterResult(nominations), ongoing
        potential = domain_victims(self.handle, prio, self.priority, group.key)
        if not potential:
            return None, Status.unresolvable(NO_VICTIMS_MSG)
        table = self.handle.table
        removed: dict[str, PodInfo] = {}
        try:
            for v in potential:
                for p in v.pods:
                    if table.remove_pod(p.uid) is not None:
                        removed[p.uid] = p
            assignments, st = reschedule()
            if not st.is_success:
                return None, st
            to_preempt = self._reprieve(potential, assignments, removed)
        finally:
            for p in removed.values():
                table.add_pod(p)
        victims = [p for v in sorted(to_preempt, key=importance) for p in v.pods]
        by_node: dict[str, list[PodInfo]] = {}
        for p in victims:
            by_node.setdefault(p.node_name, []).append(p)
        by = group_preemptor(group, first.scheduler_name)
        for node_name, pods in by_node.items():
            self.handle.preempt(first, node_name, pods, by)
        nominations = {a.pod.uid: a.node_name for a in assignments.proposed if a.node_name}
        message = f"found a placement for podgroup, preempting {len(victims)} victims"
        return PodGroupPostFilterResult(nominations), Status(Code.SUCCESS, (message,))

    def _nominated_node(self, uid: str) -> str | None:
        nominator = self.handle.nominator
        return nominator.node_of(uid) if nominator is not None else None

    def _ongoing(self, members: Sequence[PodInfo], prio: int) -> bool:
        """isOngoingPreemption: a member's nominated node holds a lower-priority pod terminating
        because of preemption."""
        table = self.handle.table
        for node_name in {n for p in members if (n := self._nominated_node(p.uid))}:
            row = table.row_of(node_name)
            if row is None:
                continue
            for p in table.pods[row].values():
                if self.priority(p) < prio and pod_terminating_by_preemption(p):
                    return True
        return False

    def _reprieve(
        self, potential: list[DomainVictim], assignments: PodGroupAssignments, removed: dict[str, PodInfo]
    ) -> list[DomainVictim]:
        """The victims that must go: put each back (PDB-violating first, most important first)
        and keep it if every placed member still fits."""
        ordered = sorted(potential, key=importance)
        flat = [p for v in ordered for p in v.pods]
        violating_pods, _ = filter_victims_with_pdb_violation(flat, self.pdbs)
        violating = {p.uid for p, _ in violating_pods}
        first_pass = [v for v in ordered if any(p.uid in violating for p in v.pods)]
        second_pass = [v for v in ordered if not any(p.uid in violating for p in v.pods)]
        to_preempt = [v for v in (*first_pass, *second_pass) if not self._fits_with(v, assignments, removed)]
        return to_preempt

    def _fits_with(self, victim: DomainVictim, assignments: PodGroupAssignments, removed: dict[str, PodInfo]) -> bool:
        """reprieveVictim: with ``victim`` back, every placed member passes Filter on its node
        (earlier members on the table). True keeps the victim (it stays back on the table)."""
        table = self.handle.table
        fwk = self.handle.framework
        assert fwk is not None
        back: list[PodInfo] = []
        for p in victim.pods:
            if p.uid in removed:
                table.add_pod(p)
                del removed[p.uid]
                back.append(p)
                row = table.row_of(p.node_name)
                for a in assignments.proposed:
                    if row is not None:
                        fwk.run_pre_filter_extension_add_pod(a.state, a.pod, p, NodeInfo(table, row))
        placed: list[str] = []
        fits = True
        try:
            for a in assignments.proposed:
                row = table.row_of(a.node_name)
                if row is None or not fwk.filter_node(a.state, a.pod, row).is_success:
                    fits = False
                    break
                table.add_pod(a.pod.with_node(a.node_name))
                placed.append(a.pod.uid)
        finally:
            for uid in reversed(placed):
                table.remove_pod(uid)
        if not fits:
            for p in back:
                table.remove_pod(p.uid)
                removed[p.uid] = p
                row = table.row_of(p.node_name)
                for a in assignments.proposed:
                    if row is not None:
                        fwk.run_pre_filter_extension_remove_pod(a.state, a.pod, p, NodeInfo(table, row))
        return fits


