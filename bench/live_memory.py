"""What `kubesched run` keeps per node and per pod (issue 32 item 3), measured in process.

``python -m bench live-memory [--workloads W,..] [--nodes N --init-pods K --pods M] [--breakdown] [SRC ...]``

For each workload shape and each source tree (default: this checkout's src/), a fresh interpreter
builds the live scheduler as ``kubesched run`` does (default profile, ``LiveScheduler``; the
kubeconfig points nowhere, nothing is requested) and feeds its node and pod informers watch events
as the apiserver sends them: JSON bytes (the objects captured from the project's control plane,
``live_memory_objects.json``: a KWOK node-default node, each shape's pod pending and bound, with
the managedFields the informer drops) decoded by ``orjson.loads`` as ``ApiClient.stream`` does and
handed to ``Informer._on_event``. In order:

1. ``nodes``: N ADDED node events (labelled as bench/live.py's workload labels them);
2. ``init pods``: K ADDED events of pods already bound and Running (scheduler_perf's initPods);
3. ``pending``: M ADDED events of pending pods with kubesched's schedulerName (the backlog queued);
4. ``bound``: the backlog scheduled by the real cycle (``Scheduler.schedule_one``; the bind request
   answered in process), and for each pod the two MODIFIED events a real bind brings (the binding,
   then KWOK's Running status).

After each phase: RSS (``VmRSS``, after ``gc.collect()``) and, with ``--breakdown`` (a second
process, as tracemalloc's own bookkeeping inflates RSS), the bytes Python allocated, by the
module that allocated them, and the bytes reachable from each holder (informer stores, parsed
pods, node table, queue, the rest of the scheduler) that were not reachable before the phase.
RSS per pod is what a real run's peak grows by per bound pod; kube-scheduler's counterpart is its
peak RSS minus its start-up over the pods (BENCHMARKS.md). Results go to
bench/results/live-memory-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import common

OBJECTS = Path(__file__).with_name("live_memory_objects.json")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

#: workload -> (node zone label per index or None, measured pod shape, init pod shape,
#: (nodes, init pods, pods) at bench/live.py's full size)
SHAPES: dict[str, tuple[str | None, str, str, tuple[int, int, int]]] = {
    "SchedulingBasic": (None, "schedulingbasic", "schedulingbasic", (1000, 1000, 5000)),
    "TopologySpreading": ("moon", "topologyspreading", "schedulingbasic", (1000, 1000, 5000)),
    "PreferredTopologySpreading": ("moon", "preferredtopologyspreading", "schedulingbasic", (1000, 1000, 5000)),
    "PodAntiAffinity": (None, "podantiaffinity", "podantiaffinity", (1000, 200, 600)),
    "PreferredPodAntiAffinity": (None, "preferredpodantiaffinity", "preferredpodantiaffinity", (1000, 1000, 5000)),
    "PodAffinity": ("zone1", "podaffinity", "podaffinity", (1000, 1000, 5000)),
}


#: What bench/live.py runs kubesched with: the default profile under kubesched's name, QPS 5000.
CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
          "leaderElection": {"leaderElect": False}, "clientConnection": {"qps": 5000, "burst": 5000},
          "profiles": [{"schedulerName": "kubesched"}]}


# -- the objects, as watch events ---------------------------------------------------------------------
def _zone(kind: str | None, i: int) -> str | None:
    return None if kind is None else "zone1" if kind == "zone1" else f"moon-{i % 3 + 1}"


def node_event(template: dict[str, Any], i: int, zone: str | None) -> bytes:
    import orjson

    node = json.loads(json.dumps(template))
    name = f"node-{i:05d}"
    meta = node["metadata"]
    meta.update(name=name, uid=f"00000000-0000-4000-8000-{i:012d}", resourceVersion=str(1000 + i))
    labels = meta["labels"]
    labels[HOSTNAME] = name
    labels.pop(ZONE, None)
    if zone is not None:
        labels[ZONE] = zone
    return orjson.dumps({"type": "ADDED", "object": node})


def pod_event(etype: str, template: dict[str, Any], name: str, i: int, node: str | None, zone: str | None,
              rv: int, role: str) -> bytes:
    import orjson

    pod = json.loads(json.dumps(template))
    pod["kind"], pod["apiVersion"] = "Pod", "v1"
    meta = pod["metadata"]
    meta.update(name=name, namespace="bench-live-memory", uid=f"{role[:4]}0000-0000-4000-8000-{i:012d}",
                resourceVersion=str(rv))
    meta["labels"]["bench.kubesched.io/role"] = role
    meta["labels"].pop(ZONE, None)
    if node is None:
        pod["spec"].pop("nodeName", None)
        pod["spec"]["schedulerName"] = "kubesched"
    else:
        pod["spec"]["nodeName"] = node
        if zone is not None:  # PodTopologyLabels admission copies the node's zone at binding
            meta["labels"][ZONE] = zone
        status = pod.get("status") or {}
        if "podIP" in status:
            ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
    return orjson.dumps({"type": etype, "object": pod})


# -- the worker (a fresh interpreter per tree and workload) ---------------------------------------------
def _rss() -> int:
    import gc

    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


#: Not followed: code, classes and modules (shared by every process), and bound methods (a
#: callback's owner is walked through its own holder, not through whoever holds the callback).
_SKIP = (type, type(sys), type(_rss), type(len), type(_rss.__code__), type(Path().exists))


def _reachable(roots: list[Any], seen: set[int]) -> int:
    """Bytes of the objects reachable from ``roots`` not in ``seen`` (added to it); code, classes
    and modules are not followed (shared by every process). Holders are walked in turn with one
    ``seen``, so an object two hold counts for the first (a pod's labels: its informer object)."""
    import gc

    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def worker(workload: str, nodes: int, init_pods: int, pods: int, breakdown: bool) -> dict[str, Any]:
    import asyncio
    import tracemalloc

    zone_kind, shape, init_shape, _ = SHAPES[workload]
    doc = json.loads(OBJECTS.read_text())
    import orjson

    from kubesched.app.startup import load_scheduler_config
    from kubesched.kube.api import ApiClient, Connection
    from kubesched.live.runner import LiveScheduler
    from kubesched.snapshot.pod import PodInfo

    out: dict[str, Any] = {"workload": workload, "nodes": nodes, "init_pods": init_pods, "pods": pods, "phases": []}
    node_names = [f"node-{i:05d}" for i in range(nodes)]
    zones = [_zone(zone_kind, i) for i in range(nodes)]
    # Each event serialized just before it is decoded (the bytes on the wire, freed at once), so a
    # phase grows by what the scheduler keeps, not by a prepared stream.
    def init_event(i: int) -> bytes:
        return pod_event("ADDED", doc["bound"][init_shape], f"init-{i}", i, node_names[i % nodes],
                         zones[i % nodes], 10_000 + i, "init")

    def pending_event(i: int) -> bytes:
        return pod_event("ADDED", doc["pending"][shape], f"pod-{i}", i, None, None, 20_000 + i, "measured")

    async def run() -> None:
        config, registry = load_scheduler_config(CONFIG)
        api = ApiClient(Connection(host="http://127.0.0.1:9", ssl_context=False), qps=None)
        live = LiveScheduler(config, registry, api)
        bound: list[tuple[int, str]] = []

        async def bind(pod: PodInfo, node_name: str, annotations: Any = None) -> None:
            bound.append((int(pod.name.removeprefix("pod-")), node_name))

        async def no_event(event: dict[str, Any]) -> None:
            return None

        live.client.bind = bind  # type: ignore[method-assign]
        live.events._create_event = no_event  # type: ignore[method-assign]
        live.events.start()
        zone_of = dict(zip(node_names, zones, strict=True))
        holders = {
            "informer store: nodes": lambda: [live.node_informer.store],
            "informer store: pods": lambda: [live.pod_informer.store],
            "parsed pods (PodInfo, memo)": lambda: list(live.scheduler.cache.table.all_pods()),
            "node table": lambda: [live.scheduler.cache.table],
            "queue": lambda: [live.scheduler.queue],
            "scheduler, plugins, rest": lambda: [live],
        }
        if breakdown:  # from here on: what the phases allocate (the imports' blocks are not traced)
            tracemalloc.start(1)
        snap0 = tracemalloc.take_snapshot() if breakdown else None

        def phase(name: str) -> None:
            row: dict[str, Any] = {"phase": name, "rss": _rss(), "cpu_s": round(time.process_time(), 3)}
            if breakdown:
                seen: set[int] = set()
                row["held"] = {h: _reachable(roots(), seen) for h, roots in holders.items()}
                row["traced"] = tracemalloc.get_traced_memory()[0]
                stats = tracemalloc.take_snapshot().compare_to(snap0, "filename")  # type: ignore[arg-type]
                row["allocated_by"] = {
                    s.traceback[0].filename.split("/src/")[-1].split("site-packages/")[-1]: s.size_diff
                    for s in stats[:14] if s.size_diff > 0
                }
            out["phases"].append(row)

        phase("start")
        inf_nodes, inf_pods = live.node_informer, live.pod_informer
        for i in range(nodes):
            inf_nodes._on_event(orjson.loads(node_event(doc["node"], i, zones[i])))
        phase("nodes")
        for i in range(init_pods):
            inf_pods._on_event(orjson.loads(init_event(i)))
        phase("init pods")
        for i in range(pods):
            inf_pods._on_event(orjson.loads(pending_event(i)))
        phase("pending")
        sched = live.scheduler
        rv = 30_000
        while True:
            n = 0
            while n < 200 and sched.schedule_one():
                n += 1
            await sched.drain()
            for i, node in bound:
                for etype, template in (("MODIFIED", doc["pending"][shape]), ("MODIFIED", doc["bound"][shape])):
                    rv += 1
                    ev = pod_event(etype, template, f"pod-{i}", i, node, zone_of[node], rv, "measured")
                    inf_pods._on_event(orjson.loads(ev))
            bound.clear()
            if n == 0:
                break
        out["scheduled"] = sum(1 for p in sched.cache.table.all_pods() if p.name.startswith("pod-"))
        phase("bound")
        await live.events.stop(0.1)
        await api.close()

    try:
        asyncio.run(run())
    finally:
        tracemalloc.stop()  # (a no-op when not tracing)
    return out


# -- the driver -------------------------------------------------------------------------------------------
def _per(phases: list[dict[str, Any]], key: str, holder: str | None = None) -> dict[str, float]:
    def v(p: dict[str, Any]) -> float:
        return float(p[key] if holder is None else sum(p[key].values()))
    return {p["phase"]: v(p) for p in phases}


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """Bytes per node (nodes phase) and per pod (init pods; pending; bound) from the RSS steps."""
    by = {p["phase"]: p["rss"] for p in run["phases"]}
    n, k, m = run["nodes"], run["init_pods"], run["pods"]
    return {
        "rss_start_mib": round(by["start"] / 2**20, 1),
        "rss_end_mib": round(by["bound"] / 2**20, 1),
        "per_node_kib": round((by["nodes"] - by["start"]) / n / 1024, 2) if n else None,
        "per_init_pod_kib": round((by["init pods"] - by["nodes"]) / k / 1024, 2) if k else None,
        "per_pending_pod_kib": round((by["pending"] - by["init pods"]) / m / 1024, 2) if m else None,
        "per_bound_pod_kib": round((by["bound"] - by["init pods"]) / m / 1024, 2) if m else None,
    }


def _child(src: str, workload: str, size: tuple[int, int, int], breakdown: bool) -> dict[str, Any]:
    env = common.installed_env(f"{src}:{common.ROOT}")
    args = [sys.executable, "-m", "bench.live_memory", "--worker", workload, *map(str, size)]
    if breakdown:
        args.append("--breakdown")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"{workload} from {src} exited {proc.returncode}: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench live-memory", description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="*", default=[str(common.ROOT / "src")])
    ap.add_argument("--workloads", default=",".join(SHAPES))
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--init-pods", type=int)
    ap.add_argument("--pods", type=int)
    ap.add_argument("--breakdown", action="store_true", help="also tracemalloc and per-holder bytes (slower)")
    ap.add_argument("--note", default="")
    ap.add_argument("--worker", nargs=4, metavar=("WORKLOAD", "NODES", "INIT", "PODS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        w, n, k, m = args.worker
        print(json.dumps(worker(w, int(n), int(k), int(m), args.breakdown)))
        return 0
    runs: list[dict[str, Any]] = []
    for wl in args.workloads.split(","):
        full = SHAPES[wl][3]
        size = (args.nodes or full[0], full[1] if args.init_pods is None else args.init_pods, args.pods or full[2])
        for src in args.src:
            run = _child(src, wl, size, False)
            run |= {"src": src, "summary": summarize(run)}
            if args.breakdown:
                run["breakdown"] = _child(src, wl, size, True)["phases"]
            runs.append(run)
            s = run["summary"]
            print(f"{wl} {size} {src}: scheduled {run['scheduled']}/{size[2]}; RSS {s['rss_start_mib']} → "
                  f"{s['rss_end_mib']} MiB; per node {s['per_node_kib']} KiB, per init pod {s['per_init_pod_kib']} "
                  f"KiB, per pending pod {s['per_pending_pod_kib']} KiB, per bound pod {s['per_bound_pod_kib']} KiB",
                  flush=True)
    record = {"benchmark": "live_memory", "when": common.now_iso(), "commit": common.git_commit(),
              "command": common.command_line(), "machine": common.machine(), "load": os.getloadavg()[0],
              "note": args.note, "runs": runs, "complete": True}
    from bench.openb import _save

    path = common.RESULTS / f"live-memory-{common.today()}.json"
    _save(record, path)
    print(f"  saved to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
