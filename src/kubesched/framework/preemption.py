"""Preemption: the evaluator PostFilter plugins such as DefaultPreemption build on.

Port of pkg/scheduler/framework/preemption/preemption.go (``Evaluator``: eligibility, candidate
search, ``DryRunPreemption``, ``SelectCandidate``; the ordering rules it uses — victims' importance,
PodDisruptionBudget violations, ``pickOneNodeForPreemption`` — are in
:mod:`kubesched.framework.preemption_order`), Kubernetes v1.37.1, with the GenericWorkload
(pod-group victims) and extender parts left out; instead, a plugin may tie victims together with
``Plugin.eviction_group`` (:func:`eviction_groups`: a group is evicted whole or not at all, e.g. a
gang waiting at Permit).

**The dry run.** Upstream gives each candidate node a *copy* of its NodeInfo and a clone of the
CycleState, removes the lower-priority pods from both (``RunPreFilterExtensionRemovePod``) and
runs the Filter plugins on the copy. kubesched's filters read the columnar NodeTable, which has
no per-node copies, so the dry run removes the victims from the **table itself** for that one row
— scheduling is single-threaded and nothing else observes the table meanwhile — and restores every
pod before moving to the next node (``try/finally``). The CycleState is cloned per node and told of
each removal and re-addition through ``PreFilterExtensions.remove_pod/add_pod``, exactly as
upstream, so plugins that keep per-domain counts in their PreFilter state (PodTopologySpread,
InterPodAffinity) see the victims gone; plugins that read the table (NodeResourcesFit's free
resources, NodePorts' used ports, plugin pod columns, the table's own topology and affinity
indexes) see them gone too. PreFilter is not run again: the state of the failed attempt is reused,
as upstream. The fit check of a node is ``Framework.filter_node`` (upstream
``RunFilterPluginsWithNominatedPods``: nominated pods of equal or higher priority count too).

Candidate nodes are those whose Filter status was Unschedulable (never
UnschedulableAndUnresolvable); they are tried from a random offset (the scheduler's seeded RNG,
so a simulation stays deterministic per seed) until ``numCandidates`` are found (with at least one
that violates no PodDisruptionBudget), sequentially where upstream uses 16 goroutines, which is
what upstream computes with a parallelism of 1. When the nodes cannot affect each other's
verdicts (no PreFilter state that crosses nodes, only node-local Filters: the common case), the
plugin judges a chunk of nodes in lockstep instead (:mod:`kubesched.framework.preemption_batch`),
with the same outcomes node for node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, fit_error_message
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import Plugin
from kubesched.framework.preemption_order import (
    Candidate,
    PodDisruptionBudget,
    PriorityFn,
    earliest_start_of_highest_priority,
    filter_victims_with_pdb_violation,
    more_important_pod,
    pick_one_node_for_preemption,
    pod_start_time,
    pod_terminating_by_preemption,
    sort_by_importance,
)
from kubesched.framework.preemption_rows import (
    NO_VICTIMS,
    NO_VICTIMS_MSG,
    NOT_HELPFUL,
    NOT_HELPFUL_MSG,
    no_candidate_message,
    unschedulable_rows,
)
from kubesched.framework.runtime import Framework, wrapped_error
from kubesched.framework.status import SUCCESS as SUCCESS_STATUS
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PostFilterResult
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

#: SelectVictimsOnNode's outcome for a node without a lower-priority pod, shared (never mutated)
#: so that a chunk of them is recognised at once.
NO_VICTIMS_OUTCOME: tuple[list[PodInfo], int, Status] = ([], 0, NO_VICTIMS)

#: Fewest nodes the batched dry run judges at once (more than the candidates still wanted costs
#: little, and a few nodes usually fail).
_MIN_CHUNK = 16


def select_victims_on_node(
    fwk: Framework, table: NodeTable, state: CycleState, pod: PodInfo, row: int,
    pdbs: Sequence[PodDisruptionBudget], priority: PriorityFn, *, required: Sequence[PodInfo] | None = None,
) -> tuple[list[PodInfo], int, Status]:
    """SelectVictimsOnNode (default_preemption.go) on ``state`` (the caller passes a clone): remove
    every lower-priority pod, check the pod fits (``Framework.filter_node``: Filter plugins,
    nominated pods included), then reprieve as many as possible — PDB-violating ones first, then
    the others, most important (priority, then earliest start) first. Returns the victims, how many
    of them violate a PDB, and the status. The table row is restored before returning.

    ``required``: victims chosen beforehand that are removed and never reprieved (the extender's
    ``preempt`` verb: kube-scheduler's own victims, which its filters need gone); they lead the
    returned list, and the PDB violation count is of the other victims only (the caller counted
    its own). With ``required`` given (even empty) a node needing no victim at all is a Success
    with none, not "No preemption victims found"."""
    node = NodeInfo(table, row)
    prio = priority(pod)
    required_check = required is not None
    required = required or ()
    required_uids = {v.uid for v in required}
    potential = [p for p in table.pods[row].values() if p.uid not in required_uids and priority(p) < prio]
    # Pods a plugin groups for eviction (Plugin.eviction_group) go all together or not at all.
    groups, protected = eviction_groups(fwk, potential, prio, priority)
    if protected:
        potential = [p for p in potential if p.uid not in protected]
    if not potential and not required_check:
        return [], 0, NO_VICTIMS
    removed: dict[str, PodInfo] = {}

    def remove(v: PodInfo) -> Status:
        if table.remove_pod(v.uid) is None:
            return SUCCESS_STATUS  # not on this node as far as the table knows: nothing to take off
        removed[v.uid] = v
        return fwk.run_pre_filter_extension_remove_pod(state, pod, v, node)

    def add(v: PodInfo) -> Status:
        table.add_pod(v)
        del removed[v.uid]
        return fwk.run_pre_filter_extension_add_pod(state, pod, v, node)

    def fits() -> Status:
        st = fwk.filter_node(state, pod, row)
        return wrapped_error("Filter", st) if st.is_error else st

    try:
        for v in (*required, *potential):
            st = remove(v)
            if not st.is_success:
                return [], 0, st
        # Not fitting with every lower-priority pod gone: this node cannot help (affinity to
        # the victims themselves is not considered, as upstream).
        st = fits()
        if not st.is_success:
            return [], 0, st
        potential = sort_by_importance(potential, priority)
        violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        settled: set[str] = set()

        def reprieve_group(v: PodInfo, group: tuple[PodInfo, ...]) -> tuple[bool, Status]:
            # The group's pods on this node go back together; if the pod does not fit with them,
            # all of the group (its pods on other nodes included) are victims.
            if v.uid in settled:
                return True, SUCCESS_STATUS  # decided with an earlier pod of its group
            settled.update(g.uid for g in group)
            here = [g for g in group if g.uid in removed]
            for g in here:
                st = add(g)
                if not st.is_success:
                    return False, st
            if fits().is_success:
                return True, SUCCESS_STATUS
            for g in here:
                st = remove(g)
                if not st.is_success:
                    return False, st
            victims.extend(group)
            return False, SUCCESS_STATUS

        def reprieve(v: PodInfo) -> tuple[bool, Status]:
            if v.uid in groups:
                return reprieve_group(v, groups[v.uid])
            st = add(v)
            if not st.is_success:
                return False, st
            if fits().is_success:
                return True, SUCCESS_STATUS
            st = remove(v)
            victims.append(v)
            return False, st

        num_violating = 0
        for v, count in violating:
            kept, st = reprieve(v)
            if not st.is_success:
                return [], 0, st
            if not kept:
                num_violating += count
        for v in non_violating:
            _, st = reprieve(v)
            if not st.is_success:
                return [], 0, st
        if groups:
            # Evicted groups brought their pods on other nodes: order and count PDBs over all.
            victims = sort_by_importance(victims, priority)
            num_violating = sum(count for _, count in filter_victims_with_pdb_violation(victims, pdbs)[0])
        elif violating and non_violating:
            victims = sort_by_importance(victims, priority)
        return [*required, *victims], num_violating, SUCCESS_STATUS
    finally:
        for v in list(removed.values()):
            table.add_pod(v)


@runtime_checkable
class VictimPolicy(Protocol):
    """How a preemption plugin ranks and protects victims: what the extender's ``preempt`` verb
    borrows from the profile's PostFilter plugin so it answers as that plugin would."""

    def priority(self, pod: PodInfo) -> int: ...

    def pdbs(self) -> list[PodDisruptionBudget]: ...


def victim_policy(fwk: Framework) -> tuple[PriorityFn, list[PodDisruptionBudget]]:
    """The priority function and PodDisruptionBudgets of the profile's first PostFilter plugin
    that has them (DefaultPreemption in the default profile); ``spec.priority`` and no budgets
    for a profile without one."""
    for plugin in fwk.post_filter:
        if isinstance(plugin, VictimPolicy):
            return plugin.priority, plugin.pdbs()
    return _spec_priority, []


def _spec_priority(pod: PodInfo) -> int:
    return pod.priority


def eviction_groups(
    fwk: Framework, pods: Sequence[PodInfo], prio: int, priority: PriorityFn
) -> tuple[dict[str, tuple[PodInfo, ...]], set[str]]:
    """``Plugin.eviction_group`` of the profile's plugins for each of ``pods`` (potential victims
    of a preemptor of priority ``prio``): uid → the pod's whole group (the pod first) for pods that
    may only be evicted together with other pods, and the uids of pods that may not be evicted at
    all because their group holds a pod the preemptor may not evict (priority ≥ ``prio``).

    Plugin-agnostic stand-in for upstream's pod-group victims (a PodGroup with DisruptionMode
    All is preempted as a whole, podgrouppreemption.go, GenericWorkload), for groups a plugin
    knows, e.g. Coscheduling's gangs waiting at Permit. Only the group's pods on the candidate
    node are taken off the table in the dry run: the others cannot change whether the preemptor
    fits there, but they are victims of the candidate (and count in the node-pick order)."""
    groups: dict[str, tuple[PodInfo, ...]] = {}
    protected: set[str] = set()
    hooks = [p.eviction_group for p in fwk.plugins.values() if type(p).eviction_group is not Plugin.eviction_group]
    if not hooks:
        return groups, protected
    for pod in pods:
        members: dict[str, PodInfo] = {}
        for hook in hooks:
            for m in hook(pod) or ():
                members[m.uid] = m
        members.pop(pod.uid, None)
        if not members:
            continue
        group = (pod, *members.values())
        if any(priority(m) >= prio for m in group):
            protected.add(pod.uid)
        else:
            groups[pod.uid] = group
    return groups, protected


class PreemptionInterface(Protocol):
    """What a preemption plugin supplies (upstream preemption.Interface, without the extender map
    and custom score functions)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated_node_status: Status | None
    ) -> tuple[bool, str]: ...

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, row: int, pdbs: Sequence[PodDisruptionBudget]
    ) -> tuple[list[PodInfo], int, Status]: ...

    def select_victims_on_nodes(
        self, state: CycleState, pod: PodInfo, rows: Sequence[int], pdbs: Sequence[PodDisruptionBudget]
    ) -> list[tuple[list[PodInfo], int, Status]] | None:
        """``select_victims_on_node`` for each of ``rows`` at once on ``state`` itself (only read),
        with the same outcomes; None when that is not possible for this pod (the evaluator then
        clones the state and asks node by node)."""
        ...

    def priority(self, pod: PodInfo) -> int: ...

    def no_potential_victims(self, pod: PodInfo) -> bool:
        """True when no placed pod anywhere could be a victim of ``pod`` (e.g. none has a lower
        priority): every node's SelectVictimsOnNode would be "No preemption victims found", so the
        dry run is skipped (its offset is still drawn). False when unsure."""
        ...


@dataclass(slots=True)
class DryRunResult:
    candidates: list[Candidate]
    #: Statuses of the nodes tried that did not become candidates, by row, except ...
    other_statuses: dict[int, Status] = field(default_factory=dict)
    #: ... the rows of the chunks where no node had a potential victim (each ``NO_VICTIMS``):
    #: kept as the chunks' lists, not row by row (on a cluster where no pod has a lower priority
    #: every failed attempt tries every node this way).
    no_victim_chunks: list[list[int] | Rows] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def node_statuses(self) -> dict[int, Status]:
        """Statuses of all the nodes tried that did not become candidates, by row."""
        statuses: dict[int, Status] = {}
        for rows in self.no_victim_chunks:
            statuses.update(dict.fromkeys(np.asarray(rows, dtype=np.intp).tolist(), NO_VICTIMS))
        statuses.update(self.other_statuses)
        return statuses


class Evaluator:
    """Runs preemption for one plugin (upstream preemption.Evaluator)."""

    def __init__(self, plugin_name: str, handle: Handle, iface: PreemptionInterface,
                 pdbs: Callable[[], list[PodDisruptionBudget]]) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.iface = iface
        self._pdbs = pdbs

    def preempt(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        """Evaluator.Preempt: a nominated node and Success after actuating the preemption; a
        result with no node and Unschedulable when preemption cannot help (clears a nomination);
        no result when the pod may not preempt (keeps its nomination) or on an error."""
        table = self.handle.table
        nominator = self.handle.nominator
        nominated = nominator.node_of(pod.uid) if nominator is not None else None
        nominated_status: Status | None = None
        if nominated:
            row = table.row_of(nominated)
            nominated_status = diagnosis.node_to_status.get(row) if row is not None else None
        ok, msg = self.iface.pod_eligible_to_preempt_others(pod, nominated_status)
        if not ok:
            return None, Status.unschedulable(msg)

        all_rows = table.search_rows()  # upstream's NodeInfos().List(): the dry run's offset counts in it
        if len(all_rows) == 0:
            return None, Status.error("no nodes available")
        potential, others = unschedulable_rows(diagnosis, all_rows)
        if not len(potential):
            dry = DryRunResult([])
        else:
            offset, num = self.iface.get_offset_and_num_candidates(len(potential))
            if self.iface.no_potential_victims(pod):
                # What the dry run would find (its chunks all without a victim), without it; the
                # offset above is still drawn: it moves the scheduler's RNG for what comes later.
                dry = DryRunResult([], no_victim_chunks=[potential])
            else:
                dry = self.dry_run_preemption(state, pod, potential.tolist(), self._pdbs(), offset, num)
        if dry.errors and not dry.candidates:
            return None, Status.error(_aggregate(dry.errors))
        if not dry.candidates:
            # Every potential row was tried (the dry run stops early only with a candidate): its
            # status is NO_VICTIMS unless the dry run kept another. The others are not helpful.
            # Only the message is made of ``fit``, and it counts reasons: row order is free.
            if not dry.other_statuses:  # every potential row: NO_VICTIMS; a function of the counts
                message = no_candidate_message(len(all_rows), len(potential), len(others))
                return PostFilterResult(""), Status.unschedulable(message)
            fit = Diagnosis()
            codes = np.ones(len(potential), dtype=np.int32)
            statuses = [NO_VICTIMS]
            if dry.other_statuses:
                # Grouped by identity; equal statuses under two codes count the same in the message.
                code_of = {id(NO_VICTIMS): 1}
                at = np.zeros(int(potential.max()) + 1, dtype=np.intp)
                at[potential] = np.arange(len(potential))
                for row, st in dry.other_statuses.items():
                    code = code_of.get(id(st))
                    if code is None:
                        statuses.append(st)
                        code = code_of[id(st)] = len(statuses)
                    codes[at[row]] = code
            fit.node_to_status.add(potential, codes, statuses)
            fit.node_to_status.add_all(others, NOT_HELPFUL)
            return PostFilterResult(""), Status.unschedulable(fit_error_message(len(all_rows), fit))

        best = self.select_candidate(dry.candidates)
        if best is None or not best.node_name:
            return None, Status.unschedulable("no candidate node for preemption")
        self.handle.preempt(pod, best.node_name, best.victims)
        return PostFilterResult(best.node_name), Status(
            Code.SUCCESS,
            (f"found a potential placement for pod on node {best.node_name}, preempting {len(best.victims)} victims",),
        )

    def dry_run_preemption(
        self, state: CycleState, pod: PodInfo, potential_rows: Sequence[int],
        pdbs: Sequence[PodDisruptionBudget], offset: int, num_candidates: int,
    ) -> DryRunResult:
        """DryRunPreemption, node by node from ``offset``: non-violating candidates first, then
        violating ones, each list holding at most ``num_candidates``; stops once there is a
        non-violating candidate and ``num_candidates`` in all."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        out = DryRunResult([])
        names = self.handle.table.names
        for row, outcome in self._outcomes(state, pod, potential_rows, pdbs, offset, num_candidates,
                                           lambda: len(non_violating) + len(violating), out):
            victims, violations, st = outcome
            if st.is_success and victims:
                c = Candidate(names[row], victims, violations)
                target = non_violating if violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if st.is_success:
                st = Status.error(f'expected at least one victim pod on node "{names[row]}"')
            if st.is_error:
                out.errors.append(st.message)
            out.other_statuses[row] = st
        out.candidates = non_violating + violating
        return out

    def _outcomes(
        self, state: CycleState, pod: PodInfo, potential_rows: Sequence[int], pdbs: Sequence[PodDisruptionBudget],
        offset: int, num_candidates: int, found: Callable[[], int], out: DryRunResult,
    ) -> Iterator[tuple[int, tuple[list[PodInfo], int, Status]]]:
        """SelectVictimsOnNode of each node from ``offset`` on, in that order, for as long as the
        caller asks. In chunks of about as many nodes as candidates are still wanted
        (``select_victims_on_nodes``; the outcomes are the same as node by node), else one node
        at a time on a clone of ``state``, as upstream. A chunk where no node has a potential
        victim goes straight into ``out.no_victim_chunks`` (nothing in it can become a candidate)."""
        n = len(potential_rows)
        start = offset % n if n else 0
        listed = potential_rows if isinstance(potential_rows, list) else np.asarray(potential_rows, np.intp).tolist()
        order: list[int] = listed[start:] + listed[:start]  # np.roll(potential_rows, -offset)
        i = 0
        #: Doubled after each chunk with no potential victim (on a cluster where no pod has a lower
        #: priority, every chunk): the same outcomes in fewer calls; a chunk's outcomes never depend
        #: on the nodes beside it.
        grow = 1
        while i < n:
            size = max(num_candidates - found(), _MIN_CHUNK) * grow
            rows = order[i:i + size]
            batch = self.iface.select_victims_on_nodes(state, pod, rows, pdbs)
            if batch is None:
                break
            i += len(rows)
            if batch.count(NO_VICTIMS_OUTCOME) == len(batch):  # list.count: identity first, in C
                out.no_victim_chunks.append(rows)
                grow *= 2
                continue
            yield from zip(rows, batch, strict=True)
        for row in order[i:]:
            yield row, self.iface.select_victims_on_node(state.clone(), pod, row, pdbs)

    def select_candidate(self, candidates: Sequence[Candidate]) -> Candidate | None:
        """SelectCandidate."""
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        name = pick_one_node_for_preemption(candidates, self.iface.priority)
        for c in candidates:
            if c.node_name == name:
                return c
        return candidates[0]


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one error as is, several as ``[e1, e2]``."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


__all__ = [
    "NOT_HELPFUL_MSG",
    "NO_VICTIMS",
    "NO_VICTIMS_MSG",
    "NO_VICTIMS_OUTCOME",
    "Candidate",
    "DryRunResult",
    "Evaluator",
    "PodDisruptionBudget",
    "PreemptionInterface",
    "VictimPolicy",
    "earliest_start_of_highest_priority",
    "eviction_groups",
    "filter_victims_with_pdb_violation",
    "more_important_pod",
    "pick_one_node_for_preemption",
    "pod_start_time",
    "pod_terminating_by_preemption",
    "select_victims_on_node",
    "sort_by_importance",
    "victim_policy",
]
