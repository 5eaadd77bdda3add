"""GangScheduling: ports of upstream's gangscheduling_test.go (v1.37.1,
pkg/scheduler/framework/plugins/gangscheduling), run through kubesched's scheduler and queue.

Ported: TestGangSchedulingFlow's cases with CompositePodGroup off (non-gang pod, basic policy, no
PodGroup yet, quorum not met at PreEnqueue, waiting at Permit and activating the unscheduled
member, the final member allowing the waiting ones), and the intent of
Test_isSchedulableAfterPodAdded / Test_isSchedulableAfterPodGroupAdded /
Test_isSchedulableAfterPodGroupUpdated (a gated member enters the queue when the member completing
its group, or its PodGroup, arrives).

TestGangSchedulingFlow's CPG=true hierarchy cases (the three stages of a three-level tree at
PreEnqueue, Permit waiting for the tree and allowing it, a basic root over gangs), their CPG=false
twins, Test_isSchedulableAfterCompositePodGroupAdded's intent (the CompositePodGroup completing a
hierarchy lets its members in) and TestPlacementFeasible's isCPG=true cases.

Not ported: the queueing hints' QueueSkip answers for other groups (kubesched's queue has no
queueing hints: any PodGroup event re-runs PreEnqueue, which answers the same); the
isDuringPodGroupSchedulingCycle variants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.podgroup import PlacementProgress, PodGroupInfo
from kubesched.framework.status import Code
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.gangscheduling import PERMIT_TIMEOUT_SECONDS, POD_GROUP, GangScheduling, parse_pod_group
from kubesched.plugins.gangscheduling.podgroup import COMPOSITE_POD_GROUP, PodGroupSpecError
from kubesched.plugins.helpers.gang_members import RESYNC_SECONDS
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod

NS = "ns1"


def pod_group(name: str, min_count: int | None, namespace: str = NS) -> dict[str, Any]:
    """st.MakePodGroup().MinCount(n) (gang) or .BasicPolicy() (min_count None)."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}"},
        "spec": {"schedulingPolicy": policy},
    }


def member(name: str, group: str | None, cpu: str = "1") -> PodInfo:
    spec: dict[str, Any] = {"schedulingGroup": {"podGroupName": group}} if group else {}
    return PodInfo.from_raw(pod(name, cpu=cpu, namespace=NS, **spec))


GANG_PLUGINS: dict[str, list[str]] = {
    "preEnqueue": ["GangScheduling"],
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeResourcesFit"],
    "filter": ["NodeResourcesFit"],
    "permit": ["GangScheduling"],
    "bind": ["DefaultBinder"],
}


def build(groups: list[dict[str, Any]], cpu: str = "8", composites: Sequence[dict[str, Any]] = (),
          gates: dict[str, bool] | None = None) -> tuple[Scheduler, SimulatedCluster, FakeClock]:
    cluster = SimulatedCluster()
    for g in groups:
        cluster.add_object(POD_GROUP, f"{g['metadata']['namespace']}/{g['metadata']['name']}", g)
    for c in composites:
        cluster.add_object(COMPOSITE_POD_GROUP, f"{c['metadata']['namespace']}/{c['metadata']['name']}", c)
    clock = FakeClock(100.0)
    sched = Scheduler.build([StaticProfile(GANG_PLUGINS)], builtin_registry(), clock, client=cluster, seed=1,
                            objects=cluster.kind, feature_gates=gates)
    cluster.attach(sched)
    cluster.add_node(node("n0", cpu=cpu))
    return sched, cluster, clock


def plugin_of(sched: Scheduler) -> GangScheduling:
    p = sched.frameworks["default-scheduler"].plugins["GangScheduling"]
    assert isinstance(p, GangScheduling)
    return p


def gated_message(sched: Scheduler, p: PodInfo) -> str | None:
    """The PreEnqueue refusal holding ``p`` out of the active queue, None if it is not held."""
    for qpi in sched.queue.gated_pods():
        if qpi.pod.uid == p.uid:
            assert qpi.gating_status is not None
            return qpi.gating_status.message
    return None


