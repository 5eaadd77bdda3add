"""The ATC '23 GPU-sharing experiment replayed by `kubesched simulate` (issue 28): one run per
(policy, seed) of the openb trace, sequential arrivals, inflated to 130 % of the GPU capacity,
GPU nodes only, ties among equal scores broken by one random node order fixed for the run
(``--tie-break shuffled``: the reference simulator prefixes node names with a seeded permutation
index, ``syncClusterResourceList``, and its ``selectHost`` keeps the smallest name), timed end to
end.

``python -m bench gpu-replay [--trace DIR] [--policies FGD,BestFit] [--seeds 42] [--inflate 1.3]``

Each run is a `kubesched simulate` process (what a user runs); recorded: wall seconds, CPU
seconds of the process (user + system: the figure that means something on a shared machine),
tasks arrived, and the GPU allocation ratio when the arrived GPU demand is 100 % and 130 % of the
capacity (``timeline.gpuAllocationAtArrivedDemand``, the reference's
``experiments/analysis/merge_alloc_discrete.py``) beside the reference's mean of 10 seeds.
The policy's configuration is examples/gpushare.yaml with FGD replaced as its comment says. FGD
gets its typical pods from the replay itself (``Plugin.expect_workload``: every pod that will
arrive, before the run), as the reference computes them from the whole pod list before it starts.
Results are appended to bench/results/gpu-replay-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common

DEFAULT_TRACE = Path(os.environ.get("KUBESCHED_OPENB_TRACE", str(common.ROOT.parent / "shared/traces/openb")))
EXAMPLE = common.ROOT / "examples/gpushare.yaml"
#: hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results (mean of 10
#: seeds, openb_pod_list_default): GPU allocation % at 100 % and 130 % arrived demand.
REFERENCE = {
    "FGD": (95.23, 95.39), "BestFit": (92.86, 93.08), "GpuPacking": (91.78, 92.00),
    "GpuClustering": (91.65, 91.88), "DotProduct": (90.62, 90.85), "RandomFit": (86.30, 87.47),
}
#: GpuShare's gpuSelMethod per policy (the example's comment).
SELECTION = {"FGD": "FGD", "RandomFit": "random"}


def policy_config(policy: str) -> str:
    text = EXAMPLE.read_text()
    text = text.replace("name: FGD", f"name: {policy}")
    return text.replace("gpuSelMethod: FGD", f"gpuSelMethod: {SELECTION.get(policy, 'best')}")


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    timeline = doc["timeline"]
    at = timeline["gpuAllocationAtArrivedDemand"]
    final = timeline["final"]
    return {
        "arrived": timeline["arrived"], "bound": final.get("boundPods"), "pending": final.get("pendingPods"),
        "nodes": doc["summary"]["nodes"], "typicalShapes": timeline["typicalShapes"],
        "allocationAt100": at["100"], "allocationAt130": at["130"],
        "finalGpuAllocation": final.get("gpuAllocation"), "fragmentedGpuMilli": final.get("fragmentedGpuMilli"),
    }


def run_one(trace: Path, policy: str, seed: int, inflate: float, tie_break: str = "shuffled") -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / f"{policy}.yaml"
        config.write_text(policy_config(policy))
        cmd = [sys.executable, "-m", "kubesched.cli", "simulate", "--trace", f"openb:{trace}",
               "--arrivals", "sequential", "--inflate", str(inflate), "--gpu-nodes-only", "--seed", str(seed),
               "--tie-break", tie_break,
               "--config", str(config), "-o", "json"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, check=True, env={**os.environ, "PYTHONPATH": "src"},
                             cwd=common.ROOT)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ref = REFERENCE.get(policy)
    return {"policy": policy, "seed": seed, "inflate": inflate, "tieBreak": tie_break, "wallSeconds": round(wall, 2),
            "cpuSeconds": round(cpu, 2), **summarize(json.loads(out.stdout)),
            "reference": {"allocationAt100": ref[0], "allocationAt130": ref[1]} if ref else None}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench gpu-replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--policies", default="FGD,BestFit")
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--tie-break", choices=["shuffled", "name", "random"], default="shuffled",
                    help="shuffled: the reference simulator's (default); name: its selectHost on unprefixed names; "
                    "random: kube-scheduler's")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    runs = []
    for policy in args.policies.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            run = run_one(args.trace, policy, seed, args.inflate, args.tie_break)
            print(json.dumps(run), flush=True)
            runs.append(run)
    record = {"benchmark": "gpu-replay", "when": common.now_iso(), "commit": common.git_commit(),
              "command": common.command_line(), "note": args.note, "machine": common.machine(),
              "versions": common.versions(), "runs": runs}
    path = common.save_result(record, common.RESULTS / f"gpu-replay-{common.today()}.json")
    print(f"appended to {path}")
    return 0
