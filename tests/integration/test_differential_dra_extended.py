"""DynamicResources, differential: extended resources backed by DRA (a DeviceClass's
``extendedResourceName``, GA in v1.37) scheduled by the real kube-scheduler (the oracle) and by
`kubesched run`, one after the other on the same nodes.

Three KWOK nodes: one offers ``example.com/gpu: 2`` through a device plugin (node allocatable), two
publish two GPUs each in ResourceSlices; the DeviceClass maps ``example.com/gpu``. Pods: one pinned
to the device-plugin node (no claim), one asking for 2 GPUs (allocated by DRA: the device-plugin node
is full), then one asking for 1, one whose init container and container each ask for 1 (the init
container reuses the container's device: one request), and one asking for 3 that no node has.

Compared: the pods bound and pending, the pending pod's message word for word, and per pod the
claim the scheduler created: its name (``<pod>-extended-resources-`` and 5 characters), annotation,
controller owner, requests, allocation (devices of the pod's node, as many as asked, none given
twice), reservation, and the pod's ``status.extendedResourceClaimStatus``.

``test_scoring_of_dra_backed_resource_decides_the_node``: NodeResourcesFit's MostAllocated on
``example.com/gpu`` alone, nodes with 4, 2 and 3 GPUs in ResourceSlices, pods one after the other:
the same node for every pod (the scoring of devices is all that tells the nodes apart).

``test_binding_conditions_match_kube_scheduler``: devices with binding conditions, the test playing
their driver (it writes the claim's ``status.devices`` conditions): PreBind waits for them, a
failure condition fails the attempt with the same message, and the claim is allocated again; both
post the same ``BindingConditionsPending`` Event regarding each pod while PreBind waits.
"""

from __future__ import annotations

import datetime
import functools
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing import pod_manifest
from kubesched.testing.controlplane import ApiError, ControlPlane

from .dra_harness import GROUP, RESOURCE, claims_in, reason, release_claims, run_both_with_objects
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

#: pod -> (wave, container requests, init container requests, pinned to the device-plugin node)
PODS: dict[str, tuple[int, int, int, bool]] = {
    "plugin-gpu": (1, 2, 0, True),
    "dra-two": (1, 2, 0, False),
    "dra-one": (2, 1, 0, False),
    "dra-init": (2, 1, 1, False),
    "too-many": (2, 3, 0, False),
}
BOUND = {"plugin-gpu", "dra-two", "dra-one", "dra-init"}
PENDING = {"too-many"}


