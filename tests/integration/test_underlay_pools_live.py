"""UnderlayIP with pools and claims in the live scheduler, on the real control plane with KWOK nodes
(the CRDs from deploy/crds): a pool shared by 3 nodes caps their total and each bound pod carries
its own address (written with the Binding); StatefulSet-style pods keep their addresses across
deletion, recreation and a scheduler restart, while another pod takes none of them; so do a real
StatefulSet's pods with statefulSetKeepDuration and no claim objects."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.testing.controlplane import ApiError, ControlPlane

from .test_live_plugins import write_profile
from .test_live_scheduler import InProcess, bound_count, create_pods, events_for, make_nodes, pods_in

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUP_PATH = "/apis/underlay.kubesched.io/v1alpha1"
KEY = "kubesched.io/underlay-ip"


@pytest.fixture(scope="session")
def underlay_crds(control_plane: ControlPlane) -> None:
    for name in ("underlayippools", "underlayipclaims"):
        crd = yaml.safe_load((ROOT / "deploy" / "crds" / f"underlay.kubesched.io_{name}.yaml").read_text())
        try:
            control_plane.api("POST", CRD_PATH, crd)
        except ApiError as e:
            if e.status != 409:
                raise

        def established(crd: dict[str, Any] = crd) -> bool:
            got = control_plane.get(f"{CRD_PATH}/{crd['metadata']['name']}")
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in got.get("status", {}).get("conditions") or [])

        control_plane.wait_for(established, 30, 0.2, f"{name} CRD established")


@pytest.fixture
def pools(control_plane: ControlPlane, underlay_crds: None) -> Iterator[list[str]]:
    """Names of pools a test creates; deleted afterwards (pools are cluster-wide: while one exists,
    every UnderlayIP profile takes its IPs from pools, so none may outlive its test)."""
    names: list[str] = []
    yield names
    for n in names:
        with contextlib.suppress(ApiError):
            control_plane.api("DELETE", f"{GROUP_PATH}/underlayippools/{n}")


def profile(tmp_path: Path, name: str) -> Path:
    return write_profile(
        tmp_path / "underlay.json", name,
        {"multiPoint": {"enabled": [{"name": "UnderlayIP"}]},
         "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "UnderlayIP"}]}},
        [{"name": "UnderlayIP", "args": {}}],
    )


def addresses(cp: ControlPlane, ns: str) -> dict[str, str]:
    return {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(KEY, "")
            for p in pods_in(cp, ns) if p["spec"].get("nodeName")}


def test_a_pool_shared_by_three_nodes_caps_their_total_and_each_pod_gets_its_own_address(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, pools: list[str]
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * 3)
    pool = f"shared-{ns}"
    cp.api("POST", f"{GROUP_PATH}/underlayippools", {
        "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": pool},
        "spec": {"cidr": "10.77.0.0/29", "reserved": ["10.77.0.1"], "nodeNames": nodes}})
    pools.append(pool)
    name = f"ul-{ns}"
    sched = InProcess(profile(tmp_path, name), cp.kubeconfig).start()
    try:
        create_pods(cp, ns, [f"p-{i}" for i in range(8)], scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 5, 60, 0.25, "5 pods bound (the pool's 5 addresses)")
        got = addresses(cp, ns)
        assert sorted(got.values()) == [f"10.77.0.{i}" for i in range(2, 7)], got
        ev = cp.wait_for(
            lambda: next((e for e in events_for(cp, ns) if e["reason"] == "FailedScheduling"), None), 30, 0.2, "event")
        assert "3 node(s) had no free underlay IP" in ev["note"], ev["note"]
        status = cp.wait_for(
            lambda: (s := cp.get(f"{GROUP_PATH}/underlayippools/{pool}").get("status") or {}).get("active") == 5 and s,
            30, 0.25, "the pool's status reports 5 active")
        assert status["free"] == 0 and len(status["allocations"]) == 5
        assert {e["pod"] for e in status["allocations"].values()} == {f"{ns}/{p}" for p in got}
        # A deleted pod's address goes to a pending pod.
        victim = min(got)
        cp.delete_pod(victim, ns)
        cp.wait_for(lambda: bound_count(cp, ns) == 5 and victim not in addresses(cp, ns), 60, 0.25,
                    "a pending pod took the freed address")
        assert sorted(addresses(cp, ns).values()) == [f"10.77.0.{i}" for i in range(2, 7)]
    finally:
        assert sched.stop() == 0


def test_statefulset_pods_keep_their_addresses_across_deletion_and_a_scheduler_restart(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, pools: list[str]
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * 2)
    pool = f"sts-{ns}"
    cp.api("POST", f"{GROUP_PATH}/underlayippools", {
        "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": pool},
        "spec": {"addresses": [f"10.78.0.{i}" for i in range(1, 9)], "nodeNames": nodes}})
    pools.append(pool)
    web = [f"web-{i}" for i in range(3)]
    for w in web:
        cp.api("POST", f"{GROUP_PATH}/namespaces/{ns}/underlayipclaims", {
            "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPClaim",
            "metadata": {"name": w, "namespace": ns}, "spec": {"pool": pool, "keepDuration": "1h"}})
    name = f"ul-{ns}"
    cfg = profile(tmp_path, name)
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        create_pods(cp, ns, ["filler-0"], scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 1, 60, 0.25, "filler bound")
        create_pods(cp, ns, web, scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 4, 60, 0.25, "web pods bound")
        first = addresses(cp, ns)
        assert len(set(first.values())) == 4 and all(first.values()), first
        for w in web:
            cp.delete_pod(w, ns)
        cp.wait_for(lambda: bound_count(cp, ns) == 1, 60, 0.25, "web pods gone")

        def released() -> bool:
            claims = cp.get(f"{GROUP_PATH}/namespaces/{ns}/underlayipclaims")["items"]
            return all((c.get("status") or {}).get("phase") == "Released" for c in claims)

        cp.wait_for(released, 30, 0.25, "claims Released in their status")
    finally:
        assert sched.stop() == 0
    # A new scheduler: the reservations come back from the pool's status.
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        create_pods(cp, ns, ["filler-1", "filler-2"], scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 3, 60, 0.25, "fillers bound")
        fillers = addresses(cp, ns)
        assert not set(fillers.values()) & {first[w] for w in web}, (fillers, first)
        create_pods(cp, ns, web, scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: bound_count(cp, ns) == 6, 60, 0.25, "web pods bound again")
        again = addresses(cp, ns)
        assert {w: again[w] for w in web} == {w: first[w] for w in web}
    finally:
        assert sched.stop() == 0


def test_a_real_statefulsets_pods_keep_their_addresses_without_claims_across_deletion_and_a_restart(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, pools: list[str]
) -> None:
    """statefulSetKeepDuration: the StatefulSet controller (kube-controller-manager) recreates the
    deleted pods under the same names; they get their addresses back, a scheduler restart in
    between included, and a bare pod created meanwhile takes none of them. No UnderlayIPClaim."""
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * 2)
    pool = f"ssk-{ns}"
    cp.api("POST", f"{GROUP_PATH}/underlayippools", {
        "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": pool},
        "spec": {"addresses": [f"10.79.0.{i}" for i in range(1, 9)], "nodeNames": nodes}})
    pools.append(pool)
    name = f"ul-{ns}"
    cfg = write_profile(
        tmp_path / "sts.json", name,
        {"multiPoint": {"enabled": [{"name": "UnderlayIP"}]},
         "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "UnderlayIP"}]}},
        [{"name": "UnderlayIP", "args": {"statefulSetKeepDuration": "1h"}}],
    )
    labels = {"app": "web"}
    cp.api("POST", f"/apis/apps/v1/namespaces/{ns}/statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 3, "serviceName": "web", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "schedulerName": name, "nodeSelector": {"kubesched.test/group": ns},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}}})
    web = [f"web-{i}" for i in range(3)]

    def uids() -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_in(cp, ns)}

    def web_bound(unlike: dict[str, str] | None = None) -> dict[str, str] | None:
        """The web pods' addresses once all 3 are bound (with uids other than ``unlike``'s)."""
        got = {n: a for n, a in addresses(cp, ns).items() if n in web}
        if sorted(got) != web or not all(got.values()):
            return None
        return got if unlike is None or all(uids().get(w) != unlike[w] for w in web) else None

    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        first = cp.wait_for(web_bound, 60, 0.25, "the StatefulSet's 3 pods bound with addresses")
        assert len(set(first.values())) == 3, first
        before = uids()
        for w in web:
            cp.delete_pod(w, ns)
        # The controller recreates them at once: the same names, new pods (new uids), bound again.
        again = cp.wait_for(lambda: web_bound(before), 60, 0.25, "the StatefulSet's pods recreated and bound")
        assert again == first
        status = cp.wait_for(
            lambda: (s := cp.get(f"{GROUP_PATH}/underlayippools/{pool}").get("status") or {}).get("active") == 3 and s,
            30, 0.25, "the pool's status reports 3 active")
        assert {e.get("statefulSet") for e in status["allocations"].values()} == {"web"}
        # Scale to 0: the pods go, their addresses stay kept; status written before the stop.
        cp.api("PATCH", f"/apis/apps/v1/namespaces/{ns}/statefulsets/web", {"spec": {"replicas": 0}})
        cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.25, "the StatefulSet scaled to 0")
    finally:
        assert sched.stop() == 0
    assert not cp.get(f"{GROUP_PATH}/namespaces/{ns}/underlayipclaims")["items"]  # none needed, none written
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        create_pods(cp, ns, [f"bare-{i}" for i in range(3)], scheduler_name=name, requests={"cpu": "100m"})
        cp.wait_for(lambda: len(addresses(cp, ns)) == 3, 60, 0.25, "bare pods bound")
        assert not set(addresses(cp, ns).values()) & set(first.values())
        cp.api("PATCH", f"/apis/apps/v1/namespaces/{ns}/statefulsets/web", {"spec": {"replicas": 3}})
        final = cp.wait_for(web_bound, 60, 0.25, "the StatefulSet's pods back")
        assert final == first
    finally:
        assert sched.stop() == 0
