"""The PodGroup scheduling cycle (scheduler_podgroup.py): ports of schedule_one_podgroup_test.go
(Kubernetes v1.37.1), and the behaviour a user sees — what binds, each member's message — on
kubesched's scheduler with the GenericWorkload gate on.

Ported: TestPodGroupSchedulingAlgorithm (every case, with TopologyAwareWorkloadScheduling and
CompositePodGroup off), the message shapes of TestSubmitPodGroupAlgorithmResult (a member placed
before the group failed, a member Filter refused, a member never tried) and
TestPodGroupCycle_PodGroupPostFilter (a successful group preemption nominates the members; its
message is appended to the group's).

TestValidatePodGroup's preemption-policy cases (PodGroupPreemptionPolicy on and off; its CPG
cases in test_composite_cycle.py) and a priority case.

Not ported: TestValidatePodGroup's scheduler-name cases and
TestScheduleOnePodGroup_SchedulerNameMismatchUpdatesStatus (only members of the popped pod's
profile are taken), TestUpdatePodGroupCondition (ported in
test_podgroup_condition.py, with the conditions of TestSubmitPodGroupAlgorithmResult),
TestPodGroupCycle_UpdateSnapshotError (no snapshot step), every TAS/CPG test
(TestPodGroupSchedulingPlacementAlgorithm*, TestPlacementCycleStateLifecycle*,
TestCPG*, TestScorePlacementPodGroupAssignments), TestPodGroupCycle_NominatedNodes,
TestSkipPodGroupPodSchedule and TestScheduleOnePodGroup_FinishesAttemptWhenAllPoppedPodsAreAssumed
(the queue's in-flight bookkeeping differs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Preemptor
from kubesched.framework.interfaces import FilterPlugin, PermitPlugin, PlacementFeasiblePlugin
from kubesched.framework.podgroup import PlacementProgress, PodGroupInfo
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.gangscheduling import POD_GROUP
from kubesched.scheduler import ScheduleFailure, Scheduler, ScheduleResult, SchedulerObserver
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo
from kubesched.testing import StaticProfile, node, pod

NS = "default"
GATES = {"GenericWorkload": True}


def pod_group(name: str, min_count: int | None, priority: int | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if priority is not None:  # admission's, from priorityClassName
        spec["priority"] = priority
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def member(name: str, group: str, cpu: str = "1", priority: int = 0) -> PodInfo:
    raw = pod(name, cpu=cpu, namespace=NS, schedulingGroup={"podGroupName": group})
    raw["spec"]["priority"] = priority
    return PodInfo.from_raw(raw)


GANG_PROFILE = {
    "preEnqueue": ["GangScheduling", "DefaultPreemption"],
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeResourcesFit"],
    "filter": ["NodeResourcesFit"],
    "postFilter": ["DefaultPreemption"],
    "permit": ["GangScheduling"],
    "bind": ["DefaultBinder"],
    "podGroupPostFilter": ["DefaultPreemption"],
}


class Messages(SchedulerObserver):
    def __init__(self) -> None:
        self.failed_with: dict[str, str] = {}
        self.nominated: dict[str, str | None] = {}
        self.victims: list[str] = []

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.failed_with[pod.name] = failure.message
        self.nominated[pod.name] = failure.nominated_node_name

    def preempted(self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
                  cleared: Sequence[PodInfo], by: Preemptor, in_memory: Any = ()) -> None:
        self.victims.extend(v.name for v in victims)


def build(groups: list[dict[str, Any]], nodes: int = 2, cpu: str = "4", gates: dict[str, bool] | None = None,
          plugins: dict[str, list[str]] | None = None, registry: Registry | None = None,
          cluster_type: type[SimulatedCluster] = SimulatedCluster,
          ) -> tuple[Scheduler, SimulatedCluster, FakeClock, Messages]:
    cluster = cluster_type()
    for g in groups:
        cluster.add_object(POD_GROUP, f"{NS}/{g['metadata']['name']}", g)
    clock = FakeClock(100.0)
    seen = Messages()
    sched = Scheduler.build([StaticProfile(plugins or GANG_PROFILE)], registry or builtin_registry(), clock,
                            client=cluster, seed=1, objects=cluster.kind, observer=seen,
                            feature_gates=GATES if gates is None else gates)
    cluster.attach(sched)
    for i in range(nodes):
        cluster.add_node(node(f"n{i}", cpu=cpu))
    return sched, cluster, clock, seen


def run(sched: Scheduler) -> None:
    async def go() -> None:
        while sched.schedule_one():
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(go())


def bound(cluster: SimulatedCluster) -> list[str]:
    return sorted(p.name for p in cluster.pods.values() if p.node_name)


# -- what a user sees ------------------------------------------------------------------------------


def test_a_gang_that_never_fits_next_to_one_that_fits_fails_at_once_with_upstreams_messages() -> None:
    """The differential test's scene (two 4-CPU nodes; 3 × 1 CPU and 5 × 2 CPU), with the
    messages kube-scheduler v1.37.1 wrote there: nothing of the big gang waits at Permit or keeps
    resources; its members are told why, each in upstream's words."""
    sched, cluster, _, seen = build([pod_group("small", 3), pod_group("big", 5)])
    for i in range(3):
        cluster.add_pod(member(f"small-{i}", "small", "1"))
    for i in range(5):
        cluster.add_pod(member(f"big-{i}", "big", "2"))
    run(sched)
    assert bound(cluster) == ["small-0", "small-1", "small-2"]
    assert len(sched.waiting_pods) == 0
    assert int(sched.cache.table.requested[:, 0].sum()) == 3000
    placed_then_failed = ("pod group is unschedulable, minCount (5) cannot be satisfied: 2 scheduled, 2 remaining, "
                          "pod group preemption: No preemption victims found for incoming preemptor")
    assert seen.failed_with == {
        "big-0": placed_then_failed,
        "big-1": placed_then_failed,
        "big-2": "0/2 nodes are available: 2 Insufficient cpu.",
        "big-3": "minCount (5) cannot be satisfied: 2 scheduled, 2 remaining",
        "big-4": "minCount (5) cannot be satisfied: 2 scheduled, 2 remaining",
    }


