"""kill -9 mid-burst gives no DRA device twice and loses none (issue 27), on the real control plane.

3 KWOK nodes, each publishing ``DEVICES`` GPUs in a ResourceSlice; ``PODS`` pods (more than the
devices) created at once, each with a claim from a ResourceClaimTemplate (kube-controller-manager
stamps the claims, as in a real cluster). `kubesched run` (a subprocess, the default profile) is
killed with SIGKILL as the pod watch sees the ``KILL_AT``-th bind, started again, and left to
finish: every device goes to a pod. Then ``DELETE_AFTER`` bound pods are deleted (the controller
deallocates and deletes their claims) and pending pods must take exactly their devices.

A claim watch records every ResourceClaim event from before the first pod is created and replays
them (``kubesched.testing.dra``): no device is ever held by two claims, and each pod, at the moment
the pod watch sees it bound, has its claim allocated with a device of its node. At the end every bound pod's
claim is allocated with a device of its node and reserved for it, no claim holds a device for a pod
that is not bound, and the pending pods say why (``cannot allocate all claims``).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from integration.dra_harness import GROUP, RESOURCE, claims_in, pod_claim_names, reason
from integration.test_extender_burst import BindWatch
from integration.test_live_scheduler import Proc, make_nodes, pods_in, write_config
from kubesched.testing import pod_manifest
from kubesched.testing.controlplane import ApiError, ControlPlane
from kubesched.testing.dra import ClaimLedger, ClaimWatch, device_capacities
from kubesched.testing.kill import Killer

pytestmark = pytest.mark.integration

NODES = 3
DEVICES = 4  # per node
PODS = 20
KILL_AT = 2  # SIGKILL as the watch sees this many binds
DELETE_AFTER = 2  # bound pods deleted after the restart: pending ones take their devices
DRIVER = "gpu.example.com"


def _objects(cp: ControlPlane, ns: str, nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The slices and the class (cluster-scoped, returned for cleanup) and the template."""
    created: list[tuple[str, dict[str, Any]]] = []
    for node in nodes:
        created.append(("resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-{node}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(DEVICES)]}}))
    created.append(("deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}))
    for plural, obj in created:
        cp.api("POST", f"{RESOURCE}/{plural}", obj)
    cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": f"{ns}-gpu", "allocationMode": "ExactCount", "count": 1}}]}}}})
    return created


def _create_pods(cp: ControlPlane, ns: str, scheduler: str, names: list[str]) -> None:
    for name in names:
        body = pod_manifest(name, ns, scheduler_name=scheduler, requests={"cpu": "10m"}, node_selector={GROUP: ns},
                            extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]})
        body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
        cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)


def _state(cp: ControlPlane, ns: str) -> dict[str, Any]:
    """Bound pods (name -> node), pending pods (name -> message), allocated claims (name -> (devices,
    pods reserved)) and what is wrong with them."""
    pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
    claims = claims_in(cp, ns)
    bound = {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}
    allocated: dict[str, tuple[list[tuple[str, str]], list[str]]] = {}
    for name, claim in claims.items():
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        if results:
            allocated[name] = (sorted((r["pool"], r["device"]) for r in results),
                               sorted(r.get("name", "") for r in status.get("reservedFor") or []))
    problems = []
    for name, node in bound.items():
        claim_name = pod_claim_names(pods[name]).get("gpu", "")
        devices, reserved = allocated.get(claim_name, ([], []))
        if [pool for pool, _ in devices] != [node]:
            problems.append(f"{name} on {node}, its claim {claim_name!r} holds {devices}")
        if name not in reserved:
            problems.append(f"{name} not in its claim {claim_name!r}'s reservedFor {reserved}")
    for claim_name, (devices, reserved) in allocated.items():
        if not set(reserved) <= set(bound):
            problems.append(f"claim {claim_name} holds {devices} for {reserved}, not all bound")
    return {"bound": bound, "pending": {n: reason(p) for n, p in pods.items() if n not in bound},
            "allocated": allocated, "problems": problems}


def _settled(cp: ControlPlane, ns: str, bound: int, without: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The state once ``bound`` pods (none of ``without``) are bound with their claims and every
    pending pod has a message; None before."""
    state = _state(cp, ns)
    ok = (len(state["bound"]) == bound and not without & set(state["bound"]) and not state["problems"]
          and len(state["allocated"]) == bound and all(state["pending"].values()))
    return state if ok else None


def test_kubesched_run_killed_mid_burst_gives_no_device_twice(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * NODES)
    created = _objects(cp, ns, nodes)
    name = f"kill-{ns}"
    cfg = write_config(tmp_path / "dra-kill.json", name, qps=500, burst=1000)
    capacity = NODES * DEVICES
    claim_watch = ClaimWatch(cp, ns, device_capacities(obj for plural, obj in created
                                                       if plural == "resourceslices")).start()
    killer = Killer(KILL_AT)
    pod_watch = BindWatch(cp, ns, on_bind=killer)
    first = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-1.log")
    second: Proc | None = None
    code: int | None = None
    try:
        first.wait_ready(60)
        killer.pid = first.popen.pid
        _create_pods(cp, ns, name, [f"p-{i:02d}" for i in range(PODS)])
        assert killer.done.wait(90), f"no {KILL_AT} binds seen: {first.tail()}"
        assert first.wait(10) == -signal.SIGKILL
        time.sleep(1)
        at_kill = _state(cp, ns)
        second = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-2.log")
        second.wait_ready(60)
        try:
            before = cp.wait_for(lambda: _settled(cp, ns, capacity), 120, 0.5, f"{capacity} pods bound")
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{_state(cp, ns)}\n{second.tail()}") from e
        assert all("cannot allocate all claims" in m for m in before["pending"].values()), before["pending"]
        victims = sorted(before["bound"])[:DELETE_AFTER]
        freed = sorted(d for v in victims for claim, (devices, reserved) in before["allocated"].items()
                       if v in reserved for d in devices)
        for v in victims:
            cp.delete_pod(v, ns)
        try:
            after = cp.wait_for(lambda: _settled(cp, ns, capacity, frozenset(victims)), 120, 0.5,
                                "pending pods took the freed devices")
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{_state(cp, ns)}\n{second.tail()}") from e
        newcomers = sorted(set(after["bound"]) - set(before["bound"]))
        taken = sorted(d for n in newcomers for claim, (devices, reserved) in after["allocated"].items()
                       if n in reserved for d in devices)
        assert taken == freed, (newcomers, taken, freed)
        time.sleep(3)  # room for a late extra bind or allocation
        final = _state(cp, ns)
        assert final["bound"] == after["bound"] and final["allocated"] == after["allocated"]
        assert not final["problems"], final["problems"]
        assert second.popen.poll() is None, second.tail()
    finally:
        pod_watch.stop()
        ledger = claim_watch.stop()
        first.close()
        if second is not None:
            second.kill(signal.SIGTERM)
            code = second.wait(30)
            second.close()
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns)
        for plural, obj in created:
            try:
                cp.api("DELETE", f"{RESOURCE}/{plural}/{obj['metadata']['name']}")
            except ApiError as e:
                if e.status != 404:
                    raise
    print(f"\nkubesched run (DRA): SIGKILL at the {killer.killed_at_bind}th bind seen, {len(at_kill['bound'])} bound "
          f"and {len(at_kill['allocated'])} claims allocated once it died; {ledger.events} claim events replayed")
    assert second is not None and code == 0, second.tail() if second else ""
    assert ledger.overlaps == [], [str(o) for o in ledger.overlaps[:20]]
    assert ledger.most_allocated >= capacity
    wrong = _bound_without_devices(pod_watch.events, ledger, ns)
    assert not wrong, wrong


def _bound_without_devices(events: list[tuple[str, dict[str, Any]]], ledger: ClaimLedger, ns: str) -> list[str]:
    """Each pod at the moment the watch first saw it bound: its claim already held one device of
    its node (PreBind writes the allocation before the bind)."""
    found, seen = [], set()
    for kind, pod in events:
        meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
        if kind == "DELETED" or not node or meta["uid"] in seen:
            continue
        seen.add(meta["uid"])
        claim_name = pod_claim_names(pod).get("gpu", "")
        held = ledger.held_at(f"{ns}/{claim_name}", meta["resourceVersion"])
        if [pool for _, pool, _ in held] != [node]:
            found.append(f"{meta['name']} bound to {node} at rv {meta['resourceVersion']}: "
                         f"claim {claim_name!r} held {held}")
    return found
