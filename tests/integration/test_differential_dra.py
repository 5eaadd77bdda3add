"""DynamicResources, differential: issue 27's GPU cluster (tests/unit/plugins/dynamicresources/
gpu_scenario.py: 4 KWOK nodes, 5 GPUs in ResourceSlices, 9 pods with claims) scheduled by the real
kube-scheduler (the oracle, same release, DynamicResources in its default profile, resource.k8s.io/v1
served by default) and by `kubesched run` with its default profile, one after the other on the same
nodes, with kube-controller-manager creating ``t4``'s claim from its ResourceClaimTemplate.

Compared: the pods bound (6) and pending (3), every bound pod's claim allocated (``status.allocation``
with devices of the pod's node, the pod in ``reservedFor``), no device given twice, the two users of
the shared claim on one node, where the A100 and big-memory pods land, and the PodScheduled message of
each pending pod, word for word; and from a watch of every ResourceClaim event of each run
(``dra_harness.watched``), that at no moment two claims held one device. Between the runs the claims
are deallocated and deleted (what kube-controller-manager does once their pods are gone), so the
second run finds the GPUs free.

``test_partitions_and_taints_match_kube_scheduler``: partitionable devices (an 8Gi GPU's partitions
sharing its counter) and a DeviceTaintRule's NoSchedule taint with a claim tolerating it.

Also checked: `kubesched run` syncs every DRA kind it declares without a warning (DeviceTaintRules
are watched in resource.k8s.io/v1, as kube-scheduler does; v1alpha3 is not served by default).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing import pod_manifest
from kubesched.testing.controlplane import ControlPlane
from unit.plugins.dynamicresources import gpu_scenario as s

from .dra_harness import GROUP, RESOURCE, claims_in, reason, release_claims, run_both_with_objects, watched
from .test_differential_spread import run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration


def _nodes(cp: ControlPlane, ns: str, cleanup: list[str]) -> list[str]:
    names = cp.create_nodes(4, prefix=f"{ns}-gpu-", cpu="8", memory="32Gi", labels={GROUP: ns}, wait_ready=False)
    cleanup += names
    cp.wait_for(lambda: set(names) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    for i, name in enumerate(names, 1):
        cp.api("POST", f"{RESOURCE}/resourceslices", s.resource_slice(name, i, prefix=f"{ns}-"))
    return names


def _create_pod(cp: ControlPlane, ns: str, scheduler: str, p: s.PodSpec, run: str) -> None:
    fields = s.pod_claim_fields(p, templates=True)
    source = fields["resourceClaims"][0]
    for key in ("resourceClaimName", "resourceClaimTemplateName"):
        if key in source:
            source[key] = f"{run}-{source[key]}"
    body = pod_manifest(p.name, ns, scheduler_name=scheduler, requests={"cpu": "100m"},
                        node_selector={GROUP: ns}, extra_spec=fields)
    body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)


def _claim_of(pod: dict[str, Any]) -> str:
    """The claim's name: named by the pod, or created from its template (pod status)."""
    source = pod["spec"]["resourceClaims"][0]
    if source.get("resourceClaimName"):
        return str(source["resourceClaimName"])
    statuses = pod.get("status", {}).get("resourceClaimStatuses") or []
    return str(statuses[0].get("resourceClaimName") or "") if statuses else ""


