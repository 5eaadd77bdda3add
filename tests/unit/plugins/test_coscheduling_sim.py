"""Coscheduling in the simulator: all-or-nothing gangs, competing gangs, Permit timeouts."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from kubesched.config.load import load_config_text
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL
from kubesched.simulate.engine.records import SCHEDULED, PodRecord
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.testing import node, pod
from unit.plugins.gang_helpers import coscheduling_config, pod_group

CONFIG = coscheduling_config(args="{permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: BACKOFF}")


def keyed(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}": g for g in groups}


def member(name: str, group: str, cpu: str = "1", **kw: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, labels={POD_GROUP_LABEL: group}, **kw)


def simulate(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    groups: list[dict[str, Any]],
    backoff: int = 0,
    max_virtual_seconds: float = 600.0,
) -> SimulationResult:
    """Run the simulator; a gang that can never complete is retried forever (as upstream), so the
    run is interrupted once virtual time passes ``max_virtual_seconds``."""
    config = load_config_text(CONFIG.replace("BACKOFF", str(backoff)), builtin_registry())
    assert config.warnings == []
    cluster = ClusterInput(nodes=nodes, pods=pods, objects={"PodGroup": keyed(groups)}, skipped={}, source="test")
    sim = Simulation(config, builtin_registry(), cluster, seed=0)

    def guard(_bound: int, _total: int) -> None:
        if sim.clock.now() > max_virtual_seconds:
            sim.interrupt()

    sim._progress = guard
    return asyncio.run(sim.run())


def message(rec: PodRecord) -> str:
    """A pod's message without the PostFilter suffix DefaultPreemption adds when it is enabled
    (``... preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.``)."""
    return rec.message.split(" preemption: ", 1)[0]


def bound(result: SimulationResult, prefix: str = "") -> list[str]:
    return sorted(p.name for p in result.cluster.pods.values() if p.node_name and p.name.startswith(prefix))


def test_a_group_of_four_binds_all_together() -> None:
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    result = simulate(nodes, [member(f"a{i}", "a") for i in range(4)], [pod_group("a", 4)])
    assert bound(result) == ["a0", "a1", "a2", "a3"]
    assert all(r.status == SCHEDULED for r in result.records.values())
    assert not result.interrupted


def test_a_group_of_four_on_room_for_three_binds_nothing() -> None:
    nodes = [node("n0", cpu="2"), node("n1", cpu="1")]
    result = simulate(nodes, [member(f"a{i}", "a") for i in range(4)], [pod_group("a", 4)], backoff=30)
    assert result.cluster.binds == 0  # nothing was ever bound, not even for a moment
    assert not result.interrupted  # with a group backoff the run settles: every pod unschedulable
    # Refused as a whole before any member reserved anything (the gang-fit check).
    messages = {message(r) for r in result.records.values()}
    assert messages == {
        "0/2 nodes are available: podGroup default/a: 1/4 members could not be placed: Insufficient cpu."
    }


@pytest.mark.parametrize("backoff", [0, 20])
def test_a_gang_larger_than_the_cluster_never_partially_binds(backoff: int) -> None:
    nodes = [node(f"n{i}", cpu="2") for i in range(3)]
    pods = [member(f"a{i}", "a") for i in range(8)] + [pod("solo", cpu="1")]
    result = simulate(nodes, pods, [pod_group("a", 8)], backoff=backoff, max_virtual_seconds=3600)
    assert bound(result, "a") == []
    # The gang is refused as a whole (it never reserves), the ungrouped pod gets its turn, and the
    # run settles: the unschedulable flush retried the gang once and nothing changed.
    assert bound(result, "solo") == ["solo"]
    assert result.cluster.binds == 1  # every bind is counted: only the ungrouped pod's was made
    assert not result.interrupted and not result.stalled
    assert result.flushes >= 1 and result.virtual_seconds < 1000
    assert result.pod_groups["default/a"]["reason"] == "3/8 members could not be placed: Insufficient cpu"


def test_minresources_larger_than_the_cluster_is_refused_at_prefilter() -> None:
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    groups = [pod_group("a", 2, minResources={"cpu": "5", "memory": "1Gi"})]
    result = simulate(nodes, [member("a0", "a"), member("a1", "a")], groups)
    assert result.cluster.binds == 0
    [msg] = {message(r) for r in result.records.values()}
    assert msg == "0/2 nodes are available: resource gap: cpu: 1."
    # Retried once on the unschedulable flush (5 virtual minutes), to the same verdict: the end.
    assert result.flushes == 1 and result.virtual_seconds == 300


def test_missing_members_are_refused_at_prefilter() -> None:
    result = simulate([node("n0")], [member("a0", "a")], [pod_group("a", 3)])
    [rec] = result.records.values()
    assert message(rec) == (
        "0/1 nodes are available: pre-filter pod a0 cannot find enough sibling pods, current pods number: 1, "
        "minMember of group: 3."
    )


@pytest.mark.parametrize("backoff", [0, 20])
def test_two_gangs_each_holding_half_the_cluster_one_completes(backoff: int) -> None:
    # 4 one-CPU slots; a0, a1, b0, b1 have a higher priority, so both gangs first grab two slots
    # each and wait at Permit for the rest: without a tie-break neither could ever complete.
    nodes = [node(f"n{i}", cpu="1") for i in range(4)]
    pods = [member(f"{g}{i}", g, priority=10 if i < 2 else 0) for g in "ab" for i in range(4)]
    groups = [pod_group("a", 4), pod_group("b", 4, created="2026-01-01T00:00:01Z")]
    result = simulate(nodes, pods, groups, backoff=backoff, max_virtual_seconds=3600)
    assert bound(result) == ["a0", "a1", "a2", "a3"]  # the older group wins
    assert result.cluster.binds == 4  # b never bound a single pod
    # b never even reserved: with a waiting for 2 more, b's 4 could not fit in what is left.
    b_msgs = {message(r) for r in result.records.values() if r.key.startswith("default/b")}
    assert any("podGroup default/b: " in m and "/4 members could not be placed: Insufficient cpu" in m for m in b_msgs)
    assert not result.interrupted


def test_permit_timeout_jumps_the_virtual_clock_and_rejects_the_whole_gang() -> None:
    # The fourth member is gated: it counts as a member (PreFilter passes) but never arrives.
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    pods = [member(f"a{i}", "a") for i in range(3)] + [member("a3", "a", schedulingGates=[{"name": "later"}])]
    groups = [pod_group("a", 4, scheduleTimeoutSeconds=30)]
    result = simulate(nodes, pods, groups, backoff=60)
    assert result.cluster.binds == 0
    assert not result.interrupted and not result.stalled
    # The clock jumped to the Permit deadline (30 s), then the group backed off; the unschedulable
    # flush retried it (5 minutes later) to the same end.
    assert result.virtual_seconds >= 30 and result.flushes >= 1
    # The members released by the timeout were retried at once and found the group backing off.
    messages = sorted(message(r) for r in result.records.values())
    assert messages == ["0/2 nodes are available: podGroup default/a failed recently."] * 3 + [
        "waiting for scheduling gates: [later]"
    ], messages
    assert result.pod_groups["default/a"]["reason"] == (
        "1/4 members could not be placed before the others were rejected at Permit (timeout or rejection)"
    )
    # Every member's resources were released.
    assert int(result.scheduler.cache.table.requested[:, 0].sum()) == 0
    assert len(result.scheduler.waiting_pods) == 0


def test_permit_timeout_without_backoff_keeps_retrying_and_never_binds() -> None:
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    pods = [member(f"a{i}", "a") for i in range(3)] + [member("a3", "a", schedulingGates=[{"name": "later"}])]
    result = simulate(nodes, pods, [pod_group("a", 4)], max_virtual_seconds=100)
    assert result.interrupted and result.virtual_seconds > 100
    assert result.cluster.binds == 0
    assert any("rejected due to timeout after waiting 10s" in r.message for r in result.records.values())


def test_groups_and_plain_pods_share_the_cluster() -> None:
    nodes = [node(f"n{i}", cpu="4") for i in range(2)]
    pods = (
        [member(f"a{i}", "a") for i in range(3)]
        + [pod(f"web{i}", cpu="500m") for i in range(4)]
        + [member(f"b{i}", "b") for i in range(3)]
    )
    result = simulate(nodes, pods, [pod_group("a", 3), pod_group("b", 3)])
    assert len(bound(result)) == 10


def test_a_gang_that_can_never_complete_ends_the_replay() -> None:
    """Without a guard: the runner itself ends the replay (group backoff 0): the gang is refused as
    a whole, and the unschedulable flush retries it once to the same verdict."""
    config = load_config_text(CONFIG.replace("BACKOFF", "0"), builtin_registry())
    cluster = ClusterInput(
        nodes=[node("n1", cpu="2")],
        pods=[member(f"g-{i}", "g") for i in range(3)],
        objects={"PodGroup": keyed([pod_group("g", 3)])},
        skipped={},
        source="test",
    )
    result = asyncio.run(Simulation(config, builtin_registry(), cluster, seed=0).run())
    assert not result.stalled and not result.interrupted
    assert bound(result) == []
    assert result.flushes == 1 and result.virtual_seconds == 300
    assert result.pod_groups["default/g"]["reason"] == "1/3 members could not be placed: Insufficient cpu"


# -- gangs that neither starve nor deadlock ----------------------------------------------------------

EXAMPLE = Path(__file__).parents[3] / "examples" / "coscheduling.yaml"


def simulate_example(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], groups: list[dict[str, Any]], backoff: int
) -> SimulationResult:
    """The profile of examples/coscheduling.yaml (default plugins + Coscheduling), no guard: the
    runner itself must end the replay."""
    text = EXAMPLE.read_text().replace("podGroupBackoffSeconds: 10", f"podGroupBackoffSeconds: {backoff}")
    assert f"podGroupBackoffSeconds: {backoff}" in text
    config = load_config_text(text, builtin_registry())
    cluster = ClusterInput(nodes=nodes, pods=pods, objects={"PodGroup": keyed(groups)}, skipped={}, source="test")
    return asyncio.run(Simulation(config, builtin_registry(), cluster, seed=0).run())


@pytest.mark.parametrize("backoff", [0, 3, 10])
@pytest.mark.parametrize("big_first", [True, False])
def test_a_gang_that_fits_binds_while_one_that_never_fits_stays_pending(backoff: int, big_first: bool) -> None:
    nodes = [node("n0", cpu="4"), node("n1", cpu="4")]
    early, late = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"
    groups = [
        pod_group("big", 5, created=early if big_first else late),
        pod_group("small", 3, created=late if big_first else early),
    ]
    big = [member(f"big-{i}", "big", cpu="2") for i in range(5)]
    small = [member(f"small-{i}", "small", cpu="1") for i in range(3)]
    result = simulate_example(nodes, big + small if big_first else small + big, groups, backoff)
    assert bound(result) == ["small-0", "small-1", "small-2"]
    assert result.cluster.binds == 3  # no big member was ever bound
    assert not result.interrupted and not result.stalled
    # A gang-level reason: before small binds 1 of big's 5 members has no room, after it 3.
    [big_msg] = {message(r) for r in result.records.values() if r.key.startswith("default/big-")}
    assert re.fullmatch(
        r"0/2 nodes are available: podGroup default/big: [13]/5 members could not be placed: Insufficient cpu\.",
        big_msg,
    ), big_msg
    left = result.pod_groups
    assert left["default/small"]["phase"] == "Scheduled" and left["default/small"]["scheduled"] == 3
    assert left["default/big"]["phase"] == "PreScheduling" and left["default/big"]["pending"] == 5
    assert left["default/big"]["reason"] in big_msg


@pytest.mark.parametrize("backoff", [0, 3, 10])
def test_many_gangs_competing_bind_only_whole_gangs_and_as_many_as_fit(backoff: int) -> None:
    # 6 nodes x 4 cpu = 24 cpu; 10 gangs of 3 x 2 cpu (6 cpu each, 2 members fit a node): 4 fit.
    nodes = [node(f"n{i}", cpu="4") for i in range(6)]
    groups = [pod_group(f"g{i}", 3, created=f"2026-01-01T00:00:{i:02d}Z") for i in range(10)]
    # Interleaved in the input, so members of different gangs are pending side by side.
    pods = [member(f"g{i}-{j}", f"g{i}", cpu="2") for j in range(3) for i in reversed(range(10))]
    result = simulate_example(nodes, pods, groups, backoff)
    assert not result.interrupted and not result.stalled
    per_group: dict[str, int] = {}
    for name in bound(result):
        per_group[name.split("-")[0]] = per_group.get(name.split("-")[0], 0) + 1
    assert set(per_group.values()) == {3}, per_group  # never a partial gang
    assert len(per_group) == 4  # as many complete gangs as fit
    assert result.cluster.binds == 12
    left = {k for k, g in result.pod_groups.items() if g["phase"] != "Scheduled"}
    assert len(left) == 6
    reason = re.compile(r"\d/3 members could not be placed: Insufficient cpu")
    assert all(reason.fullmatch(result.pod_groups[k]["reason"]) for k in left)


@pytest.mark.parametrize("backoff", [0, 10])
def test_heterogeneous_gangs_never_leave_a_partial_gang_bound(backoff: int) -> None:
    # Gangs whose members do not all fit one shape of node: some pass the cheap check and fail
    # while placing; their reservations are released at once and other gangs still get through.
    nodes = [node("n0", cpu="6"), node("n1", cpu="3"), node("n2", cpu="3")]
    groups = [pod_group(f"g{i}", 3, created=f"2026-01-01T00:00:{i:02d}Z") for i in range(5)]
    sizes = {0: ["4", "4", "1"], 1: ["2", "2", "2"], 2: ["3", "1", "1"], 3: ["1", "1", "1"], 4: ["5", "1", "1"]}
    pods = [member(f"g{i}-{j}", f"g{i}", cpu=c) for i, cs in sizes.items() for j, c in enumerate(cs)]
    result = simulate_example(nodes, pods, groups, backoff)
    assert not result.interrupted
    per_group: dict[str, int] = {}
    for name in bound(result):
        per_group[name.split("-")[0]] = per_group.get(name.split("-")[0], 0) + 1
    assert set(per_group.values()) <= {3}, per_group
    assert per_group  # something fits
    # Every reservation of a failed gang was released: the table holds exactly the bound pods.
    table = result.scheduler.cache.table
    assert sum(len(table.pods[r]) for r in table.alive_rows()) == result.cluster.binds == len(bound(result))
    assert len(result.scheduler.waiting_pods) == 0


def test_a_rejected_gang_waits_for_its_reservations_to_be_released_in_any_shell() -> None:
    """Without the simulator's eager release (e.g. the live shell between two yields), a member
    of another gang does not fail against a rejected gang's reservations: it waits for them."""
    from kubesched.framework.clock import FakeClock
    from kubesched.plugins.coscheduling import Coscheduling
    from kubesched.scheduler import Scheduler
    from kubesched.simulate.engine.cluster import SimulatedCluster
    from kubesched.snapshot.pod import PodInfo

    config = load_config_text(CONFIG.replace("BACKOFF", "10"), builtin_registry())
    cluster = SimulatedCluster()
    for g in (pod_group("a", 3), pod_group("b", 2, created="2026-01-01T00:00:01Z")):
        cluster.add_object("PodGroup", f"default/{g['metadata']['name']}", g)
    sched = Scheduler.build(config.profiles, builtin_registry(), FakeClock(0.0), client=cluster, objects=cluster.kind)
    cluster.attach(sched)
    cluster.add_node(node("n0", cpu="3"))
    cs = sched.frameworks["default-scheduler"].plugins["Coscheduling"]
    assert isinstance(cs, Coscheduling)
    a = [PodInfo.from_raw(member(f"a{i}", "a")) for i in range(3)]
    b = [PodInfo.from_raw(member(f"b{i}", "b")) for i in range(2)]
    failures: dict[str, str] = {}

    class Obs:
        def scheduled(self, *_: Any) -> None: ...
        def bound(self, *_: Any) -> None: ...
        def failed(self, pod: PodInfo, _profile: str, failure: Any) -> None:
            failures[pod.name] = failure.message

    sched.observer = Obs()  # type: ignore[assignment]

    async def go() -> None:
        # a's members all exist; a2 is gated, so a0 and a1 take 2 of the 3 cpus and wait.
        for p in (a[0], a[1], PodInfo.from_raw(member("a2", "a", schedulingGates=[{"name": "x"}])), *b):
            cluster.add_pod(p)
        assert sched.schedule_one() and sched.schedule_one()
        await asyncio.sleep(0)
        assert len(sched.waiting_pods) == 2
        cs._reject_waiting("default/a", "test rejection")  # a gang-level rejection, not yet released
        # No yield: b0 comes next while a's reservations are still in the table.
        assert sched.schedule_one()
        assert "waiting for the reservations of rejected podGroup default/a" in failures["b0"]
        await sched.drain()  # a's binding cycles release the node ...
        sched.tick(sched.clock.now() + 5)  # ... and b's members come back after their backoff
        while sched.schedule_one():
            await sched.drain()

    asyncio.run(go())
    assert sorted(p.name for p in cluster.pods.values() if p.node_name) == ["b0", "b1"]


