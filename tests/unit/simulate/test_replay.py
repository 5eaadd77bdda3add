"""A scenario replayed over time (engine/timeline.py through Simulation): the same end state as
applying its events by hand, departures that make room, node events, and the GPU metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np

from kubesched.config.load import load_config
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine import timeline as timeline_module
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.engine.timeline import Samples, allocation_at_demand, scenario_input
from kubesched.simulate.inputs.scenario import PodArrival, Scenario, arrival_pod, parse_scenario
from kubesched.simulate.report.html import render_html
from kubesched.simulate.report.json_doc import result_to_json
from kubesched.snapshot.gpushare.model import GPU_COUNT, GPU_INDEX, GPU_MILLI, GPU_MODEL
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, MEMORY
from kubesched.testing import node


def cpu_pod(name: str, cpu: str = "3", gpu_milli: int = 0, gpus: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if gpu_milli:
        meta["annotations"] = {GPU_MILLI: str(gpu_milli), GPU_COUNT: str(gpus)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def gpu_node(name: str, gpus: int, cpu: str = "16", model: str = "T4") -> dict[str, Any]:
    raw = node(name, cpu=cpu, labels={GPU_MODEL: model})
    for key in ("capacity", "allocatable"):
        raw["status"].setdefault(key, dict(raw["status"]["allocatable"]))
        raw["status"][key] |= {GPU_COUNT: str(gpus), GPU_MILLI: str(gpus * 1000)}
    return raw


SCENARIO = {
    "nodes": [node("n1"), node("n2")],
    "pods": [
        {"at": 0, "lifetime": 100, "pod": cpu_pod("a")},
        {"at": 10, "lifetime": 50, "pod": cpu_pod("b")},
        {"at": 20, "pod": cpu_pod("c")},  # no room until n3 comes
        {"at": 45, "pod": cpu_pod("d")},  # no room until b leaves (or n1 is uncordoned)
    ],
    "nodeEvents": [
        {"at": 30, "action": "add", "node": node("n3")},
        {"at": 40, "action": "cordon", "node": "n1"},
        {"at": 80, "action": "remove", "node": "n3"},
        {"at": 90, "action": "uncordon", "node": "n1"},
    ],
}


def replay(scenario: Scenario, seed: int = 0) -> SimulationResult:
    registry = builtin_registry()
    return asyncio.run(Simulation(load_config(None, registry), registry, scenario, seed=seed).run())


def state(cluster: SimulatedCluster, sim_table: Any) -> dict[str, Any]:
    alive = sim_table.alive_rows().tolist()
    return {
        "pods": {p.name: p.node_name for p in cluster.pods.values()},
        "nodes": {n: bool((raw.get("spec") or {}).get("unschedulable")) for n, raw in cluster.nodes.items()},
        "requested": {sim_table.names[r]: sim_table.requested[r].tolist() for r in alive},
    }


async def by_hand(scenario: Scenario) -> dict[str, Any]:
    """Apply the scenario's events at their times with the cluster's own calls, scheduling until
    idle before and after each; a bound pod's departure is applied at its bind + lifetime."""
    registry = builtin_registry()
    sim = Simulation(load_config(None, registry), registry, scenario_input(scenario), seed=0)
    cluster, sched, clock = sim.cluster, sim.scheduler, sim.clock
    for raw in scenario.nodes:
        cluster.add_node(raw)
    await sched.start_plugins()
    lifetimes = {arrival_pod(a, i)["metadata"]["uid"]: a.lifetime for i, a in enumerate(scenario.arrivals)}
    departures: dict[str, float] = {}

    async def settle() -> None:
        while sched.schedule_one():
            pass
        await sched.drain()
        for uid, pod in cluster.pods.items():
            if pod.node_name and uid not in departures and lifetimes.get(uid) is not None:
                departures[uid] = clock.now() + lifetimes[uid]  # type: ignore[operator]

    steps: list[tuple[float, Any]] = [(a.at, ("arrive", i, a)) for i, a in enumerate(scenario.arrivals)]
    steps += [(e.at, ("node", e)) for e in scenario.node_events]
    steps.sort(key=lambda s: s[0])
    t = -1.0
    while True:
        due = [w for w, _ in steps if w > t] + [d for d in departures.values() if d > t]
        if not due:
            break
        t = min(due)
        clock.set(t)
        sched.tick(t)
        await settle()
        for uid, due in list(departures.items()):
            if due == t and uid in cluster.pods:
                cluster.delete_pod(uid)
        for when, step in steps:
            if when != t:
                continue
            if step[0] == "arrive":
                cluster.add_pod(PodInfo.from_raw(arrival_pod(step[2], step[1])))
            else:
                event = step[1]
                if event.action == "add":
                    cluster.add_node(event.node)
                elif event.action == "remove":
                    for uid in [u for u, p in cluster.pods.items() if p.node_name == event.name]:
                        cluster.delete_pod(uid)
                    cluster.delete_node(event.name)
                else:
                    raw = cluster.nodes[event.name]
                    cluster.add_node({**raw, "spec": {**(raw.get("spec") or {}),
                                                      "unschedulable": event.action == "cordon"}})
        await settle()
    # a last pass once every backoff is over
    clock.set(500.0)
    sched.tick(500.0)
    await settle()
    return state(cluster, sched.cache.table)


