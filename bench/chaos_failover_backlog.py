"""The chaos suite's failover with a backlog (issue 32 item 2): ``pods`` pending before two
replicas start (stock configuration: lease 15s/10s/2s, 50 QPS), the leader killed with SIGKILL
once it has bound ``head`` of them, so the standby takes over with the rest of the backlog pending.

The same scenario with the real kube-scheduler (two replicas of v1.37.1, its own stock
configuration and the same Lease timings) is ``failover-backlog-kube-scheduler``. Each replica
has its own client identity (cluster-admin), so the apiserver's audit log tells who bound what.
Killed replicas are not replaced here: the figure is the warm standby's take-over, not a cold
start beside it.

Figures: pods pending at the kill; kill → the standby's first bind, the killed leader's Lease
expiry → that bind; kill → the last bind, and the standby's throughput from its first bind to its
last; from the audit log, pods bound twice (two successful pods/binding) and handovers where two
binders overlapped; from the watch, the suite's invariants (no over-commit, no pod bound twice,
nothing that fits left pending).
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import common
from bench.chaos_cluster import (
    GROUP_LABEL,
    LEASE_NAMESPACE,
    STOCK_LEASE,
    Replicas,
    create_nodes,
    delete_group,
    lease,
    micro_time,
    pod_bodies,
    post_all,
    write_config,
)
from bench.chaos_watch import Binding, InvariantWatch, read_audit, split_brain
from kubesched.testing.controlplane import Component, ControlPlane

if TYPE_CHECKING:
    from bench.chaos import Ctx


class KubeSchedulerReplicas:
    """Two (or more) real kube-schedulers with leader election on one Lease, each with its own
    client identity ``kube-scheduler-<n>``; ``leader()`` finds the one that acquired the Lease
    from its log (client-go logs "Successfully acquired lease" at --v=0)."""

    def __init__(self, cp: ControlPlane, workdir: Path, scheduler: str, lease_name: str,
                 lease_timings: tuple[str, str, str], count: int = 2) -> None:
        self.cp = cp
        self.running: dict[str, Component] = {}
        #: where each replica's log started (a log file is reused by a later scheduler of the same name)
        self._log_from: dict[str, int] = {}
        for n in range(1, count + 1):
            identity = f"kube-scheduler-{n}"
            kubeconfig = cp.client_kubeconfig(f"{lease_name}-{identity}", identity, groups=["system:masters"])
            cfg = workdir / f"{lease_name}-{identity}.json"
            cfg.write_text(json.dumps({
                "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": True, "resourceNamespace": LEASE_NAMESPACE,
                                   "resourceName": lease_name, "leaseDuration": lease_timings[0],
                                   "renewDeadline": lease_timings[1], "retryPeriod": lease_timings[2]},
                "clientConnection": {"kubeconfig": str(kubeconfig)},
                "profiles": [{"schedulerName": scheduler}],
            }))
            name = "kube-scheduler" if not cp.schedulers else f"kube-scheduler-{len(cp.schedulers)}"
            log = cp.logs_dir / f"{name}.log"
            self._log_from[identity] = log.stat().st_size if log.exists() else 0
            self.running[identity] = cp.start_kube_scheduler(cfg, extra_args=["--v=0"])

    def leader(self) -> str | None:
        for identity, comp in self.running.items():
            if not comp.alive():
                continue
            with open(comp.log_path, "rb") as f:
                f.seek(self._log_from[identity])
                if b"successfully acquired lease" in f.read().lower():
                    return identity
        return None

    def kill(self, identity: str) -> None:
        comp = self.running[identity]
        if comp.proc is not None:
            comp.proc.send_signal(signal.SIGKILL)
            comp.proc.wait(10)

    def stop(self) -> list[dict[str, Any]]:
        exits = []
        for identity, comp in self.running.items():
            code = comp.proc.poll() if comp.proc is not None else None
            exits.append({"identity": identity, "code": code})
            self.cp.stop_component(comp)
        return exits


def double_bound(bindings: list[Binding]) -> list[str]:
    """Pods with more than one successful pods/binding in the audit log."""
    per_pod = Counter(b.pod for b in bindings if b.code < 300)
    return [f"{pod} bound {n} times" for pod, n in per_pod.items() if n > 1]


def failover_backlog(ctx: Ctx, pods: int, head: int, nodes: int, contender: str = "kubesched",
                     lease_timings: tuple[str, str, str] = STOCK_LEASE) -> dict[str, Any]:
    from bench.chaos import _result, _wait

    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("fobacklog")
    sched = f"sched-{ns}"
    create_nodes(cp, ns, nodes, cpu="32", memory="256Gi", pods=110)
    t_create = time.monotonic()
    post_all(cp, pod_bodies(ns, ns, [f"b{i:05d}" for i in range(pods)], sched), timeout=600)
    create_s = time.monotonic() - t_create
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    reps: Replicas | None = None
    kube: KubeSchedulerReplicas | None = None
    if contender == "kube-scheduler":
        kube = KubeSchedulerReplicas(cp, ctx.workdir, sched, ns, lease_timings)
    else:
        from bench.chaos_cluster import identities

        cfg = write_config(ctx.workdir / f"{ns}.json", sched, ns, lease=lease_timings)
        reps = Replicas(cp, cfg, 2, ctx.workdir, identities(cp), prefix=f"{ns}-", replace=False).start()
    t_started = time.monotonic()
    budget = 180 + pods / 50 * 3

    def leader() -> str | None:
        if kube is not None:
            return kube.leader()
        holder = str(lease(cp, ns).get("holderIdentity") or "")
        return holder if reps is not None and reps.by_identity(holder) is not None else None

    try:
        _wait(lambda: leader() is not None and watch.bound >= head, budget, f"the leader binding {head} pods")
        killed = leader()
        assert killed is not None
        spec = lease(cp, ns)
        bound_at_kill = watch.bound
        t_kill = time.time()
        first_bind_s = time.monotonic() - t_started
        if kube is not None:
            kube.kill(killed)
        else:
            assert reps is not None
            reps.kill(killed)
        all_bound = watch.wait_bound(pods, budget)
        t_all = time.time()
    finally:
        exits = kube.stop() if kube is not None else reps.stop() if reps is not None else []
    report = watch.report(scheduled_events=contender == "kubesched")
    bindings = read_audit(ctx.audit, ns)
    killed_user = killed if kube is not None else f"kubesched-{killed}"
    after = [b for b in bindings if b.code < 300 and b.user != killed_user and b.at > t_kill]
    first_new = after[0].at if after else None
    last_new = after[-1].at if after else None
    report["split_brain"] = split_brain(bindings)
    twice = double_bound(bindings)
    report["double_binds"] += len(twice)
    report["violations"] = (report["violations"] + twice)[:20]
    expiry = micro_time(spec["renewTime"]) + spec["leaseDurationSeconds"] if spec.get("renewTime") else None
    figures = {
        "contender": contender, "all_bound": all_bound, "pods": pods, "nodes": nodes,
        "create_s": round(create_s, 1),
        "start_to_kill_s": round(first_bind_s, 1),
        # the watch may lag the apiserver on a loaded machine: the audit log's count is the exact one
        "bound_at_kill": bound_at_kill, "pending_at_kill": pods - bound_at_kill,
        "bound_at_kill_audit": sum(1 for b in bindings if b.code < 300 and b.at <= t_kill),
        "kill_to_first_bind_s": round(first_new - t_kill, 2) if first_new else None,
        "expiry_to_first_bind_s": round(first_new - expiry, 2) if first_new and expiry else None,
        "kill_to_last_bind_s": round(t_all - t_kill, 1) if all_bound else None,
        "standby_pods_per_s": round(len(after) / (last_new - first_new), 1)
        if first_new and last_new and last_new > first_new else None,
        "standby_binds": len(after),
        "binds_by_user": dict(Counter(b.user for b in bindings if b.code < 300)),
        # by user and HTTP status: a killed leader's binds still in the apiserver end in 504 once
        # it is gone (some of them written all the same), the standby's on a stale cache in 409
        "failed_binds": {f"{u} {code}": n for (u, code), n in
                         Counter((b.user, b.code) for b in bindings if b.code >= 300).items()},
        "lease": "/".join(lease_timings),
        "unexpected_exits": [e for e in exits if e["code"] not in (0, -9, None)],
        "loadavg_at_end": common.loadavg(),
    }
    delete_group(cp, ns)
    suffix = "" if contender == "kubesched" else f"-{contender}"
    return _result(f"failover-backlog-{pods}{suffix}",
                   f"{pods} pods pending before 2 replicas start, {nodes} nodes, stock config, lease "
                   f"{'/'.join(lease_timings)}", f"kill -9 the leader once it has bound {head}", started,
                   figures, report)
