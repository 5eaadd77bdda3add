"""An out-of-tree plugin's own kind, live: examples/plugins/node_quota declares ConfigMaps; with
nothing but `--plugins`, `kubesched run` watches them, the plugin reads the quota, and a change of
the ConfigMap requeues the pod it kept out (its ClusterEvent names the kind)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from kubesched.testing.controlplane import ApiError, ControlPlane

from .test_live_scheduler import Proc, pods_in

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "node_quota"
CM_PATH = "/api/v1/namespaces/kube-system/configmaps"


def test_node_quota_plugin_reads_its_configmap_through_an_informer(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    group = {"kubesched.test/group": ns}
    a = cp.create_nodes(1, prefix=f"{ns}-a", cpu="8", labels=group)[0]
    b = cp.create_nodes(1, prefix=f"{ns}-b", cpu="1", labels=group)[0]
    nodes_to_delete += [a, b]
    quota = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "node-pod-quotas", "namespace": "kube-system"}, "data": {a: "1"}}
    try:
        cp.api("POST", CM_PATH, quota)
    except ApiError as e:
        if e.status != 409:
            raise
        cp.api("PUT", f"{CM_PATH}/node-pod-quotas", quota)
    name = f"quota-{ns}"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name, "plugins": {"filter": {"enabled": [{"name": "NodeQuota"}]}}}],
    }))
    p = Proc(cfg, cp.kubeconfig, tmp_path / "k.log", f"--plugins={PLUGIN}")
    try:
        p.wait_ready(60)
        for i in range(3):  # 600m each: b holds one, a (quota 1) one, the third fits only a
            cp.create_pod(f"q{i}", ns, scheduler_name=name, node_selector=group, requests={"cpu": "600m"})

        def settled() -> dict[str, int] | None:
            placed = [pp["spec"].get("nodeName") for pp in pods_in(cp, ns)]
            return {a: placed.count(a), b: placed.count(b)} if placed.count(None) == 1 else None

        assert cp.wait_for(settled, 60, 0.3, "two bound, one kept out by the quota") == {a: 1, b: 1}
        cp.api("PATCH", f"{CM_PATH}/node-pod-quotas", {"data": {a: "2"}})
        cp.wait_for(lambda: all(pp["spec"].get("nodeName") for pp in pods_in(cp, ns)), 60, 0.3,
                    "the raised quota lets the third pod onto a")
        assert sum(1 for pp in pods_in(cp, ns) if pp["spec"]["nodeName"] == a) == 2
    finally:
        p.kill(signal.SIGTERM)
        p.wait(30)
        p.close()
        cp.api("DELETE", f"{CM_PATH}/node-pod-quotas")
