"""What `kubesched run` costs before it talks to the apiserver (issue 32 items 2-3): imports, the
configuration, the credentials and the LiveScheduler built, in a fresh process each time; its CPU
seconds (user + system) and peak RSS, for one or more source trees side by side.

``python -m bench startup-cost [--rounds N] [SRC ...]``  (default SRC: this checkout's src/)

Each round runs every tree once, in turn (ABAB, so a drifting machine load favours none); the
figures are each process's own (``os.wait4``). Each runs as an installed package does, from its
bytecode cache (``common.installed_env``), after one uncounted warm-up start that writes it. No
cluster is needed: the kubeconfig points at an address nobody listens on, and nothing is requested.
Results are appended to bench/results/startup-cost-<date>.json.

``--first-cycle``: instead, the CPU milliseconds of the first scheduling cycles after a start, in a
fresh process per tree: the default profile's scheduler fed the openb trace's 102-node cut (the
nodes, then every task as a pending pod, as the informers hand them on), then six cycles, each
timed alone (``time.process_time``). The first one pays whatever is imported or built lazily.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import common
from bench.openb import _save

#: What the command does up to its first log line (live/commands.py run_command, runner.run_live).
RUN_STARTUP_SCRIPT = """
import asyncio, dataclasses, gc
from kubesched.live.commands import run_command  # noqa: F401
from kubesched.live.settings import LiveOptions
if "owns_process_gc" in {f.name for f in dataclasses.fields(LiveOptions)}:
    gc.disable()  # as this tree's run_command does before it loads anything more
from kubesched.app.startup import load_scheduler_config
from kubesched.kube.api import ApiClient, load_connection
from kubesched.live.runner import LiveScheduler
import sys
config, registry = load_scheduler_config(None)

async def main():
    api = ApiClient(await load_connection(sys.argv[1]), 50, 100)
    LiveScheduler(config, registry, api, LiveOptions())
    await api.close()

asyncio.run(main())
"""


#: The first cycles after a start on the openb 102-node cut (``--first-cycle``); prints their CPU ms.
FIRST_CYCLE_SCRIPT = """
import asyncio, sys, time
from kubesched.config.load import load_config
from kubesched.framework.clock import RealClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo
from kubesched.testing.openb import load_trace, node_object, pod_object

class Binder:
    async def bind(self, pod, node_name):
        pass

async def main():
    trace = load_trace(sys.argv[1]).cut_to(102)
    registry = builtin_registry()
    sched = Scheduler.build(load_config(None, registry).profiles, registry, RealClock(), client=Binder())
    for n in trace.nodes:
        sched.on_node_add_or_update(node_object(n))
    for t in trace.tasks:
        raw = pod_object(t, "openb", "default-scheduler")
        raw["metadata"]["uid"] = raw["metadata"]["name"]
        sched.on_pod_add(PodInfo.from_raw(raw))
    await sched.start_plugins()
    cycles = []
    for _ in range(6):
        started = time.process_time()
        sched.schedule_one()
        cycles.append(round((time.process_time() - started) * 1000, 2))
        await asyncio.sleep(0)
    print(" ".join(map(str, cycles)))

asyncio.run(main())
"""


def first_cycles(src: str) -> list[float]:
    """CPU ms of the first six cycles after a start from ``src`` (``FIRST_CYCLE_SCRIPT``)."""
    from bench.openb import DEFAULT_TRACE

    out = subprocess.run([sys.executable, "-c", FIRST_CYCLE_SCRIPT, str(DEFAULT_TRACE)], env=common.installed_env(src),
                         capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def unreachable_kubeconfig(directory: Path) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
           "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    path = directory / "kubeconfig"
    path.write_text(json.dumps(doc))
    return path


def _one(src: str, kubeconfig: Path) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of one start-up from ``src``."""
    proc = subprocess.Popen([sys.executable, "-c", RUN_STARTUP_SCRIPT, str(kubeconfig)], env=common.installed_env(src))
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"start-up from {src} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def warm_up(src: str) -> None:
    """One start-up from ``src`` that writes the bytecode cache of what ``kubesched run`` imports
    (a benchmark's contenders then start as an installed package does)."""
    with tempfile.TemporaryDirectory() as tmp:
        _one(src, unreachable_kubeconfig(Path(tmp)))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench startup-cost", description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="*", default=[str(common.ROOT / "src")])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--note", default="")
    ap.add_argument("--first-cycle", action="store_true",
                    help="the CPU ms of the first scheduling cycles on the openb 102-node cut instead")
    args = ap.parse_args(argv)
    if args.first_cycle:
        return _first_cycle_main(args)
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in args.src}
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = unreachable_kubeconfig(Path(tmp))
        for s in args.src:  # a warm-up each: .pyc files written, the page cache filled
            _one(s, kubeconfig)
        for rnd in range(args.rounds):
            for s in args.src if rnd % 2 == 0 else reversed(args.src):
                runs[s].append(_one(s, kubeconfig))
    summary: dict[str, Any] = {}
    for s, figures in runs.items():
        cpu = [round(c, 3) for c, _ in figures]
        rss = [round(r, 1) for _, r in figures]
        summary[s] = {"cpu_s": cpu, "cpu_median_s": statistics.median(cpu), "peak_rss_mib": rss,
                      "peak_rss_median_mib": statistics.median(rss)}
        print(f"{s}: CPU median {statistics.median(cpu):.3f} s {cpu}, peak RSS median {statistics.median(rss):.1f} MiB")
    return _save_summary("startup_cost", args, summary)


def _first_cycle_main(args: argparse.Namespace) -> int:
    runs: dict[str, list[list[float]]] = {s: [] for s in args.src}
    for s in args.src:
        first_cycles(s)  # the warm-up: bytecode written
    for rnd in range(args.rounds):
        for s in args.src if rnd % 2 == 0 else reversed(args.src):
            runs[s].append(first_cycles(s))
    summary: dict[str, Any] = {}
    for s, cycles in runs.items():
        first = [c[0] for c in cycles]
        rest = [x for c in cycles for x in c[1:]]
        summary[s] = {"cycles_cpu_ms": cycles, "first_cycle_median_ms": statistics.median(first),
                      "later_cycles_median_ms": statistics.median(rest)}
        print(f"{s}: first cycle median {statistics.median(first):.2f} CPU ms {first}, "
              f"later cycles median {statistics.median(rest):.2f} ms")
    return _save_summary("first_cycle", args, summary)


def _save_summary(benchmark: str, args: argparse.Namespace, summary: dict[str, Any]) -> int:
    record = {"benchmark": benchmark, "when": common.now_iso(), "commit": common.git_commit(),
              "command": common.command_line(), "machine": common.machine(), "rounds": args.rounds,
              "load": os.getloadavg()[0], "note": args.note, "summary": summary, "complete": True}
    path = common.RESULTS / f"startup-cost-{common.today()}.json"
    _save(record, path)
    print(f"  saved to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
