"""TopologyAwareWorkloadScheduling: ports of topology_placement_test.go (TestGeneratePlacements) and
podgroup_pods_count_test.go (TestScorePlacement, TestNormalizePlacementScore), Kubernetes v1.37.1,
and the PodGroup cycle trying placements (a gang placed within one rack).

Not ported: the CompositePodGroup cases ("for cpg ..."), TestPodGroupSchedulingPlacementAlgorithm*
of schedule_one_podgroup_test.go (its fake plugins' placement-order assumptions), NodeResourcesFit's
placement-scoring table (fit_test.go TestScorePlacement: the MostAllocated score over the placement's
nodes is checked below on one case).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.podgroup import Placement, PodGroupAssignments, PodGroupInfo, ProposedAssignment
from kubesched.framework.status import Code
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.gangscheduling import POD_GROUP
from kubesched.plugins.noderesources import NodeResourcesFit
from kubesched.plugins.podgrouppodscount import PodGroupPodsCount
from kubesched.scheduler import Scheduler, SchedulerObserver
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod
from unit.core.test_podgroup_cycle import GANG_PROFILE, Messages, member, pod_group

NS = "default"
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
TAS_PROFILE = {
    **GANG_PROFILE,
    "placementGenerate": ["TopologyPlacementGenerator"],
    "placementScore": ["NodeResourcesFit", "PodGroupPodsCount"],
}


def topology_group(name: str, min_count: int, key: str | None) -> dict[str, Any]:
    g = pod_group(name, min_count)
    if key is not None:
        g["spec"]["schedulingConstraints"] = {"topology": [{"key": key}]}
    return g


def build(groups: list[dict[str, Any]], nodes: list[tuple[str, dict[str, str], str]],
          observer: SchedulerObserver | None = None) -> tuple[Scheduler, SimulatedCluster]:
    cluster = SimulatedCluster()
    for g in groups:
        cluster.add_object(POD_GROUP, f"{NS}/{g['metadata']['name']}", g)
    sched = Scheduler.build([StaticProfile(TAS_PROFILE)], builtin_registry(), FakeClock(100.0), client=cluster, seed=1,
                            objects=cluster.kind, observer=observer, feature_gates=GATES)
    cluster.attach(sched)
    for name, labels, cpu in nodes:
        cluster.add_node(node(name, cpu=cpu, labels=labels))
    return sched, cluster


def plugin(sched: Scheduler, name: str) -> Any:
    return sched.frameworks["default-scheduler"].plugins[name]


def group_info(sched: Scheduler, name: str) -> PodGroupInfo:
    raw = sched.frameworks["default-scheduler"].handle.objects(POD_GROUP)[f"{NS}/{name}"]
    return PodGroupInfo(NS, name, [], dict(raw))


def names(sched: Scheduler, placement: Placement) -> list[str]:
    return [sched.cache.table.names[int(r)] for r in placement.rows]


# -- TestGeneratePlacements ------------------------------------------------------------------------


def test_without_constraint_returns_the_parent_placement() -> None:
    sched, _ = build([topology_group("pg", 1, None)], [("node1", {}, "4"), ("node2", {"foo": "bar"}, "4")])
    parent = Placement("test-placement", sched.cache.table.alive_rows())
    placements, st = plugin(sched, "TopologyPlacementGenerator").generate_placements(
        CycleState(), group_info(sched, "pg"), parent)
    assert st.is_success and placements == [parent]


@pytest.mark.parametrize(
    ("key", "want"),
    [
        ("topology1", {"d1": ["node2", "node4"], "d2": ["node3"], "d3": ["node5"]}),  # one per domain
        ("topology3", {}),  # without matching topology label, returns empty
    ],
)
def test_with_topology_key_one_placement_per_domain(key: str, want: dict[str, list[str]]) -> None:
    nodes = [("node0", {"topology2": "d1"}, "4"), ("node1", {"topology2": "d4"}, "4"),
             ("node2", {"topology1": "d1"}, "4"), ("node3", {"topology1": "d2"}, "4"),
             ("node4", {"topology1": "d1"}, "4"), ("node5", {"topology1": "d3"}, "4")]
    sched, _ = build([topology_group("pg", 1, key)], nodes)
    placements, st = plugin(sched, "TopologyPlacementGenerator").generate_placements(
        CycleState(), group_info(sched, "pg"), Placement("", sched.cache.table.alive_rows()))
    assert st.is_success
    assert {p.name: names(sched, p) for p in placements} == want


def _with_scheduled(assigned: list[str], labels: dict[str, str]) -> tuple[Scheduler, Placement]:
    nodes = [("node0", {"topology": "d2"}, "4"), ("node1", {"topology": "d1"}, "4"),
             ("node2", {"topology": labels.get("node2", "d1")}, "4"), ("node3", {"topology": "d1"}, "4")]
    sched, cluster = build([topology_group("pg", 1, "topology")], nodes)
    for i, n in enumerate(assigned):
        raw = pod(f"s{i}", namespace=NS, node_name=n, schedulingGroup={"podGroupName": "pg"})
        cluster.add_pod(PodInfo.from_raw(raw))
    table = sched.cache.table
    return sched, Placement("", np.array([table.row_of("node0"), table.row_of("node1")], dtype=np.intp))


def test_with_pods_already_scheduled_in_a_single_domain_returns_that_domain() -> None:
    sched, parent = _with_scheduled(["node2", "node3"], {})
    placements, st = plugin(sched, "TopologyPlacementGenerator").generate_placements(
        CycleState(), group_info(sched, "pg"), parent)
    assert st.is_success and {p.name: names(sched, p) for p in placements} == {"d1": ["node1"]}


def test_with_pods_already_scheduled_in_conflicting_domains_returns_error() -> None:
    sched, parent = _with_scheduled(["node2", "node3"], {"node2": "d0"})
    generator = plugin(sched, "TopologyPlacementGenerator")
    _, st = generator.generate_placements(CycleState(), group_info(sched, "pg"), parent)
    assert st.code == Code.ERROR
    assert "more than 1 domain found for pod group" in st.message


# -- PodGroupPodsCount -----------------------------------------------------------------------------


@pytest.mark.parametrize(("assigned", "want"), [(2, 4), (0, 2)], ids=["existing assigned pods", "none"])
def test_pod_group_pods_count_score_placement(assigned: int, want: int) -> None:
    sched, cluster = build([topology_group("root", 1, None)], [("node1", {}, "8"), ("node2", {}, "8")])
    for i in range(assigned):
        cluster.add_pod(PodInfo.from_raw(pod(f"a{i}", namespace=NS, node_name="node2",
                                             schedulingGroup={"podGroupName": "root"})))
    proposed = tuple(ProposedAssignment(member(f"p{i}", "root"), f"node{i + 1}", CycleState()) for i in range(2))
    pl = plugin(sched, "PodGroupPodsCount")
    assert isinstance(pl, PodGroupPodsCount)
    score, st = pl.score_placement(CycleState(), group_info(sched, "root"), PodGroupAssignments(proposed))
    assert st.is_success and score == want


@pytest.mark.parametrize(
    ("scores", "want"),
    [([10, 50, 110], [9, 45, 100]), ([50, 50], [100, 100]), ([50], [100]), ([11, 100, 101, 102], [10, 98, 99, 100])],
    ids=["distinct", "equal", "single", "far minimum"],
)
def test_pod_group_pods_count_normalize(scores: list[int], want: list[int]) -> None:
    sched, _ = build([topology_group("pg", 1, None)], [("node1", {}, "8")])
    st = plugin(sched, "PodGroupPodsCount").normalize_placement_scores(CycleState(), group_info(sched, "pg"), scores)
    assert st is not None and st.is_success and scores == want


def test_pod_group_pods_count_normalize_zero_scores_is_an_error() -> None:
    sched, _ = build([topology_group("pg", 1, None)], [("node1", {}, "8")])
    st = plugin(sched, "PodGroupPodsCount").normalize_placement_scores(CycleState(), group_info(sched, "pg"), [0, 0])
    assert st is not None and st.message == "no pods from pod group are assigned to any of the candidate placements"


def test_node_resources_fit_scores_a_placement_most_allocated() -> None:
    """4 CPU of the group on two 4-CPU nodes already holding 2 CPU: cpu (2+4)/8 = 75; memory
    (the non-zero default 200Mi for each of the 3 pods, of 16Gi) 600 * 100 // 16384 = 3:
    (75 + 3) // 2 = 39."""
    sched, cluster = build([topology_group("pg", 1, None)], [("n1", {}, "4"), ("n2", {}, "4")])
    cluster.add_pod(PodInfo.from_raw(pod("busy", cpu="2", namespace=NS, node_name="n1")))
    fit = plugin(sched, "NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFit)
    proposed = tuple(ProposedAssignment(member(f"p{i}", "pg", "2"), "n2", CycleState()) for i in range(2))
    placement = Placement("all", sched.cache.table.alive_rows())
    score, st = fit.score_placement(CycleState(), group_info(sched, "pg"), PodGroupAssignments(proposed, placement))
    assert st.is_success and score == 39


# -- the PodGroup cycle with placements ------------------------------------------------------------


def run(sched: Scheduler) -> None:
    async def go() -> None:
        while sched.schedule_one():
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(go())


RACKS = [("a1", {"rack": "a"}, "4"), ("a2", {"rack": "a"}, "4"), ("b1", {"rack": "b"}, "4"), ("b2", {"rack": "b"}, "4")]


def test_a_gang_is_placed_within_one_rack() -> None:
    """4 × 2 CPU fit in either rack (or across both); with the rack constraint they share one, the
    one PlacementScore prefers (rack a is busier: MostAllocated packs it)."""
    sched, cluster = build([topology_group("g", 3, "rack")], RACKS)
    cluster.add_pod(PodInfo.from_raw(pod("busy", cpu="1", namespace=NS, node_name="a1")))
    for i in range(3):
        cluster.add_pod(member(f"g-{i}", "g", "2"))
    run(sched)
    placed = {p.name: p.node_name for p in cluster.pods.values() if p.name.startswith("g-")}
    assert len(placed) == 3 and all(placed.values())
    assert {n[0] for n in placed.values()} == {"a"}


def test_a_gang_that_fits_no_single_rack_fails_with_upstreams_message() -> None:
    seen = Messages()
    sched, cluster = build([topology_group("g", 5, "rack")], RACKS, observer=seen)
    for i in range(5):
        cluster.add_pod(member(f"g-{i}", "g", "2"))
    run(sched)
    assert not [p for p in cluster.pods.values() if p.node_name]
    placed_then_failed = (
        "pod group is unschedulable, pod group is unschedulable, 0/2 placements are available, first placement "
        "status: minCount (5) cannot be satisfied: 4 scheduled, 0 remaining, pod group preemption: "
        "No preemption victims found for incoming preemptor")
    assert seen.failed_with["g-0"] == placed_then_failed
    assert seen.failed_with["g-4"] == "0/2 nodes are available: 2 Insufficient cpu."


def test_the_gate_adds_the_placement_plugins_to_the_default_profile() -> None:
    """applyTopologyAwareWorkloadScheduling: TopologyPlacementGenerator and PodGroupPodsCount
    (weight 1) appended to multiPoint; NodeResourcesFit scores placements too."""
    from kubesched.config.load import load_config

    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "featureGates": {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}}
    plugins = load_config(doc, builtin_registry()).profiles[0].plugins
    assert plugins["placementGenerate"] == ["TopologyPlacementGenerator"]
    assert plugins["placementScore"] == ["NodeResourcesFit", "PodGroupPodsCount"]
    assert "TopologyPlacementGenerator" not in load_config(
        {**doc, "featureGates": {"GenericWorkload": True}}, builtin_registry()).profiles[0].plugins["placementGenerate"]
