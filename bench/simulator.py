"""In-process scheduling throughput: N pending pods onto M nodes with the default-equivalent profile.

Measures only the scheduling loop (cluster loading excluded): pods/s, and per-pod latency of the
scheduling cycle (pop → assume → reserve → permit) at p50/p99. The binding cycle runs in the same
loop against the in-memory cluster, so its cost is in pods/s but not in the per-pod latency.
Writes a JSON line per run to bench/results/simulator-<date>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import kubesched
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.cluster import SimulatedCluster
from kubesched.simulate.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo

RESULTS = Path(__file__).parent / "results"


def run_once(nodes: int, pods: int, seed: int) -> dict[str, Any]:
    registry = builtin_registry()
    config = load_config(None, registry)
    generated = generate_cluster(nodes, pods, seed)
    cluster = SimulatedCluster()
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, seed=seed)
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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench simulator")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    runs = [run_once(args.nodes, args.pods, args.seed + i) for i in range(args.rounds)]
    for r in runs:
        print(json.dumps(r))
    summary = {
        "benchmark": "simulator",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kubesched": kubesched.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "nodes": args.nodes,
        "pods": args.pods,
        "pods_per_second_median": statistics.median(r["pods_per_second"] for r in runs),
        "latency_p50_ms_median": statistics.median(r["latency_p50_ms"] for r in runs),
        "latency_p99_ms_median": statistics.median(r["latency_p99_ms"] for r in runs),
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"simulator-{dt.date.today().isoformat()}.json"
    with out.open("a") as f:
        f.write(json.dumps(summary) + "\n")
    print(f"median {summary['pods_per_second_median']} pods/s, p50 {summary['latency_p50_ms_median']} ms, "
          f"p99 {summary['latency_p99_ms_median']} ms -> {out}")
    return 0
