"""The CompositePodGroup cycle (scheduler_composite.py): ports of schedule_one_podgroup_test.go's
composite cases (Kubernetes v1.37.1, CompositePodGroup, GenericWorkload and
TopologyAwareWorkloadScheduling on), and what a user sees on kubesched's scheduler.

Ported, with GangScheduling and NodeResourcesFit instead of upstream's fake PlacementFeasible
plugin and mocked SchedulePod (a member "fails" by asking for more CPU than a node has):
TestCPGHierarchicalScheduling_ScheduleOnePodGroup, TestCPGHierarchicalScheduling_Internal,
TestCPGMinGroupCount_Internal, TestCPGBasicWithGangChildren_Internal.

Not ported: TestCPGSchedulingPlacementAlgorithm and TestCPGSchedulingPlacementAlgorithm_Scoring
(fake PlacementGenerate/PlacementScore plugins with per-call answers; the composite placement
search is covered below by a CompositePodGroup with a topology constraint),
TestScorePlacementPodGroupAssignments (which members a PlacementScore plugin is shown: covered by
the rack test), TestPlacementCycleStateLifecycle_MultiLevel (kubesched's placement cycle state is a
fresh CycleState per call), and the queue's TestPriorityQueue_*CompositePodGroup (kubesched's queue
indexes members by PodGroup; the hierarchy is read from the objects when a member is popped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.handle import Preemptor
from kubesched.framework.podgroup import PodGroupInfo
from kubesched.framework.workload_forest import build_tree, root_composite_of
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.gangscheduling import POD_GROUP
from kubesched.plugins.gangscheduling.podgroup import COMPOSITE_POD_GROUP
from kubesched.scheduler import ScheduleFailure, Scheduler, SchedulerObserver
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod
from unit.core.test_podgroup_cycle import member

NS = "default"
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True, "CompositePodGroup": True}
PROFILE = {
    "preEnqueue": ["GangScheduling"],
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeResourcesFit"],
    "filter": ["NodeResourcesFit"],
    "postFilter": ["DefaultPreemption"],
    "permit": ["GangScheduling"],
    "bind": ["DefaultBinder"],
    "podGroupPostFilter": ["DefaultPreemption"],
    "placementGenerate": ["TopologyPlacementGenerator"],
    "placementScore": ["PodGroupPodsCount"],
}


def pod_group(name: str, min_count: int | None, parent: str | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def composite(name: str, min_group_count: int | None, parent: str | None = None, priority: int | None = None,
              topology: str | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if min_group_count is None else {"gang": {"minGroupCount": min_group_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy, "workloadRef": {"workloadName": "w", "templateName": name}}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    if priority is not None:
        spec["priority"] = priority
    if topology is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


class Seen(SchedulerObserver):
    def __init__(self) -> None:
        self.failed_with: dict[str, str] = {}
        self.victims: list[str] = []
        self.preemptors: list[Preemptor] = []
        self.conditions: dict[str, tuple[str, str, str]] = {}

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.failed_with[pod.name] = failure.message

    def preempted(self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
                  cleared: Sequence[PodInfo], by: Preemptor, in_memory: Any = ()) -> None:
        self.victims.extend(v.name for v in victims)
        self.preemptors.append(by)

    def object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        for c in status["conditions"]:
            self.conditions[key] = (c["status"], c["reason"], c["message"])


def build(pod_groups: list[dict[str, Any]], composites: list[dict[str, Any]], nodes: int = 1, cpu: str = "20",
          labels: list[dict[str, str]] | None = None, gates: dict[str, bool] | None = None,
          ) -> tuple[Scheduler, SimulatedCluster, FakeClock, Seen]:
    cluster = SimulatedCluster()
    for g in pod_groups:
        cluster.add_object(POD_GROUP, f"{NS}/{g['metadata']['name']}", g)
    for c in composites:
        cluster.add_object(COMPOSITE_POD_GROUP, f"{NS}/{c['metadata']['name']}", c)
    clock = FakeClock(100.0)
    seen = Seen()
    sched = Scheduler.build([StaticProfile(PROFILE)], builtin_registry(), clock, client=cluster, seed=1,
                            objects=cluster.kind, observer=seen, feature_gates=GATES if gates is None else gates)
    cluster.attach(sched)
    for i in range(nodes):
        cluster.add_node(node(f"n{i}", cpu=cpu, labels=(labels or [{}] * nodes)[i]))
    return sched, cluster, clock, seen


def run(sched: Scheduler) -> None:
    async def go() -> None:
        while sched.schedule_one():
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(go())


def bound(cluster: SimulatedCluster) -> list[str]:
    return sorted(p.name for p in cluster.pods.values() if p.node_name)


def by_name(cluster: SimulatedCluster, name: str) -> PodInfo:
    return next(p for p in cluster.pods.values() if p.name == name)


def add_members(cluster: SimulatedCluster, group: str, count: int, cpu: str = "1", priority: int = 0) -> None:
    for i in range(count):
        cluster.add_pod(member(f"{group}-pod-{i}", group, cpu, priority))


# -- ports -----------------------------------------------------------------------------------------


def test_a_gang_of_groups_admits_the_hierarchy_once_min_group_count_children_fit() -> None:
    """TestCPGHierarchicalScheduling_ScheduleOnePodGroup: cpg-root (gang, minGroupCount 2) over
    pg1, pg2, pg3 (minCount 1 each); pg3 cannot fit, 2 of 3 children do: the root succeeds, p1
    and p2 bind, p3 is told why it does not fit."""
    sched, cluster, _, seen = build(
        [pod_group(f"pg{i}", 1, "cpg-root") for i in (1, 2, 3)], [composite("cpg-root", 2)], cpu="4")
    cluster.add_pod(member("p1", "pg1", "2"))
    cluster.add_pod(member("p2", "pg2", "2"))
    cluster.add_pod(member("p3", "pg3", "2"))
    run(sched)
    assert bound(cluster) == ["p1", "p2"]
    assert seen.failed_with == {"p3": "0/1 nodes are available: 1 Insufficient cpu."}
    assert len(sched.waiting_pods) == 0


def test_a_three_level_hierarchy_applies_gang_and_basic_at_every_level() -> None:
    """TestCPGHierarchicalScheduling_Internal: cpg-sub1 (gang 2 of pg1 S, pg2 S, pg3 F) and cpg-sub2
    (basic: pg4 S, pg5 S) fit; cpg-sub3 (gang 2 of pg6 S, pg7 F) does not, so pg6 does not bind
    although it fitted; cpg-root (gang 2 of 3) fits with sub1 and sub2."""
    groups = [pod_group("pg1", 1, "cpg-sub1"), pod_group("pg2", 1, "cpg-sub1"), pod_group("pg3", 1, "cpg-sub1"),
              pod_group("pg4", 1, "cpg-sub2"), pod_group("pg5", 1, "cpg-sub2"),
              pod_group("pg6", 1, "cpg-sub3"), pod_group("pg7", 1, "cpg-sub3")]
    composites = [composite("cpg-root", 2), composite("cpg-sub1", 2, "cpg-root"),
                  composite("cpg-sub2", None, "cpg-root"), composite("cpg-sub3", 2, "cpg-root")]
    sched, cluster, _, seen = build(groups, composites)
    for name in ("pg1", "pg2", "pg4", "pg5", "pg6"):
        cluster.add_pod(member(f"{name}-pod", name, "1"))
    for name in ("pg3", "pg7"):
        cluster.add_pod(member(f"{name}-pod", name, "100"))
    run(sched)
    assert bound(cluster) == ["pg1-pod", "pg2-pod", "pg4-pod", "pg5-pod"]
    assert seen.failed_with == {
        "pg3-pod": "0/1 nodes are available: 1 Insufficient cpu.",
        "pg7-pod": "0/1 nodes are available: 1 Insufficient cpu.",
        # pg6 fitted, but its parent did not: completeCompositePodGroupAlgorithmResult gives it
        # cpg-sub3's status.
        "pg6-pod": "pod group is unschedulable, 0/1 placements are available, first placement status: "
                   "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining",
    }
    assert int(sched.cache.table.requested[:, 0].sum()) == 4000  # nothing else stays assumed


def test_min_group_count_admits_the_groups_that_fit() -> None:
    """TestCPGMinGroupCount_Internal: room for two gangs of three; pg3's members fail."""
    groups = [pod_group(f"pg{i}", 3, "cpg-root") for i in (1, 2, 3)]
    sched, cluster, _, seen = build(groups, [composite("cpg-root", 2)], cpu="6")
    for name in ("pg1", "pg2", "pg3"):
        add_members(cluster, name, 3)
    run(sched)
    assert bound(cluster) == [f"pg{g}-pod-{i}" for g in (1, 2) for i in range(3)]
    assert sorted(seen.failed_with) == ["pg3-pod-0", "pg3-pod-1", "pg3-pod-2"]


