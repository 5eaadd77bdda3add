"""Time to answer: ``kubesched simulate`` timed as a user runs it, from process start to exit.

The simulator benchmark (bench/simulator.py) times the scheduling loop alone; a user waits for the
whole command: interpreter start-up and imports, generating or reading the cluster, the loop, and
rendering what was asked for. Each variant is one command line, run as a child process:

* summary: ``kubesched simulate --nodes N --pods M --seed S -q`` (the terminal summary);
* json:    the same with ``--output json`` (stdout to a file);
* report:  the same with ``--report FILE.html``;
* jsonl:   the same with ``--output jsonl`` (every pod's per-node detail, streamed).

Per run: wall seconds (a monotonic clock around start → exit), user+system CPU seconds and peak
RSS of the child from ``wait4`` (what ``/usr/bin/time -v`` reports), and the bytes written.
Children run as an installed package runs: with the bytecode cache (``PYTHONDONTWRITEBYTECODE`` is
removed from their environment; a sandbox or CI job that sets it would otherwise make every run
compile every module, ~0.9 s), after one uncounted warm-up run of each variant at a tiny size that
writes the ``.pyc`` files (``children`` in the record says so). The variants run in turn within a
round (summary, json, report, jsonl, then again), so a change in the machine's load hits them
alike. The json variant's own ``summary.wallSeconds`` (loading the cluster into the scheduler and
the loop) is kept as the loop figure of the same run.

``--size small``: 500 nodes / 1,000 pods; ``full``: 5,000 nodes / 10,000 pods (the issue's
figure). ``--curve``: the scale curve instead — the json variant at 500, 5,000, 20,000 and 50,000
nodes with 2 pods per node, each size its own process: loop pods/s, whole-process wall and peak RSS.
One record per call is appended to bench/results/<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common

SIZES = {"small": (500, 1000), "full": (5000, 10000)}
VARIANTS = ("summary", "json", "report", "jsonl")
#: (variant, field, comparison, threshold) at the full size: the issue's targets.
TARGETS = (
    ("summary", "wall_seconds_median", "<=", 2.5),
    ("report", "wall_seconds_median", "<=", 3.5),
    ("summary", "peak_rss_mib_median", "<=", 300.0),
)


def kubesched_command() -> list[str]:
    """The ``kubesched`` console script next to this interpreter (as installed), else ``-m``."""
    exe = Path(sys.executable).parent / "kubesched"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kubesched.cli"]


def argv_of(variant: str, nodes: int, pods: int, seed: int, workdir: Path) -> list[str]:
    base = [*kubesched_command(), "simulate", "--nodes", str(nodes), "--pods", str(pods), "--seed", str(seed), "-q"]
    if variant == "json":
        return [*base, "--output", "json"]
    if variant == "jsonl":
        return [*base, "--output", "jsonl"]
    if variant == "report":
        return [*base, "--report", str(workdir / "report.html")]
    return base


#: How the children ran, as the record says it (see the module docstring).
WARM_UP = ("with the bytecode cache (PYTHONDONTWRITEBYTECODE unset), after one uncounted warm-up run per "
           "variant at 20 nodes / 40 pods that writes the .pyc files")


def child_env() -> dict[str, str]:
    """This environment as an installed package's (common.installed_env: with .pyc files)."""
    return common.installed_env(os.environ.get("PYTHONPATH"))


def run_once(argv: list[str], stdout_path: Path) -> dict[str, Any]:
    """One whole process: wall, CPU and peak RSS (wait4's rusage), bytes written."""
    with stdout_path.open("wb") as out:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=child_env())
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return {
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "output_bytes": stdout_path.stat().st_size,
        "loadavg": common.loadavg(),
    }


