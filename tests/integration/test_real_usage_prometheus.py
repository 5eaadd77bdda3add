"""MemRealUsage against a real Prometheus: pods avoid the node whose real memory is exhausted;
stopping Prometheus leaves scheduling working with neutral scores.

Needs the ``prometheus`` binary (Debian: apt-get install -y prometheus). Skipped with the reason
when it is missing, except under CI=true where that is a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.real_usage import MemRealUsageArgs, RealUsage
from kubesched.plugins.real_usage.plugin import QUERY_FAILURES
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod

from .prometheus_harness import IN_CI, INSTALL_HINT, NodeExporter, PrometheusServer, prometheus_binary

GiB = 1 << 30

if prometheus_binary() is None:
    if IN_CI:
        pytest.fail(f"CI=true: the prometheus binary is required ({INSTALL_HINT})", pytrace=False)
    pytest.skip(f"prometheus is not installed ({INSTALL_HINT})", allow_module_level=True)


MEM_PLUGINS: dict[str, list[str]] = {
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeResourcesFit"],
    "filter": ["NodeResourcesFit"],
    "score": ["NodeResourcesFit", "MemRealUsage"],
    "bind": ["DefaultBinder"],
}


@pytest.fixture
async def prometheus(tmp_path: Path) -> AsyncIterator[tuple[PrometheusServer, NodeExporter]]:
    exporter = NodeExporter()
    # n2's requests are free, but its real memory is 97 % used.
    exporter.memory = {"n1": (24 * GiB, 32 * GiB), "n2": (1 * GiB, 32 * GiB), "n3": (20 * GiB, 32 * GiB)}
    await exporter.start()
    server = PrometheusServer(tmp_path, f"127.0.0.1:{exporter.port}")
    server.start()
    try:
        await server.wait_for("node_memory_MemAvailable_bytes", samples=3)
        yield server, exporter
    finally:
        server.stop()
        await exporter.stop()


def placed(cluster: SimulatedCluster) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in cluster.pods.values():
        if p.node_name:
            out[p.node_name] = out.get(p.node_name, 0) + 1
    return out


async def schedule(sched: Scheduler, cluster: SimulatedCluster, names: list[str]) -> None:
    for name in names:
        cluster.add_pod(
            PodInfo.from_raw(pod(name, cpu="50m", memory="100Mi", scheduler_name="mem-real-usage-scheduler"))
        )
    while sched.schedule_one():
        pass
    await sched.drain()


@pytest.mark.timeout(120)
async def test_pods_avoid_the_hot_node_and_survive_prometheus_going_away(
    prometheus: tuple[PrometheusServer, NodeExporter],
) -> None:
    server, _ = prometheus
    args = MemRealUsageArgs(
        prometheusApiAddr=server.url,
        queryMetricTimeSeconds=2,
        queryMetricIntervalSeconds=0.5,
        metricStaleSeconds=2,
    )
    cluster = SimulatedCluster()
    sched = Scheduler.build(
        [StaticProfile(MEM_PLUGINS, scheduler_name="mem-real-usage-scheduler",
                       score_weights={"NodeResourcesFit": 1, "MemRealUsage": 5},
                       plugin_args={"MemRealUsage": args})], builtin_registry(), FakeClock(), client=cluster, seed=7
    )
    cluster.attach(sched)
    for name in ("n1", "n2", "n3"):
        cluster.add_node(node(name, cpu="16", memory="64Gi"))
    plugin = sched.frameworks["mem-real-usage-scheduler"].plugins["MemRealUsage"]
    assert isinstance(plugin, RealUsage)
    table = sched.cache.table
    rows = table.alive_rows()

    def scores() -> dict[str, int]:
        s = plugin.score_batch(CycleState(), PodInfo.from_raw(pod("probe")), table, rows)
        assert not hasattr(s, "code")
        return dict(zip(table.node_names(rows), s.tolist(), strict=True))

    await plugin.start()
    try:
        # The first poll ran inside start(): real usage 25 %, 97 %, 37.5 %.
        assert scores() == {"n1": 75, "n2": 3, "n3": 62}

        await schedule(sched, cluster, [f"web-{i}" for i in range(30)])
        counts = placed(cluster)
        assert counts.get("n2", 0) == 0, counts
        assert sum(counts.values()) == 30

        # Prometheus goes away: polls fail, values go stale, nodes score neutrally, pods still bind.
        failures_before = QUERY_FAILURES.labels("MemRealUsage", "memory")._value.get()
        server.stop()
        await asyncio.sleep(3.0)
        assert QUERY_FAILURES.labels("MemRealUsage", "memory")._value.get() > failures_before
        assert scores() == {"n1": 50, "n2": 50, "n3": 50}
        await schedule(sched, cluster, [f"late-{i}" for i in range(9)])
        assert sum(placed(cluster).values()) == 39
    finally:
        await plugin.stop()