def test_a_basic_composite_lets_its_gangs_schedule_independently() -> None:
    """TestCPGBasicWithGangChildren_Internal: cpg-root (basic) over pg1 (fits) and pg2 (cannot)."""
    groups = [pod_group("pg1", 3, "cpg-root"), pod_group("pg2", 3, "cpg-root")]
    sched, cluster, _, seen = build(groups, [composite("cpg-root", None)], cpu="4")
    add_members(cluster, "pg1", 3)
    add_members(cluster, "pg2", 3, cpu="2")
    run(sched)
    assert bound(cluster) == ["pg1-pod-0", "pg1-pod-1", "pg1-pod-2"]
    assert sorted(seen.failed_with) == ["pg2-pod-0", "pg2-pod-1", "pg2-pod-2"]


# -- what a user sees ------------------------------------------------------------------------------


def test_a_composite_of_two_gangs_that_cannot_fit_as_a_whole_binds_nothing() -> None:
    """Two 2-member gangs under a gang composite (minGroupCount 2), room for three members: the
    first gang fits, the second does not, so neither binds; each member is told why, in upstream's
    words (the differential test holds these to kube-scheduler)."""
    groups = [pod_group("a", 2, "job"), pod_group("b", 2, "job")]
    sched, cluster, _, seen = build(groups, [composite("job", 2)], nodes=3, cpu="2")
    add_members(cluster, "a", 2, cpu="2")
    add_members(cluster, "b", 2, cpu="2")
    run(sched)
    assert bound(cluster) == []
    assert len(sched.waiting_pods) == 0
    assert int(sched.cache.table.requested[:, 0].sum()) == 0
    root = ("pod group is unschedulable, 0/1 placements are available, first placement status: "
            "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining")
    b_status = ("pod group is unschedulable, 0/1 placements are available, first placement status: "
                "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, "
                "pod group preemption: No preemption victims found for incoming preemptor")
    assert seen.failed_with == {
        "a-pod-0": root,
        "a-pod-1": root,
        "b-pod-0": f"pod group is unschedulable, {b_status}",
        "b-pod-1": "0/3 nodes are available: 3 Insufficient cpu.",
    }
    # Each PodGroup of the hierarchy gets its own condition, its result's message with the
    # PodGroupPostFilter's appended (submitPodGroupAlgorithmResult); the composite none of its own.
    assert seen.conditions == {f"{NS}/a": ("False", "Unschedulable", b_status),
                               f"{NS}/b": ("False", "Unschedulable", b_status)}
    # The simulator's report and explain: gang a is complete, its CompositePodGroup is what failed.
    gang = sched.frameworks["default-scheduler"].plugins["GangScheduling"]
    assert gang.explain_wait(by_name(cluster, "a-pod-0")) == (
        "waiting for CompositePodGroup default/job: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining\n"
        "CompositePodGroup default/job: 0/2 children placed, 2/2 ready, 4 members")