def test_replay_reaches_the_state_of_applying_its_events_by_hand() -> None:
    scenario = parse_scenario(SCENARIO, "scenario")
    result = replay(scenario)
    assert state(result.cluster, result.scheduler.cache.table) == asyncio.run(by_hand(scenario))


def test_departures_and_node_events_change_where_pods_run() -> None:
    result = replay(parse_scenario(SCENARIO, "scenario"))
    timeline = result.timeline
    assert timeline is not None
    pods = {p.name: p.node_name for p in result.cluster.pods.values()}
    # a and b left after their lifetimes; c ran on n3 and went with it; d got the room b freed
    assert set(pods) == {"d"} and pods["d"]
    assert (timeline.departed, timeline.deleted_with_node) == (2, 1)
    assert "n3" not in result.cluster.nodes
    cols = timeline.samples.columns
    pending = dict(zip(cols["t"], cols["pendingPods"], strict=True))
    assert pending[20.0] == 1 and pending[30.0] == 0  # c waits for n3
    assert pending[45.0] == 1 and pending[60.0] + pending.get(61.0, 0) <= 1  # d waits for b to leave
    assert cols["t"] == sorted(cols["t"])


def test_replay_is_deterministic_per_seed() -> None:
    scenario = parse_scenario(SCENARIO, "scenario")
    first, second = replay(scenario, seed=4), replay(scenario, seed=4)
    assert first.timeline is not None and second.timeline is not None
    assert first.timeline.samples.columns == second.timeline.samples.columns


def test_gpu_allocation_and_fragmentation_over_time() -> None:
    # one 2-GPU node; pods of 600 milli each: the second cannot share a GPU with the first
    scenario = Scenario("gpu", [gpu_node("g", 2)], [
        PodArrival(0, cpu_pod("p0", cpu="1", gpu_milli=600)),
        PodArrival(1, cpu_pod("p1", cpu="1", gpu_milli=600)),
        PodArrival(2, cpu_pod("p2", cpu="1", gpu_milli=600), lifetime=5),
    ])
    result = replay(scenario)
    assert result.timeline is not None
    cols = result.timeline.samples.columns
    assert cols["gpuMilliCapacity"][0] == 2000
    assert cols["gpuMilliAllocated"][:2] == [600, 1200]
    # the third pod finds no GPU with 600 milli free: counted as placed beyond the node's GPUs
    # (the default profile has no GPU-sharing plugin), not as allocated
    assert cols["unplacedGpuMilli"][2] == 600
    # one shape (1 CPU, 600 milli): with 400 milli left on each GPU, all the idle milli is lost
    assert cols["idleGpuMilli"][1] == 800 and cols["fragmentedGpuMilli"][1] == 800
    # alone, a 600 still fits on the free GPU: only the 400 left beside the first pod is lost
    assert cols["fragmentedGpuMilli"][0] == 400
    doc = result_to_json(result)
    assert doc["timeline"]["samples"]["gpuMilliAllocated"] == cols["gpuMilliAllocated"]
    html = render_html(doc)
    assert 'data-chart="timeline-fragmentation"' in html and 'data-chart="timeline-demand"' in html


def test_allocation_at_arrived_demand_as_the_reference_merges_it() -> None:
    samples = Samples()
    for arrived, used in [(990, 950), (1000, 960), (1004, 970), (1300, 980)]:
        samples.add({"t": 0, "arrivedPods": 0, "arrivedGpuMilli": arrived, "pendingPods": 0, "boundPods": 0,
                     "cpuAllocation": 0, "memoryAllocation": 0, "gpuMilliAllocated": used, "gpuMilliCapacity": 1000,
                     "gpuAllocation": 0, "idleGpuMilli": 0, "fragmentedGpuMilli": 0, "unplacedGpuMilli": 0})
    assert allocation_at_demand(samples, 100) == 96.5  # 100.0 % and 100.4 % round to 100
    assert allocation_at_demand(samples, 130) == 98.0
    assert allocation_at_demand(samples, 120) is None
    assert np.isclose(allocation_at_demand(samples, 99) or 0, 95.0)