def test_without_the_gate_members_are_scheduled_one_by_one_and_wait_at_permit() -> None:
    sched, cluster, _, seen = build([pod_group("big", 5)], gates={})
    for i in range(5):
        cluster.add_pod(member(f"big-{i}", "big", "2"))

    async def go() -> None:
        while sched.schedule_one():
            await asyncio.sleep(0)
        assert len(sched.waiting_pods) == 4  # the old path: held at Permit until the timeout

    asyncio.run(go())
    assert bound(cluster) == []
    assert "big-0" not in seen.failed_with


def test_a_gang_that_fits_binds_in_one_cycle() -> None:
    sched, cluster, _, seen = build([pod_group("g", 4)])
    for i in range(4):
        cluster.add_pod(member(f"g-{i}", "g", "2"))

    async def go() -> None:
        assert sched.schedule_one()  # one pop takes the whole group
        assert not sched.queue.has_active()
        await sched.drain()

    asyncio.run(go())
    assert bound(cluster) == [f"g-{i}" for i in range(4)]
    assert seen.failed_with == {}


def test_a_basic_group_binds_the_members_that_fit() -> None:
    sched, cluster, _, seen = build([pod_group("b", None)], nodes=1, cpu="2")
    for i in range(3):
        cluster.add_pod(member(f"b-{i}", "b", "1"))
    run(sched)
    assert bound(cluster) == ["b-0", "b-1"]
    assert seen.failed_with == {"b-2": "0/1 nodes are available: 1 Insufficient cpu."}


