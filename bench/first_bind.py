"""Process start to the first bind with a backlog pending, many starts on one cluster (issue 32 item 2).

``python -m bench first-bind [--trace DIR] [--nodes N] [--rounds R] [--stock] [--contenders K,..] [--finished N]``

bench/openb.py measures the first bind too, but each of its runs creates the whole trace again and
schedules it to the end (minutes at full size); here the backlog is created once and each start is
stopped at its first bind, so many starts of each contender alternate (ABBA) on the same cluster:

* The trace's nodes (KWOK; ``--nodes N``: the systematic cut, as bench/openb.py) and every task as
  a pending pod for the schedulerName ``first-bind``, which every contender's only profile
  schedules (kube-scheduler v1.37.1 and ``kubesched run``, default plugins).
* Each contender is started once, untimed, before the rounds (a source tree's first start
  compiles its modules into the bytecode cache).
* Each start: a watch on the namespace sees the first pod bound; the time from just before the
  process is started to that event, the CPU seconds the process had used then, and the apiserver's
  CPU seconds over the same span (what the start cost the control plane: kubesched's lists are
  JSON, kube-scheduler's protobuf), are recorded;
  the process is stopped (SIGTERM); the pods it bound are deleted and created again pending, so
  every start sees the same backlog.
* kubesched's log gives its phases: its first log line (imports and configuration done), the
  nodes' and pods' lists handed on, synced, its first bind answered.
* Tuned (default): clientConnection qps/burst 5000, leader election off. ``--stock``: both as
  shipped (qps 50 / burst 100, leader election on, each its own Lease, deleted before each start so
  that it is free).
* ``kubesched@DIR``: kubesched from the source tree DIR (e.g. the code before a change).
* ``--finished N``: kubesched contenders only, with Coscheduling, and N Succeeded PodGroup members in
  the cluster (a batch cluster's kept Job pods), which kubesched lists for the groups' counts.

Results are appended to bench/results/first-bind-<date>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from bench import common
from bench.live import (
    MEASURE_LABEL,
    BindWatcher,
    Bulk,
    Workload,
    profile_from,
    scheduler_config,
    start_contender,
    stop_contender,
)
from bench.openb import _save, add_trace_options, grant_kubesched_lease, openb_cluster, trace_from
from kubesched.testing import controlplane
from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.controlplane.scheduler_plugins import install_pod_group_crd
from kubesched.testing.openb import pod_object

SCHEDULER_NAME = "first-bind"
NAMESPACE = "first-bind"
_STARTED = common.now_iso()
#: kubesched's log lines that mark its phases, and the key each is recorded under.
PHASES = {"event=starting": "starting_s", "informer=nodes event=listed": "nodes_s",
          "informer=pods event=listed": "pods_s", "event=synced": "synced_s",
          # kubesched's own first bind (the POST answered), before the bench's watch sees it
          "event=first_bind": "bound_s"}


def _log_phases(log: Path, offset: int, wall_start: float) -> dict[str, float]:
    """Seconds from ``wall_start`` (time.time) to each phase's first line written after ``offset``."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in log.read_bytes()[offset:].decode(errors="replace").splitlines():
            for marker, key in PHASES.items():
                if key not in out and marker in line and line.startswith("ts="):
                    ts = datetime.strptime(line[3:27], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
                    out[key] = round(ts - wall_start, 3)
    return out


def _reset_backlog(c: ControlPlane, bodies: dict[str, dict[str, Any]]) -> int:
    """Delete the pods a start bound and create them again pending; returns how many."""
    bound = [p["metadata"]["name"] for p in c.get(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                                  fieldSelector="spec.nodeName!=")["items"]]
    bulk = Bulk(c)
    for name in bound:
        bulk.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}?gracePeriodSeconds=0")
    c.wait_for(lambda: not c.get(f"/api/v1/namespaces/{NAMESPACE}/pods", fieldSelector="spec.nodeName!=",
                                 limit=1)["items"], 120, 0.2, "bound pods deleted")
    bulk.post_all(lambda b: f"/api/v1/namespaces/{NAMESPACE}/pods", [bodies[n] for n in bound])
    return len(bound)