def _objects(ns: str, nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    slices = [("resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-{node}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}) for node in nodes[1:]]
    cls = ("deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-gpu"},
        "spec": {"extendedResourceName": GPU,
                 "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    return [*slices, cls]


def _create_pod(cp: ControlPlane, ns: str, scheduler: str, name: str, plugin_node: str) -> None:
    _, count, init, pinned = PODS[name]
    gpus = {GPU: str(count)}
    selector = {GROUP: ns, **({"kubernetes.io/hostname": plugin_node} if pinned else {})}
    body = pod_manifest(name, ns, scheduler_name=scheduler, requests={"cpu": "100m", **gpus},
                        limits=gpus, node_selector=selector)
    if init:
        body["spec"]["initContainers"] = [{"name": "setup", "image": "registry.k8s.io/pause:3.10",
                                           "resources": {"requests": {GPU: str(init)}, "limits": {GPU: str(init)}}}]
    cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)


def _scenario(cp: ControlPlane, ns: str, nodes: list[str], scheduler: str) -> dict[str, Any]:
    release_claims(cp, ns)  # the previous run's

    def by_name() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in pods_in(cp, ns)}

    def settled(names: set[str]) -> bool:
        pods = by_name()
        return all(n in pods and (bool(reason(pods[n])) if n in PENDING else bool(pods[n]["spec"].get("nodeName")))
                   for n in names)

    for wave in (1, 2):
        for name, (w, *_) in PODS.items():
            if w == wave:
                _create_pod(cp, ns, scheduler, name, nodes[0])
        names = {n for n, (w, *_) in PODS.items() if w <= wave}
        try:
            cp.wait_for(functools.partial(settled, names), 90, 0.3, f"{scheduler}: wave {wave} settled")
        except TimeoutError as e:
            state = {n: (p["spec"].get("nodeName"), reason(p)) for n, p in by_name().items()}
            raise AssertionError(f"{e}\npods: {state}\nclaims: {claims_in(cp, ns)}") from e
    time.sleep(2.0)  # nothing else happens
    pods, claims = by_name(), claims_in(cp, ns)
    out: dict[str, Any] = {"bound": sorted(n for n, p in pods.items() if p["spec"].get("nodeName")),
                           "reasons": {n: reason(pods[n]) for n in sorted(PENDING)}, "claims": {},
                           "problems": []}
    devices: Counter[tuple[str, str]] = Counter()
    owned = {n: [c for c in claims.values()
                 if any(r.get("uid") == p["metadata"]["uid"] and r.get("controller")
                        for r in c["metadata"].get("ownerReferences") or [])]
             for n, p in pods.items()}
    for name in sorted(PODS):
        pod, mine = pods[name], owned[name]
        status = pod.get("status", {}).get("extendedResourceClaimStatus")
        if not mine:
            out["claims"][name] = {"status": status}
            continue
        if len(mine) != 1:
            out["problems"].append(f"{name}: {len(mine)} claims")
        claim = mine[0]
        meta = claim["metadata"]
        alloc = (claim.get("status") or {}).get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        node = pod["spec"].get("nodeName")
        if {r["pool"] for r in results} != {node}:
            out["problems"].append(f"{name} on {node} has devices of {sorted({r['pool'] for r in results})}")
        devices.update((r["pool"], r["device"]) for r in results)
        if pod["metadata"]["uid"] not in {r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or []}:
            out["problems"].append(f"{name} not in its claim's reservedFor")
        if not (meta["name"].startswith(f"{name}-extended-resources-") and len(meta["name"]) == len(name) + 25):
            out["problems"].append(f"{name}: claim named {meta['name']}")
        if status and status.get("resourceClaimName") != meta["name"]:
            out["problems"].append(f"{name}: status names {status.get('resourceClaimName')}, claim is {meta['name']}")
        out["claims"][name] = {
            "generateName": meta.get("generateName"),
            "annotations": meta.get("annotations"),
            "owner": [(r["kind"], r["name"], r.get("controller")) for r in meta.get("ownerReferences") or []],
            "finalizers": meta.get("finalizers"),
            "requests": claim["spec"]["devices"]["requests"],
            "results": sorted((r["request"], r["driver"]) for r in results),
            "mappings": (status or {}).get("requestMappings"),
        }
    out["devices_twice"] = sorted(d for d, k in devices.items() if k > 1)
    out["devices_used"] = sum(devices.values())
    return out


def test_dra_extended_resources_match_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str],
    tmp_path: Path,
) -> None:
    cp, ns = control_plane, cp_namespace
    # Node 0 offers the GPUs through a device plugin (its allocatable), nodes 1 and 2 through DRA.
    nodes = cp.create_nodes(1, prefix=f"{ns}-ext-", cpu="8", memory="32Gi", labels={GROUP: ns},
                            extended={GPU: "2"}, wait_ready=False)
    nodes += cp.create_nodes(2, prefix=f"{ns}-ext-", start=1, cpu="8", memory="32Gi", labels={GROUP: ns},
                             wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    objects = _objects(ns, nodes)
    metrics: list[str] = []
    oracle, ours = run_both_with_objects(cp, ns, tmp_path, sa_kubeconfig, objects,
                                         lambda name: _scenario(cp, ns, nodes, name), metrics=metrics)
    print(f"\n[differential-dra-extended] kube-scheduler: {oracle}\n[differential-dra-extended] kubesched:      {ours}")
    assert oracle["bound"] == sorted(BOUND)
    assert oracle["problems"] == [] and oracle["devices_twice"] == [] and oracle["devices_used"] == 4
    assert oracle["claims"]["plugin-gpu"] == {"status": None}  # the device plugin's: no claim
    assert ours["bound"] == oracle["bound"]
    assert ours["problems"] == []
    assert ours["devices_twice"] == [] and ours["devices_used"] == oracle["devices_used"]
    assert ours["claims"] == oracle["claims"]
    assert ours["reasons"] == oracle["reasons"]
    assert "cannot allocate all claims" in ours["reasons"]["too-many"]
    # The claims the scheduler created, counted as kube-scheduler counts them (its /metrics).
    oracle_creates, our_creates = (_samples(text, CLAIM_CREATES) for text in metrics)
    assert sum(oracle_creates.values()) == 3, oracle_creates  # dra-two, dra-one, dra-init
    assert our_creates == oracle_creates


#: pkg/scheduler/metrics ResourceClaimCreatesTotal (v1.37.1's name).
CLAIM_CREATES = "dynamic_resource_allocation_resourceclaim_creates_total"


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of counter ``name`` in a /metrics text, by their sorted labels."""
    from prometheus_client.parser import text_string_to_metric_families

    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


# -- scoring -----------------------------------------------------------------------------------------
#: Node index -> its GPUs in ResourceSlices; pods asking for one GPU each, one after the other.
SCORED_GPUS = (4, 2, 3)
SCORED_PODS = [f"packed-{i}" for i in range(sum(SCORED_GPUS) - 3)]
#: NodeResourcesFit scoring the DRA-backed resource alone, MostAllocated: the fullest node wins.
MOST_ALLOCATED_GPU = {"pluginConfig": [{"name": "NodeResourcesFit", "args": {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
    "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 1}]}}}]}


def _scored_objects(ns: str, nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    slices = [("resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-{node}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}"} for i in range(count)]}})
        for node, count in zip(nodes, SCORED_GPUS, strict=True)]
    return [*slices, _objects(ns, nodes)[-1]]


def _scored_scenario(cp: ControlPlane, ns: str, nodes: list[str], scheduler: str) -> dict[str, Any]:
    release_claims(cp, ns)
    placed: dict[str, str] = {}
    for name in SCORED_PODS:
        gpus = {GPU: "1"}
        cp.api("POST", f"/api/v1/namespaces/{ns}/pods", pod_manifest(
            name, ns, scheduler_name=scheduler, requests={"cpu": "100m", **gpus}, limits=gpus,
            node_selector={GROUP: ns}))

        def bound(pod: str = name) -> str:
            return str(cp.get(f"/api/v1/namespaces/{ns}/pods/{pod}")["spec"].get("nodeName") or "")

        cp.wait_for(bound, 90, 0.2, f"{scheduler}: {name} bound")
        placed[name] = f"node-{nodes.index(bound())}"
    return {"placed": placed}


def test_scoring_of_dra_backed_resource_decides_the_node(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str],
    tmp_path: Path,
) -> None:
    """NodeResourcesFit with MostAllocated on ``example.com/gpu`` alone: a node's GPUs are the
    devices of its ResourceSlices and the allocated ones (upstream's draPreScoreState), so pods one
    after the other fill the node with the largest share in use first: node 1 (2 GPUs: 1/2), then
    node 2 (3 GPUs: 1/3 beats node 0's 1/4). The other scores are equal on these identical nodes, so
    only that scoring decides."""
    cp, ns = control_plane, cp_namespace
    nodes = cp.create_nodes(3, prefix=f"{ns}-score-", cpu="8", memory="32Gi", labels={GROUP: ns}, wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    oracle, ours = run_both_with_objects(cp, ns, tmp_path, sa_kubeconfig, _scored_objects(ns, nodes),
                                         lambda name: _scored_scenario(cp, ns, nodes, name), MOST_ALLOCATED_GPU)
    print(f"\n[differential-dra-score] kube-scheduler: {oracle}\n[differential-dra-score] kubesched:      {ours}")
    want = ["node-1", "node-1", "node-2", "node-2", "node-2", "node-0"]
    assert [oracle["placed"][p] for p in SCORED_PODS] == want
    assert ours == oracle


# -- binding conditions ------------------------------------------------------------------------------
#: The devices' binding condition and failure condition (the test plays their driver).
ATTACHED, ATTACH_FAILED = "example.com/attached", "example.com/attach-failed"
#: pod -> what the driver reports on the first allocation of its claim (later ones: attached)
BC_PODS = {"bc-ready": ATTACHED, "bc-fails-once": ATTACH_FAILED}


def _bc_objects(ns: str, nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    slices = [("resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-{node}-fabric"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "bindingConditions": [ATTACHED],
                              "bindingFailureConditions": [ATTACH_FAILED]}]}}) for node in nodes]
    cls = ("deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-fabric"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    return [*slices, cls]


def _play_driver(cp: ControlPlane, ns: str, run: str, seen: dict[str, int]) -> None:
    """The driver: for every allocated and reserved claim without device status, report the
    device's conditions (the first allocation of ``bc-fails-once``'s claim fails, later ones attach)."""
    for name, claim in claims_in(cp, ns).items():
        status = claim.get("status") or {}
        alloc = status.get("allocation")
        if not alloc or not status.get("reservedFor") or status.get("devices"):
            continue
        pod = name.removeprefix(f"{run}-")
        seen[pod] = seen.get(pod, 0) + 1
        condition = BC_PODS[pod] if seen[pod] == 1 else ATTACHED
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        devices = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                    "conditions": [{"type": condition, "status": "True", "reason": "Driver",
                                    "message": f"{condition} by the test", "lastTransitionTime": now}]}
                   for r in alloc["devices"]["results"]]
        try:
            cp.api("PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}/status",
                   {**claim, "status": {**status, "devices": devices}})
        except ApiError as e:
            if e.status != 409:  # changed meanwhile: next round
                raise
            seen[pod] -= 1


def _bc_scenario(cp: ControlPlane, ns: str, scheduler: str) -> dict[str, Any]:
    release_claims(cp, ns)
    run = scheduler.split("-")[0]
    for pod in BC_PODS:
        exactly = {"deviceClassName": f"{ns}-fabric", "allocationMode": "ExactCount", "count": 1}
        cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{run}-{pod}", "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
        body = pod_manifest(pod, ns, scheduler_name=scheduler, requests={"cpu": "100m"}, node_selector={GROUP: ns},
                            extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": f"{run}-{pod}"}]})
        body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
        cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)
    seen: dict[str, int] = {}
    messages: dict[str, list[str]] = {pod: [] for pod in BC_PODS}

    def step() -> bool:
        _play_driver(cp, ns, run, seen)
        pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
        for pod, p in pods.items():
            message = reason(p).replace(f"{run}-", "<run>-")
            if message and message not in messages[pod]:
                messages[pod].append(message)
        return all(p["spec"].get("nodeName") for p in pods.values()) and len(pods) == len(BC_PODS)

    try:
        cp.wait_for(step, 120, 0.3, f"{scheduler}: both pods bound")
    except TimeoutError as e:
        raise AssertionError(f"{e}\nmessages: {messages}\nclaims: {claims_in(cp, ns)}") from e
    pods, claims = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}, claims_in(cp, ns)
    nodes = {p["spec"]["nodeName"] for p in pods.values()}

    def pending_events() -> dict[str, list[tuple[str, ...]]]:
        """Per pod, the BindingConditionsPending Events this scheduler posted (node names and the
        scheduler's name made comparable across runs)."""
        out: dict[str, set[tuple[str, ...]]] = {pod: set() for pod in BC_PODS}
        for e in cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]:
            if e.get("reason") != "BindingConditionsPending" or e.get("reportingController") != scheduler:
                continue
            note = str(e.get("note", ""))
            for node in nodes | {n for n in cp.ready_nodes() if n.startswith(f"{ns}-bc-")}:
                note = note.replace(node, "<node>")
            out[e["regarding"]["name"]].add((e["regarding"]["kind"], e["type"], e["action"], note))
        return {pod: sorted(found) for pod, found in out.items()}

    # The Events are posted in the background: wait for one per pod.
    cp.wait_for(lambda: all(pending_events().values()), 30, 0.5, f"{scheduler}: BindingConditionsPending events")
    out: dict[str, Any] = {"messages": messages, "allocations": dict(sorted(seen.items())), "claims": {},
                           "events": pending_events()}
    for pod in sorted(BC_PODS):
        status = claims[f"{run}-{pod}"].get("status") or {}
        results = status["allocation"]["devices"]["results"]
        out["claims"][pod] = {
            "on_pod_node": {r["pool"] for r in results} == {pods[pod]["spec"]["nodeName"]},
            "results": [(r["bindingConditions"], r["bindingFailureConditions"]) for r in results],
            "timestamp": bool(status["allocation"].get("allocationTimestamp")),
            "reserved": [r["name"] for r in status.get("reservedFor") or []],
        }
    return out


def test_binding_conditions_match_kube_scheduler(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str],
    tmp_path: Path,
) -> None:
    """Devices that must be attached before their pod is bound: PreBind waits for the driver's
    condition; a failure condition fails PreBind (the same Error), the next attempt deallocates the
    claim and allocates it again, and the pod binds once the device attaches."""
    cp, ns = control_plane, cp_namespace
    nodes = cp.create_nodes(2, prefix=f"{ns}-bc-", cpu="8", memory="32Gi", labels={GROUP: ns}, wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    objects = _bc_objects(ns, nodes)
    oracle, ours = run_both_with_objects(cp, ns, tmp_path, sa_kubeconfig, objects,
                                         lambda name: _bc_scenario(cp, ns, name))
    print(f"\n[differential-dra-bc] kube-scheduler: {oracle}\n[differential-dra-bc] kubesched:      {ours}")
    both = {"on_pod_node": True, "results": [([ATTACHED], [ATTACH_FAILED])], "timestamp": True}
    assert oracle["claims"] == {p: {**both, "reserved": [p]} for p in sorted(BC_PODS)}
    assert ours["claims"] == oracle["claims"]
    assert oracle["allocations"] == {"bc-fails-once": 2, "bc-ready": 1}
    assert ours["allocations"] == oracle["allocations"]
    assert oracle["messages"]["bc-ready"] == ours["messages"]["bc-ready"] == []
    assert any("device binding failed" in m for m in oracle["messages"]["bc-fails-once"])
    assert ours["messages"]["bc-fails-once"] == oracle["messages"]["bc-fails-once"]
    # Upstream's Event while PreBind waits for the conditions, word for word.
    pending = [("Pod", "Normal", "Scheduling", "waiting for binding conditions for device on node <node>")]
    assert oracle["events"] == {p: pending for p in sorted(BC_PODS)}
    assert ours["events"] == oracle["events"]
