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
The policy's configuration is its example file (``POLICY_CONFIGS``: examples/gpushare.yaml for FGD,
examples/gpushare-<policy>.yaml for the others, the files ``kubesched sweep --trace`` is shown with). FGD
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
#: Each policy's KubeSchedulerConfiguration: GpuShare and the policy as the only score.
POLICY_CONFIGS = {
    "FGD": common.ROOT / "examples/gpushare.yaml",
    **{p: common.ROOT / f"examples/gpushare-{p.lower()}.yaml"
       for p in ("BestFit", "DotProduct", "GpuPacking", "GpuClustering", "RandomFit")},
}
#: hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results (mean of 10
#: seeds, openb_pod_list_default): GPU allocation % at 100 % and 130 % arrived demand.
REFERENCE = {
    "FGD": (95.23, 95.39), "BestFit": (92.86, 93.08), "GpuPacking": (91.78, 92.00),
    "GpuClustering": (91.65, 91.88), "DotProduct": (90.62, 90.85), "RandomFit": (86.30, 87.47),
}
def policy_config(policy: str) -> str:
    return POLICY_CONFIGS[policy].read_text()


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


#: The reference's per-seed range at 100 % (min, max of its 10 seeds in the same
#: analysis_allo_discrete.csv): how far one seed may fall from the mean.
REFERENCE_RANGE_100 = {"FGD": (95.06, 95.38), "BestFit": (92.64, 93.04), "GpuPacking": (91.07, 92.58),
                       "GpuClustering": (90.62, 92.75), "DotProduct": (90.34, 91.00), "RandomFit": (85.87, 86.79)}
TOLERANCE = 0.5


def load_runs(directory: Path = common.RESULTS) -> list[dict[str, Any]]:
    """Every run of the ``gpu-replay`` records in bench/results/gpu-replay-*.json, oldest first, with
    its record's commit (the speed records beside them, ``gpu-replay-speed``, measure no allocation)."""
    runs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("gpu-replay-*.json")):
        for record in json.loads(path.read_text()).get("results", []):
            if record.get("benchmark") != "gpu-replay":
                continue
            runs += [{**run, "commit": record.get("commit"), "when": record.get("when")} for run in record["runs"]]
    return runs


