"""DefaultPreemption: mirrors pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go
(Kubernetes v1.37.1: TestPostFilter, TestDryRunPreemption / TestSelectVictimsOnNode, TestSelectBestCandidate,
TestPodEligibleToPreemptOthers) and preemption/util_test.go (FilterVictimsWithPDBViolation), plus
kubesched's own: args validation, nominated pods in filters (RunFilterPluginsWithNominatedPods),
and a simulated preemption end to end (victims evicted after their grace period, preemptors bound,
deterministic per seed).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Preemptor
from kubesched.framework.preemption_order import (
    Candidate,
    PodDisruptionBudget,
    filter_victims_with_pdb_violation,
    pick_one_node_for_preemption,
)
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PostFilterResult
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from kubesched.plugins.defaultpreemption.plugin import parse_pdb
from kubesched.plugins.helpers.label_selector import selector_from_set
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.report.json_doc import result_to_json
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": 1}
NODE_RES = {"cpu": "200m", "memory": "400"}
VIOLATING = {"app": "violating"}
NON_VIOLATING = {"app": "non-violating"}


def mk_node(name: str, res: dict[str, Any]) -> dict[str, Any]:
    """st.MakeNode().Capacity(res): 32 pods unless given, no other resource unless given."""
    return node(name, cpu=str(res.get("cpu", "0")), memory=str(res.get("memory", "0")), pods=res.get("pods", 32))


def mk_pod(name: str, node_name: str = "", priority: int | None = None, res: dict[str, str] | None = None,
           start: int | None = None, **kw: Any) -> dict[str, Any]:
    raw = pod(name, cpu=(res or {}).get("cpu"), memory=(res or {}).get("memory"), node_name=node_name,
              priority=priority, **kw)
    raw["metadata"]["uid"] = name
    if start is not None:
        raw["status"] = {"startTime": f"1970-01-01T00:00:{start:02d}Z"}
    return raw


def mk_pdb(name: str, labels: dict[str, str], allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def setup(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pdbs: list[dict[str, Any]] | None = None,
          objects: dict[str, dict[str, dict[str, Any]]] | None = None,
          ) -> tuple[Scheduler, SimulatedCluster, Framework, DefaultPreemption]:
    registry = builtin_registry()
    config = load_config(None, registry)
    cluster = SimulatedCluster()
    for raw in pdbs or []:
        cluster.add_object("PodDisruptionBudget", f"default/{raw['metadata']['name']}", raw)
    for kind, objs in (objects or {}).items():
        for key, raw in objs.items():
            cluster.add_object(kind, key, raw)
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, objects=cluster.kind, seed=0,
                            eager_binding=True)
    cluster.attach(sched)
    for n in nodes:
        cluster.add_node(n)
    for p in pods:
        cluster.add_pod(PodInfo.from_raw(p))
    fwk = next(iter(sched.frameworks.values()))
    plugin = fwk.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    return sched, cluster, fwk, plugin


def run_post_filter(
    fwk: Framework, plugin: DefaultPreemption, preemptor: dict[str, Any], statuses: dict[str, Code]
) -> tuple[PostFilterResult | None, Status]:
    p = PodInfo.from_raw(preemptor)
    state = CycleState()
    fwk.run_pre_filter(state, p)
    diagnosis = Diagnosis()
    table = fwk.handle.table
    for name, code in statuses.items():
        row = table.row_of(name)
        assert row is not None
        diagnosis.node_to_status.add_all(np.array([row], dtype=np.intp), Status(code))
    return plugin.post_filter(state, p, diagnosis)


U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# -- TestPostFilter --------------------------------------------------------------------------------
POST_FILTER_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                              list[dict[str, Any]], dict[str, Code], str | None, Code, str]] = [
    (
        "pod with higher priority can be made schedulable",
        mk_pod("p", priority=HIGH), [mk_pod("p1", "node1")], [], [mk_node("node1", ONE_POD)],
        {"node1": U}, "node1", Code.SUCCESS,
        "preemption: found a potential placement for pod on node node1, preempting 1 victims",
    ),
    (
        "pod with tied priority is still unschedulable",
        mk_pod("p"), [mk_pod("p1", "node1")], [], [mk_node("node1", ONE_POD)],
        {"node1": U}, "", U, "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    (
        "preemption should respect filteredNodesStatuses",
        mk_pod("p", priority=HIGH), [mk_pod("p1", "node1")], [], [mk_node("node1", ONE_POD)],
        {"node1": UU}, "", U, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    (
        "preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable",
        mk_pod("p", priority=HIGH), [mk_pod("p1", "node1")], [], [mk_node("node1", ONE_POD)],
        {}, "", U, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    (
        "pod can be made schedulable on one node",
        mk_pod("p", priority=MID),
        [mk_pod("p1", "node1", HIGH), mk_pod("p2", "node2", LOW)], [],
        [mk_node("node1", ONE_POD), mk_node("node2", ONE_POD)],
        {"node1": U, "node2": U}, "node2", Code.SUCCESS,
        "preemption: found a potential placement for pod on node node2, preempting 1 victims",
    ),
    (
        "pod can be made schedulable on minHighestPriority node",
        mk_pod("p", priority=VERY_HIGH),
        [mk_pod("p1", "node1", HIGH, labels=NON_VIOLATING), mk_pod("p2", "node1", LOW, labels=VIOLATING),
         mk_pod("p3", "node2", MID, labels=VIOLATING)],
        [mk_pdb("violating-pdb", VIOLATING, 0), mk_pdb("non-violating-pdb", NON_VIOLATING, 2**31 - 1)],
        [mk_node("node1", ONE_POD), mk_node("node2", ONE_POD)],
        {"node1": U, "node2": U}, "node2", Code.SUCCESS,
        "preemption: found a potential placement for pod on node node2, preempting 1 victims",
    ),
    (
        "no candidate nodes found, no enough resource after removing low priority pods",
        mk_pod("p", priority=HIGH, res=LARGE), [mk_pod("p1", "node1"), mk_pod("p2", "node2")], [],
        [mk_node("node1", NODE_RES), mk_node("node2", NODE_RES)],
        {"node1": U, "node2": U}, "", U, "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    (
        "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
        mk_pod("p", priority=HIGH, res=LARGE),
        [mk_pod("p1", "node1", HIGH), mk_pod("p2", "node2"), mk_pod("p3", "node3", HIGH)], [],
        [mk_node("node1", ONE_POD), mk_node("node2", NODE_RES), mk_node("node3", ONE_POD)],
        {"node1": U, "node2": U, "node3": U}, "", U,
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
    ),
    (
        "no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes don't have "
        "enough CPU resource",
        mk_pod("p", priority=HIGH, res=LARGE), [mk_pod("p1", "node1"), mk_pod("p2", "node2")], [],
        [mk_node(f"node{i}", NODE_RES) for i in range(1, 5)],
        {"node1": U, "node2": U, "node4": UU}, "", U,
        "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
    ),
]


@pytest.mark.parametrize(
    ("name", "preemptor", "pods", "pdbs", "nodes", "statuses", "want_node", "want_code", "want_msg"),
    POST_FILTER_CASES, ids=[c[0] for c in POST_FILTER_CASES],
)
def test_post_filter(name: str, preemptor: dict[str, Any], pods: list[dict[str, Any]], pdbs: list[dict[str, Any]],
                     nodes: list[dict[str, Any]], statuses: dict[str, Code], want_node: str | None, want_code: Code,
                     want_msg: str) -> None:
    _, _, fwk, plugin = setup(nodes, pods, pdbs)
    result, st = run_post_filter(fwk, plugin, preemptor, statuses)
    assert (st.code, st.message) == (want_code, want_msg)
    assert (None if result is None else result.nominated_node_name) == want_node


def test_preemption_policy_never_is_not_eligible() -> None:
    _, _, fwk, plugin = setup([mk_node("node1", ONE_POD)], [mk_pod("p1", "node1")])
    result, st = run_post_filter(fwk, plugin, mk_pod("p", priority=HIGH, preemptionPolicy="Never"), {"node1": U})
    assert result is None
    assert (st.code, st.message) == (U, "preemption: not eligible due to preemptionPolicy=Never.")


# -- TestPodEligibleToPreemptOthers ----------------------------------------------------------------
def test_pod_with_terminating_victim_on_nominated_node_is_not_eligible() -> None:
    victim = mk_pod("p1", "node1", LOW)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    victim["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                         "reason": "PreemptionByScheduler"}]}
    sched, _, _, plugin = setup([mk_node("node1", ONE_POD)], [victim])
    preemptor = PodInfo.from_raw(mk_pod("p", priority=HIGH))
    sched.queue.nominator.add(preemptor, "node1")
    assert plugin.pod_eligible_to_preempt_others(preemptor, Status(U)) == (
        False, "not eligible due to a terminating pod on the nominated node.")
    # The nominated node turned UnschedulableAndUnresolvable: preempting again is allowed.
    assert plugin.pod_eligible_to_preempt_others(preemptor, Status(UU)) == (True, "")
    # A terminating pod of equal priority does not block.
    equal = PodInfo.from_raw(mk_pod("q", priority=LOW))
    sched.queue.nominator.add(equal, "node1")
    assert plugin.pod_eligible_to_preempt_others(equal, Status(U)) == (True, "")


def test_terminating_without_disruption_target_does_not_block() -> None:
    victim = mk_pod("p1", "node1", LOW)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    sched, _, _, plugin = setup([mk_node("node1", ONE_POD)], [victim])
    preemptor = PodInfo.from_raw(mk_pod("p", priority=HIGH))
    sched.queue.nominator.add(preemptor, "node1")
    assert plugin.pod_eligible_to_preempt_others(preemptor, Status(U)) == (True, "")


# -- TestSelectVictimsOnNode / TestDryRunPreemption ------------------------------------------------
def dry_run(fwk: Framework, plugin: DefaultPreemption, preemptor: dict[str, Any]) -> list[Candidate]:
    p = PodInfo.from_raw(preemptor)
    state = CycleState()
    fwk.run_pre_filter(state, p)
    rows = fwk.handle.table.alive_rows().tolist()
    out = plugin.evaluator.dry_run_preemption(state, p, rows, plugin.pdbs(), 0, len(rows))
    return out.candidates


def victims_of(cands: list[Candidate]) -> dict[str, tuple[list[str], int]]:
    return {c.node_name: ([v.name for v in c.victims], c.num_pdb_violations) for c in cands}


def test_dry_run_a_pod_that_does_not_fit_on_any_node() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1", "node1", MID, LARGE), mk_pod("p2", "node2", MID, LARGE)],
    )
    assert dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res={"cpu": "600m", "memory": "600"})) == []


def test_dry_run_a_pod_that_fits_with_no_preemption_victims() -> None:
    """'a pod that fits with no preemption' → 'expected at least one victim' errors per node."""
    _, _, fwk, plugin = setup([mk_node("node1", VERY_LARGE)], [mk_pod("p1", "node1", HIGH, SMALL)])
    p = PodInfo.from_raw(mk_pod("p", priority=HIGH, res=SMALL))
    state = CycleState()
    fwk.run_pre_filter(state, p)
    out = plugin.evaluator.dry_run_preemption(state, p, [0], [], 0, 1)
    assert out.candidates == []
    assert out.node_statuses[0].message == NO_VICTIMS


NO_VICTIMS = "No preemption victims found for incoming pod"


def test_dry_run_a_pod_that_fits_on_both_nodes_when_lower_priority_pods_are_preempted() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1", "node1", MID, LARGE), mk_pod("p2", "node2", MID, LARGE)],
    )
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {
        "node1": (["p1"], 0), "node2": (["p2"], 0)}


def test_dry_run_a_pod_that_would_fit_on_the_nodes_but_other_pods_running_are_higher_priority() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1", "node1", MID, LARGE), mk_pod("p2", "node2", MID, VERY_LARGE)],
    )
    assert dry_run(fwk, plugin, mk_pod("p", priority=LOW, res=LARGE)) == []


def test_dry_run_medium_priority_pods_are_preempted_and_lower_ones_reprieved() -> None:
    """'medium priority pod is preempted, but lower priority one stays as it is small'."""
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1.1", "node1", LOW, SMALL), mk_pod("p1.2", "node1", MID, LARGE),
         mk_pod("p2", "node2", HIGH, VERY_LARGE)],
    )
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {"node1": (["p1.2"], 0)}


def test_dry_run_mixed_priority_pods_are_preempted() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1.1", "node1", MID, SMALL), mk_pod("p1.2", "node1", LOW, SMALL),
         mk_pod("p1.3", "node1", MID, MEDIUM), mk_pod("p1.4", "node1", HIGH, SMALL),
         mk_pod("p2", "node2", HIGH, VERY_LARGE)],
    )
    # Upstream compares the victims as a set: {p1.2, p1.3}; here most important first.
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {
        "node1": (["p1.3", "p1.2"], 0)}


def test_dry_run_mixed_priority_pods_are_preempted_pick_later_start_time_one() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE), mk_node("node2", VERY_LARGE)],
        [mk_pod("p1.1", "node1", LOW, SMALL, start=5), mk_pod("p1.2", "node1", LOW, SMALL, start=4),
         mk_pod("p1.3", "node1", MID, MEDIUM, start=3), mk_pod("p1.4", "node1", HIGH, SMALL, start=2),
         mk_pod("p2", "node2", HIGH, LARGE, start=1)],
    )
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {
        "node1": (["p1.3", "p1.1"], 0)}


def test_dry_run_pdb_violating_victims_are_reprieved_first() -> None:
    """SelectVictimsOnNode: PDB-violating victims are reprieved before the others, even a
    lower-priority one; evicting one anyway counts its violation."""
    pods = [mk_pod("p1", "node1", LOW, MEDIUM, labels=VIOLATING), mk_pod("p2", "node1", MID, MEDIUM)]
    _, _, fwk, plugin = setup([mk_node("node1", VERY_LARGE)], pods, [mk_pdb("pdb", VIOLATING, 0)])
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {"node1": (["p2"], 0)}
    # Without the PDB the more important p2 is reprieved instead.
    _, _, fwk, plugin = setup([mk_node("node1", VERY_LARGE)], pods)
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=LARGE))) == {"node1": (["p1"], 0)}
    # Only evicting both fits: the violation is counted.
    _, _, fwk, plugin = setup([mk_node("node1", VERY_LARGE)], pods, [mk_pdb("pdb", VIOLATING, 0)])
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=VERY_LARGE))) == {
        "node1": (["p2", "p1"], 1)}
    # A budget with a disruption left is not violated.
    _, _, fwk, plugin = setup([mk_node("node1", VERY_LARGE)], pods, [mk_pdb("pdb", VIOLATING, 1)])
    assert victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=VERY_LARGE))) == {
        "node1": (["p2", "p1"], 0)}


def test_dry_run_restores_the_node_table() -> None:
    _, _, fwk, plugin = setup(
        [mk_node("node1", VERY_LARGE)], [mk_pod("p1", "node1", MID, LARGE), mk_pod("p2", "node1", LOW, SMALL)],
    )
    table = fwk.handle.table
    before = (table.requested.copy(), set(table.pods[0]))
    assert dry_run(fwk, plugin, mk_pod("p", priority=HIGH, res=VERY_LARGE))
    assert (table.requested == before[0]).all() and set(table.pods[0]) == before[1]


def test_dry_run_pod_topology_spread_sees_the_victims_removed() -> None:
    """The dry run tells PodTopologySpread (its PreFilter state) of the removals: a pod whose
    spread constraint the victims violate fits once they are gone (TestDryRunPreemption's
    'preemption to resolve pod topology spread filter failure')."""
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"foo": ""}}}]}
    nodes = [node("node-a", cpu="4", labels={"zone": "zone1"}), node("node-b", cpu="4", labels={"zone": "zone1"}),
             node("node-x", cpu="4", labels={"zone": "zone2"})]
    pods = [mk_pod("pod-a1", "node-a", MID, labels={"foo": ""}), mk_pod("pod-a2", "node-a", LOW, labels={"foo": ""}),
            mk_pod("pod-b1", "node-b", LOW, labels={"foo": ""}), mk_pod("pod-x1", "node-x", HIGH, labels={"foo": ""}),
            mk_pod("pod-x2", "node-x", HIGH, labels={"foo": ""})]
    _, _, fwk, plugin = setup(nodes, pods)
    got = victims_of(dry_run(fwk, plugin, mk_pod("p", priority=HIGH, labels={"foo": ""}, **spread)))
    assert got == {"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}


# -- TestSelectBestCandidate / pickOneNodeForPreemption --------------------------------------------
def select_best(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], preemptor: dict[str, Any]) -> str:
    _, _, fwk, plugin = setup(nodes, pods)
    best = plugin.evaluator.select_candidate(dry_run(fwk, plugin, preemptor))
    assert best is not None
    return best.node_name


def three(res: dict[str, str] = VERY_LARGE) -> list[dict[str, Any]]:
    return [mk_node(f"node{i}", res) for i in range(1, 4)]


def test_select_best_node_with_min_highest_priority_pod_is_picked() -> None:
    pods = [mk_pod("p1.1", "node1", MID, MEDIUM, start=0), mk_pod("p1.2", "node1", MID, LARGE, start=0),
            mk_pod("p2.1", "node2", MID, MEDIUM, start=0), mk_pod("p2.2", "node2", LOW, MEDIUM, start=0),
            mk_pod("p3.1", "node3", LOW, MEDIUM, start=0), mk_pod("p3.2", "node3", LOW, MEDIUM, start=0)]
    assert select_best(three(), pods, mk_pod("p", priority=HIGH, res=VERY_LARGE)) == "node3"


def test_select_best_when_highest_priorities_are_the_same_minimum_sum_is_picked() -> None:
    pods = [mk_pod("p1.1", "node1", MID, MEDIUM, start=0), mk_pod("p1.2", "node1", MID, LARGE, start=0),
            mk_pod("p2.1", "node2", MID, LARGE, start=0), mk_pod("p2.2", "node2", LOW, MEDIUM, start=0),
            mk_pod("p3.1", "node3", MID, MEDIUM, start=0), mk_pod("p3.2", "node3", MID, MEDIUM, start=0)]
    assert select_best(three(), pods, mk_pod("p", priority=HIGH, res=VERY_LARGE)) == "node2"


def test_select_best_when_highest_priority_and_sum_are_the_same_minimum_number_of_pods_is_picked() -> None:
    pods = [mk_pod("p1.1", "node1", MID, SMALL, start=0), mk_pod("p1.2", "node1", NEG, SMALL, start=0),
            mk_pod("p1.3", "node1", MID, SMALL, start=0), mk_pod("p1.4", "node1", NEG, SMALL, start=0),
            mk_pod("p2.1", "node2", MID, LARGE, start=0), mk_pod("p2.2", "node2", NEG, MEDIUM, start=0),
            mk_pod("p3.1", "node3", MID, MEDIUM, start=0), mk_pod("p3.2", "node3", NEG, SMALL, start=0),
            mk_pod("p3.3", "node3", LOW, SMALL, start=0)]
    assert select_best(three(), pods, mk_pod("p", priority=HIGH, res=VERY_LARGE)) == "node2"


def test_select_best_same_priority_sum_and_count_latest_start_time_is_picked() -> None:
    pods = [mk_pod("p1.1", "node1", MID, MEDIUM, start=2), mk_pod("p1.2", "node1", MID, LARGE, start=3),
            mk_pod("p2.1", "node2", MID, MEDIUM, start=4), mk_pod("p2.2", "node2", MID, LARGE, start=5),
            mk_pod("p3.1", "node3", MID, MEDIUM, start=1), mk_pod("p3.2", "node3", MID, LARGE, start=6)]
    assert select_best(three(), pods, mk_pod("p", priority=HIGH, res=VERY_LARGE)) == "node2"


def _cand(name: str, prios: list[int], pdb: int = 0, starts: list[float] | None = None) -> Candidate:
    victims = []
    for i, p in enumerate(prios):
        raw = mk_pod(f"{name}-{i}", name, p)
        if starts is not None:
            raw["status"] = {"startTime": f"1970-01-01T00:00:{int(starts[i]):02d}Z"}
        victims.append(PodInfo.from_raw(raw))
    return Candidate(name, victims, pdb)


def _prio(p: PodInfo) -> int:
    return p.priority


@pytest.mark.parametrize(("cands", "want"), [
    ([_cand("a", [MID], pdb=1), _cand("b", [HIGH], pdb=0)], "b"),
    ([_cand("a", [HIGH]), _cand("b", [MID, MID, MID])], "b"),
    ([_cand("a", [MID, LOW]), _cand("b", [MID, MID])], "a"),
    ([_cand("a", [MID, NEG, NEG]), _cand("b", [MID, NEG, NEG])], "a"),
    ([_cand("a", [MID, NEG]), _cand("b", [MID, NEG, MID - MID])], "a"),
    ([_cand("a", [MID], starts=[1]), _cand("b", [MID], starts=[7])], "b"),
    ([_cand("a", [MID]), _cand("b", [MID], starts=[7])], "a"),  # not started yet: counts as now
], ids=["fewest PDB violations", "lowest highest priority", "smallest priority sum", "first on a tie",
        "fewest victims", "latest start", "unstarted is latest"])
def test_pick_one_node_for_preemption(cands: list[Candidate], want: str) -> None:
    assert pick_one_node_for_preemption(cands, _prio) == want


# -- PDBs (preemption/util_test.go FilterVictimsWithPDBViolation) -----------------------------------
def test_filter_victims_with_pdb_violation() -> None:
    pods = [PodInfo.from_raw(mk_pod(f"v{i}", "n", LOW, labels=VIOLATING)) for i in range(3)]
    other = PodInfo.from_raw(mk_pod("other", "n", LOW, labels={"app": "x"}))
    unlabelled = PodInfo.from_raw(mk_pod("bare", "n", LOW))
    pdb = PodDisruptionBudget("default", "pdb", selector_from_set(VIOLATING), 1, frozenset({"v2"}))
    violating, non = filter_victims_with_pdb_violation([*pods, other, unlabelled], [pdb])
    # v0 uses the one allowed disruption, v1 violates, v2 is already disrupted (not counted).
    assert [(p.name, n) for p, n in violating] == [("v1", 1)]
    assert [p.name for p in non] == ["v0", "v2", "other", "bare"]
    # Another namespace, an empty selector and an invalid one never match.
    elsewhere = PodDisruptionBudget("other", "x", selector_from_set(VIOLATING), 0)
    assert filter_victims_with_pdb_violation(pods, [elsewhere])[0] == []
    empty = parse_pdb({"metadata": {"name": "e"}, "spec": {"selector": {}}})
    assert filter_victims_with_pdb_violation(pods, [empty])[0] == []
    bad = parse_pdb({"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"a b": "c"}}}})
    assert bad.selector is None and filter_victims_with_pdb_violation(pods, [bad])[0] == []


# -- args -------------------------------------------------------------------------------------------
def test_args_defaults_and_validation() -> None:
    a = DefaultPreemptionArgs()
    assert (a.min_candidate_nodes_percentage, a.min_candidate_nodes_absolute) == (10, 100)
    defaulted = DefaultPreemptionArgs.model_validate({"minCandidateNodesPercentage": None})
    assert defaulted.min_candidate_nodes_percentage == 10
    pct = r"minCandidateNodesPercentage: Invalid value: 101: not in valid range \[0, 100\]"
    with pytest.raises(ValidationError, match=pct):
        DefaultPreemptionArgs.model_validate({"minCandidateNodesPercentage": 101})
    absolute = r"minCandidateNodesAbsolute: Invalid value: -1: not in valid range \[0, inf\)"
    with pytest.raises(ValidationError, match=absolute):
        DefaultPreemptionArgs.model_validate({"minCandidateNodesAbsolute": -1})
    both = (r"\[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            r"minCandidateNodesAbsolute, minCandidateNodesAbsolute")
    with pytest.raises(ValidationError, match=both):
        DefaultPreemptionArgs.model_validate({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})


@pytest.mark.parametrize(("pct", "absolute", "nodes", "want"), [
    (10, 100, 10, 10), (10, 100, 1000, 100), (40, 1, 1000, 400), (10, 0, 5, 0), (0, 5, 3, 3),
])
def test_calculate_num_candidates(pct: int, absolute: int, nodes: int, want: int) -> None:
    _, _, _, plugin = setup([mk_node("n", ONE_POD)], [])
    plugin.args = DefaultPreemptionArgs(min_candidate_nodes_percentage=pct, min_candidate_nodes_absolute=absolute)
    assert plugin.calculate_num_candidates(nodes) == want


def test_priority_is_spec_priority_as_upstream_pod_priority() -> None:
    # Classes are resolved at admission (kubesched.api.admission), never by the plugin.
    _, _, _, plugin = setup([mk_node("n", ONE_POD)], [])
    assert plugin.priority(PodInfo.from_raw(mk_pod("a", priority=3, priorityClassName="high"))) == 3
    assert plugin.priority(PodInfo.from_raw(mk_pod("b"))) == 0


def test_object_kinds_declared() -> None:
    kinds = {(k.kind, k.group, k.version, k.resource, k.namespaced) for k in DefaultPreemption.object_kinds}
    assert kinds == {("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True)}


# -- the scheduling cycle: nomination, two-pass filters ----------------------------------------------
def test_scheduler_nominates_evicts_and_reports() -> None:
    sched, cluster, _, _ = setup([mk_node("node1", {"cpu": "1", "memory": "1Gi"})],
                                 [mk_pod("low", "node1", LOW, {"cpu": "1"})])
    seen: list[tuple[str, str, list[str]]] = []
    failures: list[Any] = []

    class Observer:
        def scheduled(self, *a: Any) -> None: ...
        def bound(self, *a: Any) -> None: ...
        def failed(self, pod: PodInfo, profile: str, failure: Any) -> None:
            failures.append(failure)
        def preempted(self, preemptor: PodInfo, profile: str, node_name: str, victims: Any, cleared: Any,
                      by: Any, in_memory: Any = ()) -> None:
            seen.append((preemptor.name, node_name, [v.name for v in victims]))

    sched.observer = Observer()  # type: ignore[assignment]
    cluster.add_pod(PodInfo.from_raw(mk_pod("high", priority=HIGH, res={"cpu": "1"})))
    assert sched.schedule_one()
    assert seen == [("high", "node1", ["low"])]
    assert failures[0].nominated_node_name == "node1"
    assert failures[0].message == ("0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential "
                                   "placement for pod on node node1, preempting 1 victims")
    assert sched.queue.nominator.node_of("high") == "node1"
    assert cluster.pods["low"].deleting  # marked, deleted after its grace period
    assert cluster.next_eviction() == 30.0
    cluster.advance(30.0)
    assert "low" not in cluster.pods
    sched.tick(40.0)
    assert sched.schedule_one()
    assert cluster.pods["high"].node_name == "node1"
    assert sched.queue.nominator.node_of("high") is None


def test_nominated_pods_count_in_filters_for_lower_priority_pods() -> None:
    """RunFilterPluginsWithNominatedPods: a node with a nominated pod of equal or higher priority
    is judged with that pod on it (then without); lower-priority nominations are ignored."""
    sched, _, fwk, _ = setup([mk_node("node1", {"cpu": "1", "memory": "1Gi"}),
                              mk_node("node2", {"cpu": "1", "memory": "1Gi"})], [])
    nominated = PodInfo.from_raw(mk_pod("nom", priority=MID, res={"cpu": "1"}))
    sched.queue.nominator.add(nominated, "node1")
    table = fwk.handle.table

    def passing(p: dict[str, Any]) -> list[str]:
        pi = PodInfo.from_raw(p)
        state = CycleState()
        fwk.run_pre_filter(state, pi)
        diagnosis = Diagnosis()
        rows, st = fwk.run_filters(state, pi, table.alive_rows(), diagnosis)
        assert st.is_success
        return table.node_names(rows)

    assert passing(mk_pod("low", priority=LOW, res={"cpu": "1"})) == ["node2"]
    assert passing(mk_pod("equal", priority=MID, res={"cpu": "1"})) == ["node2"]
    assert passing(mk_pod("higher", priority=HIGH, res={"cpu": "1"})) == ["node1", "node2"]
    assert passing(mk_pod("small", priority=LOW, res={"cpu": "0"})) == ["node1", "node2"]
    # The nominated pod itself is not counted against itself, and the table is left as it was.
    assert passing(mk_pod("nom", priority=MID, res={"cpu": "1"}) | {"metadata": {
        "name": "nom", "namespace": "default", "uid": "nom"}}) == ["node1", "node2"]
    assert table.pod("nom") is None and int(table.requested[table.row_of("node1"), 0]) == 0
    sched.queue.delete("nom")
    assert not fwk.handle.nominated


def test_nomination_from_status_and_cleared_on_bind() -> None:
    sched, cluster, _, _ = setup([mk_node("node1", {"cpu": "1", "memory": "1Gi"})], [])
    raw = mk_pod("p", priority=HIGH, res={"cpu": "1"})
    raw["status"] = {"nominatedNodeName": "node1"}
    cluster.add_pod(PodInfo.from_raw(raw))
    assert sched.queue.nominator.node_of("p") == "node1"
    assert sched.schedule_one()
    asyncio.run(sched.drain())
    assert cluster.pods["p"].node_name == "node1"
    assert sched.queue.nominator.node_of("p") is None


# -- the simulator ------------------------------------------------------------------------------------
def preemption_cluster() -> ClusterInput:
    nodes = [node(f"n{i}", cpu="2", memory="4Gi") for i in range(3)]
    pods = []
    for i in range(6):
        raw = mk_pod(f"low-{i}", f"n{i % 3}", LOW, {"cpu": "1"})
        raw["spec"]["terminationGracePeriodSeconds"] = 10 + i
        pods.append(raw)
    for i in range(3):
        pods.append(mk_pod(f"high-{i}", "", HIGH, {"cpu": "1"}))
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source="test")


async def simulate(seed: int) -> dict[str, Any]:
    registry = builtin_registry()
    cfg = load_config(None, registry)
    result = await Simulation(cfg, registry, preemption_cluster(), seed=seed).run()
    return result_to_json(result)


def test_simulation_preempts_low_priority_pods_and_binds_the_preemptors() -> None:
    data = asyncio.run(simulate(1))
    placements = {p["pod"]: p for p in data["placements"]}
    for i in range(3):
        assert placements[f"default/high-{i}"]["status"] == "Scheduled"
    preempted = [k for k, p in placements.items() if p["status"] == "Preempted"]
    assert len(preempted) == 3
    assert data["summary"]["preemptions"] == 3 and data["summary"]["preempted"] == 3
    assert len(data["preemptions"]) == 3
    first = data["preemptions"][0]
    assert first["preemptor"] == "default/high-0" and len(first["victims"]) == 1
    assert first["reason"].startswith("0/3 nodes are available: 3 Insufficient cpu. preemption: found a potential "
                                      f"placement for pod on node {first['node']}, preempting 1 victims")
    # Each preemptor binds after its victim's grace period (10-15 s of virtual time).
    assert 10 <= data["summary"]["virtualSeconds"] <= 16
    # Every node still runs at most 2 pods of 1 cpu.
    assert all(n["podsAfter"] == 2 for n in data["nodes"])


def test_simulation_with_preemption_is_deterministic_per_seed() -> None:
    def outcome(d: dict[str, Any]) -> Any:
        return ([(p["pod"], p["status"], p["node"]) for p in d["placements"]],
                [(p["preemptor"], p["node"], p["victims"]) for p in d["preemptions"]])

    assert outcome(asyncio.run(simulate(3))) == outcome(asyncio.run(simulate(3)))


def test_math_inf_start_time_for_unstarted() -> None:
    from kubesched.framework.preemption_order import pod_start_time

    assert pod_start_time(PodInfo.from_raw(mk_pod("x"))) == math.inf


def one_low_pod_and_a_high_preemptor(cluster: SimulatedCluster) -> Scheduler:
    """node1 (1 CPU) full with `low` (priority LOW); `high` (HIGH, 1 CPU) pending: it must preempt."""
    registry = builtin_registry()
    sched = Scheduler.build(load_config(None, registry).profiles, registry, FakeClock(), client=cluster, seed=0,
                            eager_binding=True)
    cluster.attach(sched)
    cluster.add_node(mk_node("node1", {"cpu": "1", "memory": "1Gi"}))
    cluster.add_pod(PodInfo.from_raw(mk_pod("low", "node1", LOW, {"cpu": "1"})))
    cluster.add_pod(PodInfo.from_raw(mk_pod("high", priority=HIGH, res={"cpu": "1"})))
    return sched


async def test_a_preemptor_waits_at_pre_enqueue_until_its_preemption_is_done() -> None:
    """SchedulerAsyncPreemption (upstream default since v1.33): while the evictions are being sent
    and the last victim is still there and not terminating, DefaultPreemption's PreEnqueue holds
    the preemptor back, so a retry cannot preempt the same victims again (in a live cluster pod
    updates would otherwise bring it back at once)."""
    release = asyncio.Event()
    evictions: list[str] = []

    class SlowEvictions(SimulatedCluster):
        async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None:
            evictions.append(pod.name)
            await release.wait()
            await super().evict(pod, preemptor)

    cluster = SlowEvictions()
    sched = one_low_pod_and_a_high_preemptor(cluster)
    assert sched.schedule_one()
    await asyncio.sleep(0)
    assert evictions == ["low"]
    sched.queue.activate(["high"])  # what any pod update would do in a live cluster
    assert not sched.schedule_one()  # held back: no second preemption of `low`
    gated = [q for q in sched.queue.gated_pods() if q.pod.name == "high"]
    assert gated and gated[0].gating_plugin == "DefaultPreemption"
    assert gated[0].gating_status is not None
    assert gated[0].gating_status.message == "waiting for the preemption for this pod to be finished"
    release.set()
    await sched.drain()
    assert not list(sched.queue.gated_pods())  # the last victim is terminating: released
    cluster.advance(30.0)  # its grace period ends: deleted
    sched.tick(40.0)
    assert sched.schedule_one()
    await sched.drain()
    assert cluster.pods["high"].node_name == "node1"
    assert evictions == ["low"]


async def test_a_failed_eviction_releases_the_preemptor_which_preempts_again() -> None:
    """An eviction that fails (an apiserver timeout, a 409 after its patch retries) leaves the
    victim running: upstream's executor ends that preemption with an error and no longer holds the
    preemptor, which then preempts again. Before, kubesched waited at PreEnqueue for the last
    victim to go — forever (seen live under heavy load: 3 of 1,000 preemptors never bound)."""
    attempts: list[str] = []

    class FlakyEvictions(SimulatedCluster):
        async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None:
            attempts.append(pod.name)
            await asyncio.sleep(0)  # a network call: it fails after the attempt has ended
            if len(attempts) == 1:
                raise TimeoutError("apiserver too slow")
            await super().evict(pod, preemptor)

    cluster = FlakyEvictions()
    sched = one_low_pod_and_a_high_preemptor(cluster)
    assert sched.schedule_one()
    await sched.drain()
    assert attempts == ["low"]
    assert not list(sched.queue.gated_pods())  # not held: the eviction failed
    assert sched.schedule_one()  # preempts `low` again
    await sched.drain()
    assert attempts == ["low", "low"]
    cluster.advance(30.0)
    sched.tick(40.0)
    assert sched.schedule_one()
    await sched.drain()
    assert cluster.pods["high"].node_name == "node1"


def test_no_lower_priority_pod_anywhere_answers_every_node_at_once_and_follows_pod_changes() -> None:
    """DefaultPreemption counts placed pods per priority: with none below the preemptor's, every
    candidate node is "No preemption victims found" without being looked at. The census must follow
    pods coming and going, or a real victim would be missed (or a node judged for nothing)."""
    nodes = [mk_node(f"node{i}", ONE_POD) for i in range(1, 41)]
    _, cluster, fwk, plugin = setup(nodes, [mk_pod(f"p{i}", f"node{i}", MID) for i in range(1, 41)])
    statuses = {f"node{i}": U for i in range(1, 41)}
    result, st = run_post_filter(fwk, plugin, mk_pod("p", priority=MID), statuses)
    assert result == PostFilterResult("") and st.code == Code.UNSCHEDULABLE
    assert st.message == f"preemption: 0/40 nodes are available: 40 {NO_VICTIMS}."

    cluster.delete_pod("p7")
    cluster.add_pod(PodInfo.from_raw(mk_pod("low", "node7", LOW)))  # the one potential victim
    result, st = run_post_filter(fwk, plugin, mk_pod("p", priority=MID), statuses)
    assert result == PostFilterResult("node7") and st.is_success

    cluster.delete_pod("low")
    result, st = run_post_filter(fwk, plugin, mk_pod("q", priority=MID), statuses)
    assert st.message == f"preemption: 0/40 nodes are available: 40 {NO_VICTIMS}."


def test_no_potential_victim_skips_the_dry_run_but_still_draws_its_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """No placed pod has a lower priority: PostFilter answers without the dry run, with the same
    result and message, and the scheduler's RNG moved as the dry run's offset moves it (later
    random choices stay the same)."""
    nodes = [mk_node(f"node{i}", NODE_RES) for i in range(1, 5)]
    pods = [mk_pod("p1", "node1", HIGH), mk_pod("p2", "node2", HIGH)]
    statuses = {"node1": U, "node2": U, "node3": U, "node4": UU}
    preemptor = mk_pod("p", priority=HIGH, res=LARGE)
    outcomes = []
    for shortcut in (True, False):
        _, _, fwk, plugin = setup(nodes, pods)
        assert plugin.no_potential_victims(PodInfo.from_raw(preemptor))
        assert not plugin.no_potential_victims(PodInfo.from_raw(mk_pod("q", priority=VERY_HIGH)))
        if not shortcut:
            monkeypatch.setattr(plugin, "no_potential_victims", lambda pod: False)
        fwk.handle.rng.seed(5)
        result, st = run_post_filter(fwk, plugin, preemptor, statuses)
        outcomes.append((result, st.code, st.message, fwk.handle.rng.random()))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][2] == ("preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
                              "3 No preemption victims found for incoming pod.")
