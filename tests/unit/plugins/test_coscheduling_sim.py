"""Coscheduling in the simulator: all-or-nothing gangs, competing gangs, Permit timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.config.load import load_config_text
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL
from kubesched.simulate.inputs import ClusterInput
from kubesched.simulate.records import SCHEDULED
from kubesched.simulate.runner import Simulation, SimulationResult
from kubesched.testing import node, pod

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
    preFilter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
    reserve: {enabled: [{name: Coscheduling}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: BACKOFF}
"""


def keyed(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}": g for g in groups}


def pod_group(name: str, min_member: int, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"minMember": min_member, **spec},
    }


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
    messages = {r.message for r in result.records.values()}
    assert "0/2 nodes are available: podGroup default/a failed recently." in messages


@pytest.mark.parametrize("backoff", [0, 20])
def test_a_gang_larger_than_the_cluster_never_partially_binds(backoff: int) -> None:
    nodes = [node(f"n{i}", cpu="2") for i in range(3)]
    pods = [member(f"a{i}", "a") for i in range(8)] + [pod("solo", cpu="1")]
    result = simulate(nodes, pods, [pod_group("a", 8)], backoff=backoff, max_virtual_seconds=300)
    assert bound(result, "a") == []
    if backoff:
        # The group backs off, the ungrouped pod gets its turn, and the run settles.
        assert bound(result, "solo") == ["solo"]
        assert result.cluster.binds == 1  # every bind is counted: only the ungrouped pod's was made
        assert not result.interrupted
        assert result.virtual_seconds < 60
    else:
        # Without a backoff the gang is retried for ever (as upstream) and, being older, keeps
        # taking its turn before the ungrouped pod.
        assert result.interrupted
        assert result.cluster.binds == len(bound(result, "solo"))


def test_minresources_larger_than_the_cluster_is_refused_at_prefilter() -> None:
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    groups = [pod_group("a", 2, minResources={"cpu": "5", "memory": "1Gi"})]
    result = simulate(nodes, [member("a0", "a"), member("a1", "a")], groups)
    assert result.cluster.binds == 0
    [msg] = {r.message for r in result.records.values()}
    assert msg == "0/2 nodes are available: resource gap: cpu: 1."
    assert result.virtual_seconds == 0


def test_missing_members_are_refused_at_prefilter() -> None:
    result = simulate([node("n0")], [member("a0", "a")], [pod_group("a", 3)])
    [rec] = result.records.values()
    assert rec.message == (
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
    result = simulate(nodes, pods, groups, backoff=backoff, max_virtual_seconds=300)
    assert bound(result) == ["a0", "a1", "a2", "a3"]  # the older group wins
    assert result.cluster.binds == 4  # b never bound a single pod
    assert any("rejected to make room for PodGroup default/a" in r.message for r in result.records.values())


def test_permit_timeout_jumps_the_virtual_clock_and_rejects_the_whole_gang() -> None:
    # The fourth member is gated: it counts as a member (PreFilter passes) but never arrives.
    nodes = [node("n0", cpu="2"), node("n1", cpu="2")]
    pods = [member(f"a{i}", "a") for i in range(3)] + [member("a3", "a", schedulingGates=[{"name": "later"}])]
    groups = [pod_group("a", 4, scheduleTimeoutSeconds=30)]
    result = simulate(nodes, pods, groups, backoff=60)
    assert result.cluster.binds == 0
    assert not result.interrupted
    # The clock jumped to the Permit deadline (30 s), then the group backed off.
    assert 30 <= result.virtual_seconds < 60
    timed_out = [r for r in result.records.values() if "timeout" in r.message]
    assert timed_out, [r.message for r in result.records.values()]
    assert "rejected due to timeout after waiting 30s at plugin Coscheduling" in timed_out[0].message
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


def test_a_gang_that_can_never_complete_stops_the_replay_as_stalled() -> None:
    """Without a guard: the runner itself ends a replay that only retries (group backoff 0)."""
    config = load_config_text(CONFIG.replace("BACKOFF", "0"), builtin_registry())
    cluster = ClusterInput(
        nodes=[node("n1", cpu="2")],
        pods=[member(f"g-{i}", "g") for i in range(3)],
        objects={"PodGroup": keyed([pod_group("g", 3)])},
        skipped={},
        source="test",
    )
    result = asyncio.run(Simulation(config, builtin_registry(), cluster, seed=0).run())
    assert result.stalled and not result.interrupted
    assert bound(result) == []
    assert 900 < result.virtual_seconds < 3600