def one_start(c: ControlPlane, kind: str, workdir: Path, qps: float | None, burst: int | None, stock: bool,
              timeout: float, profile: dict[str, Any] | None = None) -> dict[str, Any]:
    base, _, src = kind.partition("@")
    if stock:
        for lease in ("kube-scheduler", "kubesched"):
            with contextlib.suppress(controlplane.ApiError):
                c.client.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease}")
    rv = c.get(f"/api/v1/namespaces/{NAMESPACE}/pods", limit=1)["metadata"]["resourceVersion"]
    pid: list[int] = []
    cpu: list[float | None] = []
    # What a start costs the control plane too: the apiserver's CPU from just before the process
    # starts to its first bind (its background load, KWOK's node heartbeats, included alike).
    apiserver = c.apiserver.pid if c.apiserver is not None else None
    apiserver_cpu: list[float | None] = []

    def at_first_bind() -> None:
        if apiserver is not None:
            apiserver_cpu.append(common.proc_cpu_seconds(apiserver))
        if pid:
            cpu.append(common.proc_cpu_seconds(pid[0]))

    watcher = BindWatcher(c, NAMESPACE, rv, 1, on_first=at_first_bind)
    watcher.start()
    log_path = c.logs_dir / "kubesched.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    apiserver_before = common.proc_cpu_seconds(apiserver) if apiserver is not None else None
    wall_start, started = time.time(), time.monotonic()
    if base == "kubesched":
        wl = Workload("first-bind", "", kubesched_profile=profile or {"schedulerName": SCHEDULER_NAME})
        run = start_contender(c, wl, "kubesched", qps, burst, workdir, leader_elect=stock, kubesched_src=src or None)
        procs = run.procs
    else:
        cfg = scheduler_config(c, workdir / "kube-scheduler.yaml", {"schedulerName": SCHEDULER_NAME}, qps, burst,
                               leader_elect=stock)
        procs = {"scheduler": c.start_kube_scheduler(cfg, extra_args=["--v=0"])}
        run = None
    proc = procs["scheduler"]
    try:
        if proc.pid is not None:
            pid.append(proc.pid)
            if watcher.bound and not cpu:  # bound before kube-scheduler's start returned: read now, late
                cpu.append(common.proc_cpu_seconds(proc.pid))
        c.wait_for(lambda: bool(watcher.bound) or not proc.alive(), timeout, 0.02, f"{kind}'s first bind")
    finally:
        if run is not None:
            stop_contender(c, run)
        else:
            c.stop_component(proc)
        watcher.close()
    first = min(watcher.bound.values()) if watcher.bound else None
    out: dict[str, Any] = {"contender": kind, "first_bind_s": round(first - started, 3) if first else None,
                           "cpu_at_first_bind_s": cpu[0] if cpu else None, "load": common.loadavg()[0]}
    if apiserver_before is not None and apiserver_cpu and apiserver_cpu[0] is not None:
        out["apiserver_cpu_s"] = round(apiserver_cpu[0] - apiserver_before, 2)
    if base == "kubesched":
        out.update(_log_phases(log_path, offset, wall_start))
    return out


FINISHED_NAMESPACE = "first-bind-done"


