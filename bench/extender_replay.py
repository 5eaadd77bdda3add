"""The extender's cost per pod on the requests kube-scheduler really sends, against the no-op floor.

A live A/B (``python -m bench ExtenderFloor``) measures what users see, kube-scheduler's throughput
with each extender, but on this shared 2-core machine its rounds move with the load. This harness
measures what does not: the CPU the extender process spends per pod on a recorded request stream.

1. Record: run the no-op extender under the real kube-scheduler with ``NOOP_EXTENDER_RECORD=FILE``
   (bench/noop_extender.py appends each request as ``<verb>\\t<body>``), e.g.
   ``NOOP_EXTENDER_RECORD=/tmp/stream.txt python -m bench ExtenderFloor --size medium --rounds 1
   --contenders kube-scheduler+noop-extender-cache --no-save``: 500 KWOK nodes, 500 init pods bound
   round-robin, 4,000 pods, so filter carries kube-scheduler's sampled feasible nodes (~230 names).
2. Replay (``python -m bench.extender_replay --stream FILE``): both servers in processes of their
   own, the stream's requests posted one at a time as kube-scheduler sends them (a scheduling
   cycle waits for each answer), pod by pod alternately to ``kubesched extender`` and to the no-op,
   so both see the same moments of the machine's load. Each pass starts both servers afresh.

kubesched's server is ``kubesched extender``'s own (ExtenderService + ExtenderServer, default
profile, default options) on its own cluster cache (ExtenderCluster, fed through its informers'
handlers) built like the bench's cluster: the stream's node names as scheduler_perf node-default
nodes and the init pods bound round-robin, the stream's pods pending. Standing in for the
watch, a pod the extender held is seen bound ``--watch-lag`` requests after the one that held it
(default 1: during the next pod's filter and prioritize, as kube-scheduler binds while it schedules
the next pod): the bind's update and the status update (with a --baseline-src from before the
extender had one pod informer: the pending pod's delete, the bound pod's add and its status
update), each moving the cluster's event counts as the informers' would. The informers' own work
(decoding watch events) is not in this figure; the live A/B's extender CPU has it.

Reported per pass and as median/min/max over the passes: each server's CPU per pod (utime+stime of
its process over the pass, from /proc), the client-observed round trip p50 per pod, and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientSession

from bench import common

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def read_stream(path: Path, limit: int | None = None) -> list[list[tuple[str, bytes]]]:
    """The recorded requests grouped per pod (a filter and what follows it for the same pod)."""
    pods: list[list[tuple[str, bytes]]] = []
    with path.open("rb") as f:
        for line in f:
            verb, _, body = line.rstrip(b"\n").partition(b"\t")
            v = verb.decode()
            if v == "filter" or not pods:
                if limit is not None and len(pods) == limit:
                    break
                pods.append([])
            pods[-1].append((v, body))
    return pods


def stream_node_names(pods: list[list[tuple[str, bytes]]]) -> list[str]:
    names: set[str] = set()
    for reqs in pods:
        for verb, body in reqs:
            if verb == "filter":
                args = orjson.loads(body)
                names.update(args.get("NodeNames") or args.get("nodenames") or ())
    return sorted(names)


# -- kubesched's service on the replay's cluster ------------------------------------------------------
def replay_service(recorded: list[list[tuple[str, bytes]]], init_pods: int, pending_order: str = "list") -> Any:
    """``kubesched extender``'s service (default profile, default options) on its own cluster cache
    (ExtenderCluster, never started: no API calls), whose informers the replay feeds as the
    apiserver's watch would: the stream's nodes, ``init_pods`` bound round-robin, the stream's pods
    pending. Runs against whichever kubesched is on the path (a --baseline-src too)."""
    from typing import cast

    from bench.live import node_body, pod_body
    from kubesched.config.load import load_config
    from kubesched.extender.cluster import ExtenderCluster
    from kubesched.extender.service import ExtenderService
    from kubesched.kube.api import ApiClient
    from kubesched.plugins.builtin import builtin_registry

    names = stream_node_names(recorded)
    cluster = ExtenderCluster(cast(ApiClient, None))
    # One pod informer since the extender split pods by spec.nodeName itself; two before (a
    # --baseline-src from then): the bound pods' and the pending pods'.
    pending_informer = getattr(cluster, "pending", cluster.pods)
    for inf in {id(i): i for i in (cluster.nodes, cluster.pods, pending_informer)}.values():
        inf.synced.set()
    for n in names:
        cluster.nodes.handlers.on_add(node_body(n, {}))
    for i in range(init_pods):
        raw = pod_body(f"init-{i:05d}", "replay", role="init", node=names[i % len(names)])
        raw["metadata"]["uid"] = f"init-{i:05d}"
        cluster.pods.handlers.on_add(raw)
    # The measured pods pending, as the pending-pods informer has them (the watch's copy has
    # TypeMeta and managedFields, which kube-scheduler's requests do not): "list", in the order a
    # list returns them (by name), as for the recorded backlog, which kube-scheduler took in
    # another (random) order; "scheduler", in the order kube-scheduler took them, as when pods
    # arrive one by one while it schedules.
    listed: dict[str, dict[str, Any]] = {}
    for reqs in recorded:
        pod = orjson.loads(reqs[0][1]).get("Pod") or {}
        uid = (pod.get("metadata") or {}).get("uid")
        if uid:
            listed.setdefault(uid, pod)
    order = list(listed.values())
    if pending_order == "list":
        order.sort(key=lambda p: p["metadata"]["name"])
    managed = [{"manager": "replay", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}}}]
    for pod in order:
        pending_informer.handlers.on_add({"apiVersion": "v1", "kind": "Pod", **pod,
                                         "metadata": {**pod["metadata"], "managedFields": managed}})
    registry = builtin_registry()
    return ExtenderService(load_config(None, registry).profiles[0], registry, cluster)


class WatchStandIn:
    """The watch's events for a pod the extender held, ``lag`` requests after the one that held it
    (kube-scheduler binds while it goes on with the next pods): the bind's update (a new
    resourceVersion, the node, TypeMeta as a watch sends it), then its status update (Running), as
    KWOK's kubelet sends. The service's own ExtenderCluster handles
    them (a --baseline-src counts them its way). Call ``answered`` after each filter and
    prioritize answer with the request's decoded body."""

    def __init__(self, svc: Any, lag: int = 1) -> None:
        self.cluster = svc.cluster
        self.holds = svc.holds
        assert self.holds is not None
        self.lag = lag
        self.seen = 0
        self.due: list[tuple[int, dict[str, Any], str]] = []

    def answered(self, data: Any) -> None:
        self.seen += 1
        self._deliver()
        pod = data.get("Pod") if isinstance(data, dict) else None
        uid = (pod or {}).get("metadata", {}).get("uid")
        node = self.holds.node_of(uid) if uid else None
        if node is not None and not any(d[1]["metadata"]["uid"] == uid for d in self.due):
            self.due.append((self.seen + self.lag, pod, node))
            self._deliver()

    def _deliver(self) -> None:
        cluster, due = self.cluster, self.due
        while due and due[0][0] <= self.seen:
            _, pod, node = due.pop(0)
            meta = pod["metadata"]
            bound = {"apiVersion": "v1", "kind": "Pod", **pod, "metadata": {**meta, "resourceVersion": "b1"},
                     "spec": {**pod["spec"], "nodeName": node}}
            if hasattr(cluster, "pending"):  # two informers: a delete from one, an add to the other
                cluster.pending.handlers.on_delete(pod)
                cluster.pods.handlers.on_add(bound)
            else:  # one: the bind is an update
                cluster.pods.handlers.on_update(pod, bound)
            running = {**bound, "metadata": {**meta, "resourceVersion": "b2"},
                       "status": {**(pod.get("status") or {}), "phase": "Running"}}
            cluster.pods.handlers.on_update(bound, running)


