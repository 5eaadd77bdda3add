"""OpportunisticBatching, differential: the real kube-scheduler (the oracle, v1.37.1, the gate on by
default) and `kubesched run`, each with a profile whose pods are signable (PodTopologySpread with
``defaultingType: List`` and no default constraints), place identical pods that fit one per node
(a host port). Compared from each scheduler's own /metrics: every pod asked for a hint
(``scheduler_batch_attempts_total``: ``no_hint`` + ``hint_used``), no pod was found unsignable
(no ``pod_not_batchable`` flush) and no batch was dropped but by age. How many pods used a hint
depends on time (a batch lives 500 ms, and the pods are created one by one), so the counts are
not compared one to one.

The default profile signs no pod at all, in both: bench/openb.py records their counters.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_differential_spread import run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

PODS = 4
PROFILE = {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}


def _scenario(cp: ControlPlane, ns: str, scheduler: str) -> dict[str, Any]:
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10",
                 "ports": [{"containerPort": 8080, "hostPort": 8080}],
                 "resources": {"requests": {"cpu": "100m"}}}
    for i in range(PODS):
        cp.create_pod(f"{scheduler}-{i}", ns, scheduler_name=scheduler, node_selector={"kubesched.test/group": ns},
                      extra_spec={"containers": [container]})

    def bound() -> list[str]:
        return [p["spec"]["nodeName"] for p in pods_in(cp, ns) if p["spec"].get("nodeName")]

    cp.wait_for(lambda: len(bound()) == PODS, 60, 0.2, f"{PODS} pods bound")
    return {"nodes": sorted(bound())}


def _samples(text: str, name: str) -> dict[str, float]:
    """``name``'s samples, by their second label's value (result or reason)."""
    out = {}
    for m in re.finditer(rf'^{name}\{{profile="[^"]*",\w+="([^"]+)"\}} (\S+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def test_identical_signable_pods_are_batched_as_by_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes_to_delete += cp.create_nodes(PODS + 2, prefix=f"{ns}-", cpu="2", memory="8Gi",
                                       labels={"kubesched.test/group": ns})
    metrics: list[str] = []
    oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig, lambda name: _scenario(cp, ns, name), PROFILE, metrics)
    for placed in (oracle, ours):
        assert len(set(placed["nodes"])) == PODS  # one per node: the host port
    for text in metrics:
        attempts = _samples(text, "scheduler_batch_attempts_total")
        flushed = _samples(text, "scheduler_batch_cache_flushed_total")
        print(f"\n[differential-batching] attempts {attempts} flushed {flushed}")
        assert attempts.get("no_hint", 0) + attempts.get("hint_used", 0) == PODS
        assert "pod_not_batchable" not in flushed
        # Only the first pod, or one whose batch aged out (expired), searches: nothing else.
        assert set(flushed) <= {"expired", "pod_skipped"}