def measure(nodes: int, pods: int, seed: int, rounds: int, variants: tuple[str, ...]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    loop: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="kubesched-tta-") as tmp:
        workdir = Path(tmp)
        for variant in variants:  # warm-up, not counted: writes the .pyc files the timed runs use
            run_once(argv_of(variant, 20, 40, seed, workdir), workdir / "warm-up.out")
        for _ in range(rounds):
            for variant in variants:
                stdout_path = workdir / f"{variant}.out"
                r = run_once(argv_of(variant, nodes, pods, seed, workdir), stdout_path)
                if variant == "report":
                    r["output_bytes"] = (workdir / "report.html").stat().st_size
                if variant == "json":
                    s = json.loads(stdout_path.read_bytes())["summary"]
                    loop.append({"seconds": s["wallSeconds"], "pods_per_second": s["podsPerSecond"],
                                 "simulated": s["simulated"]})
                runs[variant].append(r)
                print(json.dumps({"variant": variant, **r}), flush=True)
    out: dict[str, Any] = {"children": WARM_UP, "variants": {}}
    for variant, rs in runs.items():
        out["variants"][variant] = {
            "argv": " ".join(["kubesched", *argv_of(variant, nodes, pods, seed, Path("."))[len(kubesched_command()):]]),
            "wall_seconds_median": statistics.median(r["wall_seconds"] for r in rs),
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in rs),
            "peak_rss_mib_median": statistics.median(r["peak_rss_mib"] for r in rs),
            "output_bytes": rs[-1]["output_bytes"],
            "runs": rs,
        }
    if loop:
        out["loop_seconds_median"] = statistics.median(x["seconds"] for x in loop)
        out["loop_pods_per_second_median"] = statistics.median(x["pods_per_second"] for x in loop)
        out["simulated_pods"] = loop[0]["simulated"]
    return out


CURVE = (500, 5000, 20000, 50000)


def curve(sizes: tuple[int, ...], seed: int, rounds: int) -> list[dict[str, Any]]:
    """The json variant at each size (2 pods per node), smallest first."""
    points = []
    for nodes in sizes:
        m = measure(nodes, 2 * nodes, seed, rounds, ("json",))
        v = m["variants"]["json"]
        points.append({"nodes": nodes, "pods": 2 * nodes, "simulated_pods": m.get("simulated_pods"),
                       "loop_seconds_median": m.get("loop_seconds_median"),
                       "loop_pods_per_second_median": m.get("loop_pods_per_second_median"),
                       "wall_seconds_median": v["wall_seconds_median"], "cpu_seconds_median": v["cpu_seconds_median"],
                       "peak_rss_mib_median": v["peak_rss_mib_median"], "runs": v["runs"]})
    return points


#: The child of ``--dump-load``: what ``kubesched simulate --cluster DUMP`` does up to its first
#: scheduling attempt (the same functions, in the same order), each phase stamped on the system-wide
#: monotonic clock and the child's CPU clock; it prints them as JSON and exits at that attempt.
_FIRST_CYCLE_PROBE = """
import gc, json, os, sys, time
def stamp(): return [time.monotonic(), time.process_time()]
from kubesched.simulate.command import load_input
from kubesched.simulate.engine.runner import Simulation
import asyncio
t = {"imported": stamp()}
config, registry, cluster = load_input(None, (), sys.argv[1], None, None, 0)
t["loaded"] = stamp()
gc.freeze()
def first(*_):
    t["first_cycle"] = stamp()
    print(json.dumps({"phases": t, "nodes": len(cluster.nodes), "pods": len(cluster.pods)}), flush=True)
    os._exit(0)
sim = Simulation(config, registry, cluster, on_attempt=first, unfreeze_gc=False)
asyncio.run(sim.run())
sys.exit("no scheduling attempt: nothing pending in the dump")
"""


