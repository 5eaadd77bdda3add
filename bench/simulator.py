"""In-process scheduling throughput: N pending pods onto M nodes with the default-equivalent profile.

Measures only the scheduling loop (cluster loading excluded): pods/s, and per-pod latency of the
scheduling cycle (pop → assume → reserve → permit) at p50/p99. The binding cycle runs in the same
loop against the in-memory cluster, so its cost is in pods/s but not in the per-pod latency.
Appends one record per (nodes, pods) configuration to bench/results/<date>.json (``--size small``:
500 nodes / 1,000 pods; ``full``: that plus 5,000 nodes / 10,000 pods).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import statistics
import time
from typing import Any

import numpy as np

from bench import common
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.cluster import SimulatedCluster
from kubesched.simulate.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo


def run_once(nodes: int, pods: int, seed: int) -> dict[str, Any]:
    registry = builtin_registry()
    config = load_config(None, registry)
    generated = generate_cluster(nodes, pods, seed)
    cluster = SimulatedCluster()
    # As `kubesched simulate` builds it (simulate/runner.py): in-memory binds, stepped eagerly.
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, seed=seed, eager_binding=True)
    cluster.attach(sched)
    for n in generated.nodes:
        cluster.add_node(n)
    pending = []
    for raw in generated.pods:
        pod = PodInfo.from_raw(raw)
        if pod.terminal:
            continue
        # Every pod is scheduled here (the generator pre-binds some; this benchmark places them all).
        pending.append(pod.with_node("") if pod.node_name else pod)
    for pod in pending:
        cluster.add_pod(pod)
    gc.collect()
    gc.freeze()  # the loaded cluster is long-lived: keep the cyclic GC off it, as the shells do
    latencies = np.zeros(len(pending))

    async def loop() -> int:
        n = 0
        while True:
            t0 = time.perf_counter()
            if not sched.schedule_one():
                break
            latencies[n] = time.perf_counter() - t0
            n += 1
            if n % 256 == 0:
                await asyncio.sleep(0)
        await sched.drain()
        return n

    start = time.perf_counter()
    attempts = asyncio.run(loop())
    elapsed = time.perf_counter() - start
    gc.unfreeze()
    lat = latencies[:attempts]
    return {
        "nodes": nodes,
        "pods": len(pending),
        "attempts": attempts,
        "bound": cluster.binds,
        "seconds": round(elapsed, 4),
        "pods_per_second": round(attempts / elapsed, 1),
        "latency_p50_ms": round(float(np.percentile(lat, 50)) * 1000, 4),
        "latency_p99_ms": round(float(np.percentile(lat, 99)) * 1000, 4),
    }


#: (nodes, pods) per size: small is the CI smoke, full adds scheduler_perf's 5,000-node scale.
SIZES = {"small": [(500, 1000)], "full": [(500, 1000), (5000, 10000)]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench simulator")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--nodes", type=int, default=None, help="override --size: one configuration")
    ap.add_argument("--pods", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    configs = SIZES[args.size]
    if args.nodes or args.pods:
        configs = [(args.nodes or 5000, args.pods or 10000)]
    for nodes, pods in configs:
        runs = []
        for i in range(args.rounds):
            r = run_once(nodes, pods, args.seed + i)
            r["loadavg"] = common.loadavg()
            runs.append(r)
            print(json.dumps(r))
        summary = {
            "benchmark": "simulator",
            "workload": "simulator",
            "size": args.size if not (args.nodes or args.pods) else "custom",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "commit": common.git_commit(),
            "command": common.command_line(),
            "machine": common.machine(),
            "versions": common.versions(),
            "profile": "default (load_config(None))",
            "nodes": nodes,
            "pods": pods,
            "pods_per_second_median": statistics.median(r["pods_per_second"] for r in runs),
            "latency_p50_ms_median": statistics.median(r["latency_p50_ms"] for r in runs),
            "latency_p99_ms_median": statistics.median(r["latency_p99_ms"] for r in runs),
            "runs": runs,
        }
        msg = (f"simulator {nodes} nodes / {pods} pods: median {summary['pods_per_second_median']} pods/s, "
               f"p50 {summary['latency_p50_ms_median']} ms, p99 {summary['latency_p99_ms_median']} ms, "
               f"load {common.loadavg()}")
        if not args.no_save:
            msg += f" -> {common.save_result(summary)}"
        print(msg)
    return 0
