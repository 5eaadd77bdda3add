"""The reference designs' plugins in the live scheduler, on the real control plane with KWOK nodes:
the ip-scheduler budget (UnderlayIP) and gangs (Coscheduling with the PodGroup CRD)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_live_scheduler import (
    InProcess,
    bound_count,
    create_pods,
    events_for,
    make_nodes,
    pods_in,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PG_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


def write_profile(path: Path, scheduler_name: str, plugins: dict[str, Any], plugin_config: list[Any]) -> Path:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 200, "burst": 400},
        "profiles": [{"schedulerName": scheduler_name, "plugins": plugins, "pluginConfig": plugin_config}],
    }
    path.write_text(json.dumps(doc))
    return path




def test_ip_scheduler_places_ten_per_node_then_binds_the_rest_when_room_appears(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    name = f"ip-{ns}"
    cfg = write_profile(
        tmp_path / "ip.json",
        name,
        {"multiPoint": {"enabled": [{"name": "UnderlayIP"}]},
         "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "UnderlayIP"}]}},
        [{"name": "UnderlayIP", "args": {"ipsPerNode": 10}}],
    )
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi"), ("32", "64Gi")])
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        create_pods(cp, ns, [f"gw-{i}" for i in range(25)], scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 20, 60, 0.25, "20 underlay pods bound")
        per_node: dict[str, int] = {}
        for p in pods_in(cp, ns):
            if p["spec"].get("nodeName"):
                per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        assert per_node == dict.fromkeys(nodes, 10)
        ev = cp.wait_for(
            lambda: next((e for e in events_for(cp, ns) if e["reason"] == "FailedScheduling"), None), 30, 0.2, "event"
        )
        assert "2 node(s) had no free underlay IP" in ev["note"], ev["note"]
    finally:
        assert sched.stop() == 0

    # A restarted scheduler rebuilds the counts from the bound pods: it over-commits nothing ...
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        assert bound_count(cp, ns) == 20
        # ... and a deleted pod frees its IP for one pending pod, a new node for the other four.
        victim = next(p for p in pods_in(cp, ns) if p["spec"].get("nodeName"))
        cp.delete_pod(victim["metadata"]["name"], ns)
        cp.wait_for(lambda: bound_count(cp, ns) == 20, 60, 0.25, "a pending pod took the freed IP")
        make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")], start=2)
        cp.wait_for(lambda: bound_count(cp, ns) == 24, 60, 0.25, "the rest bound on the new node")
    finally:
        assert sched.stop() == 0


def test_pod_group_of_four_binds_all_or_nothing_and_its_status_is_reported(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, podgroup_crd: None
) -> None:
    cp, ns = control_plane, cp_namespace
    name = f"gang-{ns}"
    cfg = write_profile(
        tmp_path / "gang.json",
        name,
        {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
         "preFilter": {"enabled": [{"name": "Coscheduling"}]},
         "postFilter": {"enabled": [{"name": "Coscheduling"}]},
         "permit": {"enabled": [{"name": "Coscheduling"}]},
         "reserve": {"enabled": [{"name": "Coscheduling"}]}},
        [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 5, "podGroupBackoffSeconds": 1}}],
    )
    # Room for three 1-cpu pods: a gang of four must not start at all.
    make_nodes(cp, nodes_to_delete, ns, [("1", "4Gi"), ("1", "4Gi"), ("1", "4Gi")])
    pg = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {"minMember": 4},
    }
    cp.api("POST", PG_PATH.format(ns=ns), pg)
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        create_pods(cp, ns, [f"train-{i}" for i in range(4)], scheduler_name=name, requests={"cpu": "1"},
                    labels={"scheduling.x-k8s.io/pod-group": "train"})
        cp.wait_for(
            lambda: sum(1 for e in events_for(cp, ns) if e["reason"] == "FailedScheduling") >= 1, 30, 0.2, "rejection"
        )
        # Sampled past the 5 s Permit timeout: three members may wait at Permit, none ever binds.
        for _ in range(16):
            assert bound_count(cp, ns) == 0, "a partial gang was bound"
            time.sleep(0.5)

        # A fourth node: the whole gang binds, and the PodGroup reports it.
        make_nodes(cp, nodes_to_delete, ns, [("1", "4Gi")], start=3)
        cp.wait_for(lambda: bound_count(cp, ns) == 4, 90, 0.25, "the whole gang bound")

        def phase() -> str:
            got = cp.get(f"{PG_PATH.format(ns=ns)}/train")
            return str(got.get("status", {}).get("phase", ""))

        cp.wait_for(lambda: phase() in ("Scheduled", "Running"), 30, 0.25, "PodGroup status phase")
    finally:
        assert sched.stop() == 0