def _scenario(cp: ControlPlane, ns: str, nodes: list[str], scheduler: str) -> dict[str, Any]:
    release_claims(cp, ns)  # the previous run's
    # allocationTimestamp is wall-clock time (RFC 3339, whole seconds: compared as strings)
    since = datetime.datetime.fromtimestamp(time.time() - 1, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    run = scheduler.split("-")[0]  # "ks" (kube-scheduler) or "kst" (kubesched): claim names per run
    templated = {p.claim for p in s.PODS if p.template}
    for c in s.CLAIMS:
        named = s.ClaimSpec(f"{run}-{c.name}", c.count, c.selector, c.device_class)
        if c.name in templated:
            cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", s.claim_template(named, ns))
        else:
            cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", s.resource_claim(named, ns))

    def by_name() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in pods_in(cp, ns)}

    def wait(predicate: Callable[[], Any], what: str) -> Any:
        try:
            return cp.wait_for(predicate, 90, 0.3, what)
        except TimeoutError as e:  # say where each pod and claim is
            state = {n: (p["spec"].get("nodeName"), reason(p)) for n, p in by_name().items()}
            claims = {n: c.get("status") for n, c in claims_in(cp, ns).items()}
            raise AssertionError(f"{scheduler}: {e}\npods: {state}\nclaims' status: {claims}") from e

    for p in s.PODS:
        if p.wave == 1:
            _create_pod(cp, ns, scheduler, p, run)
    wait(lambda: all(by_name()[p.name]["spec"].get("nodeName") for p in s.PODS if p.wave == 1), "wave 1 bound")
    for p in s.PODS:
        if p.wave == 2:
            _create_pod(cp, ns, scheduler, p, run)

    def settled() -> dict[str, dict[str, Any]] | None:
        pods = by_name()
        bound = {n for n, p in pods.items() if p["spec"].get("nodeName")}
        told = {n for n, p in pods.items() if not p["spec"].get("nodeName") and reason(p)}
        return pods if len(pods) == len(s.PODS) and bound == s.BOUND and told == s.PENDING else None

    wait(settled, "6 pods bound, 3 told why")
    time.sleep(2.0)  # nothing else happens
    pods = by_name()
    claims = claims_in(cp, ns)
    node_of = {n: p["spec"].get("nodeName") for n, p in pods.items()}
    index = {name: i for i, name in enumerate(nodes, 1)}
    problems, devices = [], Counter[tuple[str, str]]()
    for name in sorted(s.BOUND):
        claim = claims.get(_claim_of(pods[name])) or {}
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc:
            problems.append(f"{name}: claim {_claim_of(pods[name])!r} not allocated")
            continue
        pools = {r["pool"] for r in alloc["devices"]["results"]}
        if pools != {node_of[name]}:
            problems.append(f"{name} on {node_of[name]} has devices of {pools}")
        stamp = str(alloc.get("allocationTimestamp") or "")
        if stamp < since:
            problems.append(f"{name}: claim allocated at {stamp!r}, before the run began ({since})")
        if pods[name]["metadata"]["uid"] not in {r["uid"] for r in claim["status"].get("reservedFor") or []}:
            problems.append(f"{name} not in its claim's reservedFor")
        if name != "shared-b":
            devices.update((r["pool"], r["device"]) for r in alloc["devices"]["results"])
    return {
        "bound": sorted(n for n, node in node_of.items() if node),
        "node_index": {n: index[node] for n, node in sorted(node_of.items()) if node and n != "shared-b"},
        "shared_together": node_of["shared-a"] == node_of["shared-b"],
        "problems": problems,
        "devices_twice": sorted(d for d, k in devices.items() if k > 1),
        "devices_used": sum(devices.values()),
        "pending_claims_allocated": sorted(n for n in s.PENDING
                                           if ((claims.get(_claim_of(pods[n])) or {}).get("status") or {})
                                           .get("allocation")),
        "reasons": {n: reason(pods[n]) for n in sorted(s.PENDING)},
    }