def bound(cluster: SimulatedCluster) -> list[str]:
    return sorted(p.name for p in cluster.pods.values() if p.node_name)


GANG1, GANG2, BASIC = pod_group("pg1", 3), pod_group("pg2", 4), pod_group("pg3", None)


# -- TestGangSchedulingFlow (CPG=false) -------------------------------------------------------------


@pytest.mark.parametrize("group", [None, "pg3"], ids=["non-gang pod", "basic policy pod"])
def test_non_gang_and_basic_policy_pods_succeed_immediately(group: str | None) -> None:
    sched, cluster, _ = build([GANG1, GANG2, BASIC])
    pl = plugin_of(sched)
    p = member("p", group)
    assert pl.pre_enqueue(p).is_success
    assert pl.permit(CycleState(), p, "n0")[0].is_success
    cluster.add_pod(p)

    async def go() -> None:
        assert sched.schedule_one()
        await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == ["p"]


def test_gang_pod_fails_pre_enqueue_when_pod_group_is_not_yet_created() -> None:
    sched, cluster, _ = build([])
    pods = [member(n, "pg1") for n in ("p2", "p3")] + [member(n, "pg2") for n in ("p4", "p5")]
    for p in pods:
        cluster.add_pod(p)
    p1 = member("p1", "pg1")
    st = plugin_of(sched).pre_enqueue(p1)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message == 'waiting for pods\'s pod group "pg1" to appear in scheduling queue'
    cluster.add_pod(p1)
    assert gated_message(sched, p1) == st.message
    assert not sched.schedule_one()  # nothing in the active queue


def test_gang_pod_fails_pre_enqueue_when_quorum_is_not_met() -> None:
    sched, cluster, _ = build([GANG1, GANG2])
    for p in (member("p2", "pg1"), member("p4", "pg2"), member("p5", "pg2")):
        cluster.add_pod(p)
    p1 = member("p1", "pg1")
    cluster.add_pod(p1)
    assert gated_message(sched, p1) == "waiting for minCount pods from a gang to appear in scheduling queue"
    assert sched.queue.counts()["gated"] == 4
    assert not sched.schedule_one()


def test_gang_pod_passes_pre_enqueue_but_waits_at_permit_and_activates_the_unscheduled() -> None:
    sched, cluster, _ = build([GANG1, GANG2])
    pl = plugin_of(sched)
    p2, p3, p1 = member("p2", "pg1"), member("p3", "pg1"), member("p1", "pg1")
    for p in (p2, p3, member("p4", "pg2"), member("p5", "pg2")):
        cluster.add_pod(p)
    assert gated_message(sched, p2) is not None
    cluster.add_pod(p1)  # completes pg1's minCount: its gated members enter the queue with it
    assert all(gated_message(sched, p) is None for p in (p1, p2, p3))
    assert sched.queue.counts()["gated"] == 2  # pg2 still lacks members

    activated: list[list[str]] = []
    real = pl.handle.activate
    pl.handle.activate = lambda uids: (activated.append(sorted(uids)), real(uids))  # type: ignore[method-assign]

    async def go() -> None:
        assert sched.schedule_one()
        await asyncio.sleep(0)
        [first] = [wp for wp in sched.waiting_pods]
        assert first.pending_plugins == ["GangScheduling"]
        assert first.deadlines["GangScheduling"] == 100.0 + PERMIT_TIMEOUT_SECONDS
        # The waiting member activated the group's members not yet scheduled.
        assert activated == [sorted(p.uid for p in (p1, p2, p3) if p.uid != first.pod.uid)]
        assert bound(cluster) == []
        # ... the final member allows all waiting pods of the gang.
        assert sched.schedule_one() and sched.schedule_one()
        await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == ["p1", "p2", "p3"]
    assert len(sched.waiting_pods) == 0