def test_a_gang_preempts_lower_priority_pods_as_a_group() -> None:
    """TestPodGroupCycle_PodGroupPostFilter: the group preemption succeeds, its message is appended
    to the group's, the members are nominated; once the victims are gone the gang binds."""
    sched, cluster, clock, seen = build([pod_group("hi", 4, priority=100)])
    for i in range(3):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i % 2}")))
    for i in range(4):
        cluster.add_pod(member(f"hi-{i}", "hi", "2", priority=100))
    run(sched)
    assert sorted(seen.victims) == ["low-0", "low-1", "low-2"]
    assert seen.failed_with["hi-0"] == ("minCount (4) cannot be satisfied: 1 scheduled, 2 remaining, "
                                        "pod group preemption: found a placement for podgroup, preempting 3 victims")
    assert seen.failed_with["hi-1"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert all(seen.nominated[f"hi-{i}"] for i in range(4))
    assert not [p for p in bound(cluster) if p.startswith("hi")]  # nothing binds before the victims are gone
    for _ in range(3):
        clock.advance(60)
        cluster.advance(clock.now())
        sched.tick()
        run(sched)
    assert bound(cluster) == [f"hi-{i}" for i in range(4)]  # the victims are gone


def test_every_member_of_a_preempting_gang_waits_until_all_its_evictions_are_sent() -> None:
    """IsPodGroupRunningPreemption: the group's preemption (victims on both nodes) holds every
    member at DefaultPreemption's PreEnqueue, not only the member that stood for the group, until
    the last eviction is sent; a member let through early would preempt the same victims again."""
    sched, cluster, _, seen = build([pod_group("hi", 4, priority=100)])
    for i in range(4):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i % 2}")))
    members = [member(f"hi-{i}", "hi", "2", priority=100) for i in range(4)]
    for m in members:
        cluster.add_pod(m)
    handle = next(iter(sched.frameworks.values())).handle

    async def one_cycle() -> list[bool]:
        assert sched.schedule_one()  # the group's cycle: it preempts; the evictions are tasks not yet run
        held = [handle.preemption_running(m) for m in members]
        await sched.drain()  # every eviction sent
        return held

    assert asyncio.run(one_cycle()) == [True] * 4
    assert sorted(seen.victims) == [f"low-{i}" for i in range(4)]
    assert not any(handle.preemption_running(m) for m in members)  # the victims are terminating


NOMINATED = {"hi-0": "n0", "hi-1": "n1", "hi-2": "n0", "hi-3": "n1"}


