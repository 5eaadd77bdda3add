"""PodTopologySpread, differential: the same cluster and pods scheduled by the real kube-scheduler
(the oracle, same release) and by `kubesched run` with its default profile, one after the other on
the same nodes. Compared: pods bound, the spread each produced (per zone and per node), and the
PodScheduled message of every pod left pending, word for word.

Placements may differ node by node (both break score ties at random); the constraints make the
per-zone counts and the reasons deterministic, and those must agree.
"""

from __future__ import annotations

import ssl
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_live_scheduler import InProcess, pods_in, write_config
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
ZONES = ("za", "zb", "zc")


def _nodes(cp: ControlPlane, ns: str, cleanup: list[str]) -> dict[str, str]:
    """Three zones of three 2-CPU nodes (four 500m pods each) and one node without a zone;
    name → zone of the zoned ones."""
    zone_of = {}
    for z in ZONES:
        names = cp.create_nodes(3, prefix=f"{ns}-{z}-", cpu="2", memory="8Gi",
                                labels={ZONE: z, "kubesched.test/group": ns}, wait_ready=False)
        cleanup += names
        zone_of.update(dict.fromkeys(names, z))
    # One node without the zone label: hard zone constraints reject it ("missing required label").
    cleanup += cp.create_nodes(1, prefix=f"{ns}-nozone-", cpu="2", memory="8Gi",
                               labels={"kubesched.test/group": ns}, wait_ready=False)
    cp.wait_for(lambda: set(zone_of) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    return zone_of


def _spread_pod(cp: ControlPlane, name: str, ns: str, scheduler: str, app: str,
                constraints: list[dict[str, Any]]) -> None:
    for c in constraints:
        c["labelSelector"] = {"matchLabels": {"app": app}}
    cp.create_pod(name, ns, scheduler_name=scheduler, labels={"app": app}, requests={"cpu": "500m"},
                  node_selector={"kubesched.test/group": ns}, extra_spec={"topologySpreadConstraints": constraints})


def _hard(key: str) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule"}


def _scenario(cp: ControlPlane, ns: str, scheduler: str, zone_of: dict[str, str]) -> dict[str, Any]:
    """12 pods spread hard by zone and host (all fit); then zone zc cordoned and 6 more pods of
    another app spread hard by zone: two bind (za, zb), the rest cannot without a skew of 2."""
    for i in range(12):
        _spread_pod(cp, f"web-{i}", ns, scheduler, "web", [_hard(ZONE), _hard("kubernetes.io/hostname")])
    cp.wait_for(lambda: sum(1 for p in pods_in(cp, ns) if p["spec"].get("nodeName")) >= 12, 60, 0.2, "web bound")
    zc = [n for n, z in zone_of.items() if z == "zc"]
    for n in zc:
        cp.api("PATCH", f"/api/v1/nodes/{n}", {"spec": {"unschedulable": True}})
    try:
        for i in range(6):
            _spread_pod(cp, f"api-{i}", ns, scheduler, "api", [_hard(ZONE)])

        def pending_with_reason() -> list[dict[str, Any]] | None:
            pods = [p for p in pods_in(cp, ns) if p["metadata"]["name"].startswith("api-")]
            bound = [p for p in pods if p["spec"].get("nodeName")]
            pending = [p for p in pods if not p["spec"].get("nodeName")]
            told = [p for p in pending if _reason(p)]
            return pods if len(bound) == 2 and len(told) == 4 else None

        pods = cp.wait_for(pending_with_reason, 90, 0.3, "2 api pods bound, 4 told why")
        time.sleep(2.0)  # nothing else binds
        everything = pods_in(cp, ns)
        web = [p for p in everything if p["metadata"]["name"].startswith("web-")]
        api = [p for p in everything if p["metadata"]["name"].startswith("api-")]
        return {
            "web_bound": sum(1 for p in web if p["spec"].get("nodeName")),
            "web_per_zone": sorted(Counter(zone_of[p["spec"]["nodeName"]] for p in web).values()),
            "web_per_node": sorted(Counter(p["spec"]["nodeName"] for p in web).values()),
            "api_bound_zones": sorted(zone_of[p["spec"]["nodeName"]] for p in api if p["spec"].get("nodeName")),
            "api_reasons": sorted({_reason(p) for p in pods if not p["spec"].get("nodeName")}),
        }
    finally:
        for n in zc:
            cp.api("PATCH", f"/api/v1/nodes/{n}", {"spec": {"unschedulable": False}})


def _reason(pod: dict[str, Any]) -> str:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "")
    return ""


def _clear(cp: ControlPlane, ns: str) -> None:
    for p in pods_in(cp, ns):
        cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
    cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")


def run_both(
    cp: ControlPlane, ns: str, tmp_path: Path, kubeconfig: Path, scenario: Callable[[str], dict[str, Any]],
    profile: dict[str, Any] | None = None, metrics: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``scenario(schedulerName)`` run by the real kube-scheduler, the namespace cleared, then run by
    `kubesched run`; both with their whole default profile (DefaultPreemption included: its
    "preemption: ..." suffix is part of the compared messages), plus ``profile``'s fields (e.g.
    ``pluginConfig``) in both. ``metrics``: each scheduler's /metrics text once its scenario is
    done is appended (kube-scheduler's first). Returns (oracle, kubesched)."""
    oracle_name = f"ks-{ns}"
    ks_config = cp.write_scheduler_config(tmp_path / "ks.json", scheduler_names=(oracle_name,),
                                          extra={"profiles": [{"schedulerName": oracle_name, **(profile or {})}]})
    ks = cp.start_kube_scheduler(ks_config)
    try:
        oracle = scenario(oracle_name)
        if metrics is not None:
            metrics.append(_get(f"https://127.0.0.1:{_flag(ks.argv, '--secure-port')}/metrics", cp.pki.admin_tls()))
    finally:
        cp.stop_component(ks)
    _clear(cp, ns)
    ours_name = f"kst-{ns}"
    sched = InProcess(write_config(tmp_path / "kst.json", ours_name, profile=profile), kubeconfig).start()
    try:
        ours = scenario(ours_name)
        if metrics is not None:
            metrics.append(_get(f"http://127.0.0.1:{sched.live.health.port}/metrics", None))
    finally:
        assert sched.stop() == 0
    return oracle, ours


def _flag(argv: list[str], flag: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(flag + "="))


def _get(url: str, context: ssl.SSLContext | None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as r:
        return str(r.read().decode())


def test_topology_spread_matches_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    zone_of = _nodes(cp, ns, nodes_to_delete)

    oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig, lambda name: _scenario(cp, ns, name, zone_of))

    print(f"\n[differential-spread] kube-scheduler: {oracle}\n[differential-spread] kubesched:      {ours}")
    assert oracle["web_bound"] == ours["web_bound"] == 12
    assert oracle["web_per_zone"] == ours["web_per_zone"] == [4, 4, 4]
    assert max(ours["web_per_node"]) - min(ours["web_per_node"]) <= 1
    assert oracle["api_bound_zones"] == ours["api_bound_zones"] == ["za", "zb"]
    assert ours["api_reasons"] == oracle["api_reasons"]
    assert "didn't match pod topology spread constraints" in ours["api_reasons"][0]
    assert "1 node(s) didn't match pod topology spread constraints (missing required label)" in ours["api_reasons"][0]