def test_permit_status_messages() -> None:
    """permitPodGroup: Wait with upstream's message and timeout below minCount; an error when the
    PodGroup is gone."""
    sched, _, _ = build([GANG1])
    pl = plugin_of(sched)
    st, timeout = pl.permit(CycleState(), member("p1", "pg1"), "n0")
    assert (st.code, st.message, timeout) == (Code.WAIT, "waiting for minCount pods from a gang to be scheduled", 300.0)
    st, _ = pl.permit(CycleState(), member("x", "gone"), "n0")
    assert st.code == Code.ERROR
    assert st.message == 'failed to get podGroup ns1/gone: podgroup.scheduling.k8s.io "gone" not found'


# -- isSchedulableAfter* (events that let a gated member in) -----------------------------------------


def test_members_deleted_while_their_gang_is_short_are_forgotten() -> None:
    # A gang that never completes must not keep its deleted members for the scheduler's life: the
    # next PreEnqueue after a resync of the pending members drops them, and the gang still
    # completes with the members that exist.
    sched, cluster, clock = build([GANG1])
    pl = plugin_of(sched)
    gone = [member(n, "pg1") for n in ("p1", "p2")]
    for p in gone:
        cluster.add_pod(p)
    assert pl._held == {f"{NS}/pg1": {p.uid for p in gone}}
    for p in gone:
        cluster.delete_pod(p.uid)
    clock.advance(RESYNC_SECONDS)
    later = [member(n, "pg1") for n in ("p3", "p4")]
    for p in later:
        cluster.add_pod(p)
    assert pl._held == {f"{NS}/pg1": {p.uid for p in later}}
    cluster.add_pod(member("p5", "pg1"))

    async def go() -> None:
        while sched.schedule_one():
            await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == ["p3", "p4", "p5"]
    assert pl._held == {}


def test_a_pod_group_created_after_its_pods_lets_them_in() -> None:
    """isSchedulableAfterPodGroupAdded: the PodGroup's Add event re-runs PreEnqueue."""
    sched, cluster, _ = build([])
    pods = [member(f"m{i}", "pg1") for i in range(3)]
    for p in pods:
        cluster.add_pod(p)
    assert sched.queue.counts()["gated"] == 3
    cluster.add_object(POD_GROUP, "ns1/pg1", GANG1)
    sched.queue.move_all_to_active_or_backoff(_event("Add"))
    assert sched.queue.counts()["gated"] == 0

    async def go() -> None:
        while sched.schedule_one():
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == ["m0", "m1", "m2"]


def test_lowering_min_count_lets_the_members_in() -> None:
    """isSchedulableAfterPodGroupUpdated: minCount decreased."""
    sched, cluster, _ = build([GANG2])
    for i in range(2):
        cluster.add_pod(member(f"m{i}", "pg2"))
    assert sched.queue.counts()["gated"] == 2
    cluster.add_object(POD_GROUP, "ns1/pg2", pod_group("pg2", 2))
    sched.queue.move_all_to_active_or_backoff(_event("Update"))
    assert sched.queue.counts()["gated"] == 0


def test_a_member_of_another_group_or_namespace_does_not_complete_a_gang() -> None:
    """isSchedulableAfterPodAdded: only pods of the same namespace and group count."""
    sched, cluster, _ = build([GANG1, pod_group("pg1", 3, namespace="other")])
    for p in (member("a", "pg1"), member("b", "pg1")):
        cluster.add_pod(p)
    cluster.add_pod(PodInfo.from_raw(pod("c", cpu="1", namespace="other", schedulingGroup={"podGroupName": "pg1"})))
    cluster.add_pod(member("d", "pg3"))  # no such group
    assert sched.queue.counts()["gated"] == 4


def test_a_gang_that_cannot_fit_binds_nothing_and_times_out() -> None:
    """All or nothing: two of three members fit; they wait at Permit and are rejected on timeout."""
    sched, cluster, clock = build([GANG1], cpu="2")
    for i in range(3):
        cluster.add_pod(member(f"m{i}", "pg1"))

    async def go() -> None:
        for _ in range(3):
            sched.schedule_one()
            await asyncio.sleep(0)
        assert len(sched.waiting_pods) == 2
        clock.advance(PERMIT_TIMEOUT_SECONDS)
        sched.tick()
        await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == []
    assert int(sched.cache.table.requested[:, 0].sum()) == 0


