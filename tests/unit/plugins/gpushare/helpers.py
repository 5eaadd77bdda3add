"""Builders for gpushare tests: GPU nodes and pods in the openb model, and a scheduler over them."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.backend.host_selection import TieBreak
from kubesched.config import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod

PROFILE = "gpu-scheduler"


def gpu_node(name: str, gpus: int = 8, model: str = "V100", cpu: str = "96", memory: str = "512Gi") -> dict[str, Any]:
    extra = {"alibabacloud.com/gpu-count": str(gpus), "alibabacloud.com/gpu-milli": str(1000 * gpus)} if gpus else {}
    labels = {"alibabacloud.com/gpu-card-model": model} if gpus else {}
    return node(name, cpu=cpu, memory=memory, labels=labels, extra=extra)


def gpu_pod(
    name: str, milli: int | None = None, count: int = 1, model: str | None = None, cpu: str = "4",
    node_name: str = "", index: str | None = None, scheduler_name: str = PROFILE, **kw: Any,
) -> dict[str, Any]:
    raw = pod(name, cpu=cpu, memory="1Gi", node_name=node_name, scheduler_name=scheduler_name, **kw)
    ann: dict[str, str] = {}
    if milli is not None:
        ann["alibabacloud.com/gpu-milli"] = str(milli)
        ann["alibabacloud.com/gpu-count"] = str(count)
    if model is not None:
        ann["alibabacloud.com/gpu-card-model"] = model
    if index is not None:
        ann["alibabacloud.com/gpu-index"] = index
    if ann:
        raw["metadata"]["annotations"] = ann
    return raw


def profile_plugins(score: str | None = None) -> dict[str, Any]:
    """GpuShare + NodeResourcesFit (+ one policy at weight 1000), as the reference's config."""
    stanza: dict[str, Any] = {
        "multiPoint": {"enabled": [{"name": "GpuShare"}, {"name": "NodeResourcesFit"}], "disabled": [{"name": "*"}]},
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
        "score": {"disabled": [{"name": "*"}]},
    }
    if score is not None:
        stanza["multiPoint"]["enabled"].append({"name": score, "weight": 1000})
        stanza["score"]["enabled"] = [{"name": score, "weight": 1000}]
    return stanza


def config(args: dict[str, Any] | None = None, score: str | None = None) -> dict[str, Any]:
    profile: dict[str, Any] = {"schedulerName": PROFILE, "plugins": profile_plugins(score)}
    if args:
        profile["pluginConfig"] = [{"name": name, "args": a} for name, a in args.items()]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 100, "profiles": [profile]}


def scheduler(
    args: dict[str, Any] | None = None, score: str | None = None, seed: int = 1, tie_break: TieBreak = "random",
) -> tuple[Scheduler, SimulatedCluster]:
    loaded = load_config(config(args, score), builtin_registry())
    cluster = SimulatedCluster()
    sched = Scheduler.build(loaded.profiles, builtin_registry(), FakeClock(), client=cluster, seed=seed,
                            tie_break=tie_break)
    cluster.attach(sched)
    return sched, cluster


def drain(sched: Scheduler) -> None:
    """Schedule until nothing is active, jumping the fake clock over backoffs (not the
    5-minute unschedulable flush)."""

    async def go() -> None:
        while True:
            while sched.schedule_one():
                pass
            await sched.drain()
            wake = sched.next_wakeup(include_unschedulable=False)
            if wake is None:
                return
            assert isinstance(sched.clock, FakeClock)
            sched.clock.set(max(wake, sched.clock.now()))
            sched.tick()

    asyncio.run(go())


def add_pods(cluster: SimulatedCluster, pods: list[dict[str, Any]]) -> list[PodInfo]:
    infos = [PodInfo.from_raw(p) for p in pods]
    for info in infos:
        cluster.add_pod(info)
    return infos