# -- kubesched's server (a process of its own) --------------------------------------------------------
def serve(stream: Path, port: int, init_pods: int, profile: Path | None = None, watch_lag: int = 1,
          pending_order: str = "list", stats: Path | None = None) -> None:
    """``kubesched extender``'s server on ``replay_service``, the watch played by WatchStandIn."""
    from kubesched.extender.server import ExtenderServer, start_server
    try:
        from kubesched.extender.server import settle_heap
    except ImportError:  # a --baseline-src from before it
        def settle_heap() -> None:
            pass

    svc = replay_service(read_stream(stream), init_pods, pending_order)
    watch = WatchStandIn(svc, watch_lag)

    def then_bound(verb: str) -> None:
        answer = getattr(svc, verb)

        def call(data: Any, deadline: Any) -> Any:
            t0 = time.process_time()
            reply = answer(data, deadline)
            spent[verb] = spent.get(verb, 0.0) + time.process_time() - t0
            watch.answered(data)
            return reply

        setattr(svc, verb, call)

    #: CPU seconds in each verb's handler (what kube-scheduler waits for), and in work done ahead.
    spent: dict[str, float] = {}
    then_bound("filter")
    then_bound("prioritize")
    work_ahead = getattr(svc, "work_ahead", None)
    if work_ahead is not None:
        def ahead() -> None:
            t0 = time.process_time()
            work_ahead()
            spent["ahead"] = spent.get("ahead", 0.0) + time.process_time() - t0

        svc.work_ahead = ahead

    async def main() -> None:
        await start_server(ExtenderServer(svc), "127.0.0.1", port)
        settle_heap()  # as `kubesched extender` does once it serves
        done = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
        await done.wait()
        if stats is not None:
            stats.write_text(json.dumps(spent))

    if profile is None:
        asyncio.run(main())
        return
    import cProfile

    prof = cProfile.Profile(time.process_time)  # CPU time: on a loaded machine wall time is mostly waiting
    prof.runcall(asyncio.run, main())
    prof.dump_stats(str(profile))