def report_section(runs: list[dict[str, Any]] | None = None, tie_break: str = "shuffled") -> list[str]:
    """BENCHMARKS.md lines: per policy, the mean over seeds of the newest full-trace run per seed
    with ``tie_break``, beside the reference (bench/report.py calls this)."""
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for run in runs if runs is not None else load_runs():
        if run.get("tieBreak") == tie_break and run.get("inflate") == 1.3 and run.get("nodes") == 1213:
            newest[(run["policy"], run["seed"])] = run
    lines = ["## The ATC '23 GPU-sharing table (issue 28): allocation at 100 % / 130 % arrived GPU demand", ""]
    if not newest:
        return [*lines, "Not run yet (`python -m bench gpu-replay --policies ... --seeds ...`).", ""]
    lines += [
        "`python -m bench gpu-replay` (bench/gpu_replay.py): `kubesched simulate --trace openb:DIR --arrivals "
        f"sequential --inflate 1.3 --gpu-nodes-only --tie-break {tie_break} --seed S`, one policy per run, "
        "with its example file (examples/gpushare.yaml for FGD, examples/gpushare-<policy>.yaml for the others); "
        "GPU allocation (%) when the arrived GPU demand is 100 % and 130 % of the capacity. "
        "Reference: hkust-adsl/kubernetes-scheduler-simulator "
        "experiments/analysis/expected_results, mean of its 10 seeds (its seeds are Go's math/rand, ours numpy's: "
        "the workloads differ per seed, the distribution is the same).",
        "",
        f"| policy | seeds | 100 % | 130 % | reference 100 % (its seeds' range) | reference 130 % | Δ 100 % | Δ 130 % "
        f"| within ±{TOLERANCE} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    means: dict[str, float] = {}
    for policy in sorted(REFERENCE, key=lambda p: -REFERENCE[p][0]):
        got = [r for (p, _), r in sorted(newest.items()) if p == policy]
        ref = REFERENCE[policy]
        low, high = REFERENCE_RANGE_100[policy]
        ref100 = f"{ref[0]:.2f} ({low:.2f}-{high:.2f})"
        if not got:
            lines.append(f"| {policy} | – | – | – | {ref100} | {ref[1]:.2f} | – | – | not run |")
            continue
        a100 = sum(r["allocationAt100"] for r in got) / len(got)
        a130 = sum(r["allocationAt130"] for r in got) / len(got)
        means[policy] = a100
        d100, d130 = a100 - ref[0], a130 - ref[1]
        ok = "yes" if abs(d100) <= TOLERANCE and abs(d130) <= TOLERANCE else "**no**"
        seeds = ",".join(str(r["seed"]) for r in got)
        lines.append(f"| {policy} | {seeds} | {a100:.2f} | {a130:.2f} | {ref100} | {ref[1]:.2f} | "
                     f"{d100:+.2f} | {d130:+.2f} | {ok} |")
    ours = sorted(means, key=lambda p: -means[p])
    theirs = [p for p in sorted(REFERENCE, key=lambda p: -REFERENCE[p][0]) if p in means]
    same = "the same as the reference's" if ours == theirs else f"the reference's is {' > '.join(theirs)}"
    lines += ["", f"Ranking at 100 % (policies measured): {' > '.join(ours)} — {same}.", ""]
    commits = sorted({str(r.get("commit")) for r in newest.values()})
    cpu = [r["cpuSeconds"] for r in newest.values() if r.get("cpuSeconds")]
    swept = sum(1 for r in newest.values() if r.get("from") == "sweep")
    per_run = f"CPU seconds per run {min(cpu):.0f}-{max(cpu):.0f}" if cpu else "CPU seconds per run not measured"
    if swept:
        per_run += (f"; {swept} of them from `kubesched sweep --trace` (`python -m bench gpu-replay --from-sweep`: "
                    "the whole matrix's CPU and wall seconds are its gpu-replay-matrix record)")
    lines += [f"Runs: {len(newest)} (commits {', '.join(commits)}); {per_run}. "
              "Reproduce a row: `python -m bench gpu-replay --policies POLICY "
              f"--seeds SEEDS --tie-break {tie_break}` (bit for bit: the same seed gives the same figures). "
              "Why the tie-break "
              "matters and what was checked against the reference: bench/analysis.md (\"Parity with the "
              "reference\").", ""]
    return lines


#: A sweep's configuration file name → the policy it is (``POLICY_CONFIGS`` read backwards).
POLICY_OF_CONFIG = {path.name: policy for policy, path in POLICY_CONFIGS.items()}


def runs_from_sweep(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs of a ``kubesched sweep --trace ... --output json`` document (one policy file per
    configuration) as ``gpu-replay`` runs: the allocation at 100 % and 130 % arrived demand is the
    run's ``curves.gpuAllocation`` there (read from the samples as ``gpuAllocationAtArrivedDemand``
    is), the placements are the run's (``placementDigest``). CPU seconds per run are not known to a
    sweep (its workers run many): the whole matrix's are recorded beside (``gpu-replay-matrix``)."""
    from kubesched.simulate.inputs.scenario import load_replay

    nodes: dict[str, int] = {}  # the replay's nodes (a sweep's results do not say), per replay
    runs = []
    for r in doc["results"]:
        replay = r["replay"]
        label = json.dumps(replay, sort_keys=True)
        if label not in nodes:
            nodes[label] = len(load_replay(replay["scenario"], replay["trace"], replay["arrivals"], replay["inflate"],
                                           replay["gpu_nodes_only"], r["seed"]).nodes)
        policy = POLICY_OF_CONFIG[Path(r["config"]).name]
        curve = r["curves"]["gpuAllocation"]
        ref = REFERENCE[policy]
        runs.append({
            "policy": policy, "seed": r["seed"], "inflate": replay["inflate"], "tieBreak": r["tie_break"],
            "nodes": nodes[label], "arrived": r["arrived"], "allocationAt100": curve["100"],
            "allocationAt130": curve["130"], "finalGpuAllocation": r["gpuAllocation"],
            "fragmentedGpuMilli": r["fragmentedGpuMilli"], "placementDigest": r["placementDigest"],
            "wallSeconds": r["wallSeconds"], "from": "sweep",
            "reference": {"allocationAt100": ref[0], "allocationAt130": ref[1]},
        })
    return runs


def record_sweep(path: Path, engine: str, wall: float, cpu: float, note: str) -> None:
    """``--from-sweep``: the sweep's runs as a ``gpu-replay`` record (the ATC table reads it) and the
    matrix's wall and CPU seconds, as measured around it, as a ``gpu-replay-matrix`` record."""
    doc = json.loads(path.read_text())
    runs = runs_from_sweep(doc)
    base = {"when": common.now_iso(), "commit": common.git_commit(), "command": doc.get("command", ""),
            "note": note, "machine": common.machine(), "versions": common.versions()}
    out = common.RESULTS / f"gpu-replay-{common.today()}.json"
    common.save_result({"benchmark": "gpu-replay", **base, "runs": runs}, out)
    common.save_result({
        "benchmark": "gpu-replay-matrix", **base, "engine": engine, "workers": doc.get("workers"),
        "runs": len(runs), "policies": sorted({r["policy"] for r in runs}),
        "seeds": sorted({r["seed"] for r in runs}), "wallSeconds": wall, "cpuSeconds": cpu,
    }, out)
    print(f"appended {len(runs)} runs and the matrix's timing to {out}")


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
    ap.add_argument("--from-sweep", type=Path, metavar="JSON",
                    help="record a `kubesched sweep --trace ... --output json` document instead of running")
    ap.add_argument("--engine", default="local", help="with --from-sweep: where the sweep ran")
    ap.add_argument("--wall-seconds", type=float, default=0.0, help="with --from-sweep: the whole sweep's")
    ap.add_argument("--cpu-seconds", type=float, default=0.0,
                    help="with --from-sweep: the whole sweep's, workers included (user + system)")
    args = ap.parse_args(argv)
    if args.from_sweep is not None:
        record_sweep(args.from_sweep, args.engine, args.wall_seconds, args.cpu_seconds, args.note)
        return 0
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
