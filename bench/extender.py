"""Extender latency: filter + prioritize over HTTP to the in-process server, as the kube-scheduler calls them.

For each cluster size and node mode, each iteration sends one pod: POST /filter with every node, then
POST /prioritize with the nodes that passed (the scheduler's sequence). Every iteration's pod is a new
one (its own UID, the same spec), as the scheduler sends each pending pod once, so nothing the extender
keeps from one pod helps the next. Request bodies are built before they are timed (serialising them
is the scheduler's cost, not ours); each latency is client-observed round-trip time over loopback
HTTP, so JSON parsing, the node table, the plugins and the response are all in.

* ``nodes`` mode (nodeCacheCapable: false): full Node objects in every request. ``warm`` numbers hit
  the node-table LRU (the same resourceVersions as the previous call); ``cold`` numbers change one
  node's resourceVersion before each call, so the table is rebuilt from the request every time.
* ``names`` mode (nodeCacheCapable: true): node names only, the table is the extender's own cache.

The profile is the default one (every default-equivalent filter and score plugin). Results go to
bench/results/extender-<date>.json. Run: ``python -m bench.extender [--sizes 100,1000,5000]``.

``--floor N`` (names mode, N nodes): the same pods sent alternately to ``kubesched extender``'s
server and to bench/noop_extender.py, each in a process of its own, so the two differ only in what
the extender does; the watch is played by binding each pod where the extender held it. Reported:
the client-observed filter+prioritize round trip of each, and the extender's CPU per pod in its
filter and prioritize handlers (``time.process_time`` around them) — on a shared machine the round
trips move with the load, the CPU much less.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

import kubesched
from kubesched.backend.cache import SchedulerCache
from kubesched.config.load import load_config
from kubesched.extender.server import ExtenderServer
from kubesched.extender.service import ExtenderService
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo

RESULTS = Path(__file__).parent / "results"


class _StaticCluster:
    """A synced node cache holding the generated nodes (what the informers would have built)."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self._cache = SchedulerCache()
        self.objects_by_kind: dict[str, dict[str, dict[str, Any]]] = {}
        self.changes = self.pending_changes = 0  # ClusterView's event counts: static
        for n in nodes:
            self._cache.add_or_update_node(n)

    @property
    def cache(self) -> SchedulerCache:
        return self._cache

    @property
    def synced(self) -> bool:
        return True

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.objects_by_kind.get(kind, {})

    def pending_pods(self) -> Iterator[PodInfo]:
        return iter(())

    def pending_pod(self, uid: str) -> PodInfo | None:
        return None

    def next_pending(self, skip: object, limit: int = 64) -> PodInfo | None:
        return None

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise NotImplementedError


def _with_uid(filter_body: bytes, prio_body: bytes, uid: str) -> tuple[bytes, bytes]:
    """The two request bodies for a new pod: the same ones with the pod's UID replaced."""
    out = []
    for body in (filter_body, prio_body):
        args = orjson.loads(body)
        args["Pod"]["metadata"]["uid"] = uid
        out.append(orjson.dumps(args))
    return out[0], out[1]


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _summary(xs: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in xs]
    return {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(_pct(ms, 0.99), 3),
            "max_ms": round(max(ms), 3), "n": len(ms)}


async def _post(session: ClientSession, url: str, body: bytes) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        data = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {data[:300]!r}")
    return time.perf_counter() - t0, data