def _gang_on_two_nodes_of_victims(
    cluster_type: type[SimulatedCluster] = SimulatedCluster,
) -> tuple[Scheduler, SimulatedCluster, Messages, list[PodInfo]]:
    """A gang of 4 (2 cpu each, priority 100) that must evict the four 2-cpu pods filling n0 and
    n1; the first cycle has run: it preempted them all and nominated the members."""
    sched, cluster, _, seen = build([pod_group("hi", 4, priority=100)])
    if cluster_type is not SimulatedCluster:
        sched, cluster, _, seen = build([pod_group("hi", 4, priority=100)], cluster_type=cluster_type)
    low = [PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i // 2}")) for i in range(4)]
    for p in low:
        cluster.add_pod(p)
    for i in range(4):
        cluster.add_pod(member(f"hi-{i}", "hi", "2", priority=100))
    run(sched)
    assert sorted(seen.victims) == ["low-0", "low-1", "low-2", "low-3"]
    # The profile has no Score plugin: each member takes the first feasible node from the
    # rotating start, which moves one node on each time (numNodesToFind 1), so they alternate.
    assert seen.nominated == NOMINATED
    seen.victims.clear()
    return sched, cluster, seen, low


def backoff_over(sched: Scheduler) -> None:
    assert isinstance(sched.clock, FakeClock)
    sched.clock.advance(60)
    sched.tick()


#: hi-0 fits on n0; hi-1 (nominated to n1, still terminating) does not fit on n0 either, where
#: hi-0 and hi-2, nominated there at the same priority, are counted.
ONGOING = ("minCount (4) cannot be satisfied: 1 scheduled, 2 remaining, "
           "pod group preemption: ongoing preemption on nominated nodes")


def test_a_gang_retried_while_its_victims_terminate_waits_without_preempting_again() -> None:
    """isOngoingPreemption: n0's victims are gone, n1's are still terminating (deletionTimestamp,
    DisruptionTarget): the retried gang fits on n0 only and must wait for n1 with upstream's
    message, its nominations kept, no victim preempted twice."""
    sched, cluster, seen, low = _gang_on_two_nodes_of_victims()
    assert all(cluster.pods[p.uid].deleting for p in low)
    cluster.delete_pod(low[0].uid)
    cluster.delete_pod(low[1].uid)  # n0 is free: the deletions bring the gang back
    run(sched)
    assert seen.victims == []
    assert seen.failed_with["hi-0"] == ONGOING
    assert seen.nominated == NOMINATED
    assert bound(cluster) == ["low-2", "low-3"]


class LaggingCluster(SimulatedCluster):
    """The API server accepts every eviction, but the scheduler's watch has not delivered it yet
    (a loaded control plane: GangPreemptionBasic saw 10-18 s): the victims look alive."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted: list[str] = []

    async def evict(self, pod: PodInfo, by: Preemptor) -> None:
        self.accepted.append(pod.name)


def test_victims_evicted_before_the_watch_shows_it_count_as_terminating() -> None:
    """The live bug of GangPreemptionBasic (issue 31): the gang's evictions were all sent, the
    watch had shown n0's victims gone but not yet n1's, and the retried gang preempted n1's
    victims again. An eviction this scheduler sent counts as terminating by preemption until the
    watch shows it (kubesched's addition to upstream's PodTerminatingByPreemption)."""
    sched, cluster, seen, low = _gang_on_two_nodes_of_victims(LaggingCluster)
    assert isinstance(cluster, LaggingCluster)
    assert sorted(cluster.accepted) == ["low-0", "low-1", "low-2", "low-3"]
    assert not any(cluster.pods[p.uid].deleting for p in low)  # nothing seen yet
    # The watch catches up with the node of the last victim evicted (what releases the gang at
    # DefaultPreemption's PreEnqueue), not yet with the other node.
    last = int(cluster.accepted[-1].removeprefix("low-")) // 2
    seen_gone, unseen = low[2 * last:2 * last + 2], low[2 * (1 - last):2 * (1 - last) + 2]
    for p in seen_gone:
        cluster.delete_pod(p.uid)
    seen.failed_with.clear()
    backoff_over(sched)
    run(sched)
    assert sorted(seen.failed_with) == [f"hi-{i}" for i in range(4)]  # the gang was retried
    assert seen.victims == []
    assert sorted(cluster.accepted) == ["low-0", "low-1", "low-2", "low-3"]  # no second eviction
    assert seen.nominated == NOMINATED
    for p in unseen:
        cluster.delete_pod(p.uid)
    backoff_over(sched)
    run(sched)
    assert bound(cluster) == [f"hi-{i}" for i in range(4)]


class RefusingCluster(SimulatedCluster):
    """The API server refuses the first evictions (e.g. overloaded), then accepts them."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 4

    async def evict(self, pod: PodInfo, by: Preemptor) -> None:
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("the server is currently unable to handle the request")
        await super().evict(pod, by)


def test_a_failed_eviction_is_logged_and_releases_the_gang(caplog: pytest.LogCaptureFixture) -> None:
    """upstream executor.go PreemptPod logs a failed eviction and ends the preemption (the
    preemptor is no longer held): kubesched said nothing, now it warns with the pod and the error."""
    sched, cluster, _, seen = build([pod_group("hi", 4, priority=100)], cluster_type=RefusingCluster)
    for i in range(4):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i // 2}")))
    members = [member(f"hi-{i}", "hi", "2", priority=100) for i in range(4)]
    for m in members:
        cluster.add_pod(m)
    with caplog.at_level("WARNING", logger="kubesched.scheduler"):
        run(sched)
    failures = [r.getMessage() for r in caplog.records if "event=eviction_failed" in r.getMessage()]
    assert len(failures) == 4
    assert any(f.startswith("pod=default/low-0 preemptor=podgroup ") and " node=n0 " in f for f in failures), failures
    assert "the server is currently unable to handle the request" in failures[0]
    # The gang was not held: it preempted again at once, and those evictions went through.
    assert sorted(seen.victims) == sorted(f"low-{i}" for i in range(4) for _ in range(2))
    assert all(p.deleting for p in cluster.pods.values() if p.name.startswith("low"))


def test_a_gang_that_cannot_fit_even_with_every_victim_gone_evicts_nothing() -> None:
    sched, cluster, _, seen = build([pod_group("hi", 5, priority=100)])
    for i in range(2):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i}")))
    for i in range(5):
        cluster.add_pod(member(f"hi-{i}", "hi", "2", priority=100))
    run(sched)
    assert seen.victims == []
    assert bound(cluster) == ["low-0", "low-1"]
    assert seen.failed_with["hi-3"] == "minCount (5) cannot be satisfied: 2 scheduled, 2 remaining"


