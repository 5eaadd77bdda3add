"""``python -m bench profile``: where `kubesched run` spends its CPU while draining a live backlog.

Runs one round of a live workload (default SchedulingBasic; ``--size full``: 1,000 KWOK nodes and
5,000 pods) with `kubesched run` under py-spy (``py-spy record --format raw``: sampled stacks of the
running Python code, no instrumentation in the process). py-spy comes from PyPI (``pip install
py-spy``: a binary wheel); found on PATH, next to this interpreter, or in $PY_SPY. The collapsed
stacks are aggregated into inclusive and self percentages per function and into areas of the live
shell (informer decode, informer handlers, scheduling cycle, binds, events, metrics, event loop).
Writes a "profile" record to bench/results/<date>.json and the raw stacks next to it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common, dra, live, podgroups

#: (area, regex over the joined stack); the first match wins, so the more specific come first.
AREAS = (
    ("scheduling cycle (Scheduler.schedule_one: queue pop, filter, score, assume, permit)", r"schedule_one"),
    ("informer handlers (PodInfo.from_raw, cache and queue updates)",
     r"_pod_add|_pod_update|_pod_delete|_node_add|_node_update|_node_delete"),
    ("binding cycle tasks (Scheduler._binding_cycle: POST pods/binding, bound bookkeeping)",
     r"_binding_cycle|live/client\.py|live/bind_client\.py"),
    ("informer list/watch (HTTP read, JSON decode, store)", r"live/informer\.py"),
    ("events and status writes", r"live/events\.py"),
    ("metrics", r"live/metrics\.py|prometheus_client"),
    ("TLS handshakes (new connections to the apiserver)", r"do_handshake"),
    # not cli.py: `kubesched run`'s every stack starts there (it put every sample no area above
    # matched, TLS handshakes included, under start-up)
    ("start-up (imports, config, plugin build)", r"_find_and_load|load_config|Scheduler\.build"),
    ("event loop, TLS and HTTP plumbing (not attributable)", r"."),
)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]+)(?::\d+)?\)$")


def find_py_spy() -> str | None:
    for cand in (os.environ.get("PY_SPY"), shutil.which("py-spy"), str(Path(sys.executable).parent / "py-spy")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    f = m.group("file")
    for marker in ("site-packages/", "src/", "lib/python3"):
        if marker in f:
            f = f.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({f})"


def analyse(raw: str, top: int = 25) -> dict[str, Any]:
    """Aggregate py-spy's collapsed stacks ("frame;frame;... count" per line)."""
    incl: collections.Counter[str] = collections.Counter()
    self_: collections.Counter[str] = collections.Counter()
    areas: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        self_[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
        joined = ";".join(stack.split(";"))
        for area, pat in AREAS:
            if re.search(pat, joined):
                areas[area] += count
                break

    def rows(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": f, "percent": round(100 * c / total, 1), "samples": c} for f, c in counter.most_common(top)
        ]

    return {
        "samples": total,
        "inclusive": rows(incl),
        "self": rows(self_),
        "buckets": [{"area": a, "percent": round(100 * c / total, 1), "samples": c} for a, c in areas.most_common()],
    }


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(x) for x in (task / "children").read_text().split()]
    return out


def _print(result: dict[str, Any]) -> None:
    for b in result["buckets"]:
        print(f"  {b['percent']:5.1f}%  {b['area']}")
    print("  top inclusive:")
    for x in result["inclusive"][:25]:
        print(f"  {x['percent']:5.1f}%  {x['function']}")
    print("  top self:")
    for x in result["self"][:25]:
        print(f"  {x['percent']:5.1f}%  {x['function']}")


def main(argv: list[str]) -> int:
    workloads = {**live.WORKLOADS, **podgroups.live_workloads(), **dra.live_workloads()}
    ap = argparse.ArgumentParser(prog="python -m bench profile")
    ap.add_argument("--workload", default="SchedulingBasic", choices=sorted(workloads))
    ap.add_argument("--size", choices=sorted(live.SIZES), default="full")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--qps", type=float, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--analyse", type=Path, metavar="STACKS", help="only aggregate saved py-spy raw stacks")
    args = ap.parse_args(argv)
    if args.analyse:
        result = analyse(args.analyse.read_text())
        _print(result)
        return 0
    py_spy = find_py_spy()
    if py_spy is None:
        print("profile: py-spy not found (pip install py-spy, or set PY_SPY)", file=sys.stderr)
        return 2
    wl = workloads[args.workload]
    size = wl.sizes.get(args.size) or live.SIZES[args.size]
    wd = Path(tempfile.mkdtemp(prefix="kubesched-bench-profile-"))
    raw_path = wd / "kubesched.pyspy.txt"
    wrap = [py_spy, "record", "--rate", str(args.rate), "--format", "raw", "--output", str(raw_path), "--"]

    def pre_stop(run: live.Running) -> None:
        # SIGTERM kubesched itself (not py-spy): py-spy writes its output when its child exits.
        pid = run.procs["scheduler"].pid
        if pid is None:
            return
        for child in _children(pid):
            os.kill(child, signal.SIGTERM)
        proc = run.procs["scheduler"].proc
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.wait(timeout=60)

    print(f"profile: {args.workload} [{args.size}] under {py_spy} at {args.rate} Hz; load {common.loadavg()}")
    with live.cluster_for(wl, size, wd) as (c, nodes):
        r = live.run_round(c, wl, size, "kubesched", 0, nodes, args.qps, args.burst, wd, wrap=wrap,
                           pre_stop=pre_stop)
    for _ in range(50):
        if raw_path.exists() and raw_path.stat().st_size:
            break
        time.sleep(0.2)
    if not raw_path.exists():
        print(f"profile: py-spy wrote nothing to {raw_path}", file=sys.stderr)
        return 1
    result = analyse(raw_path.read_text())
    record = {
        "benchmark": "profile",
        "workload": args.workload,
        "size": args.size,
        "nodes": size.nodes,
        "pods": size.pods,
        "profiler": f"py-spy record --rate {args.rate} (sampled, GIL-holding and waiting threads alike)",
        "date": common.now_iso(),
        "commit": common.git_commit(),
        "command": common.command_line(),
        "machine": common.machine(),
        "versions": common.versions(),
        "round": {k: r[k] for k in ("bound", "throughput", "loadavg_after", "wall_seconds")},
        **result,
    }
    print(f"profile: {result['samples']} samples; {r['bound']} pods bound, "
          f"{r['throughput']['average']} pods/s under the profiler")
    _print(result)
    if not args.no_save:
        common.RESULTS.mkdir(parents=True, exist_ok=True)
        keep = common.RESULTS / f"profile-{args.workload}-{args.size}-{common.today()}.txt"
        keep.write_text(raw_path.read_text())
        record["raw_stacks"] = keep.name
        print(f"  -> {common.save_result(record)} (stacks: {keep})")
    return 0