# -- the replay ---------------------------------------------------------------------------------------
def _start(kind: str, stream: Path, init_pods: int, src: Path, profile: Path | None = None, watch_lag: int = 1,
           pending_order: str = "list", stats: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    from kubesched.testing.controlplane import free_port

    port = free_port()
    path = os.pathsep.join([str(src), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("NOOP_EXTENDER_RECORD", None)
    if kind == "noop":
        argv = [sys.executable, str(ROOT / "bench" / "noop_extender.py"), f"--listen=127.0.0.1:{port}"]
    else:
        argv = [sys.executable, "-m", "bench.extender_replay", "--serve", "--stream", str(stream),
                "--port", str(port), "--init-pods", str(init_pods), "--watch-lag", str(watch_lag),
                "--pending-order", pending_order]
        if stats is not None:
            argv += ["--stats", str(stats)]
        if profile is not None:
            argv += ["--profile", str(profile)]
    return subprocess.Popen(argv, env=env, cwd=ROOT), port


async def _ready(session: ClientSession, port: int) -> None:
    for _ in range(1200):
        try:
            async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"extender on port {port} not ready")


async def _post(session: ClientSession, url: str, body: bytes) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        answer = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}")
    return time.perf_counter() - t0, answer


async def one_pass(pods: list[list[tuple[str, bytes]]], stream: Path, init_pods: int,
                   baseline: Path | None = None, profile: Path | None = None, watch_lag: int = 1,
                   think: float = 0.0, pending_order: str = "list") -> dict[str, Any]:
    """One pass over ``pods``: kubesched (this checkout's src, and ``baseline``'s when given) and
    the no-op, each pod's requests to each in turn. With a baseline, every answer of the two
    kubesched servers is compared byte for byte (``answers_differing``). ``think`` seconds: the
    client waits that long after each answer before its next request, as kube-scheduler runs its
    own plugins between them (not counted in the round trip)."""
    srcs = {"kubesched": ROOT / "src", "noop": ROOT / "src"}
    if baseline is not None:
        srcs["baseline"] = baseline
    stats = {k: Path(tempfile.gettempdir()) / f"extender-replay-{os.getpid()}-{k}.json" for k in srcs if k != "noop"}
    procs = {k: _start(k, stream, init_pods, src, profile if k == "kubesched" else None, watch_lag, pending_order,
                       stats.get(k))
             for k, src in srcs.items()}
    differing = 0
    try:
        async with ClientSession() as probe:  # a connection of its own, as the kubelet's probes are
            for _, port in procs.values():
                await _ready(probe, port)
        async with ClientSession() as session:
            cpu0 = {k: common.proc_cpu_seconds(p.pid) or 0.0 for k, (p, _) in procs.items()}
            rtt: dict[str, list[float]] = {k: [] for k in procs}
            per_verb: dict[str, dict[str, list[float]]] = {k: {} for k in procs}
            t0 = time.perf_counter()
            for reqs in pods:
                answers: dict[str, list[bytes]] = {}
                for k, (_, port) in procs.items():
                    spent = 0.0
                    answers[k] = []
                    for verb, body in reqs:
                        if think:
                            await asyncio.sleep(think)
                        took, answer = await _post(session, f"http://127.0.0.1:{port}/{verb}", body)
                        spent += took
                        per_verb[k].setdefault(verb, []).append(took)
                        answers[k].append(answer)
                    rtt[k].append(spent)
                if baseline is not None:
                    differing += sum(a != b for a, b in zip(answers["kubesched"], answers["baseline"], strict=True))
            wall = time.perf_counter() - t0
            cpu = {k: (common.proc_cpu_seconds(p.pid) or 0.0) - cpu0[k] for k, (p, _) in procs.items()}
    finally:
        for p, _ in procs.values():
            p.send_signal(signal.SIGTERM)
        for p, _ in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    n = len(pods)
    out: dict[str, Any] = {"pods": n, "watch_lag": watch_lag, "think_ms": think * 1000, "pending_order": pending_order,
                           "wall_seconds": round(wall, 2),
                           "loadavg_after": common.loadavg()}
    for k in procs:
        out[k] = {"cpu_ms_per_pod": round(cpu[k] * 1000 / n, 4),
                  "round_trip_p50_ms": round(statistics.median(rtt[k]) * 1000, 3),
                  **{f"{verb}_p50_ms": round(statistics.median(v) * 1000, 3) for verb, v in per_verb[k].items()}}
    for k, path in stats.items():
        if path.exists():
            spent = json.loads(path.read_text())
            path.unlink()
            # The server's CPU in its verb handlers, on the client's wait, and in work done ahead.
            out[k]["handler_cpu_us_per_pod"] = {verb: round(v * 1e6 / n, 1) for verb, v in spent.items()}
    out["cpu_per_pod_over_floor"] = round(cpu["kubesched"] / max(cpu["noop"], 1e-9), 3)
    out["cpu_per_pod_minus_floor_ms"] = round((cpu["kubesched"] - cpu["noop"]) * 1000 / n, 4)
    rtt_p50 = out["kubesched"]["round_trip_p50_ms"], out["noop"]["round_trip_p50_ms"]
    out["round_trip_p50_over_floor"] = round(rtt_p50[0] / rtt_p50[1], 3)
    if baseline is not None:
        out["baseline"]["src"] = str(baseline)
        out["cpu_per_pod_over_baseline"] = round(cpu["kubesched"] / max(cpu["baseline"], 1e-9), 3)
        out["answers_differing"] = differing
    return out


def _spread(values: Iterator[float]) -> dict[str, float]:
    v = list(values)
    return {"median": round(statistics.median(v), 4), "min": round(min(v), 4), "max": round(max(v), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.extender_replay", description=__doc__.splitlines()[0])
    ap.add_argument("--stream", type=Path, required=True, help="requests recorded by bench/noop_extender.py")
    ap.add_argument("--pods", type=int, default=None, help="replay the first N pods of the stream")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--init-pods", type=int, default=500, help="pods bound round-robin before the stream")
    ap.add_argument("--baseline-src", type=Path, default=None, metavar="DIR",
                    help="also replay against kubesched from another src tree (e.g. `git archive REV src`), "
                         "interleaved with the other two: a before/after in one run")
    ap.add_argument("--profile", type=Path, default=None, metavar="FILE",
                    help="run this checkout's kubesched server under cProfile (CPU time), stats to FILE "
                         "(its figures are then not comparable)")
    ap.add_argument("--watch-lag", type=int, default=1, metavar="N",
                    help="the watch sees a held pod bound N requests after the one that held it (0: at once)")
    ap.add_argument("--think-ms", type=float, default=0.0, metavar="MS",
                    help="the client waits MS after each answer before its next request (kube-scheduler's own "
                         "plugins run between its extender calls); 0: back to back")
    ap.add_argument("--pending-order", choices=("list", "scheduler"), default="list",
                    help="the order of the pending pods the extender's watch shows: as a list returns them "
                         "(by name; kube-scheduler took the recorded backlog in another order) or the order "
                         "kube-scheduler took them (pods arriving one by one)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stats", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.stream, args.port, args.init_pods, args.profile, args.watch_lag, args.pending_order, args.stats)
        return 0
    pods = read_stream(args.stream, args.pods)
    passes = []
    for i in range(args.passes):
        r = asyncio.run(one_pass(pods, args.stream, args.init_pods, args.baseline_src, args.profile, args.watch_lag,
                                  args.think_ms / 1000, args.pending_order))
        passes.append(r)
        base = (f"; baseline {r['baseline']['cpu_ms_per_pod']} ms/pod (x{r['cpu_per_pod_over_baseline']} of it), "
                f"round trip p50 {r['baseline']['round_trip_p50_ms']} ms, {r['answers_differing']} answers differing"
                if "baseline" in r else "")
        print(f"pass {i}: {r['pods']} pods in {r['wall_seconds']} s; CPU ms/pod kubesched "
              f"{r['kubesched']['cpu_ms_per_pod']} noop {r['noop']['cpu_ms_per_pod']} (x{r['cpu_per_pod_over_floor']},"
              f" +{r['cpu_per_pod_minus_floor_ms']} ms); round trip p50 {r['kubesched']['round_trip_p50_ms']} vs "
              f"{r['noop']['round_trip_p50_ms']} ms{base}; load {r['loadavg_after']}", flush=True)
        print("  p50 ms per verb: " + "; ".join(
            f"{k} " + ", ".join(f"{key[:-7]} {v}" for key, v in r[k].items() if key.endswith("_p50_ms") and
                                key != "round_trip_p50_ms")
            for k in ("kubesched", "baseline", "noop") if k in r), flush=True)
        print("  handler CPU us per pod: " + "; ".join(
            f"{k} {r[k].get('handler_cpu_us_per_pod')}" for k in ("kubesched", "baseline") if k in r), flush=True)
    summary = {
        "kubesched_cpu_ms_per_pod": _spread(p["kubesched"]["cpu_ms_per_pod"] for p in passes),
        "noop_cpu_ms_per_pod": _spread(p["noop"]["cpu_ms_per_pod"] for p in passes),
        "cpu_per_pod_over_floor": _spread(p["cpu_per_pod_over_floor"] for p in passes),
        "cpu_per_pod_minus_floor_ms": _spread(p["cpu_per_pod_minus_floor_ms"] for p in passes),
        "round_trip_p50_over_floor": _spread(p["round_trip_p50_over_floor"] for p in passes),
    }
    if args.baseline_src is not None:
        summary["baseline_cpu_ms_per_pod"] = _spread(p["baseline"]["cpu_ms_per_pod"] for p in passes)
        summary["cpu_per_pod_over_baseline"] = _spread(p["cpu_per_pod_over_baseline"] for p in passes)
        summary["answers_differing"] = sum(p["answers_differing"] for p in passes)
    for k in ("kubesched", "baseline"):
        if all("handler_cpu_us_per_pod" in p.get(k, {}) for p in passes):
            waited = [sum(v for verb, v in p[k]["handler_cpu_us_per_pod"].items() if verb != "ahead") for p in passes]
            summary[f"{k}_handler_cpu_us_per_pod"] = _spread(iter(waited))
    print(json.dumps(summary, indent=1))
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"extender-replay-{dt.date.today().isoformat()}.json"
        records = json.loads(path.read_text()) if path.exists() else []
        records.append({
            "benchmark": "extender-replay", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "commit": common.git_commit(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "command": "python -m bench.extender_replay " + " ".join(argv if argv is not None else sys.argv[1:]),
            "stream": {"file": str(args.stream), "pods": len(pods), "requests": sum(len(p) for p in pods)},
            "summary": summary, "passes": passes,
        })
        path.write_text(json.dumps(records, indent=2) + "\n")
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