def _event(action: str) -> Any:
    from kubesched.framework.types import ActionType, ClusterEvent

    kind = {"Add": ActionType.ADD, "Update": ActionType.UPDATE_OTHER}[action]
    return ClusterEvent(POD_GROUP, kind, f"PodGroup{action}")


# -- the PodGroup object and the feature gate --------------------------------------------------------


def test_pod_group_parsing_and_errors() -> None:
    assert parse_pod_group(GANG1).gang_min_count == 3
    assert parse_pod_group(BASIC).gang_min_count is None and parse_pod_group(BASIC).min_count == 1
    bad = pod_group("x", 3)
    bad["spec"]["schedulingPolicy"]["gang"]["minCount"] = 0
    with pytest.raises(PodGroupSpecError, match=r"PodGroup ns1/x: spec.schedulingPolicy.gang.minCount must be a "):
        parse_pod_group(bad)
    bad["spec"]["schedulingPolicy"] = {}
    with pytest.raises(PodGroupSpecError, match="must set basic or gang"):
        parse_pod_group(bad)


def test_an_invalid_pod_group_keeps_its_pods_out_with_the_reason() -> None:
    bad = pod_group("pg1", 3)
    bad["spec"]["schedulingPolicy"] = {"gang": {"minCount": -1}}
    sched, cluster, _ = build([bad])
    p = member("p", "pg1")
    cluster.add_pod(p)
    assert gated_message(sched, p) == (
        "PodGroup ns1/pg1: spec.schedulingPolicy.gang.minCount must be a positive integer, got -1"
    )


def _default_multi_point(doc: dict[str, Any]) -> list[str]:
    cfg = load_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **doc},
                      builtin_registry())
    return [n for names in cfg.profiles[0].plugins.values() for n in names]


def test_generic_workload_gate_adds_gang_scheduling_to_the_default_profile() -> None:
    assert "GangScheduling" not in _default_multi_point({})
    assert "GangScheduling" not in _default_multi_point({"featureGates": {"GenericWorkload": False}})
    on = load_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
         "featureGates": {"GenericWorkload": True}},
        builtin_registry(),
    )
    plugins = on.profiles[0].plugins
    # Appended after the default plugins, as applyGangScheduling appends it to multiPoint.
    assert plugins["preEnqueue"][0] == "SchedulingGates" and plugins["preEnqueue"][-1] == "GangScheduling"
    assert plugins["permit"] == ["GangScheduling"]
    assert on.feature_gates == {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": False,
                                "CompositePodGroup": False, "PodGroupPreemptionPolicy": False,
                                "OpportunisticBatching": True}


# -- the simulator: a dump holding both PodGroup kinds ------------------------------------------------