def dump_load(nodes: int, seed: int, rounds: int) -> dict[str, Any]:
    """Loading a cluster dump: the generated cluster of ``nodes`` nodes and 2 pods per node written
    as one JSON ``v1 List`` (as ``kubectl get nodes,pods -A -o json`` prints it), then, per round, a
    child process timed from its start to the first scheduling attempt (phases: interpreter and
    imports, reading and checking the dump, building the scheduler's table and queue)."""
    import orjson

    from kubesched.simulate.inputs.generator import generate_cluster

    def write_dump(path: Path, n: int) -> Path:
        cluster = generate_cluster(n, 2 * n, seed, pod_topology=True)
        items = [*cluster.nodes, *cluster.pods, *(o for objs in cluster.objects.values() for o in objs.values())]
        path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return path

    def probe(dump: Path) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", _FIRST_CYCLE_PROBE, str(dump)], capture_output=True,
                              check=False, env=child_env())
        if proc.returncode != 0:
            raise RuntimeError(f"dump-load probe exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
        result: dict[str, Any] = json.loads(proc.stdout)
        return result

    runs = []
    with tempfile.TemporaryDirectory(prefix="kubesched-dump-") as tmp:
        probe(write_dump(Path(tmp) / "warm-up.json", 20))  # not counted: writes the .pyc files
        dump = write_dump(Path(tmp) / "cluster.json", nodes)
        for _ in range(rounds):
            start = time.monotonic()
            out = probe(dump)
            ph = out["phases"]
            prev_wall, prev_cpu, phases = start, 0.0, {}
            for name in ("imported", "loaded", "first_cycle"):
                wall, cpu = ph[name]
                phases[name] = {"wall_seconds": round(wall - prev_wall, 3), "cpu_seconds": round(cpu - prev_cpu, 3)}
                prev_wall, prev_cpu = wall, cpu
            runs.append({"wall_seconds": round(ph["first_cycle"][0] - start, 3),
                         "cpu_seconds": round(ph["first_cycle"][1], 3), "phases": phases,
                         "loadavg": common.loadavg()})
            print(json.dumps(runs[-1]), flush=True)
        size = dump.stat().st_size
    return {"nodes": nodes, "pods": 2 * nodes, "dump_bytes": size, "children": WARM_UP, "runs": runs,
            "wall_seconds_median": statistics.median(r["wall_seconds"] for r in runs),
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in runs)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench time-to-answer")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--nodes", type=int, default=None, help="override --size")
    ap.add_argument("--pods", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--curve", default=None, const=",".join(map(str, CURVE)), nargs="?", metavar="N,N,...",
                    help=f"the scale curve at these node counts (default {','.join(map(str, CURVE))}), 2 pods/node")
    ap.add_argument("--dump-load", type=int, default=None, const=50000, nargs="?", metavar="N",
                    help="time loading a JSON dump of N generated nodes (default 50,000) and 2N pods up to the first "
                         "scheduling attempt")
    args = ap.parse_args(argv)
    if args.dump_load is not None:
        m = dump_load(args.dump_load, args.seed, args.rounds)
        record = {"benchmark": "dump-load", "date": common.now_iso(), "commit": common.git_commit(),
                  "command": common.command_line(), "machine": common.machine(), "versions": common.versions(),
                  "seed": args.seed, "rounds": args.rounds, **m}
        msg = (f"dump load, {m['nodes']} nodes / {m['pods']} pods: first scheduling attempt after "
               f"{m['wall_seconds_median']:.1f} s wall, {m['cpu_seconds_median']:.1f} s CPU (median of {args.rounds})")
        if not args.no_save:
            msg += f" -> {common.save_result(record)}"
        print(msg)
        return 0
    if args.curve is not None:
        sizes = tuple(int(x) for x in args.curve.split(",") if x.strip())
        points = curve(sizes, args.seed, args.rounds)
        record = {"benchmark": "scale-curve", "date": common.now_iso(), "commit": common.git_commit(),
                  "command": common.command_line(), "machine": common.machine(), "versions": common.versions(),
                  "seed": args.seed, "rounds": args.rounds, "points": points}
        msg = "scale curve: " + ", ".join(
            f"{p['nodes']} nodes {p['loop_pods_per_second_median']} pods/s {p['peak_rss_mib_median']:.0f} MiB"
            for p in points)
        if not args.no_save:
            msg += f" -> {common.save_result(record)}"
        print(msg)
        return 0
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    nodes, pods = SIZES[args.size]
    custom = args.nodes is not None or args.pods is not None
    nodes, pods = args.nodes or nodes, args.pods or pods
    measured = measure(nodes, pods, args.seed, args.rounds, variants)
    record = {
        "benchmark": "time-to-answer",
        "size": "custom" if custom else args.size,
        "date": common.now_iso(),
        "commit": common.git_commit(),
        "command": common.command_line(),
        "machine": common.machine(),
        "versions": common.versions(),
        "nodes": nodes,
        "pods": pods,
        "seed": args.seed,
        "rounds": args.rounds,
        **measured,
    }
    parts = [f"{v} {d['wall_seconds_median']:.2f} s / {d['peak_rss_mib_median']:.0f} MiB"
             for v, d in measured["variants"].items()]
    msg = f"time to answer, {nodes} nodes / {pods} pods (median of {args.rounds}): " + ", ".join(parts)
    if "loop_seconds_median" in measured:
        msg += f"; loop {measured['loop_seconds_median']:.2f} s ({measured['loop_pods_per_second_median']} pods/s)"
    if not args.no_save:
        msg += f" -> {common.save_result(record)}"
    print(msg)
    return 0


