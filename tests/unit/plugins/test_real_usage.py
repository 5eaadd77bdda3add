"""RealUsage / MemRealUsage: scores from a fake Prometheus, staleness, failures, args."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.real_usage import MemRealUsage, MemRealUsageArgs, RealUsage, RealUsageArgs
from kubesched.plugins.real_usage.prometheus import PrometheusError, node_key, parse_response
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod

DATA = Path(__file__).parents[1] / "config" / "data"
ADDR = "http://127.0.0.1:1"  # never contacted: every test swaps in a fake fetcher


class FakeFetcher:
    def __init__(self, answers: dict[str, list[tuple[dict[str, str], float]]] | None = None) -> None:
        self.answers = answers or {}
        self.fail: Exception | None = None
        self.queries: list[str] = []

    async def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        self.queries.append(promql)
        if self.fail is not None:
            raise self.fail
        for needle, samples in self.answers.items():
            if needle in promql:
                return samples
        return []

    async def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def mem(**used: float) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {"MemAvailable": [({"node": n}, v) for n, v in used.items()]}


def real_usage_profile(plugin: str, args: RealUsageArgs) -> StaticProfile:
    return StaticProfile(
        {
            "queueSort": ["PrioritySort"],
            "preFilter": ["NodeResourcesFit", plugin],
            "filter": ["NodeResourcesFit", plugin],
            "score": ["NodeResourcesFit", plugin],
            "bind": ["DefaultBinder"],
        },
        score_weights={"NodeResourcesFit": 1, plugin: 5},
        plugin_args={plugin: args},
    )


def build(
    args: RealUsageArgs, nodes: list[dict[str, Any]], plugin: str = "MemRealUsage"
) -> tuple[Scheduler, SimulatedCluster, RealUsage, Clock]:
    cluster = SimulatedCluster()
    profile = real_usage_profile(plugin, args)
    sched = Scheduler.build([profile], builtin_registry(), FakeClock(), client=cluster, seed=3)
    cluster.attach(sched)
    for n in nodes:
        cluster.add_node(n)
    p = sched.frameworks["default-scheduler"].plugins[plugin]
    assert isinstance(p, RealUsage)
    clock = Clock()
    p.cache.now = clock
    return sched, cluster, p, clock


def scores(sched: Scheduler, p: RealUsage) -> dict[str, int]:
    t = sched.cache.table
    rows = t.alive_rows()
    s = p.score_batch(CycleState(), PodInfo.from_raw(pod("x")), t, rows)
    assert not isinstance(s, type(None)) and isinstance(s, np.ndarray)
    return dict(zip(t.node_names(rows), s.tolist(), strict=True))


def place(sched: Scheduler, cluster: SimulatedCluster, n: int) -> dict[str, int]:
    async def go() -> None:
        for i in range(n):
            cluster.add_pod(PodInfo.from_raw(pod(f"p{i}", cpu="100m", memory="100Mi")))
        while sched.schedule_one():
            pass
        await sched.drain()

    asyncio.run(go())
    out: dict[str, int] = {}
    for q in cluster.pods.values():
        out[q.node_name] = out.get(q.node_name, 0) + 1
    return out


def three_nodes() -> list[dict[str, Any]]:
    return [node(f"n{i}", cpu="8", memory="32Gi") for i in (1, 2, 3)]


def test_lower_real_memory_scores_higher_and_a_full_node_scores_zero() -> None:
    sched, _, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR), three_nodes())
    p.fetcher = FakeFetcher(mem(n1=0.2, n2=1.0, n3=0.55))
    assert asyncio.run(p.poll_once())
    assert scores(sched, p) == {"n1": 80, "n2": 0, "n3": 45}


def test_pods_go_away_from_the_hot_node_even_though_its_requests_look_free() -> None:
    nodes = three_nodes()
    sched, cluster, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR), nodes)
    # n2 has no requests at all, but its real memory is nearly exhausted.
    p.fetcher = FakeFetcher(mem(n1=0.3, n2=0.97, n3=0.3))
    asyncio.run(p.poll_once())
    placed = place(sched, cluster, 30)
    assert placed.get("n2", 0) == 0 and placed["n1"] + placed["n3"] == 30


def test_missing_nodes_and_prometheus_down_give_the_neutral_score() -> None:
    sched, _, p, clock = build(MemRealUsageArgs(prometheusApiAddr=ADDR, queryMetricIntervalSeconds=10), three_nodes())
    fake = FakeFetcher(mem(n1=0.1))
    p.fetcher = fake
    assert asyncio.run(p.poll_once())
    assert scores(sched, p) == {"n1": 90, "n2": 50, "n3": 50}
    fake.fail = ConnectionRefusedError("connection refused")
    assert not asyncio.run(p.poll_once())
    assert scores(sched, p)["n1"] == 90  # the last value holds until it is stale
    clock.t += 30  # default staleness: 3 intervals
    assert scores(sched, p) == {"n1": 50, "n2": 50, "n3": 50}
    fake.fail = None
    assert asyncio.run(p.poll_once())
    assert scores(sched, p)["n1"] == 90


def test_a_failed_or_hanging_query_never_blocks_or_crashes_scheduling() -> None:
    sched, cluster, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR, queryMetricTimeSeconds=0.05), three_nodes())

    class Hanging(FakeFetcher):
        async def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
            await asyncio.sleep(3600)
            return []

    p.fetcher = Hanging()
    assert not asyncio.run(p.poll_once())  # bounded by queryMetricTimeSeconds
    assert sum(place(sched, cluster, 6).values()) == 6


def test_cpu_and_memory_weighted_with_instance_labels_and_node_addresses() -> None:
    nodes = three_nodes()
    nodes[2]["status"]["addresses"] = [{"type": "InternalIP", "address": "10.1.2.3"}]
    args = RealUsageArgs(
        prometheusApiAddr=ADDR,
        resources=[{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 3}],
        nodeLabel="instance",
    )
    sched, _, p, _ = build(args, nodes, plugin="RealUsage")
    p.fetcher = FakeFetcher(
        {
            "MemAvailable": [
                ({"instance": "n1:9100"}, 0.0),
                ({"instance": "n2:9100"}, 1.0),
                ({"instance": "10.1.2.3:9100"}, 0.5),
            ],
            "node_cpu_seconds_total": [({"instance": "n1:9100"}, 1.0), ({"instance": "n2:9100"}, 0.0)],
        }
    )
    assert asyncio.run(p.poll_once())
    assert 'avg by (instance)' in p.fetcher.queries[1]  # type: ignore[attr-defined]
    # n1: mem 100, cpu 0 → 25; n2: mem 0, cpu 100 → 75; n3: mem 50, cpu neutral 50 → 50.
    assert scores(sched, p) == {"n1": 25, "n2": 75, "n3": 50}


def test_max_utilization_filters_hot_nodes_but_not_unknown_ones() -> None:
    args = MemRealUsageArgs(prometheusApiAddr=ADDR, maxUtilization={"memory": 0.9})
    sched, _, p, _ = build(args, three_nodes())
    p.fetcher = FakeFetcher(mem(n1=0.95, n2=0.5))
    asyncio.run(p.poll_once())
    t = sched.cache.table
    v = p.filter_batch(CycleState(), PodInfo.from_raw(pod("x")), t, t.alive_rows())
    assert v.codes.tolist() == [1, 0, 0]
    assert v.statuses[0].reasons == ("node(s) had real memory usage above 90%",)
    assert p.pre_filter(CycleState(), PodInfo.from_raw(pod("x")), t)[1].is_success


def test_without_thresholds_the_filter_is_skipped() -> None:
    sched, _, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR), three_nodes())
    assert p.pre_filter(CycleState(), PodInfo.from_raw(pod("x")), sched.cache.table)[1].is_skip


def test_start_polls_once_then_in_the_background_and_stop_ends_it() -> None:
    _, _, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR, queryMetricIntervalSeconds=0.01), three_nodes())
    fake = FakeFetcher(mem(n1=0.5))
    p.fetcher = fake

    async def go() -> None:
        await p.start()
        assert len(fake.queries) == 1  # the first poll is done before scheduling starts
        await asyncio.sleep(0.1)
        await p.stop()

    asyncio.run(go())
    assert len(fake.queries) > 3
    assert p._task is None


def test_usage_array_is_cached_between_polls() -> None:
    sched, _, p, _ = build(MemRealUsageArgs(prometheusApiAddr=ADDR), three_nodes())
    p.fetcher = FakeFetcher(mem(n1=0.5, n2=0.5, n3=0.5))
    asyncio.run(p.poll_once())
    t = sched.cache.table
    a = p.usage(t)
    assert p.usage(t) is a
    asyncio.run(p.poll_once())
    assert p.usage(t) is not a


# -- Prometheus answers and labels ------------------------------------------------------------------


def test_parse_response() -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"node": "a"}, "value": [1.0, "0.25"]},
                {"metric": {"node": "b"}, "value": [1.0, "NaN"]},
                {"metric": {"node": "c"}},
            ],
        },
    }
    samples = parse_response(body)
    assert samples[0] == ({"node": "a"}, 0.25) and len(samples) == 2
    with pytest.raises(PrometheusError, match="bad_data: parse error"):
        parse_response({"status": "error", "errorType": "bad_data", "error": "parse error"})
    with pytest.raises(PrometheusError, match="instant vector"):
        parse_response({"status": "success", "data": {"resultType": "matrix", "result": []}})


@pytest.mark.parametrize(
    ("raw", "key"),
    [("n1", "n1"), ("n1:9100", "n1"), ("10.0.0.1:9100", "10.0.0.1"), ("[::1]:9100", "::1"), ("fe80::1", "fe80::1")],
)
def test_node_key_strips_ports(raw: str, key: str) -> None:
    assert node_key(raw) == key


# -- args and the reference config ----------------------------------------------------------------


def test_reference_mem_real_usage_config_loads_unchanged() -> None:
    cfg = load_config(DATA / "ref_memrealusage_v1.yaml", builtin_registry())
    assert cfg.warnings == []
    p = cfg.profiles[0]
    assert p.scheduler_name == "mem-real-usage-scheduler" and p.plugins["score"] == ["MemRealUsage"]
    args = p.plugin_args["MemRealUsage"]
    assert isinstance(args, MemRealUsageArgs)
    assert args.prometheus_api_addr == "http://10.96.0.102:9090"
    assert (args.query_metric_time_seconds, args.query_metric_interval_seconds) == (10, 10)


def test_example_config_loads() -> None:
    cfg = load_config(Path(__file__).parents[3] / "examples" / "mem-real-usage.yaml", builtin_registry())
    assert cfg.warnings == []
    assert "MemRealUsage" in cfg.profiles[0].plugins["score"]


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"prometheusApiAddr": "prometheus:9090"},
        {"prometheusApiAddr": ADDR, "maxUtilization": {"memory": 1.5}},
        {"prometheusApiAddr": ADDR, "resources": [{"name": "disk"}]},
        {"prometheusApiAddr": ADDR, "resources": [{"name": "cpu"}, {"name": "cpu"}]},
        {"prometheusApiAddr": ADDR, "queryMetricIntervalSeconds": 0},
    ],
)
def test_invalid_args(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RealUsageArgs.model_validate(raw)


def test_mem_real_usage_is_memory_only() -> None:
    with pytest.raises(ValidationError, match="real memory only"):
        MemRealUsageArgs.model_validate({"prometheusApiAddr": ADDR, "resources": [{"name": "cpu"}]})
    assert MemRealUsage.args_model is MemRealUsageArgs