def test_dynamic_resources_match_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str],
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    cp, ns = control_plane, cp_namespace
    served = {r["name"] for r in cp.get(RESOURCE)["resources"]}
    assert {"resourceclaims", "resourceclaimtemplates", "resourceslices", "deviceclasses",
            "devicetaintrules"} <= served
    nodes = _nodes(cp, ns, nodes_to_delete)
    cp.api("POST", f"{RESOURCE}/deviceclasses", s.device_class())
    caplog.set_level(logging.WARNING, logger="kubesched")
    started = time.monotonic()
    try:
        oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig,
                                watched(cp, ns, lambda name: _scenario(cp, ns, nodes, name)))
    finally:
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
        cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")
        release_claims(cp, ns)
        for name in nodes:
            cp.api("DELETE", f"{RESOURCE}/resourceslices/{ns}-{name}-gpus")
        cp.api("DELETE", f"{RESOURCE}/deviceclasses/{s.CLASS}")
    print(f"\n[differential-dra] {time.monotonic() - started:.1f}s\n[differential-dra] kube-scheduler: {oracle}"
          f"\n[differential-dra] kubesched:      {ours}")
    assert oracle["bound"] == ours["bound"] == sorted(s.BOUND)
    assert oracle["problems"] == ours["problems"] == []
    assert oracle["devices_twice"] == ours["devices_twice"] == []
    # ... nor at any moment of either run (every claim event replayed; kube-scheduler's as a sanity check)
    assert oracle["claim_overlaps"] == ours["claim_overlaps"] == []
    assert oracle["most_claims_allocated"] >= 5 and ours["most_claims_allocated"] >= 5
    assert oracle["devices_used"] == ours["devices_used"] == 5
    assert oracle["shared_together"] and ours["shared_together"]
    expected = {"a100-0": 1, "a100-1": 1, "big-mem": 2}
    assert {n: oracle["node_index"][n] for n in expected} == {n: ours["node_index"][n] for n in expected} == expected
    assert oracle["pending_claims_allocated"] == ours["pending_claims_allocated"] == []
    assert ours["reasons"] == oracle["reasons"]
    assert "cannot allocate all claims" in ours["reasons"]["three-gpus"]
    assert f"device class {s.MISSING_CLASS} does not exist" in ours["reasons"]["no-class"]
    # Every declared kind lists and watches: no kind left unsynced, no informer retrying a refused
    # or unserved list/watch (a 403 from missing RBAC, a 404 from a version the apiserver lacks).
    noisy = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
             and any(s in r.getMessage() for s in ("objects_not_synced", "event=error", "DeviceTaintRule"))]
    assert noisy == []


# -- partitionable devices and device taints --------------------------------------------------------

MIG_DRIVER = "mig.example.com"