async def run_case(size: int, mode: str, iterations: int, seed: int = 1) -> dict[str, Any]:
    registry = builtin_registry()
    profile = load_config(None, registry).profiles[0]
    generated = generate_cluster(size, max(4, size // 50), seed)
    nodes = generated.nodes
    for n in nodes:
        n["metadata"]["resourceVersion"] = "1"
    pod = next(p for p in generated.pods if not (p.get("spec") or {}).get("nodeName"))
    cluster = _StaticCluster(nodes) if mode == "names" else None
    service = ExtenderService(profile, registry, cluster)
    server = TestServer(ExtenderServer(service).app(), host="127.0.0.1")
    await server.start_server()
    out: dict[str, Any] = {"nodes": size, "mode": mode, "iterations": iterations}
    try:
        async with ClientSession() as session:
            base = str(server.make_url(""))
            if mode == "names":
                names = [n["metadata"]["name"] for n in nodes]
                filter_body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
            else:
                filter_body = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
            _, first = await _post(session, base + "/filter", filter_body)
            result = orjson.loads(first)
            if mode == "names":
                passed = result["NodeNames"]
                prio_body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed})
            else:
                passed = result["Nodes"]["items"]
                prio_body = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": passed}, "NodeNames": None})
            out["feasible"] = len(passed)
            # Untimed, like the first filter: the first prioritize after start encodes each node's
            # answer entry once (a one-off of a few µs per node).
            await _post(session, base + "/prioritize", prio_body)
            out["request_bytes"] = {"filter": len(filter_body), "prioritize": len(prio_body)}
            f_lat: list[float] = []
            p_lat: list[float] = []
            both: list[float] = []
            for i in range(iterations):
                filter_body, prio_body = _with_uid(filter_body, prio_body, f"bench-pod-{i}")
                f, _ = await _post(session, base + "/filter", filter_body)
                p, _ = await _post(session, base + "/prioritize", prio_body)
                f_lat.append(f)
                p_lat.append(p)
                both.append(f + p)
            key = "warm" if mode == "nodes" else "cache"
            out[key] = {"filter": _summary(f_lat), "prioritize": _summary(p_lat), "filter+prioritize": _summary(both)}
            if mode == "nodes":
                cold_f: list[float] = []
                cold_p: list[float] = []
                cold_n = max(3, iterations // 3)
                for i in range(cold_n):
                    cold_pod = {**pod, "metadata": {**pod["metadata"], "uid": f"bench-cold-pod-{i}"}}
                    nodes[0]["metadata"]["resourceVersion"] = f"cold-{i}"
                    body = orjson.dumps({"Pod": cold_pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
                    f, _ = await _post(session, base + "/filter", body)
                    passed[0]["metadata"]["resourceVersion"] = f"cold-p-{i}"
                    pbody = orjson.dumps({"Pod": cold_pod, "Nodes": {"metadata": {}, "items": passed},
                                          "NodeNames": None})
                    p, _ = await _post(session, base + "/prioritize", pbody)
                    cold_f.append(f)
                    cold_p.append(p)
                out["cold"] = {"filter": _summary(cold_f), "prioritize": _summary(cold_p),
                               "filter+prioritize": _summary([a + b for a, b in zip(cold_f, cold_p, strict=True)])}
            out["table_builds"] = service.table_builds
            out["table_hits"] = service.table_hits
    finally:
        await server.close()
    return out


def run(sizes: tuple[int, ...] = (100, 1000, 5000), modes: tuple[str, ...] = ("nodes", "names"),
        iterations: int | None = None) -> list[dict[str, Any]]:
    results = []
    for size in sizes:
        for mode in modes:
            iters = iterations or (200 if size <= 100 else 60 if size <= 1000 else 20)
            results.append(asyncio.run(run_case(size, mode, iters)))
    return results


def real_scheduler_throughput(nodes: int = 100, pods: int = 1000) -> dict[str, Any]:
    """The REAL kube-scheduler's pods/s on a local control plane (KWOK nodes), without and with the extender.

    Each run creates ``pods`` pods for a fresh schedulerName in a fresh namespace and times from the
    first create to the last pod bound. The extender (default profile, nodeCacheCapable: true with its
    own informer cache) runs in-process on a background event loop.
    """
    import tempfile
    import threading
    import uuid

    from kubesched.extender.cluster import ExtenderCluster
    from kubesched.extender.command import extender_stanza
    from kubesched.extender.server import start_server
    from kubesched.testing import controlplane

    workdir = Path(tempfile.mkdtemp(prefix="kubesched-bench-"))
    cp = controlplane.ControlPlane(workdir, bin_dir=controlplane.ensure_binaries())
    cp.start(with_kwok=True)
    out: dict[str, Any] = {"nodes": nodes, "pods": pods}
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        cp.create_nodes(nodes, prefix="bench-node-")

        async def start_extender() -> tuple[Any, Any, int]:
            cluster = await ExtenderCluster.connect(str(cp.kubeconfig))
            await cluster.start()
            registry = builtin_registry()
            service = ExtenderService(load_config(None, registry).profiles[0], registry, cluster)
            runner, port = await start_server(ExtenderServer(service), "127.0.0.1", 0)
            return cluster, runner, port

        cluster, runner, port = asyncio.run_coroutine_threadsafe(start_extender(), loop).result(120)
        stanza = extender_stanza(url=f"http://127.0.0.1:{port}/", node_cache_capable=True)
        for label, extenders in (("without_extender", []), ("with_extender", [stanza])):
            name = f"bench-{uuid.uuid4().hex[:6]}"
            cp.create_namespace(name)
            cfg = cp.write_scheduler_config(workdir / f"{name}.json", scheduler_names=(name,),
                                            extra={"extenders": extenders, "clientConnection": {
                                                "kubeconfig": str(cp.scheduler_kubeconfig), "qps": 5000,
                                                "burst": 5000}})
            for i in range(pods):  # all pending before the scheduler starts: only scheduling is timed
                cp.create_pod(f"p{i}", name, scheduler_name=name, requests={"cpu": "10m"})

            def bound(ns: str = name) -> int:
                items = cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
                return sum(1 for p in items if p["spec"].get("nodeName"))

            sched = cp.start_kube_scheduler(cfg)
            try:
                first_t, first_n = 0.0, 0
                while True:
                    n, t = bound(), time.perf_counter()
                    if n and not first_t:
                        first_t, first_n = t, n
                    if n == pods:
                        break
                    if first_t and t - first_t > 300:
                        raise TimeoutError(f"{label}: {n}/{pods} bound after 300 s")
                    time.sleep(0.05)
                elapsed = max(t - first_t, 1e-3)
            finally:
                cp.stop_component(sched)
            rate = (pods - first_n) / elapsed
            out[label] = {"seconds": round(elapsed, 2), "pods_per_second": round(rate, 1)}
        out["ratio_with_over_without"] = round(
            out["with_extender"]["pods_per_second"] / out["without_extender"]["pods_per_second"], 3
        )
        out["note"] = ("pods created pending first; rate from the first bound pod seen to the last (polled every "
                       "50 ms); same cluster and nodes; default profile in the extender; kube-scheduler client "
                       "qps/burst raised to 5000 so the bind rate limit (default 50 QPS) does not hide the "
                       "extender's cost")

        async def stop_extender() -> None:
            await runner.cleanup()
            await cluster.stop()

        asyncio.run_coroutine_threadsafe(stop_extender(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        cp.stop()
    return out


_FLOOR_SERVER = r"""
import asyncio, signal, sys, time
import orjson
from bench.extender import _StaticCluster
from kubesched.config.load import load_config
from kubesched.extender.server import ExtenderServer, start_server
from kubesched.extender.service import ExtenderService
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.snapshot.pod import PodInfo


async def main() -> None:
    cluster = _StaticCluster(generate_cluster(int(sys.argv[1]), max(4, int(sys.argv[1]) // 50), 1).nodes)
    registry = builtin_registry()
    svc = ExtenderService(load_config(None, registry).profiles[0], registry, cluster)
    spent = {"filter": [0.0, 0], "prioritize": [0.0, 0]}
    for verb in spent:
        def timed(data, deadline, f=getattr(svc, verb), acc=spent[verb]):
            t = time.process_time()
            try:
                return f(data, deadline)
            finally:
                acc[0] += time.process_time() - t
                acc[1] += 1
        setattr(svc, verb, timed)
    prioritize = svc.prioritize

    def prioritize_then_bind(data, deadline):  # the watch sees the bind (and the pod leaves again)
        reply = prioritize(data, deadline)
        pod = data["Pod"]
        node = svc.holds.node_of(pod["metadata"]["uid"])
        if node is not None:
            bound = PodInfo.from_raw({**pod, "spec": {**pod["spec"], "nodeName": node}})
            cluster.cache.add_or_update_pod(bound)
            cluster.cache.remove_pod(bound.uid)
        return reply

    svc.prioritize = prioritize_then_bind
    await start_server(ExtenderServer(svc), "127.0.0.1", int(sys.argv[2]))
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()
    print(orjson.dumps({v: a[0] / max(a[1], 1) for v, a in spent.items()}).decode(), flush=True)


asyncio.run(main())
"""


async def floor_case(size: int, iterations: int, seed: int = 1) -> dict[str, Any]:
    """kubesched extender vs the no-op extender on the same requests (see the module doc)."""
    import socket
    import subprocess
    import sys

    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    generated = generate_cluster(size, max(4, size // 50), seed)
    names = [n["metadata"]["name"] for n in generated.nodes]
    pod = next(p for p in generated.pods if not (p.get("spec") or {}).get("nodeName"))
    root = Path(__file__).resolve().parent.parent
    path = os.pathsep.join([str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    ports = {"kubesched": free_port(), "noop": free_port()}
    procs = {
        "kubesched": subprocess.Popen([sys.executable, "-c", _FLOOR_SERVER, str(size), str(ports["kubesched"])],
                                      env=env, stdout=subprocess.PIPE),
        "noop": subprocess.Popen([sys.executable, str(root / "bench" / "noop_extender.py"),
                                  f"--listen=127.0.0.1:{ports['noop']}"], env=env),
    }
    out: dict[str, Any] = {"nodes": size, "mode": "names", "iterations": iterations}
    try:
        async with ClientSession() as session:
            for k, port in ports.items():
                for _ in range(600):
                    try:
                        async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                            if resp.status == 200:
                                break
                    except OSError:
                        pass
                    await asyncio.sleep(0.1)
                else:
                    raise RuntimeError(f"{k} extender not ready")
            lat: dict[str, list[float]] = {"kubesched": [], "noop": []}
            for i in range(-20, iterations):  # 20 warm-up pods, then alternate
                p = {**pod, "metadata": {**pod["metadata"], "uid": f"floor-pod-{i}", "name": f"floor-pod-{i}"}}
                for k, port in ports.items():
                    base = f"http://127.0.0.1:{port}/"
                    f, body = await _post(session, base + "filter",
                                          orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names}))
                    passed = orjson.loads(body)["NodeNames"]
                    pr, _ = await _post(session, base + "prioritize",
                                        orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": passed}))
                    if i >= 0:
                        lat[k].append(f + pr)
            out["feasible"] = len(passed)
    finally:
        procs["noop"].kill()
        procs["kubesched"].terminate()
        stdout, _ = procs["kubesched"].communicate(timeout=30)
    cpu = orjson.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    out["round_trip"] = {k: _summary(v) for k, v in lat.items()}
    out["round_trip_p50_over_floor"] = round(out["round_trip"]["kubesched"]["p50_ms"]
                                             / out["round_trip"]["noop"]["p50_ms"], 3)
    out["extender_cpu_ms_per_pod"] = {k: round(v * 1000, 3) for k, v in cpu.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.extender", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--modes", default="nodes,names")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--floor", type=int, default=None, metavar="NODES",
                    help="instead: kubesched extender vs the no-op extender, names mode, at NODES nodes")
    ap.add_argument("--real-scheduler", action="store_true",
                    help="also measure the real kube-scheduler's pods/s with and without the extender "
                         "(local control plane)")
    args = ap.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    if args.floor is not None:
        floor = asyncio.run(floor_case(args.floor, args.iterations or 300))
        print(json.dumps(floor, indent=1))
        if not args.no_write:
            RESULTS.mkdir(exist_ok=True)
            path = RESULTS / f"extender-floor-{dt.date.today().isoformat()}.json"
            record = {"benchmark": "extender-floor", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                      "kubesched": kubesched.__version__, "python": platform.python_version(),
                      "cpus": os.cpu_count(), "loadavg": os.getloadavg(), "command": "python -m bench.extender "
                      + " ".join(argv if argv is not None else __import__("sys").argv[1:]), "result": floor}
            path.write_text(json.dumps(record, indent=2) + "\n")
            print(f"written to {path}")
        return 0
    results = run(sizes, tuple(args.modes.split(",")), args.iterations)
    record = {
        "benchmark": "extender",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kubesched": kubesched.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "profile": "default (all default-equivalent plugins)",
        "results": results,
    }
    if args.real_scheduler:
        record["real_kube_scheduler"] = real_scheduler_throughput()
        print(f"real kube-scheduler: {record['real_kube_scheduler']}")
    for r in results:
        k = "cache" if r["mode"] == "names" else "warm"
        parts = []
        for k2 in (k, "cold"):
            if k2 in r:
                fp = r[k2]["filter+prioritize"]
                parts.append(f"{k2} f+p p50 {fp['p50_ms']:.2f} ms p99 {fp['p99_ms']:.2f} ms "
                             f"(filter p50 {r[k2]['filter']['p50_ms']:.2f}, prioritize p50 "
                             f"{r[k2]['prioritize']['p50_ms']:.2f})")
        line = f"{r['nodes']:>6} nodes  {r['mode']:<5}  feasible {r['feasible']:>5}  " + "  ".join(parts)
        print(line)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"extender-{dt.date.today().isoformat()}.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