def test_simulator_loads_both_pod_group_kinds_and_schedules_each_gang_by_its_plugin(tmp_path: Any) -> None:
    """One dump with a Workload API PodGroup and a scheduler-plugins PodGroup of the same name:
    each is loaded under its own kind name and gangs its own pods (GangScheduling through the
    GenericWorkload gate, Coscheduling enabled beside it)."""
    import json

    from kubesched.framework.objects import kinds_of_plugins
    from kubesched.plugins.coscheduling import POD_GROUP_LABEL
    from kubesched.simulate.engine.runner import Simulation
    from kubesched.simulate.inputs.dump import load_cluster
    from unit.plugins.gang_helpers import pod_group as x_pod_group

    config = load_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
         "featureGates": {"GenericWorkload": True},
         "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                                   "queueSort": {"enabled": [{"name": "Coscheduling"}],
                                                 "disabled": [{"name": "*"}]}}}]},
        builtin_registry(),
    )
    registry = builtin_registry()
    workload_pg = pod_group("g", 3, namespace="default")
    items: list[dict[str, Any]] = [node("n0", cpu="4"), workload_pg, x_pod_group("g", 2)]
    # Workload API gang: 3 members of 2 CPU on 4 CPU — never complete, nothing binds.
    items += [pod(f"w{i}", cpu="2", schedulingGroup={"podGroupName": "g"}) for i in range(3)]
    # scheduler-plugins gang: 2 members of 1 CPU — fits.
    items += [pod(f"x{i}", cpu="1", labels={POD_GROUP_LABEL: "g"}) for i in range(2)]
    dump = tmp_path / "cluster.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    kinds = kinds_of_plugins(registry.get(n) for p in config.profiles for n in {m for v in p.plugins.values()
                                                                                 for m in v})
    cluster = load_cluster(dump, kinds)
    assert set(cluster.objects) >= {"PodGroup", POD_GROUP}
    assert cluster.objects[POD_GROUP]["default/g"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    sim = Simulation(config, registry, cluster, seed=0)

    interrupted: list[float] = []

    def guard(_bound: int, _total: int) -> None:
        if sim.clock.now() > 2 * PERMIT_TIMEOUT_SECONDS:
            interrupted.append(sim.clock.now())
            sim.interrupt()

    sim._progress = guard
    result = asyncio.run(sim.run())
    assert sorted(p.name for p in result.cluster.pods.values() if p.node_name) == ["x0", "x1"]
    # The Workload gang fails its PodGroup cycle at once (no Permit wait): the run ends by itself.
    assert interrupted == []


# -- TestPlacementFeasible (the PodGroup cases; the CPG ones repeat them) ----------------------------

S, U, W = Code.SUCCESS, Code.UNSCHEDULABLE, Code.WAIT


@pytest.mark.parametrize(
    ("min_count", "members", "pod_codes", "expected", "initially_scheduled"),
    [
        (2, 2, [S, S], [W, S], 0),  # all pods succeed, minCount met at end
        (3, 3, [U], [U], 0),  # first pod fails, minCount not satisfiable
        (2, 2, [S, U], [W, U], 0),  # second pod fails, minCount not satisfiable
        (None, 1, [U], [U], 0),  # non-gang pod group with 0 scheduled pods fails
        (None, 1, [S], [S], 0),  # non-gang pod group succeeds
        (None, 1, [U], [S], 1),  # non-gang pod group with 1 scheduled pod succeeds
        (2, 3, [S, S, S], [W, S, S], 0),  # minCount met before the last pod
        (2, 3, [U, S, S], [W, W, S], 0),  # first fails, the others complete minCount
        (2, 3, [U, U], [W, U], 0),  # two fail: minCount out of reach
        (3, 2, [S, S], [W, S], 1),  # minCount met with an already scheduled pod
        (2, 1, [U], [S], 2),  # minCount already met by scheduled pods
        (3, 2, [U], [U], 1),  # scheduled pods do not help enough
        (4, 2, [S], [U], 1),  # minCount larger than every pod of the group
    ],
)
def test_placement_feasible(
    min_count: int | None, members: int, pod_codes: list[Code], expected: list[Code], initially_scheduled: int
) -> None:
    sched, _, _ = build([pod_group("test-pg", min_count)])
    group = PodGroupInfo(NS, "test-pg", [member(f"p{i}", "test-pg") for i in range(members)])
    scheduled = initially_scheduled
    got = []
    for i, code in enumerate(pod_codes):
        scheduled += 1 if code == S else 0
        st = plugin_of(sched).placement_feasible(CycleState(), group, PlacementProgress(members - i - 1, scheduled))
        got.append(st.code)
    assert got == expected


def test_placement_feasible_messages() -> None:
    sched, _, _ = build([pod_group("test-pg", 5)])
    group = PodGroupInfo(NS, "test-pg", [])
    pl = plugin_of(sched)
    assert pl.placement_feasible(CycleState(), group, PlacementProgress(2, 2)).message == (
        "minCount (5) cannot be satisfied: 2 scheduled, 2 remaining")
    assert pl.placement_feasible(CycleState(), group, PlacementProgress(3, 2)).message == (
        "minCount (5) is not yet satisfied: 2 scheduled, 3 remaining")


# -- TestGangSchedulingFlow (CPG=true) --------------------------------------------------------------

CPG_GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True, "CompositePodGroup": True}