def test_dynamic_resources_answers_for_the_group_before_default_preemption() -> None:
    """DynamicResources' PodGroupPostFilter runs first (multiPoint order) and always answers
    Unschedulable (``deallocation and deletion of ResourceClaims completed``): when DefaultPreemption
    refuses as Unschedulable too (preemptionPolicy Never), both answers are the group's, as
    kube-scheduler v1.37.1's RunPodGroupPostFilterPlugins joins them."""
    plugins = {point: [*names, "DynamicResources"] if point in ("preFilter", "filter") else names
               for point, names in GANG_PROFILE.items()}
    plugins["podGroupPostFilter"] = ["DynamicResources", "DefaultPreemption"]
    sched, cluster, _, seen = build([pod_group("g", 3)], plugins=plugins)
    for i in range(3):
        m = member(f"g-{i}", "g", "3")
        m.spec["preemptionPolicy"] = "Never"
        cluster.add_pod(m)
    run(sched)
    placed_then_failed = ("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
                          "deallocation and deletion of ResourceClaims completed, "
                          "pod group preemption: not eligible due to preemptionPolicy=Never.")
    assert seen.failed_with == {"g-0": placed_then_failed, "g-1": placed_then_failed,
                                "g-2": "0/2 nodes are available: 2 Insufficient cpu."}


def test_members_whose_priority_is_not_the_pod_groups_fail_with_upstreams_error() -> None:
    """validatePodGroup: upstream fails the whole group before scheduling (a SchedulerError)."""
    sched, cluster, _, seen = build([pod_group("g", 2)])
    for i in range(2):
        cluster.add_pod(member(f"g-{i}", "g", "1", priority=1000))
    run(sched)
    assert bound(cluster) == []
    message = ("all pods in a single pod group should have the same priority as the pod group's priority, "
               "got 1000 and 0")
    assert seen.failed_with == {"g-0": message, "g-1": message}


# -- PodGroupPreemptionPolicy: TestValidatePodGroup's preemption-policy cases -------------------------

POLICY_GATES = {"GenericWorkload": True, "PodGroupPreemptionPolicy": True}
NEVER, LOWER = "Never", "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("gate", "pod_policies", "message"),
    [
        pytest.param(True, (NEVER, NEVER), None, id="success when preemption policies match"),
        pytest.param(True, (LOWER, NEVER),
                     "all pods in a single pod group should have the same preemption policy as the pod group's "
                     "preemption policy, got PreemptLowerPriority and Never",
                     id="failure when different preemption policies across pods"),
        pytest.param(True, (LOWER, LOWER),
                     "all pods in a single pod group should have the same preemption policy as the pod group's "
                     "preemption policy, got PreemptLowerPriority and Never",
                     id="failure when different preemption policies across pods and pod group"),
        pytest.param(False, (LOWER, LOWER), None,
                     id="success when preemption policies between pods and podgroup do not match but "
                        "PodGroupPreemptionPolicy is disabled"),
        pytest.param(False, (LOWER, NEVER),
                     "all pods in a single pod group should have the same preemption policy, got Never and "
                     "PreemptLowerPriority",
                     id="failure when preemption policies do not match across pods and PodGroupPreemptionPolicy is "
                        "disabled"),
    ],
)
def test_validate_pod_group_preemption_policy(gate: bool, pod_policies: tuple[str, str], message: str | None) -> None:
    group = pod_group("pg", 2)
    group["spec"]["preemptionPolicy"] = NEVER
    sched, cluster, _, seen = build([group], gates=POLICY_GATES if gate else GATES)
    for i, policy in enumerate(pod_policies):
        m = member(f"p{i + 1}", "pg")
        m.spec["preemptionPolicy"] = policy
        cluster.add_pod(m)
    run(sched)
    if message is None:
        assert bound(cluster) == ["p1", "p2"]
    else:
        assert bound(cluster) == []
        assert seen.failed_with == {"p1": message, "p2": message}


