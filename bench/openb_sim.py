"""kubesched's bound count on the openb trace over many seeds, in the simulator (issue 32 item 1).

``python -m bench openb-sim [--trace DIR] [--nodes N] [--seeds 1-20] [--tie-break random|heap]
[--src DIR]``

A live round of ``python -m bench openb`` costs minutes per scheduler, so a handful of rounds is all
a session affords, and each round's count moves by ±15 pods with the order the backlog comes in.
This gives the spread of kubesched's own placements cheaply: per seed, the trace's nodes and pods
as ``bench/openb.py`` creates them (``kubesched.testing.openb``), shuffled with the seed (the
backlog as a watch-list hands it over: Go-map order, one attempt per pod), scheduled by
``kubesched simulate --cluster`` with the default profile, end to end as a user runs it. The counts
(with their mean and standard deviation) go to bench/results/openb-sim-<date>.json; compare them
with kube-scheduler's live rounds with ``python -m bench.parity``'s figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench import common
from bench.openb import _save, add_trace_options, trace_from
from kubesched.testing.openb import Trace, node_object, pod_object

ROOT = Path(__file__).resolve().parent.parent


def shuffled_cluster(trace: Trace, seed: int) -> dict[str, Any]:
    """The trace's nodes and pending pods as one v1 List, each kind in the seed's random order."""
    rng = random.Random(seed)
    nodes = [node_object(n) for n in trace.nodes]
    pods = [pod_object(t, "openb", "default-scheduler") for t in trace.tasks]
    rng.shuffle(nodes)
    rng.shuffle(pods)
    return {"apiVersion": "v1", "kind": "List", "items": nodes + pods}


def parse_seeds(text: str) -> list[int]:
    """``1-20`` or ``1,5,9``."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return seeds


def bound_with_seed(trace: Trace, seed: int, tie_break: str, src: Path, workdir: Path) -> int:
    cluster = workdir / f"openb-{seed}.json"
    cluster.write_bytes(orjson.dumps(shuffled_cluster(trace, seed)))
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-m", "kubesched.cli", "simulate", "--cluster", str(cluster), "--seed", str(seed),
         "--tie-break", tie_break, "-o", "json"],
        env=env, capture_output=True, check=True)
    return int(orjson.loads(out.stdout)["summary"]["scheduled"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench openb-sim", description=__doc__.splitlines()[0])
    add_trace_options(ap)
    ap.add_argument("--seeds", default="1-20", help="e.g. 1-20 or 1,5,9")
    ap.add_argument("--tie-break", default="random", choices=("random", "heap"))
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the kubesched source tree to run")
    args = ap.parse_args(argv)
    trace = trace_from(args)
    seeds = parse_seeds(args.seeds)
    bound: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="kubesched-openb-sim-") as tmp:
        for seed in seeds:
            bound[seed] = bound_with_seed(trace, seed, args.tie_break, args.src, Path(tmp))
            print(f"seed {seed}: {bound[seed]} of {len(trace.tasks)} bound", flush=True)
    counts = list(bound.values())
    record = {
        "benchmark": "openb-sim", "when": common.now_iso(), "commit": common.git_commit(),
        "command": common.command_line(), "machine": common.machine(), "src": str(args.src),
        "nodes": len(trace.nodes), "tasks": len(trace.tasks), "tie_break": args.tie_break,
        "bound": bound, "mean": round(statistics.fmean(counts), 1),
        "sd": round(statistics.stdev(counts), 1) if len(counts) > 1 else None,
        "range": [min(counts), max(counts)],
    }
    path = common.RESULTS / f"openb-sim-{common.today()}.json"
    _save(record, path)
    print(f"openb-sim: mean {record['mean']}, sd {record['sd']}, range {record['range']}; saved to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
