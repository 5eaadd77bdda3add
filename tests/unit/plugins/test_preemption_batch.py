"""Preemption's batched dry run (framework/preemption_batch.py) against the node-by-node search it
replaces when the nodes are independent: the same victims, PDB violation counts and statuses on
every node of random clusters (priorities, start times, PDBs, host ports, nominated pods), the
table and its pod observers exactly as before, and the fall-back when a Filter reads other nodes.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.preemption_batch import nodes_independent, select_victims_on_nodes
from kubesched.framework.runtime import Framework
from kubesched.plugins.defaultpreemption import DefaultPreemption
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

from .test_default_preemption import mk_node, mk_pdb, mk_pod, setup


def _cluster(seed: int) -> tuple[Any, Framework, DefaultPreemption, PodInfo]:
    rng = random.Random(seed)
    nodes = [mk_node(f"n{i}", {"cpu": f"{rng.choice([500, 1000, 2000])}m", "memory": "4000",
                               "pods": rng.choice([3, 8, 32])}) for i in range(12)]
    pods = []
    for i in range(40):
        raw = mk_pod(f"p{i}", f"n{rng.randrange(12)}", rng.choice([-5, 0, 0, 10, 50, 200]),
                     {"cpu": f"{rng.choice([100, 200, 300, 400])}m", "memory": "100"}, start=rng.randrange(60),
                     labels={"app": rng.choice(["a", "b", "c"])})
        if rng.random() < 0.2:
            raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        pods.append(raw)
    pdbs = [mk_pdb("pa", {"app": "a"}, rng.randrange(3)), mk_pdb("pb", {"app": "b"}, rng.randrange(2))]
    sched, _, fwk, plugin = setup(nodes, pods, pdbs)
    for i in range(rng.randrange(4)):  # pods nominated to some nodes (the two-pass filters)
        nominated = PodInfo.from_raw(mk_pod(f"nom{i}", priority=rng.choice([0, 100, 300]),
                                            res={"cpu": f"{rng.choice([100, 300])}m", "memory": "100"}))
        sched.queue.nominator.add(nominated, f"n{rng.randrange(12)}")
    preemptor = mk_pod("preemptor", priority=100, res={"cpu": f"{rng.choice([300, 600, 900])}m", "memory": "200"})
    if rng.random() < 0.3:
        preemptor["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return sched, fwk, plugin, PodInfo.from_raw(preemptor)


def _fingerprint(table: NodeTable) -> tuple[Any, ...]:
    rows = table.alive_rows()
    return (table.requested[rows].tolist(), table.available[rows].tolist(), table.nonzero_requested[rows].tolist(),
            [dict(table.used_ports[r]) for r in rows.tolist()], [sorted(table.pods[r]) for r in rows.tolist()])


@pytest.mark.parametrize("seed", range(40))
def test_batched_dry_run_equals_node_by_node(seed: int) -> None:
    _, fwk, plugin, preemptor = _cluster(seed)
    table = fwk.handle.table
    state = CycleState()
    fwk.run_pre_filter(state, preemptor)
    rows = table.alive_rows().tolist()
    if preemptor.host_ports:  # NodePorts runs and does not declare itself node-local: node by node
        assert not nodes_independent(fwk, state, preemptor)
        return
    assert nodes_independent(fwk, state, preemptor)
    seen: list[tuple[int, Any]] = []
    table.add_pod_observer(lambda row, pod, sign: seen.append((row, sign)))
    before = _fingerprint(table)
    pdbs = plugin.pdbs()
    batched = select_victims_on_nodes(fwk, table, state, preemptor, rows, pdbs, plugin.priority)
    assert batched is not None
    assert _fingerprint(table) == before
    assert seen == []  # observers never saw the round trips
    for row, (victims, violations, st) in zip(rows, batched, strict=True):
        one_by_one = plugin.select_victims_on_node(state.clone(), preemptor, row, pdbs)
        assert ([v.name for v in victims], violations, st) == (
            [v.name for v in one_by_one[0]], one_by_one[1], one_by_one[2]), table.names[row]
    assert _fingerprint(table) == before


@pytest.mark.parametrize("seed", range(10))
def test_evaluator_candidates_equal_with_and_without_batching(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of nodes, the stop rule and the statuses of the nodes tried: as node by node."""
    _, fwk, plugin, preemptor = _cluster(seed)
    rows = fwk.handle.table.alive_rows().tolist()

    def run() -> tuple[Any, ...]:
        state = CycleState()
        fwk.run_pre_filter(state, preemptor)
        out = plugin.evaluator.dry_run_preemption(state, preemptor, rows, plugin.pdbs(), seed % len(rows), 3)
        return ([(c.node_name, [v.name for v in c.victims], c.num_pdb_violations) for c in out.candidates],
                sorted((r, s.code, s.reasons) for r, s in out.node_statuses.items()), out.errors)

    batched = run()
    monkeypatch.setattr(DefaultPreemption, "select_victims_on_nodes", lambda *a, **k: None)
    assert run() == batched


def test_a_filter_reading_other_nodes_falls_back_to_node_by_node() -> None:
    """A preemptor with required pod anti-affinity: InterPodAffinity runs, with PreFilter state
    its extensions update per node; the batch declines."""
    _, fwk, plugin, _ = _cluster(0)
    raw = mk_pod("anti", priority=100, res={"cpu": "300m", "memory": "100"}, labels={"app": "x"})
    raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    preemptor = PodInfo.from_raw(raw)
    state = CycleState()
    fwk.run_pre_filter(state, preemptor)
    assert not nodes_independent(fwk, state, preemptor)
    rows = fwk.handle.table.alive_rows().tolist()
    assert plugin.select_victims_on_nodes(state, preemptor, rows, plugin.pdbs()) is None


def test_bulk_table_ops_equal_one_by_one() -> None:
    sched, fwk, _, _ = _cluster(3)
    table = fwk.handle.table
    before = _fingerprint(table)
    pods = [p for r in table.alive_rows().tolist() for p in table.pods[r].values()]
    gone = table.remove_pods([p.uid for p in pods])
    assert [p.uid for p in gone if p is not None] == [p.uid for p in pods]
    assert int(np.asarray(table.requested[table.alive_rows()]).sum()) == 0
    table.add_pods(pods)
    assert _fingerprint(table) == before
    del sched
