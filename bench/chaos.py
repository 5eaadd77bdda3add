"""The chaos suite: ``python -m bench chaos [--size small|full] [--only NAME,...]``.

Each scenario runs `kubesched run` (or kube-scheduler with `kubesched extender`) on a real control
plane (etcd + kube-apiserver auditing pods/binding + KWOK nodes), injects its faults during a
burst, and asserts from a watch (bench/chaos_watch.py) that no node is ever over-committed, no pod
is bound twice or to a deleted node, and every pod that fits is bound in the end. Every scenario
is bounded in time. The small size is what CI runs (tests/integration/test_chaos.py); the full
size is what RELIABILITY.md reports. Results are appended to bench/results/<date>.json.

Scenarios: backlog (pods pending at start, stock configuration: leader election on, 50 QPS),
failover (kill -9 the leader N times during a burst, two replicas), failover-backlog (the leader
killed once, with the rest of a 10,000-pod backlog pending; bench/chaos_failover_backlog.py),
apiserver (kube-apiserver restarted mid-burst), compaction (etcd compacted and the apiserver
restarted: every watch resumes into 410 Gone), proxy (latency, connection resets and a partition of
the leader between kubesched and the apiserver), extender (kube-scheduler's extender killed,
restarted and slow, ignorable or not), assumed (a node deleted under pods waiting at Permit; pods
deleted at Permit and in Bind).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import common
from bench.chaos_cluster import (
    GROUP_LABEL,
    LEASE_NAMESPACE,
    STOCK_LEASE,
    Replicas,
    chaos_control_plane,
    create_nodes,
    delete_group,
    identities,
    lease,
    lease_holder,
    micro_time,
    pod_bodies,
    post_all,
    write_config,
)
from bench.chaos_watch import InvariantWatch, assert_clean, read_audit, split_brain
from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.tcpproxy import TcpProxy, retarget_kubeconfig

FAST_LEASE = ("4s", "3s", "500ms")


@dataclass(frozen=True)
class Size:
    backlog: tuple[int, ...]
    backlog_nodes: int
    failover_pods: int
    kills: int
    failover_lease: tuple[str, str, str]
    restart_pods: int
    restarts: int
    proxy_pods: int
    partition_s: float
    proxy_lease: tuple[str, str, str]
    extender_pods: int
    nodes: int  # for the burst scenarios (32 cpu, 110 pods each)
    #: failover-backlog: pods pending before the replicas start, on how many nodes, the leader
    #: killed once it has bound this many
    failover_backlog: int = 1000
    failover_backlog_nodes: int = 10
    failover_backlog_head: int = 50


SIZES = {
    "small": Size(backlog=(300,), backlog_nodes=10, failover_pods=500, kills=2, failover_lease=FAST_LEASE,
                  restart_pods=500, restarts=1, proxy_pods=300, partition_s=8.0, proxy_lease=FAST_LEASE,
                  extender_pods=10, nodes=5),
    "full": Size(backlog=(5000, 10000), backlog_nodes=1000, failover_pods=5000, kills=10, failover_lease=STOCK_LEASE,
                 restart_pods=3000, restarts=3, proxy_pods=3000, partition_s=30.0, proxy_lease=STOCK_LEASE,
                 extender_pods=50, nodes=100, failover_backlog=10500, failover_backlog_nodes=200,
                 failover_backlog_head=500),
}


@dataclass
class Ctx:
    cp: ControlPlane
    audit: Path
    workdir: Path
    log: Callable[[str], None] = print
    groups: list[str] = field(default_factory=list)

    def group(self, kind: str) -> str:
        ns = f"{kind}-{uuid.uuid4().hex[:6]}"
        self.cp.create_namespace(ns)
        self.groups.append(ns)
        return ns


def _seconds(d: str) -> float:
    return float(d[:-2]) / 1000 if d.endswith("ms") else float(d.rstrip("s"))


def _result(name: str, load: str, faults: str, started: float, figures: dict[str, Any],
            invariants: dict[str, Any]) -> dict[str, Any]:
    return {"scenario": name, "load": load, "faults": faults, "elapsed_s": round(time.monotonic() - started, 1),
            "figures": figures, "invariants": invariants, "loadavg_end": common.loadavg()}


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"chaos: {what} not within {timeout:.0f}s")
        time.sleep(0.1)


def _creator(cp: ControlPlane, ns: str, sched: str, pods: int, prefix: str = "p") -> threading.Thread:
    """Create the burst in the background (through outages), in a few chunks."""
    names = [f"{prefix}{i:05d}" for i in range(pods)]
    t = threading.Thread(target=post_all, args=(cp, pod_bodies(ns, ns, names, sched)), daemon=True)
    t.start()
    return t


def _first_bind_after(bindings: list[Any], t: float, not_user: str = "") -> float | None:
    b = next((b for b in bindings if b.at > t and b.code < 300 and b.user != not_user), None)
    return b.at if b is not None else None


# -- scenarios ---------------------------------------------------------------------------------------
def backlog(ctx: Ctx, pods: int, nodes: int, contender: str = "kubesched") -> dict[str, Any]:
    """``pods`` pending when a single replica starts with the stock configuration (leader election
    15s/10s/2s, 50 QPS): all bound, the lease held throughout (no exit, no transition).
    ``contender`` "kube-scheduler": the real one in the same scenario (its own stock configuration)."""
    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("backlog")
    sched = f"kubesched-{ns}"
    create_nodes(cp, ns, nodes, cpu="32", memory="256Gi", pods=110)
    post_all(cp, pod_bodies(ns, ns, [f"b{i:05d}" for i in range(pods)], sched))
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    reps: Replicas | None = None
    kube_scheduler = None
    lease_name = ns
    if contender == "kube-scheduler":
        lease_name = "kube-scheduler"  # the only Lease system:kube-scheduler may update
        cfg = ctx.workdir / f"{ns}-kube-scheduler.json"
        cfg.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": True, "resourceNamespace": LEASE_NAMESPACE,
                               "resourceName": lease_name},
            "clientConnection": {"kubeconfig": str(cp.scheduler_kubeconfig)},
            "profiles": [{"schedulerName": sched}],
        }))
        kube_scheduler = cp.start_kube_scheduler(cfg, extra_args=["--v=0"])
    else:
        cfg = write_config(ctx.workdir / f"{ns}.json", sched, ns)
        reps = Replicas(cp, cfg, 1, ctx.workdir, identities(cp), prefix=f"{ns}-").start()
    t0 = time.monotonic()
    exits: list[dict[str, Any]] = []
    try:
        all_bound = watch.wait_bound(pods, 120 + pods / 50 * 3)
        drain_s = time.monotonic() - t0
        time.sleep(3.0)  # a renewal or two more
        exits_during = list(reps.exits) if reps is not None else []
        alive = kube_scheduler.alive() if kube_scheduler is not None else True
        spec = lease(cp, lease_name)
    finally:
        if reps is not None:
            exits = reps.stop()
        if kube_scheduler is not None:
            cp.stop_component(kube_scheduler)
            with contextlib.suppress(Exception):
                cp.api("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{lease_name}")
    report = watch.report(scheduled_events=contender == "kubesched")
    lags = [e["max_loop_lag_ms"] for e in exits if e.get("max_loop_lag_ms") is not None]
    figures = {"contender": contender, "all_bound": all_bound, "drain_s": round(drain_s, 1),
               "pods_per_s": round(pods / drain_s, 1) if drain_s else None,
               "exits_while_leading": len(exits_during) + (0 if alive else 1),
               "lease_transitions": spec.get("leaseTransitions"),
               "max_loop_stall_ms": max(lags) if lags else None}
    delete_group(cp, ns)
    suffix = "" if contender == "kubesched" else f"-{contender}"
    return _result(f"backlog-{pods}{suffix}", f"{pods} pending at start, {nodes} nodes, 1 replica, stock config",
                   "none (start-up under backlog)", started, figures, report)


def failover(ctx: Ctx, pods: int, kills: int, lease_timings: tuple[str, str, str], nodes: int = 50
             ) -> dict[str, Any]:
    """Two replicas; the leader is killed with SIGKILL ``kills`` times during the burst (each
    replaced at once, as a Deployment would). Failover per kill: the new leader's first bind after
    the kill, and after the killed leader's lease expired."""
    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("failover")
    sched = f"kubesched-{ns}"
    create_nodes(cp, ns, nodes, cpu="32", memory="256Gi", pods=110)
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    cfg = write_config(ctx.workdir / f"{ns}.json", sched, ns, lease=lease_timings)
    reps = Replicas(cp, cfg, 2, ctx.workdir, identities(cp), prefix=f"{ns}-").start()
    creator = _creator(cp, ns, sched, pods)
    step = max(1, pods // (kills + 2))
    record: list[dict[str, Any]] = []
    budget = 120 + _seconds(lease_timings[0]) * 3
    try:
        last = 0
        for _ in range(kills):
            _wait(lambda: reps.by_identity(lease_holder(cp, ns)) is not None and watch.bound >= last + step,  # noqa: B023
                  budget + pods / 50, "a leader binding")
            spec = lease(cp, ns)
            holder = spec["holderIdentity"]
            t_kill = time.time()
            reps.kill(holder)
            record.append({"killed": holder, "at": t_kill, "bound_at_kill": watch.bound,
                           "expiry": micro_time(spec["renewTime"]) + spec["leaseDurationSeconds"]})
            last = watch.bound
            _wait(lambda: lease_holder(cp, ns) not in ("", holder) and (watch.bound > last or watch.bound >= pods),  # noqa: B023
                  budget, "a new leader binding")
            last = watch.bound
        creator.join(300)
        all_bound = watch.wait_bound(pods, budget + pods / 50 * 2)
    finally:
        exits = reps.stop()
    report = watch.report()
    bindings = read_audit(ctx.audit, ns)
    per_kill = []
    for k in record:
        first = _first_bind_after(bindings, k["at"], f"kubesched-{k['killed']}")
        per_kill.append({"kill_to_first_bind_s": round(first - k["at"], 2) if first else None,
                         "expiry_to_first_bind_s": round(first - k["expiry"], 2) if first else None})
    report["split_brain"] = split_brain(bindings)
    kill_to_bind = [k["kill_to_first_bind_s"] for k in per_kill if k["kill_to_first_bind_s"] is not None]
    figures = {"all_bound": all_bound, "kills": len(record), "per_kill": per_kill,
               "failover_max_s": max(kill_to_bind) if kill_to_bind else None,
               "failover_median_s": common.median(kill_to_bind),
               "lease": "/".join(lease_timings), "unexpected_exits": [e for e in exits if e["code"] not in
                                                                      (0, -9, None)]}
    delete_group(cp, ns)
    return _result("failover", f"{pods}-pod burst, 2 replicas, lease {'/'.join(lease_timings)}",
                   f"kill -9 the leader {kills} times", started, figures, report)


def apiserver_restarts(ctx: Ctx, pods: int, restarts: int, compact: bool, nodes: int = 50) -> dict[str, Any]:
    """Two replicas (stock config) during a burst; kube-apiserver restarted ``restarts`` times (with
    ``compact``: etcd compacted first, so every watch resumes into 410 Gone and relists)."""
    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("compaction" if compact else "apiserver")
    sched = f"kubesched-{ns}"
    create_nodes(cp, ns, nodes, cpu="32", memory="256Gi", pods=110)
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    cfg = write_config(ctx.workdir / f"{ns}.json", sched, ns)
    reps = Replicas(cp, cfg, 2, ctx.workdir, identities(cp), prefix=f"{ns}-").start()
    chunk = pods // (restarts + 1)
    outages: list[dict[str, float]] = []
    relists = 0
    try:
        created = 0
        for k in range(restarts):
            # A chunk of the burst, and the restart once half of it is bound (binds in flight).
            creator = _creator(cp, ns, sched, chunk, prefix=f"r{k}-")
            created += chunk
            _wait(lambda: watch.bound >= created - chunk // 2, 180 + pods / 50, "binding before the restart")  # noqa: B023
            if compact:
                cp.compact_etcd()
            t_down, bound_down = time.time(), watch.bound
            cp.restart_apiserver()
            outages.append({"down": t_down, "up": time.time(), "bound_down": bound_down, "bound_up": watch.bound})
            creator.join(300)
        creator = _creator(cp, ns, sched, pods - created, prefix="last-")  # bound only after the last restart
        creator.join(300)
        all_bound = watch.wait_bound(pods, 180 + pods / 50 * 2)
        for r in list(reps.running):
            _, text = r.get("/metrics")
            for line in text.splitlines():
                if line.startswith("kubesched_informer_relists_after_gone_total"):
                    relists += int(float(line.split()[-1]))
    finally:
        exits = reps.stop()
    report = watch.report()
    bindings = read_audit(ctx.audit, ns)
    report["split_brain"] = split_brain(bindings)
    recovery = []
    for o in outages:
        first = _first_bind_after(bindings, o["up"])
        recovery.append({"outage_s": round(o["up"] - o["down"], 1), "bound_before": o["bound_down"],
                         "bound_when_ready_again": o["bound_up"],
                         "ready_to_first_bind_s": round(first - o["up"], 2) if first else None})
    figures = {"all_bound": all_bound, "restarts": len(outages), "per_restart": recovery,
               "replica_exits_lost_lease": sum(1 for e in exits if e["code"] == 1),
               "informer_relists_after_410": relists, "checker_relists_after_410": report["watch_relists_410"]}
    delete_group(cp, ns)
    name = "compaction" if compact else "apiserver-restart"
    faults = (f"etcd compacted + apiserver restarted {restarts}x (410 on every watch)" if compact
              else f"kube-apiserver restarted {restarts}x mid-burst")
    return _result(name, f"{pods}-pod burst, 2 replicas, stock config", faults, started, figures, report)


def proxy_faults(ctx: Ctx, pods: int, partition_s: float, lease_timings: tuple[str, str, str], nodes: int = 50
                 ) -> dict[str, Any]:
    """Two replicas, each reaching the apiserver through its own TCP proxy: 300 ms latency, then
    every connection reset three times, then the leader partitioned for ``partition_s``. The
    leader must step down before the other replica binds (no two replicas binding within a second)."""
    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("proxy")
    sched = f"kubesched-{ns}"
    create_nodes(cp, ns, nodes, cpu="32", memory="256Gi", pods=110)
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    proxies: dict[str, TcpProxy] = {}
    direct = identities(cp)

    def via_proxy(identity: str) -> Path:
        p = proxies[identity] = TcpProxy("127.0.0.1", cp.apiserver_port).start()
        return retarget_kubeconfig(direct(identity), p.address, ctx.workdir / f"{identity}-proxied.kubeconfig")

    cfg = write_config(ctx.workdir / f"{ns}.json", sched, ns, lease=lease_timings)
    reps = Replicas(cp, cfg, 2, ctx.workdir, via_proxy, prefix=f"{ns}-").start()
    figures: dict[str, Any] = {}
    try:
        _wait(lambda: reps.by_identity(lease_holder(cp, ns)) is not None, 60, "a leader")
        first = pods // 2  # the rest is created during the partition: only the new leader can bind it
        creator = _creator(cp, ns, sched, first)
        step = max(1, first // 4)
        _wait(lambda: watch.bound >= step, 120, "first binds")
        for p in list(proxies.values()):
            p.latency = 0.3
        before = watch.bound
        time.sleep(5.0)
        figures["bound_during_latency"] = watch.bound - before
        for p in list(proxies.values()):
            p.latency = 0.0
        resets = 0
        for _ in range(3):
            resets += sum(p.reset() for p in list(proxies.values()))
            time.sleep(1.0)
        figures["connections_reset"] = resets
        _wait(lambda: watch.bound >= 2 * step and reps.by_identity(lease_holder(cp, ns)) is not None, 120,
              "binding after the resets")
        leader = lease_holder(cp, ns)
        t_part = time.time()
        proxies[leader].partition()
        creator.join(300)
        creator = _creator(cp, ns, sched, pods - first, prefix="q")
        _wait(lambda: lease_holder(cp, ns) not in ("", leader), partition_s + _seconds(lease_timings[0]) * 3,
              "another replica leading")
        t_taken = time.time()
        time.sleep(max(0.0, partition_s - (t_taken - t_part)))
        old = reps.by_identity(leader)
        if old is not None and old.component.alive():
            figures["old_leader_alive_at_heal"] = True
            _dump_stacks(old, ctx.workdir / f"{leader}-stacks-at-heal.txt")
        proxies[leader].heal()
        creator.join(300)
        figures["all_bound"] = watch.wait_bound(pods, 180 + pods / 50 * 2)
    finally:
        exits = reps.stop()
        for p in proxies.values():
            p.stop()
    report = watch.report()
    bindings = read_audit(ctx.audit, ns)
    report["split_brain"] = split_brain(bindings)
    # Stepped down: the scheduling loop stopped (not just the elector giving up).
    step_down = _logged_at(ctx.workdir / f"kubesched-{leader}.log", "event=leader_lease_lost")
    exited = next((e["wall"] for e in exits if e["identity"] == leader and e["code"] == 1), None)
    figures["partition_to_exit_s"] = round(exited - t_part, 2) if exited else None
    first_new = _first_bind_after(bindings, t_part, f"kubesched-{leader}")
    last_old = max((b.at for b in bindings if b.user == f"kubesched-{leader}" and b.code < 300), default=None)
    figures.update({
        "partitioned_leader": leader, "partition_s": partition_s, "lease": "/".join(lease_timings),
        "leader_exit_code": next((e["code"] for e in exits if e["identity"] == leader), None),
        "partition_to_step_down_s": round(step_down - t_part, 2) if step_down else None,
        "partition_to_new_leader_first_bind_s": round(first_new - t_part, 2) if first_new else None,
        "old_leader_last_bind_to_new_leader_first_bind_s":
            round(first_new - last_old, 2) if first_new and last_old else None,
        "stepped_down_before_takeover": bool(step_down and first_new and step_down <= first_new),
    })
    delete_group(cp, ns)
    return _result("proxy", f"{pods}-pod burst, 2 replicas each behind a TCP proxy, lease {'/'.join(lease_timings)}",
                   f"300 ms latency 5 s; 3 resets of every connection; leader partitioned {partition_s:g} s",
                   started, figures, report)


def _logged_at(log: Path, needle: str) -> float | None:
    """The timestamp (epoch seconds) of the first line of a kubesched log containing ``needle``."""
    from datetime import datetime

    for line in log.read_text(errors="replace").splitlines():
        if needle in line and line.startswith("ts="):
            return datetime.fromisoformat(line.split()[0][3:].replace("Z", "+00:00")).timestamp()
    return None


def _dump_stacks(replica: Any, out: Path) -> None:
    """py-spy's view of a replica that should have exited (diagnosis; py-spy is a dev dependency)."""
    import shutil
    import subprocess
    import sys

    spy = Path(sys.executable).parent / "py-spy"
    exe = str(spy) if spy.exists() else shutil.which("py-spy")
    if exe and replica.component.pid:
        with contextlib.suppress(Exception):
            r = subprocess.run([exe, "dump", "--pid", str(replica.component.pid)], capture_output=True, text=True,
                               timeout=30)
            out.write_text(r.stdout + r.stderr)


# -- the command ---------------------------------------------------------------------------------------
SCENARIOS = ("backlog", "failover", "failover-backlog", "apiserver", "compaction", "proxy", "extender", "assumed")
#: Not in the default run: the same scenario with the real kube-scheduler, for RELIABILITY.md.
REFERENCE = ("backlog-kube-scheduler", "failover-backlog-kube-scheduler")


def run_scenario(ctx: Ctx, name: str, size: Size) -> list[dict[str, Any]]:
    if name == "backlog":
        return [backlog(ctx, n, size.backlog_nodes) for n in size.backlog]
    if name == "backlog-kube-scheduler":
        return [backlog(ctx, n, size.backlog_nodes, "kube-scheduler") for n in size.backlog]
    if name == "failover":
        return [failover(ctx, size.failover_pods, size.kills, size.failover_lease, size.nodes)]
    if name in ("failover-backlog", "failover-backlog-kube-scheduler"):
        from bench.chaos_failover_backlog import failover_backlog

        contender = "kube-scheduler" if name.endswith("kube-scheduler") else "kubesched"
        return [failover_backlog(ctx, size.failover_backlog, size.failover_backlog_head, size.failover_backlog_nodes,
                                 contender)]
    if name == "apiserver":
        return [apiserver_restarts(ctx, size.restart_pods, size.restarts, compact=False, nodes=size.nodes)]
    if name == "compaction":
        return [apiserver_restarts(ctx, size.restart_pods, size.restarts, compact=True, nodes=size.nodes)]
    if name == "proxy":
        return [proxy_faults(ctx, size.proxy_pods, size.partition_s, size.proxy_lease, size.nodes)]
    if name == "extender":
        from bench.chaos_extender import extender_faults

        return [extender_faults(ctx, size.extender_pods, ignorable) for ignorable in (False, True)]
    if name == "assumed":
        from bench.chaos_assumed import node_deleted_under_permit, pods_deleted_at_permit_and_bind

        return [node_deleted_under_permit(ctx), pods_deleted_at_permit_and_bind(ctx)]
    raise ValueError(f"unknown chaos scenario {name!r}; the scenarios are {', '.join(SCENARIOS)}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench chaos", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--only", default="", help=f"comma-separated scenarios (default: all of {', '.join(SCENARIOS)}; "
                                                f"also {', '.join(REFERENCE)})")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--results", type=Path, default=None,
                    help="append the record to this file (default bench/results/<date>.json)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS + REFERENCE]
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; the scenarios are {', '.join(SCENARIOS)}")
    import tempfile

    from kubesched.testing.controlplane import BinariesUnavailable, ensure_binaries, missing_binaries

    # Only the core four are needed: with them there, no build (another may be running the
    # extras' build at the same time, e.g. a benchmark).
    if missing_binaries():
        try:
            ensure_binaries(build=True, quiet=True)
        except BinariesUnavailable as e:
            raise SystemExit(f"chaos: {e}") from None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kubesched-chaos-"))
    record: dict[str, Any] = {"benchmark": "chaos", "size": args.size, "date": common.now_iso(),
                              "commit": common.git_commit(), "command": common.command_line(),
                              "machine": common.machine(), "versions": common.versions(), "scenarios": []}
    failed = 0
    with chaos_control_plane(workdir) as (cp, audit):
        ctx = Ctx(cp, audit, workdir)
        for name in names:
            print(f"chaos: {name} ({args.size}) ...", flush=True)
            try:
                results = run_scenario(ctx, name, SIZES[args.size])
            except Exception as e:
                failed += 1
                record["scenarios"].append({"scenario": name, "error": f"{type(e).__name__}: {e}"})
                print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
                continue
            for r in results:
                try:
                    assert_clean(r["invariants"])
                    assert not r["invariants"].get("split_brain"), r["invariants"]["split_brain"]
                    r["passed"] = True
                except AssertionError as e:
                    failed += 1
                    r["passed"] = False
                    r["error"] = str(e)
                record["scenarios"].append(r)
                (workdir / "chaos-progress.json").write_text(json.dumps(record, indent=1, default=str))
                inv = r["invariants"]
                print(f"  {r['scenario']}: {'ok' if r['passed'] else 'FAILED'} in {r['elapsed_s']}s; over-commits "
                      f"{inv['overcommits']}, double binds {inv['double_binds']}, lost {inv['lost_pods']}; "
                      f"{r['figures']}", flush=True)
    record["loadavg_end"] = common.loadavg()
    if not args.no_save:
        print(f"results: {common.save_result(record, args.results)}")
    return 1 if failed else 0