def _mig_objects(ns: str, nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Node 1: one GPU of 8Gi cut into partitions (``mig-a`` and ``mig-b`` of 4Gi, ``whole`` of 8Gi)
    sharing its counter; node 2: a plain GPU a DeviceTaintRule taints NoSchedule. A DeviceClass."""
    gpu, plain = nodes

    def slice_(name: str, node: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-{name}"},
                "spec": {"driver": MIG_DRIVER, "nodeName": node, **spec}}

    def partition(name: str, memory: str) -> dict[str, Any]:
        return {"name": name, "capacity": {"memory": {"value": memory}},
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]}

    pool = {"name": gpu, "generation": 1, "resourceSliceCount": 2}
    return [
        ("resourceslices", slice_("mig-counters", gpu, {"pool": pool, "sharedCounters": [
            {"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}]})),
        ("resourceslices", slice_("mig-devices", gpu, {"pool": pool, "devices": [
            partition("mig-a", "4Gi"), partition("mig-b", "4Gi"), partition("whole", "8Gi")]})),
        ("resourceslices", slice_("tainted", plain, {"pool": {"name": plain, "generation": 1, "resourceSliceCount": 1},
                                                     "devices": [{"name": "gpu-0"}]})),
        ("devicetaintrules", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                              "metadata": {"name": f"{ns}-maintenance"},
                              "spec": {"deviceSelector": {"driver": MIG_DRIVER, "pool": plain},
                                       "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}),
        ("deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-mig"},
                           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{MIG_DRIVER}"'}}]}}),
    ]


#: pod -> (wave, tolerates the maintenance taint)
_MIG_PODS = {"part-1": (1, False), "part-2": (1, False), "no-room": (2, False), "tolerant": (2, True)}


def _mig_scenario(cp: ControlPlane, ns: str, nodes: list[str], scheduler: str) -> dict[str, Any]:
    release_claims(cp, ns)
    run = scheduler.split("-")[0]
    for pod, (_, tolerant) in _MIG_PODS.items():
        exactly: dict[str, Any] = {"deviceClassName": f"{ns}-mig", "allocationMode": "ExactCount", "count": 1}
        if tolerant:
            exactly["tolerations"] = [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
        cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{run}-{pod}", "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})

    def create(wave: int) -> None:
        for pod, (w, _) in _MIG_PODS.items():
            if w == wave:
                claim = {"name": "gpu", "resourceClaimName": f"{run}-{pod}"}
                body = pod_manifest(pod, ns, scheduler_name=scheduler, requests={"cpu": "100m"},
                                    node_selector={GROUP: ns}, extra_spec={"resourceClaims": [claim]})
                body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
                cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)

    def by_name() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in pods_in(cp, ns)}

    def settled(names: set[str], pending: set[str]) -> bool:
        pods = by_name()
        return all(n in pods and (bool(reason(pods[n])) if n in pending else bool(pods[n]["spec"].get("nodeName")))
                   for n in names)

    create(1)
    cp.wait_for(lambda: settled({"part-1", "part-2"}, set()), 90, 0.3, f"{scheduler}: wave 1 bound")
    create(2)
    cp.wait_for(lambda: settled(set(_MIG_PODS), {"no-room"}), 90, 0.3, f"{scheduler}: wave 2 settled")
    time.sleep(2.0)
    pods, claims = by_name(), claims_in(cp, ns)
    out: dict[str, Any] = {"nodes": {}, "devices": {}, "tolerations": {}}
    for pod in sorted(_MIG_PODS):
        out["nodes"][pod] = nodes.index(pods[pod]["spec"]["nodeName"]) + 1 if pods[pod]["spec"].get("nodeName") else 0
        alloc = ((claims.get(f"{run}-{pod}") or {}).get("status") or {}).get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        out["devices"][pod] = sorted(f"{r['pool']}/{r['device']}" for r in results)
        out["tolerations"][pod] = [r.get("tolerations") for r in results]
    out["reason"] = reason(pods["no-room"])
    return out


def test_partitions_and_taints_match_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str],
    tmp_path: Path,
) -> None:
    """Two 4Gi partitions of an 8Gi GPU use up its counter (the ``whole`` partition and a third pod
    do not fit), a tainted GPU is only given to the claim that tolerates the taint."""
    cp, ns = control_plane, cp_namespace
    nodes = cp.create_nodes(2, prefix=f"{ns}-mig-", cpu="8", memory="32Gi", labels={GROUP: ns}, wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    objects = _mig_objects(ns, nodes)
    oracle, ours = run_both_with_objects(cp, ns, tmp_path, sa_kubeconfig, objects,
                                         watched(cp, ns, lambda name: _mig_scenario(cp, ns, nodes, name)))
    print(f"\n[differential-dra-mig] kube-scheduler: {oracle}\n[differential-dra-mig] kubesched:      {ours}")
    assert oracle["nodes"] == {"no-room": 0, "part-1": 1, "part-2": 1, "tolerant": 2}
    assert sorted(oracle["devices"]["part-1"] + oracle["devices"]["part-2"]) == [f"{nodes[0]}/mig-a",
                                                                                 f"{nodes[0]}/mig-b"]
    assert ours["nodes"] == oracle["nodes"]
    assert oracle["claim_overlaps"] == ours["claim_overlaps"] == []
    assert oracle["most_claims_allocated"] == ours["most_claims_allocated"] == 3
    assert ours["devices"] == oracle["devices"]
    assert ours["tolerations"] == oracle["tolerations"]
    assert ours["reason"] == oracle["reason"]
    assert "cannot allocate all claims" in ours["reason"]
