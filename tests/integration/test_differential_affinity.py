"""InterPodAffinity, differential: the real kube-scheduler (the oracle) and `kubesched run`, one
after the other on the same nodes, each with its default profile (DefaultPreemption included).
Compared: pods bound, where they went by zone and per node, and the PodScheduled message of every
pod left pending, word for word — required anti-affinity on the hostname (a StatefulSet's
replicas), required affinity to a zone (next to a cache), a term nothing matches, and an existing
pod's anti-affinity keeping a newcomer off its node (symmetry)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ControlPlane

from .test_differential_spread import ZONE, _nodes, _reason, run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

HOST = "kubernetes.io/hostname"


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _pod(cp: ControlPlane, name: str, ns: str, sched: str, app: str, affinity: dict[str, Any] | None = None,
         node_selector: dict[str, str] | None = None) -> None:
    cp.create_pod(name, ns, scheduler_name=sched, labels={"app": app}, requests={"cpu": "100m"},
                  node_selector={"kubesched.test/group": ns, **(node_selector or {})}, affinity=affinity)


def _scenario(cp: ControlPlane, ns: str, sched: str, zone_of: dict[str, str]) -> dict[str, Any]:
    za0 = sorted(n for n, z in zone_of.items() if z == "za")[0]
    # An existing pod that wants no "noisy" pod on its host (symmetry), pinned to za0.
    _pod(cp, "lonely", ns, sched, "lonely", {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("noisy", HOST)]}}, {HOST: za0})
    # The cache, in zone zb.
    _pod(cp, "cache", ns, sched, "cache", None, {ZONE: "zb"})
    cp.wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_in(cp, ns)), 60, 0.2, "lonely and cache")
    for i in range(12):  # replicas that must not share a host: 10 nodes, so 2 stay pending
        _pod(cp, f"db-{i}", ns, sched, "db", {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term("db", HOST)]}})
    for i in range(4):  # next to the cache: zone zb only
        _pod(cp, f"web-{i}", ns, sched, "web", {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term("cache", ZONE)]}})
    _pod(cp, "orphan", ns, sched, "orphan", {"podAffinity": {  # no pod matches, and not itself
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("nothing", ZONE)]}})
    _pod(cp, "noisy", ns, sched, "noisy", None, {HOST: za0})  # kept off za0 by lonely's anti-affinity

    def settled() -> list[dict[str, Any]] | None:
        pods = pods_in(cp, ns)
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        return pods if len(pods) == 20 and len(pending) == 4 and all(_reason(p) for p in pending) else None

    try:
        cp.wait_for(settled, 90, 0.3, "16 bound, 4 pending with a reason")
    except TimeoutError:
        seen = [(p["metadata"]["name"], p["spec"].get("nodeName"), _reason(p)) for p in pods_in(cp, ns)]
        raise AssertionError(f"{sched}: {seen}") from None
    time.sleep(2.0)  # nothing else binds
    pods = pods_in(cp, ns)
    by_app: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        by_app.setdefault(p["metadata"]["labels"]["app"], []).append(p)
    return {
        "db_bound": sum(1 for p in by_app["db"] if p["spec"].get("nodeName")),
        "db_per_node": sorted(Counter(p["spec"]["nodeName"] for p in by_app["db"] if p["spec"].get("nodeName"))
                              .values()),
        "web_zones": sorted({zone_of.get(p["spec"].get("nodeName", ""), "-") for p in by_app["web"]}),
        "pending": sorted((p["metadata"]["labels"]["app"], _reason(p)) for p in pods if not p["spec"].get("nodeName")),
    }


def test_inter_pod_affinity_matches_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    zone_of = _nodes(cp, ns, nodes_to_delete)

    oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig, lambda name: _scenario(cp, ns, name, zone_of))

    print(f"\n[differential-affinity] kube-scheduler: {oracle}\n[differential-affinity] kubesched:      {ours}")
    assert oracle["db_bound"] == ours["db_bound"] == 10
    assert ours["db_per_node"] == [1] * 10
    assert oracle["web_zones"] == ours["web_zones"] == ["zb"]
    assert [app for app, _ in ours["pending"]] == ["db", "db", "noisy", "orphan"]
    assert ours["pending"] == oracle["pending"]
