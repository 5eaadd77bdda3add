"""Preemption's dry run over many candidate nodes at once, when the nodes cannot affect each other.

Upstream's ``SelectVictimsOnNode`` (default_preemption.go) judges each candidate node on its own
copy of the NodeInfo and a clone of the CycleState. kubesched's sequential port
(:func:`kubesched.framework.preemption.select_victims_on_node`) takes the victims off the node
table row by row and runs every Filter on that one row, each step a Python call per plugin:
about 16 table operations and 5 one-row Filter runs per node, i.e. tens of milliseconds per
preemptor at 100 candidate nodes.

When no Filter that runs for the preemptor reads pods of *other* nodes (every non-skipped Filter
plugin is ``filter_node_local`` or has a ``filter_signature``) and no non-skipped PreFilter plugin
keeps state that ``PreFilterExtensions`` would update (PodTopologySpread, InterPodAffinity,
VolumeRestrictions skip for a pod without spread constraints, affinity or such volumes), a node's
verdict is the same whether or not the other candidates' victims are off the table too. Then the
steps run in lockstep over all the nodes of a chunk: every lower-priority pod off every node, one
batch Filter; then round k of the reprieve re-adds each node's k-th most important victim and one
batch Filter decides, for all nodes at once, which of them stay victims. The victims, PDB
violation counts and statuses are exactly those of the sequential search, node for node (the
unit tests hold the two against each other); nominated pods still get their two passes
(``Framework.run_filters``). Anything else — eviction groups (``Plugin.eviction_group``), a
Filter error, a plugin that is not node-local — returns None and the caller judges the nodes one
by one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubesched.framework import preemption as _p
from kubesched.framework import preemption_order as order
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.interfaces import Plugin
from kubesched.framework.runtime import Framework
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: (victims most important first, PDB violations, status) per node, as select_victims_on_node.
Outcome = tuple[list[PodInfo], int, Status]


def nodes_independent(fwk: Framework, state: CycleState, pod: PodInfo) -> bool:
    """Whether the dry run of one node cannot change the verdict of another (see the module doc)."""
    if not fwk.filters_node_local(state, pod):
        return False
    return not any(type(p).eviction_group is not Plugin.eviction_group for p in fwk.plugins.values())


def select_victims_on_nodes(
    fwk: Framework, table: NodeTable, state: CycleState, pod: PodInfo, rows: Sequence[int],
    pdbs: Sequence[order.PodDisruptionBudget], priority: order.PriorityFn,
) -> list[Outcome] | None:
    """SelectVictimsOnNode for each of ``rows`` (distinct), in lockstep; None when the nodes are
    not independent for this pod or a Filter errs (the caller then judges them one by one). The
    table is restored before returning. ``state`` is only read (no PreFilterExtensions run)."""
    if not nodes_independent(fwk, state, pod):
        return None
    with table.pod_observers_paused():  # every pod goes back; node-local Filters read no index
        return _lockstep(fwk, table, state, pod, rows, pdbs, priority)


def _lockstep(
    fwk: Framework, table: NodeTable, state: CycleState, pod: PodInfo, rows: Sequence[int],
    pdbs: Sequence[order.PodDisruptionBudget], priority: order.PriorityFn,
) -> list[Outcome] | None:
    prio = priority(pod)
    outcomes: list[Outcome | None] = [None] * len(rows)
    off: dict[str, PodInfo] = {}  # pods taken off the table, put back in ``finally``
    try:
        at: list[int] = []  # indexes into rows of the nodes with potential victims
        potentials: list[list[PodInfo]] = []
        for i, row in enumerate(rows):
            potential = [p for p in table.pods[row].values() if priority(p) < prio]
            if not potential:
                outcomes[i] = _p.NO_VICTIMS_OUTCOME
                continue
            at.append(i)
            potentials.append(potential)
        for v in table.remove_pods([v.uid for potential in potentials for v in potential]):
            if v is not None:
                off[v.uid] = v
        if not at:
            return [o for o in outcomes if o is not None]
        # Not fitting with every lower-priority pod gone: that node cannot help.
        fitting, rejected = _judge(fwk, state, pod, np.array([rows[i] for i in at], dtype=np.intp))
        if rejected is None:
            return None
        # Per fitting node: the reprieve order (PDB-violating victims first), its victims so far.
        orders: list[list[tuple[PodInfo, bool]]] = []
        victims: list[list[PodInfo]] = []
        violations: list[int] = []
        mixed: list[bool] = []
        live: list[int] = []
        for i, potential in zip(at, potentials, strict=True):
            row = rows[i]
            if row not in fitting:
                outcomes[i] = ([], 0, rejected[row])
                continue
            violating, non_violating = order.filter_victims_with_pdb_violation(
                order.sort_by_importance(potential, priority), pdbs)
            live.append(i)
            orders.append([(v, True) for v, _ in violating] + [(v, False) for v in non_violating])
            victims.append([])
            violations.append(0)
            mixed.append(bool(violating) and bool(non_violating))
        step = 0
        while True:
            trying = [(j, orders[j][step]) for j in range(len(live)) if step < len(orders[j])]
            if not trying:
                break
            back = [v for _, (v, _violates) in trying]
            table.add_pods(back)
            for v in back:
                del off[v.uid]
            fitting, failed = _judge(fwk, state, pod, np.array([rows[live[j]] for j, _ in trying], dtype=np.intp))
            if failed is None:
                return None
            again: list[PodInfo] = []
            for j, (v, violates) in trying:
                if rows[live[j]] in fitting:
                    continue  # reprieved
                again.append(v)
                victims[j].append(v)
                if violates:
                    violations[j] += 1
            table.remove_pods([v.uid for v in again])
            off.update((v.uid, v) for v in again)
            step += 1
        for j, i in enumerate(live):
            chosen = order.sort_by_importance(victims[j], priority) if mixed[j] else victims[j]
            outcomes[i] = (chosen, violations[j], SUCCESS)
        done = [o for o in outcomes if o is not None]
        assert len(done) == len(rows)
        return done
    finally:
        table.add_pods(off.values())


def _judge(
    fwk: Framework, state: CycleState, pod: PodInfo, rows: Rows
) -> tuple[set[int], dict[int, Status] | None]:
    """Every Filter over ``rows`` (nominated pods' two passes included): the rows that pass and
    the rejection of each other row, or (…, None) on an Error."""
    diagnosis = Diagnosis()
    passing, st = fwk.run_filters(state, pod, rows, diagnosis)
    if not st.is_success:
        return set(), None
    fitting = set(passing.tolist())
    rejected: dict[int, Status] = {}
    for row in rows.tolist():
        if row not in fitting:
            found = diagnosis.node_to_status.get(row)
            rejected[row] = found if found is not None else Status.unschedulable()
    return fitting, rejected
