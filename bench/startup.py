"""How long an informer takes to sync a backlog: paged LIST (pages of 500) against watch-list
(issue 32 item 2), on the openb trace as a real control plane holds it.

``python -m bench startup [--trace DIR] [--nodes N] [--rounds R] [--encodings]``

The trace's nodes (KWOK) and every task as a pending pod (for a scheduler that is not running) are
created once; then, alternately (ABAB, so a machine whose load drifts favours neither), a fresh
:class:`~kubesched.kube.informer.Informer` for pods and one for nodes is started each way and timed
from start to synced (request, server, transfer, decode, store; no handlers). Each sync is also
charged the CPU seconds this process spent on it (reading and decoding the wire: work a Python
client cannot hand to another core), and the pods the CPU of parsing every listed pod as the
scheduler does (``PodInfo.from_raw``). With ``python -m bench startup-cost`` (the imports and the
configuration), that is the CPU a ``kubesched run`` start needs before any handler runs. Results
are appended to bench/results/startup-<date>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common
from bench.live import Bulk
from bench.openb import _save, add_trace_options, openb_cluster, trace_from
from kubesched.kube.api import ApiClient, load_connection
from kubesched.kube.informer import Informer
from kubesched.snapshot.pod import PodInfo
from kubesched.testing.openb import pod_object

_STARTED = common.now_iso()


@dataclass
class Synced:
    seconds: float
    objects: int
    cpu_s: float
    #: CPU seconds of parsing the listed objects as pods (pods only, else None).
    parse_cpu_s: float | None


async def _sync(kubeconfig: str, path: str, watch_list: bool) -> Synced:
    api = ApiClient(await load_connection(kubeconfig), qps=5000, burst=5000)
    inf = Informer(api, path, name=path, watch_list=watch_list, shuffle_lists=True)
    try:
        t0, cpu0 = time.perf_counter(), time.process_time()
        inf.start()
        await asyncio.wait_for(inf.synced.wait(), 300)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        parse_cpu = None
        if path.endswith("/pods"):
            cpu0 = time.process_time()
            for obj in inf.store.values():
                PodInfo.from_raw(obj)
            parse_cpu = time.process_time() - cpu0
        return Synced(seconds, len(inf.store), cpu, parse_cpu)
    finally:
        await inf.stop()
        await api.close()


_WATCH_LIST = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
               "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
ACCEPT = {"json": "application/json", "protobuf": "application/vnd.kubernetes.protobuf;stream=watch"}
#: The encodings compared: the media type, and whether the stream is gzipped (the apiserver gzips a
#: watch-list when asked to, WatchListCompression, beta and on in v1.37; client-go and aiohttp both ask).
ENCODINGS = {"json": ("json", "gzip"), "protobuf": ("protobuf", "gzip"),
             "json identity": ("json", "identity"), "protobuf identity": ("protobuf", "identity")}


async def _watch_list_seconds(kubeconfig: str, path: str, encoding: str, objects: int) -> float:
    """Seconds from the request to the end of the initial events (their count known: ``objects``)."""
    api = ApiClient(await load_connection(kubeconfig), qps=None)
    try:
        media, compression = ENCODINGS[encoding]
        headers = {**await api._headers(None), "Accept": ACCEPT[media], "Accept-Encoding": compression}
        t0 = time.perf_counter()
        async with api.session.get(api.conn.host + path, params=_WATCH_LIST, headers=headers,
                                   server_hostname=api.conn.server_hostname) as resp:
            buf, seen = b"", 0
            async for chunk in resp.content.iter_any():
                buf += chunk
                if media == "json":
                    *lines, buf = buf.split(b"\n")
                    seen += len(lines)
                else:
                    while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                        buf, seen = buf[4 + int.from_bytes(buf[:4], "big"):], seen + 1
                if seen > objects:  # the objects, then the bookmark
                    return time.perf_counter() - t0
        raise RuntimeError(f"{path}: the stream ended after {seen} events")
    finally:
        await api.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__.splitlines()[0])
    add_trace_options(ap)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--note", default="")
    ap.add_argument("--encodings", action="store_true",
                    help="watch-list to its bookmark: JSON vs protobuf, gzip or not")
    args = ap.parse_args(argv)
    trace = trace_from(args)
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"kubesched-startup-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    with openb_cluster(trace, workdir) as c:
        ns = "startup"
        c.create_namespace(ns)
        Bulk(c).post_all(lambda b: f"/api/v1/namespaces/{ns}/pods",
                         [pod_object(t, ns, "nobody") for t in trace.tasks])
        kubeconfig = str(c.scheduler_kubeconfig)
        objects = {"pods": len(trace.tasks), "nodes": len(trace.nodes)}
        for rnd in range(args.rounds if args.encodings else 0):
            for resource in ("pods", "nodes"):
                ways = list(ENCODINGS)
                for encoding in ways if rnd % 2 == 0 else ways[::-1]:
                    key = f"{resource} watch-list {encoding}"
                    secs = asyncio.run(_watch_list_seconds(kubeconfig, f"/api/v1/{resource}", encoding,
                                                           objects[resource]))
                    times.setdefault(key, []).append(round(secs, 3))
                    counts[key] = objects[resource]
                    print(f"  round {rnd}: {key}: {secs:.2f}s")
        for rnd in range(0 if args.encodings else args.rounds):
            list_ways = (False, True) if rnd % 2 == 0 else (True, False)
            for resource in ("pods", "nodes"):
                for watch_list in list_ways:
                    key = f"{resource} {'watch-list' if watch_list else 'paged list'}"
                    synced = asyncio.run(_sync(kubeconfig, f"/api/v1/{resource}", watch_list))
                    times.setdefault(key, []).append(round(synced.seconds, 3))
                    cpu.setdefault(key, []).append(round(synced.cpu_s, 3))
                    if synced.parse_cpu_s is not None:
                        cpu.setdefault(f"{key} parse", []).append(round(synced.parse_cpu_s, 3))
                    counts[key] = synced.objects
                    print(f"  round {rnd}: {key}: {synced.objects} objects in {synced.seconds:.2f}s, "
                          f"{synced.cpu_s:.2f} CPU s"
                          + (f" (+{synced.parse_cpu_s:.2f} parsing them)" if synced.parse_cpu_s is not None else ""))
    summary: dict[str, Any] = {k: {"objects": counts[k], "seconds": v, "median": statistics.median(v)}
                               for k, v in times.items()}
    for k, v in cpu.items():
        summary.setdefault(k, {"objects": counts[k.removesuffix(" parse")]}).update(
            {"cpu_s": v, "cpu_median": statistics.median(v)})
    record = {"benchmark": "startup", "when": _STARTED, "commit": common.git_commit(),
              "command": common.command_line(), "machine": common.machine(), "nodes": len(trace.nodes),
              "tasks": len(trace.tasks), "note": args.note, "summary": summary, "complete": True}
    path = common.RESULTS / f"startup-{common.today()}.json"
    _save(record, path)
    print(f"startup: {summary}\n  saved to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