def test_replay_gpu_metrics_count_the_gpus_the_scheduler_chose() -> None:
    # One model: with GpuShare in the profile, the replay's metrics are the GPUs GpuShare chose
    # and wrote to gpu-index. Three 600-milli pods on a 2-GPU node: the third stays pending (no
    # GPU has 600 left), so nothing is unplaced and 1,200 milli are allocated on two GPUs.
    registry = builtin_registry()
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "gpushare.yaml", registry)
    scenario = Scenario("gpu", [gpu_node("g", 2)], [
        PodArrival(i, cpu_pod(f"p{i}", cpu="1", gpu_milli=600)) for i in range(3)
    ])
    result = asyncio.run(Simulation(config, registry, scenario, seed=0).run())
    assert result.timeline is not None
    final = result.timeline.to_json()["final"]
    assert (final["gpuMilliAllocated"], final["unplacedGpuMilli"], final["pendingPods"]) == (1200, 0, 1)
    indices = sorted(p.raw["metadata"]["annotations"].get(GPU_INDEX, "") for p in result.cluster.pods.values())
    assert indices == ["", "0", "1"]
    # the one shape does not fit on 400 + 400 free: all idle milli is fragmented
    assert (final["idleGpuMilli"], final["fragmentedGpuMilli"]) == (800, 800)


def test_cpu_allocation_follows_a_node_given_more_cpu() -> None:
    """The CPU allocation sampled over time divides by the nodes' allocatable as it is then: a
    node updated with more CPU (no pod moves) and a node added both change it."""
    scenario = parse_scenario({
        "nodes": [node("n1", cpu="8")],
        "pods": [{"at": 0, "pod": cpu_pod("a")}],
        "nodeEvents": [{"at": 10, "action": "add", "node": node("n1", cpu="16")},
                       {"at": 20, "action": "add", "node": node("n2", cpu="16")}],
    }, "scenario")
    result = replay(scenario)
    assert result.timeline is not None
    cols = result.timeline.samples.columns
    allocation = dict(zip(cols["t"], cols["cpuAllocation"], strict=True))
    assert (allocation[0.0], allocation[10.0], allocation[20.0]) == (0.375, 0.1875, 0.09375)


def test_cpu_and_memory_sums_kept_between_samples_equal_fresh_sums(monkeypatch: Any) -> None:
    """The sample's CPU and memory requested, moved by the rows changed since the last sample,
    equal the sums over the alive nodes made from scratch at every sample, while pods come and
    leave and nodes come, change and go."""
    rng = np.random.default_rng(4)
    pods = [{"at": int(t), "lifetime": int(rng.integers(5, 60)), "pod": cpu_pod(f"p{i}", cpu=str(rng.integers(1, 4)))}
            for i, t in enumerate(sorted(rng.integers(0, 200, size=60)))]
    scenario = parse_scenario({
        "nodes": [node(f"n{i}", cpu="8") for i in range(20)],
        "pods": pods,
        "nodeEvents": [{"at": 50, "action": "add", "node": node("n20", cpu="16")},
                       {"at": 90, "action": "remove", "node": "n3"},
                       {"at": 120, "action": "add", "node": node("n1", cpu="32")},
                       {"at": 150, "action": "remove", "node": "n20"}],
    }, "scenario")
    compared = []
    original = timeline_module.Timeline._requested

    def checked(self: timeline_module.Timeline) -> tuple[int, int]:
        got = original(self)
        table = self._table
        alive = table.alive_rows()
        requested = table.requested_by_resource
        fresh = (int(requested[CPU, alive].sum()), int(requested[MEMORY, alive].sum()))
        assert got == fresh
        compared.append(got)
        return got

    monkeypatch.setattr(timeline_module.Timeline, "_requested", checked)
    replay(scenario)
    assert len(compared) > 50 and len(set(compared)) > 10


def test_the_json_document_of_a_replay_whose_nodes_came_and_went() -> None:
    """Nodes added during a replay (more than the table had rows for at the start) and a removed
    one whose row an added node reuses: the JSON document is written (it raised IndexError once
    the table grew), and a node added later had requested nothing before."""
    events: list[dict[str, Any]] = [{"at": 10, "action": "remove", "node": "n2"}]
    events += [{"at": 20 + i, "action": "add", "node": node(f"m{i}", cpu="8")} for i in range(80)]
    scenario = parse_scenario({
        "nodes": [node(f"n{i}", cpu="8") for i in range(3)],
        "pods": [{"at": 0, "pod": cpu_pod("early", cpu="2")}]
        + [{"at": 120 + i, "pod": cpu_pod(f"p{i}", cpu="7")} for i in range(40)],
        "nodeEvents": events,
    }, "scenario")
    doc = result_to_json(replay(scenario))
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert len(nodes) == 2 + 80
    assert all(v in ("0", 0) for i in range(80) for v in nodes[f"m{i}"]["requestedBefore"].values())
    assert sum(1 for i in range(80) if nodes[f"m{i}"]["podsAfter"]) >= 38  # the added nodes took pods