def composite(name: str, min_group_count: int | None, parent: str | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if min_group_count is None else {"gang": {"minGroupCount": min_group_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def child(name: str, min_count: int | None, parent: str) -> dict[str, Any]:
    raw = pod_group(name, min_count)
    raw["spec"]["parentCompositePodGroupName"] = parent
    return raw


#: cpg-root (gang 2) over cpg-sub1 (gang 2: pg1..pg3), cpg-sub2 (basic: pg4 basic, pg5) and
#: cpg-sub3 (gang 2: pg6, pg7); every PodGroup a gang of one unless basic.
TREE = [child("pg1-cpg", 1, "cpg-sub1"), child("pg2-cpg", 1, "cpg-sub1"), child("pg3-cpg", 1, "cpg-sub1"),
        child("pg4-cpg", None, "cpg-sub2"), child("pg5-cpg", 1, "cpg-sub2"),
        child("pg6-cpg", 1, "cpg-sub3"), child("pg7-cpg", 1, "cpg-sub3")]
TREE_CPGS = [composite("cpg-root", 2), composite("cpg-sub1", 2, "cpg-root"), composite("cpg-sub2", None, "cpg-root"),
             composite("cpg-sub3", 2, "cpg-root")]
NOT_READY = 'waiting for composite pod group "cpg-root" tree to meet quorum'


def test_a_hierarchy_enters_the_queue_once_its_root_tree_meets_the_quorum() -> None:
    """CPG Hierarchical Stages 1–3: p1 alone (the tree not ready); p1, p2 then p6 (cpg-sub1 ready,
    the root not); p4 makes cpg-sub2 ready and with it the root: every held member enters."""
    sched, cluster, _ = build(TREE, composites=TREE_CPGS, gates=CPG_GATES)
    p1, p2, p6, p4 = (member(f"p{i}-cpg", f"pg{i}-cpg") for i in (1, 2, 6, 4))
    cluster.add_pod(p1)
    assert gated_message(sched, p1) == NOT_READY
    cluster.add_pod(p2)
    cluster.add_pod(p6)
    assert gated_message(sched, p6) == NOT_READY
    cluster.add_pod(p4)
    assert [gated_message(sched, p) for p in (p1, p2, p6, p4)] == [None] * 4


@pytest.mark.parametrize("gates", [{}, {"GenericWorkload": True}], ids=["no gates", "CPG=false"])
def test_without_the_gate_a_pod_groups_parent_is_ignored(gates: dict[str, bool]) -> None:
    sched, cluster, _ = build(TREE, composites=TREE_CPGS, gates=gates)
    p1 = member("p1-cpg", "pg1-cpg")
    cluster.add_pod(p1)
    assert gated_message(sched, p1) is None
    sched.cache.assume(p1, "n0")  # its own gang of one is complete: no waiting for the tree
    st, _ = plugin_of(sched).permit(CycleState(), p1, "n0")
    assert st.is_success


def test_permit_waits_for_the_tree_then_allows_it() -> None:
    """CPG Permit Wait, and Stage 3's Permit: p4 waits while p1, p2, p6 are not placed; with them
    assumed, p4 completes the tree and passes."""
    sched, _, _ = build(TREE, composites=TREE_CPGS, gates=CPG_GATES)
    pl = plugin_of(sched)
    p1, p2, p6, p4 = (member(f"p{i}-cpg", f"pg{i}-cpg") for i in (1, 2, 6, 4))
    sched.cache.assume(p4, "n0")
    st, timeout = pl.permit(CycleState(), p4, "n0")
    assert (st.code, st.message, timeout) == (Code.WAIT, NOT_READY, PERMIT_TIMEOUT_SECONDS)
    for p in (p1, p2, p6):
        sched.cache.assume(p, "n0")
    st, _ = pl.permit(CycleState(), p4, "n0")
    assert st.is_success


def test_a_basic_root_over_gangs_is_ready_with_one_gang() -> None:
    """CPG Basic With Gang Stage 1: cpg-basic-root (basic) over two gangs of 2; pg-basic-1 has both
    members, so p2_1 of pg-basic-2 passes PreEnqueue, and waits at Permit while nothing is placed.
    With the gate off the same pod is short of its own gang."""
    groups = [child("pg-basic-1", 2, "cpg-basic-root"), child("pg-basic-2", 2, "cpg-basic-root")]
    for gates, pre_enqueue in ((CPG_GATES, None), ({}, "waiting for minCount pods from a gang to appear in scheduling "
                                                       "queue")):
        sched, cluster, _ = build(groups, composites=[composite("cpg-basic-root", None)], gates=gates)
        for p in (member("p1_1", "pg-basic-1"), member("p1_2", "pg-basic-1")):
            cluster.add_pod(p)
        p2_1 = member("p2_1", "pg-basic-2")
        cluster.add_pod(p2_1)
        assert gated_message(sched, p2_1) == pre_enqueue
    sched, _, _ = build(groups, composites=[composite("cpg-basic-root", None)], gates=CPG_GATES)
    st, _ = plugin_of(sched).permit(CycleState(), member("p2_1", "pg-basic-2"), "n0")
    assert (st.code, st.message) == (Code.WAIT, 'waiting for composite pod group "cpg-basic-root" tree to meet quorum')


def test_the_composite_pod_group_arriving_last_lets_the_members_in() -> None:
    """Test_isSchedulableAfterCompositePodGroupAdded: members held because their parent does not
    exist yet enter the queue once it is added."""
    sched, cluster, _ = build([child("a", 1, "root")], gates=CPG_GATES)
    p = member("a-0", "a")
    cluster.add_pod(p)
    assert gated_message(sched, p) == ("failed to build hierarchy snapshot: composite pod group object not found in "
                                       "state for compositepodgroup/ns1/root")
    cluster.add_object(COMPOSITE_POD_GROUP, f"{NS}/root", composite("root", 1))
    from kubesched.framework.types import ActionType, ClusterEvent

    sched.queue.move_all_to_active_or_backoff(ClusterEvent(COMPOSITE_POD_GROUP, ActionType.ADD, "CompositePodGroupAdd"))
    assert gated_message(sched, p) is None


@pytest.mark.parametrize(
    ("min_group_count", "children", "outcomes", "expected"),
    [
        (2, 2, [S, S], [W, S]),  # all children succeed, minGroupCount met at the end
        (3, 3, [U], [U]),  # first child fails: out of reach
        (2, 2, [S, U], [W, U]),  # second child fails
        (None, 1, [U], [U]),  # basic composite: one child needed
        (None, 1, [S], [S]),
    ],
)
def test_placement_feasible_counts_a_composites_children(
    min_group_count: int | None, children: int, outcomes: list[Code], expected: list[Code]
) -> None:
    """TestPlacementFeasible (isCPG=true): PlacementProgress counts children."""
    sched, _, _ = build([], composites=[composite("cpg", min_group_count)], gates=CPG_GATES)
    group = PodGroupInfo(NS, "cpg", composite_pod_group=composite("cpg", min_group_count))
    scheduled, got = 0, []
    for i, code in enumerate(outcomes):
        scheduled += 1 if code == S else 0
        got.append(plugin_of(sched).placement_feasible(CycleState(), group,
                                                       PlacementProgress(children - i - 1, scheduled)).code)
    assert got == expected


def test_a_composite_pod_group_that_cannot_be_used_holds_its_members_with_the_reason() -> None:
    bad = composite("root", 1)
    bad["spec"]["schedulingPolicy"] = {"gang": {"minGroupCount": 0}}
    sched, cluster, _ = build([child("a", 1, "root")], composites=[bad], gates=CPG_GATES)
    p = member("a-0", "a")
    cluster.add_pod(p)
    assert gated_message(sched, p) == ("CompositePodGroup ns1/root: spec.schedulingPolicy.gang.minGroupCount must be "
                                       "a positive integer, got 0")