def _gang_facing_lower_priority_pods(gates: dict[str, bool], group_policy: str | None,
                                     pod_policy: str = LOWER) -> tuple[SimulatedCluster, Messages]:
    group = pod_group("hi", 2, priority=100)
    if group_policy is not None:
        group["spec"]["preemptionPolicy"] = group_policy
    sched, cluster, _, seen = build([group], gates=gates)
    for i in range(2):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="3", namespace=NS, node_name=f"n{i}")))
    for i in range(2):
        m = member(f"hi-{i}", "hi", "3", priority=100)
        m.spec["preemptionPolicy"] = pod_policy
        cluster.add_pod(m)
    run(sched)
    return cluster, seen


def test_with_the_gate_a_pod_group_whose_policy_is_never_does_not_preempt() -> None:
    """resolvePreemptionPolicy with PodGroupPreemptionPolicy on: the PodGroup's policy decides."""
    _, seen = _gang_facing_lower_priority_pods(POLICY_GATES, NEVER, NEVER)
    assert seen.victims == []
    assert seen.failed_with["hi-0"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert seen.failed_with["hi-1"] == "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"


def test_with_the_gate_a_pod_group_created_without_a_policy_preempts() -> None:
    """A PodGroup created with the gate off has no policy: PreemptLowerPriority."""
    _, seen = _gang_facing_lower_priority_pods(POLICY_GATES, None)
    assert sorted(seen.victims) == ["low-0", "low-1"]


def test_without_the_gate_the_pod_groups_policy_is_not_read() -> None:
    _, seen = _gang_facing_lower_priority_pods(GATES, NEVER)
    assert sorted(seen.victims) == ["low-0", "low-1"]


# -- TestPodGroupSchedulingAlgorithm ---------------------------------------------------------------


class FakeFilter(FilterPlugin):
    """fakePodGroupPlugin: a Filter status per pod name."""

    name: ClassVar[str] = "FakeFilter"
    statuses: ClassVar[dict[str, Status]] = {}

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.statuses.get(pod.name, SUCCESS)


class FakePlacementFeasible(PermitPlugin, PlacementFeasiblePlugin):
    """fakePlacementFeasiblePlugin: the answers in order; Success once they run out."""

    name: ClassVar[str] = "FakePlacementFeasible"
    codes: ClassVar[list[Code]] = []

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._answers = list(self.codes)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return SUCCESS, 0.0

    def placement_feasible(self, state: CycleState, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        code = self._answers.pop(0) if self._answers else Code.SUCCESS
        return Status(code, () if code == Code.SUCCESS else (code.name,))


OK, U, UU, E, W = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.ERROR, Code.WAIT


@pytest.mark.parametrize(
    ("filters", "feasible", "group_code", "pod_codes"),
    [
        ({}, [], OK, [OK, OK, OK]),  # all pods feasible
        ({}, [OK, OK, OK, OK], OK, [OK, OK, OK]),  # podGroup already meeting quorum before any pod
        ({}, [W, W, W, OK], OK, [OK, OK, OK]),  # schedulable with 3 schedulable pods
        ({}, [W, W, W, W], U, [OK, OK, OK]),  # podGroup waiting
        ({}, [W, U], U, [OK]),  # podGroup unschedulable
        ({}, [W, W, U], U, [OK, OK]),  # podGroup unschedulable with 2 pods
        ({"p1": U}, [W, W, W, OK], OK, [U, OK, OK]),  # schedulable with 2 schedulable pods
        ({"p1": UU, "p2": U, "p3": U}, [W, OK, OK, OK], U, [U, U, U]),  # all pods unschedulable
        ({"p2": E}, [], E, [OK, E]),  # any filter returned Error
        ({}, [W, OK, E], E, [OK, OK]),  # any placementFeasible returned Error
        ({}, [U], U, []),  # first placementFeasible call returned Unschedulable
        ({}, [E], E, []),  # first placementFeasible call returned Error
    ],
    ids=["all feasible", "quorum before any pod", "3 schedulable", "waiting", "unschedulable",
         "unschedulable with 2 pods", "2 schedulable", "all unschedulable", "filter error",
         "placementFeasible error", "first Unschedulable", "first Error"],
)
def test_pod_group_scheduling_algorithm(
    filters: dict[str, Code], feasible: list[Code], group_code: Code, pod_codes: list[Code]
) -> None:
    FakeFilter.statuses = {name: Status(code, ("fake",)) for name, code in filters.items()}
    FakePlacementFeasible.codes = feasible
    registry = builtin_registry()
    registry.register(FakeFilter)
    registry.register(FakePlacementFeasible)
    plugins = {"queueSort": ["PrioritySort"], "filter": ["FakeFilter"], "permit": ["FakePlacementFeasible"],
               "bind": ["DefaultBinder"]}
    sched, _, _, _ = build([pod_group("pg", 3)], nodes=1, cpu="8", plugins=plugins, registry=registry)
    fwk = sched.frameworks["default-scheduler"]
    members = [member(f"p{i}", "pg") for i in (1, 2, 3)]
    for m in members:
        sched.queue.add(m)
    qpis = sched.queue.take_group(f"{NS}/pg", "default-scheduler")
    qpis.sort(key=lambda q: q.pod.name)
    cycle = sched._pod_group_cycle
    assert cycle is not None
    result = cycle.algorithm(fwk, PodGroupInfo(NS, "pg", members), qpis)
    assert result.status.code == (U if group_code in (U, UU) else group_code)
    got = []
    for a in result.attempts:
        if isinstance(a.outcome, ScheduleResult):
            assert a.outcome.node_name == "n0"
            got.append(OK)
        else:
            got.append(E if a.outcome.status.is_error else U)
    assert got == pod_codes
    assert int(sched.cache.table.requested[:, 0].sum()) == 0  # every assumption undone


def test_the_queue_hands_over_a_groups_queued_members_only() -> None:
    """take_group: the members waiting in active, backoff or unschedulable of that group and
    profile; gated members, other groups and deleted pods stay out."""
    sched, _, _, _ = build([pod_group("g", None), pod_group("h", None), pod_group("k", 9)])
    queue = sched.queue
    pods = {name: member(name, group) for name, group in [("g-0", "g"), ("g-1", "g"), ("g-2", "g"), ("h-0", "h"),
                                                           ("k-0", "k")]}
    for p in pods.values():
        queue.add(p)
    popped = queue.pop()
    assert popped is not None and popped.pod.name == "g-0"
    queue.add_unschedulable(popped, queue.scheduling_cycle)  # back, as after a failed attempt
    queue.delete(pods["g-2"].uid)
    taken = queue.take_group(f"{NS}/g", "default-scheduler")
    assert sorted(q.pod.name for q in taken) == ["g-0", "g-1"]
    assert queue.take_group(f"{NS}/g", "default-scheduler") == []
    assert queue.take_group(f"{NS}/h", "other-profile") == []
    assert queue.take_group(f"{NS}/k", "default-scheduler") == []  # gated: GangScheduling holds it
    assert [q.pod.name for q in queue.take_group(f"{NS}/h", "default-scheduler")] == ["h-0"]
