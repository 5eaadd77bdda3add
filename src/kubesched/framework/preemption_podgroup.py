"""Preemption for a whole PodGroup: evict for the gang or not at all.

Port of pkg/scheduler/framework/preemption/podgrouppreemption.go (``PodGroupEvaluator``,
Kubernetes v1.37.1, GenericWorkload on, CompositePodGroup and PodGroupPreemptionPolicy on or off),
the PodGroupPostFilter half of DefaultPreemption:

1. the preemptor is the group (the PodGroup's priority, or a root CompositePodGroup's; its
   preemption policy: with PodGroupPreemptionPolicy on the group's ``spec.preemptionPolicy``, off
   ``Never`` when a member says so — validatePodGroup made them all share it); ``Never`` is not
   eligible; a member nominated to a node where a lower-priority pod is terminating because
   of preemption means a preemption is under way (Success, the nominations kept);
2. the domain is the whole cluster. Its possible victims are the pods below the group's priority
   (getCrossNodesVictims): a pod counts alone, with its PodGroup's priority (with the
   CompositePodGroup gate: its hierarchy root's), unless a group above it has ``disruptionMode:
   all`` — then every placed pod under the highest such group is one victim, evicted together —
   and without any: ``No preemption victims found for incoming preemptor``;
3. every possible victim is taken off the node table and the group algorithm runs again
   (``reschedule``); if the group still does not fit, its status is the answer;
4. the victims are reprieved one by one, PDB-violating ones first, most important first
   (``MoreImportantVictim``: priority, CompositePodGroups before PodGroups before pods, bigger
   groups, earliest start): a
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
from typing import Any

from kubesched.framework.handle import Handle, Preemptor
from kubesched.framework.podgroup import (
    COMPOSITE_POD_GROUP,
    COMPOSITE_POD_GROUP_API_VERSION,
    COMPOSITE_POD_GROUP_OBJECTS,
    POD_GROUP_API_VERSION,
    POD_GROUP_OBJECTS,
    POD_GROUP_PREEMPTION_POLICY,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    group_key,
    group_name,
    group_preemption_policy,
    parent_composite_name,
    pod_group_priority,
    pod_preemption_policy,
)
from kubesched.framework.preemption_order import (
    PodDisruptionBudget,
    PriorityFn,
    filter_victims_with_pdb_violation,
    pod_start_time,
)
from kubesched.framework.status import Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo

NO_VICTIMS_MSG = "No preemption victims found for incoming preemptor"


#: victimRank: a pod alone, a PodGroup, a CompositePodGroup (groups are the more important).
POD_RANK, POD_GROUP_RANK, COMPOSITE_RANK = 1, 2, 3
#: WorkloadMaxTreeDepth (scheduling/v1beta1): how far TraverseHierarchyUp climbs.
MAX_TREE_DEPTH = 4


@dataclass(frozen=True, slots=True)
class DomainVictim:
    """A pod, or the placed pods of a group evicted together (upstream DomainVictim)."""

    pods: tuple[PodInfo, ...]
    priority: int
    #: victimRank: POD_RANK, POD_GROUP_RANK or COMPOSITE_RANK.
    rank: int

    def earliest_start(self) -> float:
        return min(pod_start_time(p) for p in self.pods)


def importance(v: DomainVictim) -> tuple[int, int, int, float]:
    """MoreImportantVictim as a sort key (most important first)."""
    return (-v.priority, -v.rank, -len(v.pods), v.earliest_start())


def _disrupted_together(raw: dict[str, Any]) -> bool:
    """``spec.disruptionMode.all`` set (the default is ``single``)."""
    mode = (raw.get("spec") or {}).get("disruptionMode")
    return isinstance(mode, dict) and mode.get("all") is not None


def victim_unit(handle: Handle, pod: PodInfo, own_priority: int) -> tuple[str | None, int, int]:
    """How a placed pod is evicted (getHighestAllAncestor, GetPodPriority): the key of the
    highest group above it with ``disruptionMode: all`` (None: the pod alone), that unit's rank,
    and the pod's priority as a victim — its PodGroup's, or with the CompositePodGroup gate its
    hierarchy root's (the pod's own when it names no group the shell knows)."""
    name = group_name(pod)
    pod_groups = handle.objects(POD_GROUP_OBJECTS)
    raw = pod_groups.get(f"{pod.namespace}/{name}") if name is not None else None
    if raw is None:
        return None, POD_RANK, own_priority
    unit, rank = (f"podgroup/{pod.namespace}/{name}", POD_GROUP_RANK) if _disrupted_together(raw) else (None, POD_RANK)
    last = raw
    if handle.feature_gates.get(COMPOSITE_POD_GROUP):  # TraverseHierarchyUp
        composites = handle.objects(COMPOSITE_POD_GROUP_OBJECTS)
        parent, seen = parent_composite_name(raw), {""}
        while parent is not None and parent not in seen and len(seen) < MAX_TREE_DEPTH:
            seen.add(parent)
            cpg = composites.get(f"{pod.namespace}/{parent}")
            if cpg is None:
                break
            last = cpg
            if _disrupted_together(cpg):
                unit, rank = f"compositepodgroup/{pod.namespace}/{parent}", COMPOSITE_RANK
            parent = parent_composite_name(cpg)
    return unit, rank, pod_group_priority(last)


def domain_victims(handle: Handle, below: int, priority: PriorityFn, exclude: str | None) -> list[DomainVictim]:
    """getCrossNodesVictims: the cluster's placed pods whose victim priority is below ``below`` (the
    preemptor's own group ``exclude`` left out), each alone or with the pods of its group disrupted
    together (``victim_unit``)."""
    victims: list[DomainVictim] = []
    units: dict[str, tuple[list[PodInfo], int, int]] = {}
    for pod in handle.table.all_pods():
        if exclude is not None and group_key(pod) == exclude:
            continue
        unit, rank, prio = victim_unit(handle, pod, priority(pod))
        if prio >= below:
            continue
        if unit is None:
            victims.append(DomainVictim((pod,), prio, POD_RANK))
        else:
            units.setdefault(unit, ([], prio, rank))[0].append(pod)
    victims.extend(DomainVictim(tuple(pods), prio, rank) for pods, prio, rank in units.values())
    return victims


def group_preemptor(group: PodGroupInfo, scheduler_name: str) -> Preemptor | None:
    """podGroupExecutorPreemptor / compositePodGroupExecutorPreemptor (executor.go): the victims
    are told the PodGroup (``podgroup``) or the root CompositePodGroup (``compositepodgroup``)
    preempted them, on the group's one candidate, ``cluster`` (podgrouppreemption.go). Without the
    object: the first member (None)."""
    if group.composite_pod_group is not None:
        obj, kind, api_version, type_ = (group.composite_pod_group, "CompositePodGroup",
                                         COMPOSITE_POD_GROUP_API_VERSION, "compositepodgroup")
    elif group.pod_group is not None:
        obj, kind, api_version, type_ = group.pod_group, "PodGroup", POD_GROUP_API_VERSION, "podgroup"
    else:
        return None
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    related = {"apiVersion": api_version, "kind": kind, "namespace": group.namespace, "name": group.name, "uid": uid}
    return Preemptor(type_, uid, "cluster", scheduler_name, related)


def resolve_preemption_policy(raw: dict[str, Any] | None, members: Sequence[PodInfo], gate: bool) -> str:
    """resolvePreemptionPolicy / resolveCompositePreemptionPolicy (preemption/types.go): with
    PodGroupPreemptionPolicy on (``gate``), the group object's ``spec.preemptionPolicy`` (a
    CompositePodGroup's: anything but PreemptLowerPriority is Never; unset: PreemptLowerPriority,
    whatever the members say); off, Never when any member says Never."""
    if gate:
        policy = group_preemption_policy(raw)
        return PREEMPT_LOWER_PRIORITY if policy == PREEMPT_LOWER_PRIORITY else PREEMPT_NEVER
    never = any(pod_preemption_policy(p) == PREEMPT_NEVER for p in members)
    return PREEMPT_NEVER if never else PREEMPT_LOWER_PRIORITY


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
        # The preemptor's priority and policy: its PodGroup's, or a CompositePodGroup root's.
        raw = group.composite_pod_group if group.is_composite else group.pod_group
        gate = bool(self.handle.feature_gates.get(POD_GROUP_PREEMPTION_POLICY))
        if resolve_preemption_policy(raw, members, gate) == PREEMPT_NEVER:
            return None, Status.unschedulable("not eligible due to preemptionPolicy=Never.")
        prio = pod_group_priority(raw) if raw is not None else self.priority(first)
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
        because of preemption (``Handle.terminating_by_preemption``: an eviction this scheduler
        sent counts before the watch shows it)."""
        table = self.handle.table
        for node_name in {n for p in members if (n := self._nominated_node(p.uid))}:
            row = table.row_of(node_name)
            if row is None:
                continue
            for p in table.pods[row].values():
                if victim_unit(self.handle, p, self.priority(p))[2] < prio and self.handle.terminating_by_preemption(p):
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
        # Each member as it goes on the table, made once: every reprieve puts the same ones back.
        on_node = [a.pod.with_node(a.node_name) for a in assignments.proposed]
        return [v for v in (*first_pass, *second_pass) if not self._fits_with(v, assignments, on_node, removed)]

    def _fits_with(self, victim: DomainVictim, assignments: PodGroupAssignments, on_node: list[PodInfo],
                   removed: dict[str, PodInfo]) -> bool:
        """reprieveVictim: with ``victim`` back, every placed member passes Filter on its node
        (earlier members on the table; ``on_node``: the members assigned to their nodes). True
        keeps the victim (it stays back on the table)."""
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
            for a, member in zip(assignments.proposed, on_node, strict=True):
                row = table.row_of(a.node_name)
                if row is None or not fwk.filter_node(a.state, a.pod, row).is_success:
                    fits = False
                    break
                table.add_pod(member)
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