def test_members_wait_at_pre_enqueue_until_the_whole_tree_meets_its_quorum() -> None:
    groups = [pod_group("a", 2, "job"), pod_group("b", 2, "job")]
    sched, cluster, _, _ = build(groups, [composite("job", 2)], nodes=2, cpu="4")
    add_members(cluster, "a", 2)
    cluster.add_pod(member("b-pod-0", "b"))
    run(sched)
    assert bound(cluster) == []
    gated = {q.pod.name: q.gating_status.message for q in sched.queue.gated_pods() if q.gating_status}
    assert gated == dict.fromkeys(["a-pod-0", "a-pod-1", "b-pod-0"],
                                  'waiting for composite pod group "job" tree to meet quorum')
    gang = sched.frameworks["default-scheduler"].plugins["GangScheduling"]
    assert gang.explain_wait(by_name(cluster, "a-pod-0")) == (
        'waiting for PodGroup default/a: waiting for composite pod group "job" tree to meet quorum\n'
        "CompositePodGroup default/job: 0/2 children placed, 1/2 ready, 3 members")
    cluster.add_pod(member("b-pod-1", "b"))
    run(sched)
    assert bound(cluster) == ["a-pod-0", "a-pod-1", "b-pod-0", "b-pod-1"]


def test_a_member_whose_parent_composite_does_not_exist_waits_for_it() -> None:
    sched, cluster, _, _ = build([pod_group("a", 1, "job")], [])
    cluster.add_pod(member("a-pod-0", "a"))
    run(sched)
    assert bound(cluster) == []
    (gated,) = sched.queue.gated_pods()
    assert gated.gating_status is not None
    assert gated.gating_status.message == ("failed to build hierarchy snapshot: composite pod group object not found "
                                           "in state for compositepodgroup/default/job")