def _create_finished_pods(c: ControlPlane, n: int) -> None:
    """``n`` Succeeded pods, 8 to a PodGroup label, on a node that no longer exists (KWOK leaves them
    alone): a batch cluster's Job pods kept after they ran. Created, then their status set."""
    install_pod_group_crd(c)
    c.create_namespace(FINISHED_NAMESPACE)
    bulk = Bulk(c)
    started = time.monotonic()

    def one(i: int) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"done-{i}", "namespace": FINISHED_NAMESPACE,
                            "labels": {"scheduling.x-k8s.io/pod-group": f"g{i // 8}"}},
               "spec": {"nodeName": "gone-node", "schedulerName": SCHEDULER_NAME, "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                        "resources": {"requests": {"cpu": "1"}}}]}}
        status, raw = bulk.request("POST", f"/api/v1/namespaces/{FINISHED_NAMESPACE}/pods", pod)
        if status >= 300:
            raise RuntimeError(f"creating finished pod {i}: HTTP {status}: {raw[:200]!r}")
        obj = orjson.loads(raw)
        obj["status"] = {**(obj.get("status") or {}), "phase": "Succeeded"}
        status, raw = bulk.request("PUT", f"/api/v1/namespaces/{FINISHED_NAMESPACE}/pods/done-{i}/status", obj)
        if status >= 300:
            raise RuntimeError(f"finishing pod {i}: HTTP {status}: {raw[:200]!r}")

    with ThreadPoolExecutor(bulk.threads) as ex:
        list(ex.map(one, range(n)))
    print(f"  {n} finished pods in {time.monotonic() - started:.0f} s", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench first-bind", description=__doc__.splitlines()[0])
    add_trace_options(ap)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--contenders", default="kube-scheduler,kubesched")
    ap.add_argument("--stock", action="store_true", help="qps 50 / burst 100 and leader election on, both")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--note", default="")
    ap.add_argument("--finished", type=int, default=0, metavar="N",
                    help="kubesched with a Coscheduling profile, and N finished pods (PodGroup members) in the "
                    "cluster, which it lists for their counts (kubesched contenders only: kube-scheduler has no "
                    "Coscheduling)")
    args = ap.parse_args(argv)
    trace = trace_from(args)
    contenders = [k.strip() for k in args.contenders.split(",") if k.strip()]
    if args.finished and any(not k.startswith("kubesched") for k in contenders):
        ap.error("--finished: kubesched contenders only (kube-scheduler has no Coscheduling)")
    # --finished: examples/coscheduling.yaml's profile, as the live Coscheduling workload runs it:
    # Coscheduling counts finished pods, so kubesched lists them.
    profile = {**profile_from("coscheduling.yaml"), "schedulerName": SCHEDULER_NAME} if args.finished else None
    qps, burst = (None, None) if args.stock else (5000.0, 5000)
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"kubesched-first-bind-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True, exist_ok=True)
    path = common.RESULTS / f"first-bind-{common.today()}.json"
    starts: list[dict[str, Any]] = []
    record: dict[str, Any] = {}
    print(f"first-bind: {len(trace.nodes)} nodes, {len(trace.tasks)} pods pending, {args.rounds} round(s) of "
          f"{contenders}{' (stock)' if args.stock else ''}")
    with openb_cluster(trace, workdir) as c:
        if args.stock:
            grant_kubesched_lease(c)
        c.create_namespace(NAMESPACE)
        bodies = {}
        for t in trace.tasks:
            body = pod_object(t, NAMESPACE, SCHEDULER_NAME)
            body["metadata"]["labels"][MEASURE_LABEL] = "measure"
            bodies[body["metadata"]["name"]] = body
        Bulk(c).post_all(lambda b: f"/api/v1/namespaces/{NAMESPACE}/pods", list(bodies.values()))
        if args.finished:
            _create_finished_pods(c, args.finished)
        # One untimed start of each first: a source tree's first start compiles every module it
        # imports into the bench's bytecode cache (common.installed_env), which an installed
        # kubesched never does (it made round 0 of each tree ~1.5 s slower).
        for kind in contenders:
            warm = one_start(c, kind, workdir, qps, burst, args.stock, args.timeout, profile)
            _reset_backlog(c, bodies)
            print(f"  warm-up (not counted): {warm['contender']} {warm['first_bind_s']} s", flush=True)
        for rnd in range(args.rounds):
            for kind in contenders if rnd % 2 == 0 else list(reversed(contenders)):  # ABBA
                res = one_start(c, kind, workdir, qps, burst, args.stock, args.timeout, profile)
                res["round"] = rnd
                res["recreated"] = _reset_backlog(c, bodies)
                starts.append(res)
                print(f"  round {rnd}: {res}", flush=True)
                record = _record(args, trace, contenders, starts, complete=False)
                _save(record, path)
    record["complete"] = True
    _save(record, path)
    print(f"first-bind: {record['summary']}\n  saved to {path}")
    return 0


def _record(args: argparse.Namespace, trace: Any, contenders: list[str], starts: list[dict[str, Any]],
            complete: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for kind in contenders:
        mine = [s for s in starts if s["contender"] == kind]
        row: dict[str, Any] = {}
        for key in ("first_bind_s", "cpu_at_first_bind_s", "apiserver_cpu_s", *PHASES.values()):
            values = [s[key] for s in mine if s.get(key) is not None]
            if values:
                row[key] = {"values": values, "median": round(statistics.median(values), 3)}
        summary[kind] = row
    return {"benchmark": "first-bind", "when": _STARTED, "commit": common.git_commit(),
            "command": common.command_line(), "machine": common.machine(), "nodes": len(trace.nodes),
            "pods": len(trace.tasks), "stock": args.stock, "finished": args.finished, "note": args.note,
            "summary": summary, "starts": starts, "complete": complete}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
