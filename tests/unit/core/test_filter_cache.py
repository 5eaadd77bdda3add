"""Filter verdicts shared by pods with the same signature (framework/filter_cache.py).

The cache must never change a scheduling outcome: every test compares what a user sees (the
node, the failure message, the plugins that rejected) with the cache in play and without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, fit_error_message
from kubesched.framework.filter_cache import STATE_KEY, SignatureVerdicts
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Status
from kubesched.framework.types import Verdicts
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import ScheduleFailure, Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod_info

GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def scheduler() -> tuple[Scheduler, SimulatedCluster, Framework]:
    registry = builtin_registry()
    config = load_config(None, registry)
    cluster = SimulatedCluster()
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, objects=cluster.kind)
    cluster.attach(sched)
    return sched, cluster, next(iter(sched.frameworks.values()))


def filter_all(fwk: Framework, pod: PodInfo) -> tuple[list[str], str, set[str], bool]:
    """Passing node names, the FitError text over all nodes, rejecting plugins, cache used."""
    table = fwk.handle.table
    state = CycleState()
    _, st = fwk.run_pre_filter(state, pod)
    assert st.is_success
    diagnosis = Diagnosis()
    passing, st = fwk.run_filters(state, pod, table.alive_rows(), diagnosis)
    assert st.is_success
    used = state.get(STATE_KEY) is not None
    return table.node_names(passing), fit_error_message(len(table), diagnosis), diagnosis.unschedulable_plugins, used


def mixed_nodes(cluster: SimulatedCluster) -> None:
    for i in range(6):
        kw: dict[str, Any] = {}
        if i % 3 == 1:
            kw["taints"] = [GPU_TAINT]
        if i == 5:
            kw["unschedulable"] = True
        cluster.add_node(node(f"n{i}", cpu="2", labels={"zone": "a" if i < 3 else "b"}, **kw))


def test_a_family_shares_verdicts_from_its_second_pod_and_they_equal_the_uncached_ones() -> None:
    _, cluster, fwk = scheduler()
    mixed_nodes(cluster)
    results = [filter_all(fwk, pod_info(f"p{i}", cpu="1", nodeSelector={"zone": "a"})) for i in range(3)]
    assert [r[3] for r in results] == [False, True, True]  # first pod: evaluated plugin by plugin
    assert results[0][:3] == results[1][:3] == results[2][:3]
    names, message, plugins, _ = results[0]
    assert names == ["n0", "n2"]
    # The first rejection per node wins, in Filter order: n5 cordoned, n1/n4 tainted, n3 zone b.
    assert message == (
        "0/6 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) were unschedulable, 2 node(s) had untolerated taint(s)."
    )
    assert plugins == {"NodeUnschedulable", "TaintToleration", "NodeAffinity"}


def test_pods_that_differ_in_what_the_filters_read_do_not_share() -> None:
    _, cluster, fwk = scheduler()
    mixed_nodes(cluster)
    for i in range(2):
        filter_all(fwk, pod_info(f"plain{i}", cpu="1"))
    tolerant = [filter_all(fwk, pod_info(f"gpu{i}", cpu="1", tolerations=[GPU_TOLERATION])) for i in range(2)]
    assert tolerant[0][0] == tolerant[1][0] == ["n0", "n1", "n2", "n3", "n4"]
    plain = filter_all(fwk, pod_info("plain2", cpu="1"))
    assert plain[3] and plain[0] == ["n0", "n2", "n3"]


def test_a_node_change_invalidates_the_shared_verdicts() -> None:
    _, cluster, fwk = scheduler()
    mixed_nodes(cluster)
    for i in range(2):
        filter_all(fwk, pod_info(f"a{i}", cpu="1"))
    cluster.add_node(node("n0", cpu="2", labels={"zone": "a"}, taints=[GPU_TAINT]))  # n0 tainted now
    names, _, _, _ = filter_all(fwk, pod_info("a2", cpu="1"))
    assert "n0" not in names


async def test_resource_verdicts_stay_live_while_pods_fill_the_nodes() -> None:
    sched, cluster, _ = scheduler()
    for i in range(2):
        cluster.add_node(node(f"n{i}", cpu="2"))
    for i in range(5):
        cluster.add_pod(pod_info(f"w{i}", cpu="1", tolerations=[GPU_TOLERATION]))
    failures: list[str] = []

    class Observer:
        def scheduled(self, *a: Any) -> None: ...
        def bound(self, *a: Any) -> None: ...
        def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
            failures.append(failure.message)

    sched.observer = Observer()  # type: ignore[assignment]
    while sched.schedule_one():
        pass
    await sched.drain()
    placed = [p for p in cluster.pods.values() if p.node_name]
    assert len(placed) == 4
    # DefaultPreemption (default profile) finds no lower-priority pod to evict: upstream's suffix.
    assert failures == ["0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
                        "2 No preemption victims found for incoming pod."]


def test_error_statuses_are_never_cached() -> None:
    _, cluster, fwk = scheduler()
    mixed_nodes(cluster)
    pod = pod_info("x", cpu="1")
    state = CycleState()
    fwk.run_pre_filter(state, pod)
    cache = fwk.signature_cache
    table = fwk.handle.table
    # A plugin that reports an error over the whole table makes the entry uncacheable.
    broken = cache.plugins[0]
    original = broken.filter_batch

    def failing(*a: Any) -> Verdicts:
        rows = a[3]
        return Verdicts(np.ones(len(rows), dtype=np.int32), [Status.error("boom")])

    broken.filter_batch = failing  # type: ignore[method-assign]
    try:
        assert cache._evaluate(state, pod, table) is None
    finally:
        broken.filter_batch = original  # type: ignore[method-assign]


def test_a_status_heartbeat_keeps_the_shared_verdicts_but_a_label_change_does_not() -> None:
    _, cluster, fwk = scheduler()
    mixed_nodes(cluster)
    selector = {"zone": "a"}
    for i in range(2):
        filter_all(fwk, pod_info(f"a{i}", cpu="1", nodeSelector=selector))
    beat = node("n3", cpu="2", labels={"zone": "b"})
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-22T00:00:00Z"}]
    beat["metadata"]["resourceVersion"] = "42"
    cluster.add_node(beat)
    assert filter_all(fwk, pod_info("a2", cpu="1", nodeSelector=selector))[3]  # still shared
    cluster.add_node(node("n3", cpu="2", labels={"zone": "a"}))  # relabelled into zone a
    names, _, _, used = filter_all(fwk, pod_info("a3", cpu="1", nodeSelector=selector))
    assert not used and "n3" in names


def test_cached_verdicts_keep_the_passing_rows_in_order_and_record_the_others() -> None:
    rejected = Status.unresolvable("node(s) had untolerated taint", plugin="TaintToleration")
    verdicts = SignatureVerdicts(np.array([0, 1, 0, 1, 0], dtype=np.int32), [rejected])
    diagnosis = Diagnosis()
    rows = np.array([4, 3, 2, 1, 0], dtype=np.intp)  # a rotated window
    assert verdicts.keep_passing(rows, diagnosis).tolist() == [4, 2, 0]
    assert dict(diagnosis.node_to_status.items()) == {3: rejected, 1: rejected}
    assert diagnosis.unschedulable_plugins == {"TaintToleration"}
    everyone = SignatureVerdicts(np.zeros(5, dtype=np.int32), [])
    untouched = Diagnosis()
    assert everyone.keep_passing(rows, untouched) is rows
    assert len(untouched.node_to_status) == 0


def test_ascending_windows_get_the_same_rows_and_rejections_as_gathered_ones() -> None:
    # Consecutive ascending windows are answered with slices; a gap or a window of one row must
    # still equal the gather of each row's verdict.
    rejected = Status.unresolvable("node(s) had untolerated taint", plugin="TaintToleration")
    cordoned = Status.unresolvable("node(s) were unschedulable", plugin="NodeUnschedulable")
    codes = np.array([0, 1, 0, 2, 0, 0, 1, 1, 0, 2], dtype=np.int32)
    verdicts = SignatureVerdicts(codes, [rejected, cordoned])
    windows = [[0, 1, 2, 3, 4], [3, 4, 5, 6], [6, 7], [9], [8], [1, 2, 5, 6], [2, 4, 6, 7, 8, 9], []]
    for window in windows:
        rows = np.array(window, dtype=np.intp)
        sliced, gathered = Diagnosis(), Diagnosis()
        kept = verdicts.keep_passing(rows, sliced, ascending=True)
        assert kept.tolist() == [r for r in window if codes[r] == 0]
        assert kept.tolist() == verdicts.keep_passing(rows, gathered).tolist()
        assert dict(sliced.node_to_status.items()) == dict(gathered.node_to_status.items())
        assert len(sliced.node_to_status) == len(gathered.node_to_status) == sum(1 for r in window if codes[r])