def test_without_the_gate_the_parent_is_ignored_and_each_pod_group_is_scheduled_alone() -> None:
    groups = [pod_group("a", 2, "job"), pod_group("b", 2, "job")]
    gates = {"GenericWorkload": True}
    sched, cluster, _, _ = build(groups, [composite("job", 2)], nodes=3, cpu="2", gates=gates)
    add_members(cluster, "a", 2, cpu="2")
    add_members(cluster, "b", 2, cpu="2")
    run(sched)
    assert bound(cluster) == ["a-pod-0", "a-pod-1"]
    assert COMPOSITE_POD_GROUP not in {k.name for k in sched.object_kinds()}


def test_a_composite_with_a_topology_constraint_lands_in_one_rack() -> None:
    """TopologyPlacementGenerator reads the CompositePodGroup's constraint: both gangs in one rack
    (rack-a has room for one gang only, rack-b for both)."""
    groups = [pod_group("a", 2, "job"), pod_group("b", 2, "job")]
    labels = [{"rack": "a"}, {"rack": "b"}, {"rack": "b"}]
    sched, cluster, _, _ = build(groups, [composite("job", 2, topology="rack")], nodes=3, cpu="2", labels=labels)
    add_members(cluster, "a", 2)
    add_members(cluster, "b", 2)
    run(sched)
    assert bound(cluster) == ["a-pod-0", "a-pod-1", "b-pod-0", "b-pod-1"]
    assert {cluster.pods[uid].node_name for uid in cluster.pods} == {"n1", "n2"}


def test_a_composite_preempts_lower_priority_pods_for_the_whole_hierarchy() -> None:
    groups = [pod_group("a", 2, "job"), pod_group("b", 2, "job")]
    sched, cluster, clock, seen = build(groups, [composite("job", 2, priority=100)], nodes=2, cpu="2")
    for i in range(2):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="1", namespace=NS, node_name=f"n{i}")))
    add_members(cluster, "a", 2, priority=100)
    add_members(cluster, "b", 2, priority=100)
    run(sched)
    assert sorted(seen.victims) == ["low-0", "low-1"]
    # compositePodGroupExecutorPreemptor: the victims are told the root CompositePodGroup did it.
    assert {(p.event_message, p.related["kind"], p.related["name"]) for p in seen.preemptors} == {
        ("Preempted by compositepodgroup  on node cluster", "CompositePodGroup", "job")}
    for _ in range(3):
        clock.advance(60)
        cluster.advance(clock.now())
        sched.tick()
        run(sched)
    assert bound(cluster) == ["a-pod-0", "a-pod-1", "b-pod-0", "b-pod-1"]
    assert {c[:2] for c in seen.conditions.values()} == {("True", "Scheduled")}


# -- the hierarchy ---------------------------------------------------------------------------------


def test_the_forest_finds_the_root_and_orders_children_by_name() -> None:
    pgs = {f"{NS}/{g['metadata']['name']}": g for g in
           [pod_group("z", 1, "mid"), pod_group("y", 1, "root"), pod_group("alone", 1)]}
    cpgs = {f"{NS}/{c['metadata']['name']}": c for c in [composite("root", 1), composite("mid", 1, "root")]}
    assert root_composite_of(pgs, cpgs, f"{NS}/z") == f"{NS}/root"
    assert root_composite_of(pgs, cpgs, f"{NS}/alone") is None
    tree = build_tree(pgs, cpgs, f"{NS}/root")
    assert tree is not None

    def shape(g: PodGroupInfo) -> Any:
        return (g.entity_key, [shape(c) for c in g.children]) if g.is_composite else g.entity_key

    assert shape(tree) == ("compositepodgroup/default/root",
                           [("compositepodgroup/default/mid", ["podgroup/default/z"]), "podgroup/default/y"])
    loop = {f"{NS}/{c['metadata']['name']}": c for c in [composite("p", 1, "q"), composite("q", 1, "p")]}
    assert root_composite_of({f"{NS}/x": pod_group("x", 1, "p")}, loop, f"{NS}/x") is None