def test_gangs_at_scale_2000_gangs_of_8_on_1000_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    """Room for 1,500 of 2,000 gangs (12,000 of 16,000 cpus asked). Measured, not timed: the rate
    is printed (pytest -s); member counting and the gang-fit check are O(members of a group)."""
    nodes = [node(f"n{i:04d}", cpu="12", memory="48Gi") for i in range(1000)]
    groups = [
        pod_group(f"g{i:04d}", 8, created=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z")
        for i in range(2000)
    ]
    pods = [member(f"g{i:04d}-{j}", f"g{i:04d}", cpu="1", memory="2Gi") for i in range(2000) for j in range(8)]
    result = simulate_example(nodes, pods, groups, backoff=10)
    per_group: dict[str, int] = {}
    for p in result.cluster.pods.values():
        if p.node_name:
            per_group[p.name.split("-")[0]] = per_group.get(p.name.split("-")[0], 0) + 1
    assert set(per_group.values()) == {8} and len(per_group) == 1500
    assert not result.stalled and not result.interrupted
    with capsys.disabled():
        print(f"\n2,000 gangs x 8 pods on 1,000 nodes: {len(pods) / result.wall_seconds:,.0f} pods/s "
              f"({result.wall_seconds:.2f} s wall, {result.attempts} attempts, {result.flushes} flushes)")


def test_json_output_has_a_pod_groups_section() -> None:
    from kubesched.simulate.report.json_doc import result_to_json

    nodes = [node("n0", cpu="4"), node("n1", cpu="4")]
    groups = [pod_group("big", 5), pod_group("small", 3, created="2026-01-01T00:00:05Z")]
    pods = [member(f"big-{i}", "big", cpu="2") for i in range(5)] + [member(f"s{i}", "small") for i in range(3)]
    data = result_to_json(simulate_example(nodes, pods, groups, backoff=10))
    assert data["podGroups"]["default/small"]["phase"] == "Scheduled"
    assert data["podGroups"]["default/big"]["reason"].endswith("/5 members could not be placed: Insufficient cpu")
    assert data["summary"]["scheduled"] == 3
