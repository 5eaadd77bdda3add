"""UnderlayIP: the reference ip-scheduler's budget, exact under assume/forget/delete/restart."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.underlay_ip import UnderlayIP, UnderlayIPArgs
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import StaticProfile, node, pod

PROFILE = "blueking-ip-scheduler"


UNDERLAY_PLUGINS: dict[str, list[str]] = {
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeResourcesFit", "UnderlayIP"],
    "filter": ["NodeUnschedulable", "TaintToleration", "NodeResourcesFit", "UnderlayIP"],
    "preScore": ["UnderlayIP"],
    "score": ["UnderlayIP"],
    "reserve": ["UnderlayIP"],
    "bind": ["DefaultBinder"],
}


def underlay_profile(args: UnderlayIPArgs) -> StaticProfile:
    return StaticProfile(UNDERLAY_PLUGINS, scheduler_name=PROFILE, score_weights={"UnderlayIP": 1},
                         plugin_args={"UnderlayIP": args})


def ip_pod(name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, cpu="100m", memory="64Mi", scheduler_name=PROFILE, **kw)


def run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], args: UnderlayIPArgs | None = None) -> Any:
    cluster = SimulatedCluster()
    profile = underlay_profile(args or UnderlayIPArgs())
    sched = Scheduler.build([profile], builtin_registry(), FakeClock(), client=cluster, seed=1)
    cluster.attach(sched)
    for n in nodes:
        cluster.add_node(n)
    for p in pods:
        cluster.add_pod(PodInfo.from_raw(p))

    async def go() -> None:
        while sched.schedule_one():
            pass
        await sched.drain()

    asyncio.run(go())
    return cluster, sched


def placed(cluster: SimulatedCluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in cluster.pods.values():
        if p.node_name:
            counts[p.node_name] = counts.get(p.node_name, 0) + 1
    return counts


def test_eleventh_underlay_pod_on_a_10_ip_node_stays_pending_with_a_clear_reason() -> None:
    failures: list[str] = []
    cluster, sched = run([node("n1", cpu="64", memory="64Gi")], [ip_pod(f"p{i}") for i in range(11)])

    assert placed(cluster) == {"n1": 10}
    pending = [q.pod.name for q in sched.queue.pending_pods()]
    assert len(pending) == 1
    sched.observer.failed = lambda p, prof, f: failures.append(f.message)  # type: ignore[method-assign]
    qpi = next(iter(sched.queue.pending_pods()))
    sched.queue.delete(qpi.pod.uid)
    sched.queue.add(qpi.pod)
    sched.schedule_one()
    assert failures == ["0/1 nodes are available: 1 node(s) had no free underlay IP."]


def test_most_free_ips_wins_and_spreads_pods_evenly() -> None:
    cluster, _ = run([node(f"n{i}", cpu="64", memory="64Gi") for i in range(3)], [ip_pod(f"p{i}") for i in range(9)])
    assert placed(cluster) == {"n0": 3, "n1": 3, "n2": 3}


def test_budget_override_from_node_annotation_and_label() -> None:
    small = node("small", cpu="64", memory="64Gi")
    small["metadata"]["annotations"] = {"kubesched.io/underlay-ips": "2"}
    labelled = node("labelled", cpu="64", memory="64Gi", labels={"kubesched.io/underlay-ips": "1"})
    cluster, _ = run([small, labelled], [ip_pod(f"p{i}") for i in range(5)])
    assert placed(cluster) == {"small": 2, "labelled": 1}


def test_control_plane_nodes_get_no_ips() -> None:
    cp = node("cp", cpu="64", memory="64Gi", labels={"node-role.kubernetes.io/master": ""})
    cluster, _ = run([cp, node("w", cpu="64", memory="64Gi")], [ip_pod(f"p{i}") for i in range(3)])
    assert placed(cluster) == {"w": 3}


def test_pods_of_other_schedulers_consume_no_ip_by_default() -> None:
    others = [pod(f"web{i}", cpu="100m", node_name="n1") for i in range(20)]
    cluster, _ = run([node("n1", cpu="64", memory="64Gi")], others + [ip_pod(f"p{i}") for i in range(10)])
    assert placed(cluster)["n1"] == 30


def test_pod_selector_and_extended_resource_style() -> None:
    args = UnderlayIPArgs.model_validate(
        {"podSelector": {"matchLabels": {"network": "underlay"}}, "resourceName": "kubesched.io/underlay-ip"}
    )
    table = NodeTable()
    handle = Handle(table, FakeClock(), WaitingPods(), profile_name=PROFILE)
    plugin = UnderlayIP(args, handle)
    two = PodInfo.from_raw(
        pod("a", labels={"network": "underlay"}, extra_requests={"kubesched.io/underlay-ip": "2"})
    )
    unlabeled = PodInfo.from_raw(pod("b", extra_requests={"kubesched.io/underlay-ip": "1"}))
    assert plugin.ips_needed(two) == 2
    assert plugin.ips_needed(unlabeled) == 0
    assert plugin.ips_needed(PodInfo.from_raw(pod("c", labels={"network": "underlay"}))) == 0


def test_counts_are_rebuilt_from_bound_pods_and_survive_node_leaving_and_returning() -> None:
    table = NodeTable()
    n = node("n1", cpu="64", memory="64Gi")
    table.upsert_node(n)
    for i in range(7):
        table.add_pod(PodInfo.from_raw(ip_pod(f"p{i}", node_name="n1")))
    # A plugin built after the pods were bound (a restarted scheduler) counts them.
    plugin = UnderlayIP(UnderlayIPArgs(), Handle(table, FakeClock(), WaitingPods(), profile_name=PROFILE))
    rows = np.array([table.row_of("n1")], dtype=np.intp)
    assert plugin.free_ips(table, rows).tolist() == [3]
    table.remove_node("n1")
    table.upsert_node(n)
    rows = np.array([table.row_of("n1")], dtype=np.intp)
    assert plugin.free_ips(table, rows).tolist() == [3]
    table.remove_pod(next(iter(table.pods[int(rows[0])])))
    assert plugin.free_ips(table, rows).tolist() == [4]


def test_reserve_refuses_an_over_committed_node() -> None:
    table = NodeTable()
    table.upsert_node(node("n1", cpu="64", memory="64Gi"))
    plugin = UnderlayIP(UnderlayIPArgs(ipsPerNode=1), Handle(table, FakeClock(), WaitingPods(), profile_name=PROFILE))
    first = PodInfo.from_raw(ip_pod("a", node_name="n1"))
    table.add_pod(first)
    racer = PodInfo.from_raw(ip_pod("b"))
    table.add_pod(racer.with_node("n1"))  # assumed by a concurrent cycle
    st = plugin.reserve(CycleState(), racer, "n1")
    assert st.is_rejected and st.reasons == ("node(s) had no free underlay IP",)


def test_deleting_a_pod_frees_its_ip_and_the_pending_pod_binds() -> None:
    cluster, sched = run([node("n1", cpu="64", memory="64Gi")], [ip_pod(f"p{i}") for i in range(11)])
    victim = next(p for p in cluster.pods.values() if p.node_name)
    cluster.delete_pod(victim.uid)

    async def go() -> None:
        sched.tick(sched.clock.now() + 60)
        while sched.schedule_one():
            pass
        await sched.drain()

    asyncio.run(go())
    assert placed(cluster) == {"n1": 10}
    assert not list(sched.queue.pending_pods())


def test_args_validation_names_the_field() -> None:
    with pytest.raises(ValidationError, match="ipsPerNode"):
        UnderlayIPArgs.model_validate({"ipsPerNode": -1})
    with pytest.raises(ValidationError, match="podSelectr"):
        UnderlayIPArgs.model_validate({"podSelectr": {}})
