"""DefaultPreemption, differential: a cluster full of priority-0 pods, then higher-priority pods
arrive; the real kube-scheduler (the oracle) and `kubesched run`, one after the other on the same
nodes, each with its default profile. Compared: victims evicted, preemptors bound, nodes never
over-committed, and the victims' DisruptionTarget condition and Preempted events."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ApiError, ControlPlane

from .test_differential_spread import run_both
from .test_live_scheduler import assert_no_overcommit, pods_in

pytestmark = pytest.mark.integration

PC_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _priority_class(cp: ControlPlane, name: str, value: int) -> None:
    with contextlib.suppress(ApiError):
        cp.api("POST", PC_PATH, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": value})


def _scenario(cp: ControlPlane, ns: str, sched: str, nodes: list[str], pc: str) -> dict[str, Any]:
    group = {"kubesched.test/group": ns}
    earlier = {e["metadata"]["name"] for e in cp.get(f"/api/v1/namespaces/{ns}/events")["items"]}
    for i in range(6):  # 3 nodes x 2 cpu: full
        cp.create_pod(f"low-{i}", ns, scheduler_name=sched, node_selector=group, requests={"cpu": "1"})
    cp.wait_for(lambda: sum(1 for p in pods_in(cp, ns) if p["spec"].get("nodeName")) == 6, 60, 0.2, "low bound")
    for i in range(2):
        cp.create_pod(f"high-{i}", ns, scheduler_name=sched, node_selector=group, requests={"cpu": "1"},
                      priority_class_name=pc)

    def done() -> dict[str, Any] | None:
        pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
        high = [pods.get(f"high-{i}") for i in range(2)]
        if not all(h is not None and h["spec"].get("nodeName") for h in high):
            return None
        low_left = [n for n in pods if n.startswith("low-")]
        return {"high_bound": 2, "low_left": len(low_left)}

    outcome: dict[str, Any] = cp.wait_for(done, 120, 0.3, "both preemptors bound")
    time.sleep(2.0)  # no further evictions
    outcome["low_left"] = sum(1 for p in pods_in(cp, ns) if p["metadata"]["name"].startswith("low-"))
    assert_no_overcommit(cp, nodes)
    events = cp.get(f"/api/v1/namespaces/{ns}/events")["items"]
    preempted = [e for e in events if e.get("reason") == "Preempted" and e["metadata"]["name"] not in earlier]
    outcome["preempted_events"] = len(preempted)
    # Each event's text, "Preempted by pod <preemptor uid> on node <node>" (the uid read as a
    # placeholder, the node, which may differ between the runs, left out), and what it relates to:
    # nothing (kube-scheduler's recorder cannot reference its pod preemptor wrapper).
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods_in(cp, ns)}
    outcome["preempted_by"] = sorted(
        (re.sub(r"pod (\S+)", lambda m: f"pod <uid of {uids.get(m.group(1), '?')}>",
                str(e.get("message", ""))).rsplit(" on node ", 1)[0], e.get("related"))
        for e in preempted)
    return outcome


def test_preemption_matches_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    pc = f"high-{ns}"
    _priority_class(cp, pc, 1000)
    nodes = cp.create_nodes(3, prefix=f"{ns}-n", cpu="2", memory="8Gi", labels={"kubesched.test/group": ns})
    nodes_to_delete += nodes
    try:
        oracle, ours = run_both(cp, ns, tmp_path, cp.kubeconfig, lambda name: _scenario(cp, ns, name, nodes, pc))
    finally:
        with contextlib.suppress(ApiError):
            cp.api("DELETE", f"{PC_PATH}/{pc}")
    print(f"\n[differential-preemption] kube-scheduler: {oracle}\n[differential-preemption] kubesched:      {ours}")
    assert oracle["low_left"] == ours["low_left"] == 4  # one victim per preemptor
    assert ours["preempted_events"] == oracle["preempted_events"] == 2
    assert oracle["preempted_by"] == [(f"Preempted by pod <uid of high-{i}>", None) for i in range(2)]
    assert ours["preempted_by"] == oracle["preempted_by"]