def _bound_member(name: str, group: str, node_name: str, cpu: str = "1", priority: int = 0) -> PodInfo:
    raw = pod(name, cpu=cpu, namespace=NS, node_name=node_name, schedulingGroup={"podGroupName": group})
    raw["spec"]["priority"] = priority
    return PodInfo.from_raw(raw)


def test_a_hierarchy_disrupted_all_together_is_one_victim() -> None:
    """getCrossNodesVictims: the low-priority hierarchy ``old`` has ``disruptionMode: all``, so
    making room for the high-priority gang (one node's worth) evicts every pod under it."""
    old = composite("old", 2)
    old["spec"]["disruptionMode"] = {"all": {}}
    groups = [pod_group("oa", 1, "old"), pod_group("ob", 1, "old"), pod_group("hi", 2)]
    groups[2]["spec"]["priority"] = 100
    sched, cluster, _, seen = build(groups, [old], nodes=2, cpu="2")
    cluster.add_pod(_bound_member("oa-0", "oa", "n0", "2"))
    cluster.add_pod(_bound_member("ob-0", "ob", "n1", "2"))
    add_members(cluster, "hi", 2, cpu="1", priority=100)
    run(sched)
    assert sorted(seen.victims) == ["oa-0", "ob-0"]


def test_without_disruption_mode_all_the_pods_of_a_hierarchy_are_victims_one_by_one() -> None:
    """The default ``disruptionMode: single``: each pod is a victim of its own (with its root's
    priority), so only what the gang needs (one node's worth, in one pod) is evicted."""
    groups = [pod_group("oa", 1, "old"), pod_group("ob", 1, "old"), pod_group("hi", 1)]
    groups[2]["spec"]["priority"] = 100
    sched, cluster, _, seen = build(groups, [composite("old", 2)], nodes=2, cpu="2")
    cluster.add_pod(_bound_member("oa-0", "oa", "n0", "2"))
    cluster.add_pod(_bound_member("ob-0", "ob", "n1", "2"))
    add_members(cluster, "hi", 1, cpu="2", priority=100)
    run(sched)
    assert len(seen.victims) == 1


def test_a_victims_priority_is_its_hierarchy_roots() -> None:
    """GetPodPriority: a pod at priority 0 under a root CompositePodGroup at priority 200 is no
    victim for a gang at 100."""
    groups = [pod_group("oa", 1, "old"), pod_group("hi", 2)]
    groups[1]["spec"]["priority"] = 100
    sched, cluster, _, seen = build(groups, [composite("old", 1, priority=200)], nodes=1, cpu="2")
    cluster.add_pod(_bound_member("oa-0", "oa", "n0", "2"))
    add_members(cluster, "hi", 2, cpu="1", priority=100)
    run(sched)
    assert seen.victims == []
    assert bound(cluster) == ["oa-0"]


@pytest.mark.parametrize(("root_policy", "pod_policy", "message"), [
    pytest.param("Never", "Never", None,
                 id="CPG success when all pods have the root's PreemptNever with PodGroupPreemptionPolicy enabled"),
    pytest.param("Never", "PreemptLowerPriority",
                 "all pods in a single pod group should have the same preemption policy as the pod group's "
                 "preemption policy, got PreemptLowerPriority and Never",
                 id="CPG failure when the pods' policy is not the root's"),
])
def test_validate_pod_group_checks_every_member_against_the_roots_preemption_policy(
    root_policy: str, pod_policy: str, message: str | None,
) -> None:
    """TestValidatePodGroup's CompositePodGroup cases with PodGroupPreemptionPolicy: the root's
    ``spec.preemptionPolicy`` is the hierarchy's."""
    root = composite("job", 2)
    root["spec"]["preemptionPolicy"] = root_policy
    sched, cluster, _, seen = build([pod_group("a", 1, "job"), pod_group("b", 1, "job")], [root],
                                    gates={**GATES, "PodGroupPreemptionPolicy": True})
    for name in ("a", "b"):
        m = member(f"{name}-pod-0", name)
        m.spec["preemptionPolicy"] = pod_policy
        cluster.add_pod(m)
    run(sched)
    if message is None:
        assert bound(cluster) == ["a-pod-0", "b-pod-0"]
    else:
        assert bound(cluster) == []
        assert seen.failed_with == {"a-pod-0": message, "b-pod-0": message}
        assert seen.conditions == {f"{NS}/a": ("False", "SchedulerError", message),
                                   f"{NS}/b": ("False", "SchedulerError", message)}
