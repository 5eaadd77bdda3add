"""``Simulation(...).run()`` directly: virtual time, backoff, termination, Ctrl-C (task
cancellation), determinism and the explain hook."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from kubesched.config.load import load_config
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin
from kubesched.framework.registry import Registry
from kubesched.framework.status import Status
from kubesched.framework.types import Verdicts
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.command import demo_dir
from kubesched.simulate.engine import runner as runner_module
from kubesched.simulate.engine.records import PENDING, PRE_BOUND, SCHEDULED, UNSCHEDULABLE
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.inputs.dump import ClusterInput, load_cluster
from kubesched.simulate.inputs.gc_pause import SIMULATION_GC_THRESHOLD
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.simulate.report.json_doc import result_to_json
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows
from kubesched.testing import node

DATA = Path(__file__).parent / "data" / "cli"
V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def pod(name: str, cpu: str = "100m", memory: str = "128Mi", ts: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2025-01-01T00:{ts // 60:02d}:{ts % 60:02d}Z",
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    }


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterInput:
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source="test")


async def simulate(
    cluster_input: ClusterInput,
    config: Any = None,
    registry: Registry | None = None,
    **kwargs: Any,
) -> SimulationResult:
    registry = registry or builtin_registry()
    cfg = load_config(config, registry)
    return await Simulation(cfg, registry, cluster_input, **kwargs).run()


def placements(result: SimulationResult) -> list[tuple[str, str, str | None]]:
    return [(r.key, r.status, r.node) for r in result.records.values()]


# -- virtual time and termination ---------------------------------------------------------------------


async def test_demo_run_needs_no_retries_and_no_virtual_time() -> None:
    result = await simulate(load_cluster(demo_dir() / "cluster.yaml"), demo_dir() / "config.yaml")
    data = result_to_json(result)
    s = data["summary"]
    assert result.virtual_seconds == 0 and s["virtualSeconds"] == 0
    assert s["unschedulable"] == 9
    # Every simulated pod was tried exactly once: a static replay never retries an unschedulable pod.
    assert s["attempts"] == s["simulated"] == 110
    assert all(r.attempts == 1 for r in result.records.values() if r.status != PRE_BOUND)
    assert not result.interrupted


@pytest.mark.timeout(60)
async def test_run_with_mostly_unschedulable_pods_terminates_quickly() -> None:
    nodes = [node("only", cpu="2", memory="2Gi", pods="10")]
    pods = [pod(f"p{i}", cpu="500m", memory="256Mi", ts=i) for i in range(2000)]
    result = await simulate(cluster(nodes, pods))
    data = result_to_json(result)
    s = data["summary"]
    assert s["scheduled"] == 4  # 4 x 500m = 2 cpu
    assert s["unschedulable"] == 1996
    assert s["attempts"] == 2000  # no retry loop
    assert s["virtualSeconds"] == 0
    assert not s["interrupted"]
    assert "Insufficient cpu" in data["unschedulableReasons"]


class FlakyFilter(FilterPlugin):
    """Fails every pod with an internal error (not a rejection) on its first ``failures`` attempts."""

    name: ClassVar[str] = "FlakyFilter"
    failures: ClassVar[int] = 1

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.calls: dict[str, int] = {}

    def events_to_register(self) -> Sequence[Any]:
        return ()

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        n = self.calls[pod.uid] = self.calls.get(pod.uid, 0) + 1
        if n <= self.failures:
            return Verdicts(np.ones(len(rows), dtype=np.int32), [Status.error("transient failure", plugin=self.name)])
        return Verdicts.all_pass(len(rows))


def flaky_setup(failures: int) -> tuple[dict[str, Any], Registry]:
    cls = type(f"FlakyFilter{failures}", (FlakyFilter,), {"failures": failures, "name": "FlakyFilter"})
    registry = builtin_registry()
    registry.register(cls)
    config = {
        **V1,
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 10,
        "profiles": [
            {"schedulerName": "default-scheduler", "plugins": {"filter": {"enabled": [{"name": "FlakyFilter"}]}}}
        ],
    }
    return config, registry


async def test_backoff_advances_virtual_time_not_wall_time() -> None:
    config, registry = flaky_setup(failures=2)
    nodes = [node("n1"), node("n2")]
    pods = [pod(f"p{i}", ts=i) for i in range(5)]
    started = time.perf_counter()
    result = await simulate(cluster(nodes, pods), config, registry)
    assert time.perf_counter() - started < 5  # nobody slept through the backoff for real
    data = result_to_json(result)
    s = data["summary"]
    assert s["scheduled"] == 5 and s["errors"] == 0
    assert s["attempts"] == 15  # two errors then success, per pod
    assert all(r.attempts == 3 for r in result.records.values())
    # Backoff 1s after the first failure, 2s after the second: the clock jumped to ~3s.
    assert s["virtualSeconds"] == pytest.approx(3.0)
    assert all(r.time == pytest.approx(3.0) for r in result.records.values())


@pytest.mark.timeout(60)
async def test_a_pod_that_always_errors_does_not_loop_forever() -> None:
    config, registry = flaky_setup(failures=10**9)
    reports = 0
    sim_box: list[Simulation] = []

    def progress(done: int, total: int) -> None:
        nonlocal reports
        reports += 1
        if reports >= 2000:  # safety valve so the bug makes the test fail instead of hanging
            sim_box[0].interrupt()

    cfg = load_config(config, registry)
    sim = Simulation(cfg, registry, cluster([node("n1")], [pod("p0")]), progress=progress)
    sim_box.append(sim)
    result = await sim.run()
    assert not result.interrupted, f"still retrying after {reports} loop passes, virtual t={result.virtual_seconds}s"
    rec = next(iter(result.records.values()))
    assert rec.status == "Error" and rec.message


# -- Ctrl-C --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_cluster() -> ClusterInput:
    return generate_cluster(500, 6000, 7)


async def run_and_cancel(cluster_input: ClusterInput) -> tuple[SimulationResult, list[tuple[int, int]]]:
    registry = builtin_registry()
    cfg = load_config(None, registry)
    progressed = asyncio.Event()
    reports: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        reports.append((done, total))
        if done > 0:
            progressed.set()

    sim = Simulation(cfg, registry, cluster_input, seed=1, progress=progress)
    task = asyncio.create_task(sim.run())
    await asyncio.wait_for(progressed.wait(), timeout=60)
    assert not task.done()
    task.cancel()  # what asyncio.run does to the main task on Ctrl-C
    return await asyncio.wait_for(task, timeout=60), reports


@pytest.mark.timeout(120)
async def test_cancelled_run_returns_partial_result_marked_interrupted(big_cluster: ClusterInput) -> None:
    result, reports = await run_and_cancel(big_cluster)
    assert result.interrupted
    total = reports[0][1]
    pending_input = sum(1 for p in big_cluster.pods if not p["spec"].get("nodeName"))
    assert total == pending_input
    data = result_to_json(result)
    s = data["summary"]
    assert s["interrupted"] is True
    assert 0 < s["scheduled"] < total
    assert s["simulated"] < total
    # Partial counts are consistent with the cluster: bound pods are on the nodes' books.
    bound = sum(1 for p in result.cluster.pods.values() if p.node_name)
    pre_bound = sum(1 for p in big_cluster.pods if p["spec"].get("nodeName") and p["status"]["phase"] == "Running")
    assert bound - pre_bound == s["scheduled"]
    assert sum(n["podsAfter"] - n["podsBefore"] for n in data["nodes"]) == s["scheduled"]


@pytest.mark.timeout(120)
async def test_cancelled_run_counts_never_attempted_pods_as_pending(big_cluster: ClusterInput) -> None:
    result, reports = await run_and_cancel(big_cluster)
    s = result_to_json(result)["summary"]
    non_terminal = sum(1 for p in big_cluster.pods if p["status"]["phase"] not in ("Succeeded", "Failed"))
    assert s["pods"] == non_terminal
    assert s["pending"] == reports[0][1] - s["simulated"] > 0


async def test_interrupt_before_start_schedules_nothing() -> None:
    registry = builtin_registry()
    sim = Simulation(
        load_config(None, registry), registry, cluster([node("n1")], [pod(f"p{i}", ts=i) for i in range(3)])
    )
    sim.interrupt()
    result = await sim.run()
    assert result.interrupted
    assert not any(r.status == SCHEDULED for r in result.records.values())


# -- determinism, pre-bound pods, explain ------------------------------------------------------------------


async def test_same_seed_same_placements_across_runs() -> None:
    a = await simulate(generate_cluster(60, 300, 11), seed=5)
    b = await simulate(generate_cluster(60, 300, 11), seed=5)
    assert placements(a) == placements(b)
    assert [r.top_scores for r in a.records.values()] == [r.top_scores for r in b.records.values()]
    c = await simulate(generate_cluster(60, 300, 11), seed=6)
    # A different tie-breaking seed may place pods elsewhere but schedules the same number.
    assert sum(r.status == SCHEDULED for r in c.records.values()) == sum(
        r.status == SCHEDULED for r in a.records.values()
    )


async def test_pre_bound_pods_are_on_the_books_before_scheduling() -> None:
    bound = pod("already", cpu="3", memory="1Gi")
    bound["spec"]["nodeName"] = "n1"
    pods = [bound, pod("new", cpu="2", memory="1Gi", ts=1)]
    result = await simulate(cluster([node("n1"), node("n2")], pods))
    recs = {r.key: r for r in result.records.values()}
    assert recs["default/already"].status == PRE_BOUND and recs["default/already"].attempts == 0
    # n1 has 1 cpu left: the new pod must go to n2.
    assert (recs["default/new"].status, recs["default/new"].node) == (SCHEDULED, "n2")
    data = result_to_json(result)
    n1 = next(n for n in data["nodes"] if n["name"] == "n1")
    assert n1["requestedBefore"]["cpu"] == n1["requestedAfter"]["cpu"] == 3000
    assert data["summary"]["utilisationBefore"]["cpu"] == pytest.approx(3000 / 8000)


async def test_explain_captures_every_node_for_a_pod_that_fits_nowhere() -> None:
    result = await simulate(load_cluster(DATA / "small.yaml"), explain_pod="shop/huge")
    ex = result.explanation
    assert ex is not None and ex.pod == "shop/huge" and ex.profile == "default-scheduler"
    assert ex.feasible == []
    verdicts = {n.node: {p: st.message for p, st in n.filters.items() if st is not None} for n in ex.nodes}
    assert verdicts["small-a"] == {"NodeResourcesFit": "Insufficient memory"}
    assert verdicts["small-b"] == {"NodeResourcesFit": "Insufficient memory"}
    assert set(verdicts["tainted-c"]) == {"TaintToleration"}
    assert ex.message.startswith("0/3 nodes are available")
    assert result.records["sim-shop-huge"].status == UNSCHEDULABLE


async def test_explain_a_pre_bound_pod_as_if_unplaced() -> None:
    bound = pod("already", cpu="3")
    bound["spec"]["nodeName"] = "n1"
    result = await simulate(cluster([node("n1"), node("n2", cpu="2")], [bound]), explain_pod="already")
    ex = result.explanation
    assert ex is not None and ex.pod == "default/already"
    # Taken off n1 while explained, so it fits there; n2 is too small.
    assert [n.node for n in ex.feasible] == ["n1"]
    assert [n.node for n in ex.rejected] == ["n2"]


async def test_strict_scheduler_name_leaves_pods_pending_with_a_reason() -> None:
    custom = pod("custom", ts=1)
    custom["spec"]["schedulerName"] = "nobody"
    pods = [pod("normal"), custom]
    lenient = await simulate(cluster([node("n1")], pods))
    assert lenient.reassigned == {"nobody": 1}
    assert {r.key: r.status for r in lenient.records.values()} == {
        "default/normal": SCHEDULED,
        "default/custom": SCHEDULED,
    }
    strict = await simulate(cluster([node("n1")], pods), strict_scheduler_name=True)
    assert strict.reassigned == {}
    recs = {r.key: r for r in strict.records.values()}
    assert recs["default/custom"].status == PENDING and "nobody" in recs["default/custom"].message
    assert recs["default/normal"].status == SCHEDULED


def test_young_generation_collected_less_often_while_scheduling(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the simulation schedules, the cyclic GC's young threshold is at least
    SIMULATION_GC_THRESHOLD (never lowered below a caller's own); afterwards it is the caller's
    again, the placements unchanged."""
    seen: list[int] = []
    original = runner_module.Simulation._loop

    async def loop(self: Simulation, *args: Any) -> None:
        seen.append(gc.get_threshold()[0])
        await original(self, *args)

    monkeypatch.setattr(runner_module.Simulation, "_loop", loop)
    before = gc.get_threshold()
    try:
        for threshold in (700, 50_000):
            gc.set_threshold(threshold, *before[1:])
            result = asyncio.run(simulate(cluster([node("n1")], [pod("a"), pod("b")])))
            assert gc.get_threshold()[0] == threshold
            assert [status for _, status, _ in placements(result)] == [SCHEDULED, SCHEDULED]
    finally:
        gc.set_threshold(*before)
    assert seen == [SIMULATION_GC_THRESHOLD, 50_000]
