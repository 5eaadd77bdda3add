"""Chaos scenario: the real kube-scheduler with `kubesched extender` (filter + prioritize) behind a
TCP proxy; the extender is killed, restarted, and made slower than ``httpTimeout``.

What the extender configuration says (upstream pkg/scheduler/schedule_one.go
findNodesThatPassExtenders): an ``ignorable`` extender that fails is skipped, so pods keep binding;
a non-ignorable one fails the scheduling attempt, so pods wait (FailedScheduling, retried with
backoff) until it answers again. Either way nothing is over-committed or lost.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from bench.chaos import Ctx, _result, _wait
from bench.chaos_cluster import GROUP_LABEL, create_nodes, delete_group, kubesched_argv, pod_bodies, post_all
from bench.chaos_watch import InvariantWatch
from kubesched.testing.controlplane import Component, free_port
from kubesched.testing.tcpproxy import TcpProxy

HTTP_TIMEOUT_S = 1.0
SLOW_S = 2.5  # proxy latency each way: every extender call outlives httpTimeout
HELD_S = 6.0  # how long a non-ignorable outage is watched for binds that must not happen


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def extender_faults(ctx: Ctx, pods: int, ignorable: bool) -> dict[str, Any]:
    cp, started = ctx.cp, time.monotonic()
    ns = ctx.group("extender")
    sched = f"ks-{ns}"
    create_nodes(cp, ns, 5, cpu="32", memory="256Gi")
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    eport = free_port()
    argv = [*kubesched_argv(), "extender", f"--listen=127.0.0.1:{eport}", "--log-level=warning"]

    def start_extender() -> Component:
        comp = Component(f"extender-{ns}", argv, ctx.workdir / f"extender-{ns}.log").start()
        _wait(lambda: _ready(eport), 60, "kubesched extender ready")
        return comp

    ext = start_extender()
    proxy = TcpProxy("127.0.0.1", eport).start()
    cfg = ctx.workdir / f"kube-scheduler-{ns}.json"
    cfg.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(cp.scheduler_kubeconfig)},
        "profiles": [{"schedulerName": sched}],
        "extenders": [{"urlPrefix": f"http://{proxy.address}/", "filterVerb": "filter",
                       "prioritizeVerb": "prioritize", "weight": 1, "httpTimeout": f"{HTTP_TIMEOUT_S:g}s",
                       "ignorable": ignorable, "nodeCacheCapable": False}],
    }))
    ks = cp.start_kube_scheduler(cfg, extra_args=["--v=1"])
    phases: dict[str, Any] = {}
    created = 0

    def burst(tag: str) -> None:
        nonlocal created
        post_all(cp, pod_bodies(ns, ns, [f"{tag}-{i:03d}" for i in range(pods)], sched))
        created += pods

    def all_bound(timeout: float) -> float | None:
        t0 = time.monotonic()
        return round(time.monotonic() - t0, 2) if watch.wait_bound(created, timeout) else None

    try:
        burst("healthy")
        phases["healthy_all_bound_s"] = all_bound(60)

        ext.stop()  # killed: connection refused
        before = watch.bound
        burst("killed")
        if ignorable:
            phases["killed_all_bound_s"] = all_bound(60)
        else:
            time.sleep(HELD_S)
        phases["bound_while_killed"] = watch.bound - before
        t_restart = time.monotonic()
        ext = start_extender()
        phases["restart_to_all_bound_s"] = (round(time.monotonic() - t_restart, 2) if watch.wait_bound(created, 90)
                                            else None)

        proxy.latency = SLOW_S  # slow: every call outlives httpTimeout
        before = watch.bound
        burst("slow")
        if ignorable:
            phases["slow_all_bound_s"] = all_bound(pods * (HTTP_TIMEOUT_S * 2 + 1) + 60)
        else:
            time.sleep(HELD_S)
        phases["bound_while_slow"] = watch.bound - before
        proxy.latency = 0.0
        t_fast = time.monotonic()
        phases["fast_again_to_all_bound_s"] = (round(time.monotonic() - t_fast, 2) if watch.wait_bound(created, 90)
                                               else None)
        events = cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
        failed = [e.get("note", "") for e in events if e.get("reason") == "FailedScheduling"]
        phases["failed_scheduling_events"] = len(failed)
        phases["failed_scheduling_example"] = failed[0][:200] if failed else ""
    finally:
        cp.stop_component(ks)
        ext.stop()
        proxy.stop()
    report = watch.report(scheduled_events=False)  # kube-scheduler's Scheduled events are not per-bind exact
    expected_while_down = pods if ignorable else 0
    phases["behaves_as_configured"] = (phases["bound_while_killed"] == expected_while_down
                                       and phases["bound_while_slow"] == expected_while_down
                                       and report["bound"] == created)
    delete_group(cp, ns)
    return _result(f"extender-ignorable-{str(ignorable).lower()}",
                   f"kube-scheduler + kubesched extender, 3 bursts of {pods} pods, httpTimeout {HTTP_TIMEOUT_S:g}s",
                   f"extender killed, restarted, then {SLOW_S:g}s slower than httpTimeout",
                   started, phases, report)