def report_section(records: list[dict[str, Any]]) -> list[str]:
    """BENCHMARKS.md lines: the newest record of the largest size (bench/report.py calls this)."""
    ranked = sorted((r for r in records if r.get("benchmark") == "time-to-answer"),
                    key=lambda r: ({"full": 2, "custom": 1}.get(str(r.get("size")), 0), str(r.get("date", ""))))
    lines = ["## Simulator: time to answer (the command, end to end)", ""]
    if not ranked:
        return [*lines, "Not run yet (`python -m bench time-to-answer --size full`).", "", *_curve_section(records)]
    r = ranked[-1]
    lines += [
        "`bench/time_to_answer.py`: `kubesched simulate` as a user runs it, one process per run from start to",
        "exit (start-up, generating the cluster, the loop, the output asked for); wall and peak RSS of the",
        f"child (`wait4`, as `/usr/bin/time -v`). {r['nodes']:,} nodes / {r['pods']:,} pods, seed {r['seed']}, "
        f"median of {r['rounds']} rounds, variants alternated within each round. Wall seconds move with the "
        "machine's load (`load`: 1-minute loadavg on its CPUs, shared with other jobs); CPU seconds much less.",
        *([f"Children run {r['children']} (records before 2026-11-24T04:00 compiled every module in every "
           "run, ~0.9 s, because the sandbox sets PYTHONDONTWRITEBYTECODE)."] if r.get("children") else []),
        "",
        "| variant | command | wall s | CPU s | peak RSS MiB | output | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant, d in r.get("variants", {}).items():
        loads = [x["loadavg"][0] for x in d.get("runs", []) if x.get("loadavg")]
        load = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "–"
        size = d.get("output_bytes", 0)
        shown = f"{size / 1e6:,.1f} MB" if size >= 1e6 else f"{size / 1e3:,.0f} kB"
        lines.append(f"| {variant} | `{d.get('argv')}` | {d['wall_seconds_median']:.2f} | "
                     f"{d['cpu_seconds_median']:.2f} | {d['peak_rss_mib_median']:.0f} | {shown} | {load} |")
    if "loop_seconds_median" in r:
        lines += ["", f"The same runs' scheduling loop (loading the cluster into the scheduler, then scheduling "
                  f"{r.get('simulated_pods', 0):,} pods; `summary.wallSeconds`): {r['loop_seconds_median']:.2f} s, "
                  f"{r['loop_pods_per_second_median']:,.0f} pods/s."]
    if r.get("size") == "full":
        lines += ["", "| target | measured | met? |", "|---|---|---|"]
        for variant, field, op, thr in TARGETS:
            v = r.get("variants", {}).get(variant, {}).get(field)
            unit = "s" if field.startswith("wall") else "MiB"
            met = "–" if v is None else ("yes" if (v <= thr if op == "<=" else v >= thr) else "**no**")
            lines.append(f"| {variant}: {field.replace('_median', '').replace('_', ' ')} {op} {thr:g} {unit} | "
                         f"{'–' if v is None else f'{v:.2f}'} | {met} |")
    lines += ["", f"Reproduce: `{r.get('command')}` (commit {r.get('commit')}, {str(r.get('date', ''))[:19]}).", ""]
    return lines + _curve_section(records)


def _curve_section(records: list[dict[str, Any]]) -> list[str]:
    curves = sorted((r for r in records if r.get("benchmark") == "scale-curve"), key=lambda r: str(r.get("date")))
    lines = ["### Scale curve", ""]
    if not curves:
        return [*lines, "Not run yet (`python -m bench time-to-answer --curve`).", ""]
    r = curves[-1]
    lines += [
        "`kubesched simulate --nodes N --pods 2N --seed S --output json`, one process per size: the loop's pods/s "
        "(`summary.podsPerSecond`: loading the cluster into the scheduler, then scheduling), the whole process's "
        "wall time and peak RSS.",
        "",
        "| nodes | pods | pods simulated | loop s | loop pods/s | whole process s | peak RSS MiB | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in r["points"]:
        loads = [x["loadavg"][0] for x in p.get("runs", []) if x.get("loadavg")]
        load = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "–"
        lines.append(f"| {p['nodes']:,} | {p['pods']:,} | {p.get('simulated_pods') or 0:,} | "
                     f"{p['loop_seconds_median']:.2f} | {p['loop_pods_per_second_median']:,.0f} | "
                     f"{p['wall_seconds_median']:.2f} | {p['peak_rss_mib_median']:,.0f} | {load} |")
    lines += ["", f"Reproduce: `{r.get('command')}` (commit {r.get('commit')}, {str(r.get('date', ''))[:19]}).", ""]
    return lines + _dump_load_section(records)


def _dump_load_section(records: list[dict[str, Any]]) -> list[str]:
    loads = sorted((r for r in records if r.get("benchmark") == "dump-load"), key=lambda r: str(r.get("date")))
    lines = ["### Loading a dump", ""]
    if not loads:
        return [*lines, "Not run yet (`python -m bench time-to-answer --dump-load`).", ""]
    r = loads[-1]
    lines += [
        f"`kubesched simulate --cluster DUMP.json`'s steps from process start to the first scheduling attempt, "
        f"on the generated cluster of {r['nodes']:,} nodes and {r['pods']:,} pods written as one JSON `v1 List` "
        f"({r['dump_bytes'] / 1e6:,.0f} MB); median of {len(r['runs'])} (target ≤ 10 s). Wall seconds move with "
        "the machine's load (`load`); CPU seconds much less.",
        "",
        "| phase | wall s | CPU s |",
        "|---|---|---|",
    ]
    names = {"imported": "interpreter start-up and imports", "loaded": "reading and checking the dump",
             "first_cycle": "building the scheduler's table and queue, first attempt"}
    for key, label in names.items():
        lines.append(f"| {label} | {median(x['phases'][key]['wall_seconds'] for x in r['runs']):.2f} | "
                     f"{median(x['phases'][key]['cpu_seconds'] for x in r['runs']):.2f} |")
    load = [x["loadavg"][0] for x in r["runs"] if x.get("loadavg")]
    lines += [f"| **total** | **{r['wall_seconds_median']:.2f}** | **{r['cpu_seconds_median']:.2f}** |", "",
              (f"Load {min(load):.2f}–{max(load):.2f}. " if load else "")
              + f"Reproduce: `{r.get('command')}` (commit {r.get('commit')}, {str(r.get('date', ''))[:19]}).", ""]
    return lines


def median(values: Any) -> float:
    return float(statistics.median(list(values)))
