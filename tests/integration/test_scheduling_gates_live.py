"""Scheduling gates, live and differential: a gated pod is left alone by ``kubesched run`` exactly
as by the real kube-scheduler — not bound, no FailedScheduling event, its PodScheduled condition
the apiserver's SchedulingGated one — and both bind it once its last gate is removed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_live_scheduler import InProcess, write_config

pytestmark = pytest.mark.integration


def _gated_pod(cp: ControlPlane, name: str, ns: str, scheduler: str, selector: dict[str, str]) -> None:
    body = cp.pod_manifest(name, ns, scheduler_name=scheduler, requests={"cpu": "100m"}, node_selector=selector)
    body["spec"]["schedulingGates"] = [{"name": "example.com/quota"}, {"name": "example.com/image"}]
    cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return {k: c.get(k) for k in ("status", "reason", "message")}
    return {}


def test_gated_pods_wait_and_bind_once_ungated_like_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    selector = {"kubesched.test/gates": ns}
    nodes_to_delete += cp.create_nodes(1, prefix=f"{ns}-n", cpu="4", memory="8Gi", labels=selector)
    oracle, ours = f"ks-{ns}", f"kubesched-{ns}"
    kube_scheduler = cp.start_kube_scheduler(cp.write_scheduler_config(tmp_path / "ks.json", scheduler_names=[oracle]))
    sched = InProcess(write_config(tmp_path / "kubesched.json", ours), cp.kubeconfig).start()
    try:
        _gated_pod(cp, "by-oracle", ns, oracle, selector)
        _gated_pod(cp, "by-kubesched", ns, ours, selector)
        time.sleep(3)  # both schedulers have seen the pods (and would have tried by now)
        gated = {
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
        for name in ("by-oracle", "by-kubesched"):
            pod = cp.get_pod(name, ns)
            assert not pod["spec"].get("nodeName"), name
            assert _scheduled_condition(pod) == gated, name
        events = cp.get(f"/api/v1/namespaces/{ns}/events")["items"]
        assert [e["involvedObject"]["name"] for e in events if e.get("reason") == "FailedScheduling"] == []

        # Removing one gate changes nothing; removing the last one lets both schedulers bind.
        for name in ("by-oracle", "by-kubesched"):
            cp.api("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                   {"spec": {"schedulingGates": [{"name": "example.com/image"}]}})
        time.sleep(2)
        assert not any(cp.get_pod(n, ns)["spec"].get("nodeName") for n in ("by-oracle", "by-kubesched"))
        for name in ("by-oracle", "by-kubesched"):
            cp.api("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", {"spec": {"schedulingGates": None}})
        for name in ("by-oracle", "by-kubesched"):
            assert cp.wait_pod(name, ns, timeout=60)["spec"]["nodeName"] == f"{ns}-n0"
    finally:
        sched.stop()
        cp.stop_component(kube_scheduler)
