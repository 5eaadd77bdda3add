"""Volume plugins, differential: a StatefulSet-style workload whose claims use ``WaitForFirstConsumer``
classes, scheduled by the real kube-scheduler (the oracle, same release) and by `kubesched run` with
its default profile, one after the other on the same nodes, with kube-controller-manager's PV
controller completing the bindings both start; then kubesched's cluster, dumped as
`kubectl get nodes,pods,pvc,pv,storageclass,csinode -o yaml` would, replayed by the simulator.

Two zones of two KWOK nodes, each with a CSINode allowing one volume of the test's CSI driver.

* Phase 1 (VolumeBinding's static binding): PVs of a ``kubernetes.io/no-provisioner`` class — two
  ReadWriteOnce in za, one ReadWriteOncePod in zb — and four pods with a claim each: web-0/1
  (RWO) bind in za, web-2 (RWOP) in zb, each claim really Bound by the PV controller to a PV whose
  node affinity matches the pod's node; web-3 asks for more than any PV holds and stays pending.
* Phase 2: ``reader`` shares web-0's claim: NodeVolumeLimits rejects the other nodes already at
  their attach limit, VolumeBinding the free zb node (PV node affinity), so it lands beside web-0;
  ``rwop-reader`` shares web-2's ReadWriteOncePod claim (VolumeRestrictions; preemption finds no
  victim of lower priority) and stays pending; ``dyn-0``'s claim is of a class provisioned by the
  CSI driver, allowed in zb only: the only node under its limit there is selected, and PreBind
  writes ``volume.kubernetes.io/selected-node``. No external provisioner runs on this control
  plane, so (as with kube-scheduler) the pod then waits in PreBind: the annotation is compared.

Compared: the pods bound and where (zone, and the reader beside web-0), the selected node, and
the PodScheduled message of every pod left pending, word for word.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.app.startup import load_scheduler_config
from kubesched.framework.registry import profiles_object_kinds
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.testing.controlplane import ControlPlane

from .test_differential_spread import run_both
from .test_live_scheduler import pods_in
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
DRIVER = "csi.kubesched.test"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NO_PV = "didn't find available persistent volumes to bind"
RWOP_CONFLICT = "PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
#: Pods that the schedulers leave pending with a reason.
TOLD = ("rwop-reader", "web-3")


def _nodes(cp: ControlPlane, ns: str, cleanup: list[str]) -> dict[str, str]:
    zone_of: dict[str, str] = {}
    for z in ("za", "zb"):
        names = cp.create_nodes(2, prefix=f"{ns}-{z}-", cpu="2", memory="8Gi",
                                labels={ZONE: z, "kubesched.test/group": ns}, wait_ready=False)
        cleanup += names
        zone_of.update(dict.fromkeys(names, z))
    cp.wait_for(lambda: set(zone_of) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    for name in zone_of:
        cp.api("POST", "/apis/storage.k8s.io/v1/csinodes", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": DRIVER, "nodeID": name, "topologyKeys": [ZONE],
                                  "allocatable": {"count": 1}}]}})
    return zone_of


def _storage_classes(cp: ControlPlane, ns: str) -> tuple[str, str]:
    """(static class, dynamically provisioned class), both ``WaitForFirstConsumer``."""
    local, dyn = f"{ns}-local", f"{ns}-dyn"
    cp.api("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": local},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"})
    cp.api("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": dyn},
        "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["zb"]}]}]})
    return local, dyn


def _pv(cp: ControlPlane, name: str, run: str, sc: str, zone: str, mode: str) -> None:
    cp.api("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": {"run": run}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": [mode], "storageClassName": sc,
                 "persistentVolumeReclaimPolicy": "Retain",
                 "csi": {"driver": DRIVER, "volumeHandle": name},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}})


def _claim_pod(cp: ControlPlane, ns: str, scheduler: str, pod: str, claim: str) -> None:
    cp.create_pod(pod, ns, scheduler_name=scheduler, requests={"cpu": "100m"},
                  node_selector={"kubesched.test/group": ns},
                  extra_spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})


def _claim(cp: ControlPlane, ns: str, name: str, sc: str, mode: str, size: str) -> None:
    cp.api("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": [mode], "storageClassName": sc, "resources": {"requests": {"storage": size}}}})


def _scenario(cp: ControlPlane, ns: str, classes: tuple[str, str], zone_of: Mapping[str, str],
              scheduler: str) -> dict[str, Any]:
    """The workload above; PVs and claims are named after the scheduler (PVs are cluster-scoped,
    and the first run's stay Bound to its claims)."""
    local, dyn = classes
    pvs = {f"{scheduler}-pv-a0": ("za", "ReadWriteOnce"), f"{scheduler}-pv-a1": ("za", "ReadWriteOnce"),
           f"{scheduler}-pv-b0": ("zb", "ReadWriteOncePod")}
    for name, (zone, mode) in pvs.items():
        _pv(cp, name, scheduler, local, zone, mode)
    # The PV controller makes them Available; only those are matched (FindMatchingVolume).
    cp.wait_for(lambda: all(cp.get(f"/api/v1/persistentvolumes/{n}").get("status", {}).get("phase") == "Available"
                            for n in pvs), 60, 0.2, "PVs Available")

    claim_of = {f"web-{i}": f"data-{scheduler}-web-{i}" for i in range(4)}
    for i, (mode, size) in enumerate((("ReadWriteOnce", "5Gi"), ("ReadWriteOnce", "5Gi"),
                                      ("ReadWriteOncePod", "5Gi"), ("ReadWriteOnce", "20Gi"))):
        _claim(cp, ns, claim_of[f"web-{i}"], local, mode, size)
        _claim_pod(cp, ns, scheduler, f"web-{i}", claim_of[f"web-{i}"])

    def phase1() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
        bound = [n for n in ("web-0", "web-1", "web-2") if pods[n]["spec"].get("nodeName")]
        claims = [_get_claim(cp, ns, claim_of[n]) for n in bound]
        done = (len(bound) == 3 and all(c["status"].get("phase") == "Bound" for c in claims)
                and bool(_reason(pods["web-3"])))
        return pods if done else None

    _wait(cp, ns, phase1, 60, "web-0..2 bound with their claims, web-3 told why")

    claim_of |= {"reader": claim_of["web-0"], "rwop-reader": claim_of["web-2"], "dyn-0": f"data-{scheduler}-dyn-0"}
    _claim_pod(cp, ns, scheduler, "reader", claim_of["reader"])
    _claim_pod(cp, ns, scheduler, "rwop-reader", claim_of["rwop-reader"])
    _claim(cp, ns, claim_of["dyn-0"], dyn, "ReadWriteOnce", "1Gi")
    _claim_pod(cp, ns, scheduler, "dyn-0", claim_of["dyn-0"])

    def phase2() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
        selected = _get_claim(cp, ns, claim_of["dyn-0"])["metadata"].get("annotations", {}).get(SELECTED_NODE)
        done = pods["reader"]["spec"].get("nodeName") and _reason(pods["rwop-reader"]) and selected
        return pods if done else None

    _wait(cp, ns, phase2, 60, "reader bound, rwop-reader told why, dyn-0's node selected")
    time.sleep(2.0)  # nothing else happens
    pods = {p["metadata"]["name"]: p for p in pods_in(cp, ns)}
    node_of = {n: p["spec"].get("nodeName") for n, p in pods.items()}
    bound = {n: node for n, node in node_of.items() if node}
    claims = {n: _get_claim(cp, ns, c) for n, c in claim_of.items()}
    dyn_claim = claims["dyn-0"]
    return {
        "bound_zones": {n: zone_of[node] for n, node in sorted(bound.items())},
        "reader_beside_web_0": node_of["reader"] == node_of["web-0"],
        "violations": _volume_topology_violations(cp, ns, pods, claim_of),
        "claims_bound": sorted(n for n, c in claims.items() if c["status"].get("phase") == "Bound"),
        "dyn_selected_zone": zone_of[dyn_claim["metadata"]["annotations"][SELECTED_NODE]],
        "dyn_selected_beside_web_2": dyn_claim["metadata"]["annotations"][SELECTED_NODE] == node_of["web-2"],
        "reasons": {n: _reason(pods[n]) for n in TOLD},
        "pending_without_reason": sorted(n for n, p in pods.items() if not node_of[n] and not _reason(p)),
        "selected_node": dyn_claim["metadata"]["annotations"][SELECTED_NODE],
    }


def _wait(cp: ControlPlane, ns: str, done: Callable[[], object | None], timeout: float, what: str) -> None:
    """``cp.wait_for``, failing with the pods, claims and PVs as they were (what a user would look at)."""
    try:
        cp.wait_for(done, timeout, 0.3, what)
    except TimeoutError as e:
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), _reason(p)) for p in pods_in(cp, ns)]
        claims = [(c["metadata"]["name"], c["status"].get("phase"), c["spec"].get("volumeName"),
                   c["metadata"].get("annotations"))
                  for c in cp.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"]]
        pvs = [(v["metadata"]["name"], v["status"].get("phase"), (v["spec"].get("claimRef") or {}).get("name"))
               for v in cp.get("/api/v1/persistentvolumes")["items"]]
        raise AssertionError(f"{e}\npods: {pods}\nclaims: {claims}\nPVs: {pvs}") from e


def _get_claim(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    return dict(cp.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"))


def _reason(pod: dict[str, Any]) -> str:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "")
    return ""


def _matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One nodeSelectorTerm's matchExpressions against a node's labels (the operators the PVs use)."""
    for e in term.get("matchExpressions") or []:
        value, op = labels.get(e["key"]), e["operator"]
        if (op == "In" and value not in e.get("values", [])) or (op == "NotIn" and value in e.get("values", [])) \
                or (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


def _volume_topology_violations(cp: ControlPlane, ns: str, pods: Mapping[str, dict[str, Any]],
                                claim_of: Mapping[str, str]) -> list[str]:
    """Bound pods whose claim is bound to a PV whose node affinity does not match the pod's node."""
    out = []
    for name, pod in pods.items():
        node, claim = pod["spec"].get("nodeName"), _get_claim(cp, ns, claim_of[name])
        if not node or not claim["spec"].get("volumeName"):
            continue
        pv = cp.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
        labels = cp.get(f"/api/v1/nodes/{node}")["metadata"].get("labels", {})
        terms = (((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or [{}]
        if not any(_matches(t, labels) for t in terms):
            out.append(f"{name} on {node} with {pv['metadata']['name']}")
    return out


def _dump(cp: ControlPlane, ns: str, nodes: list[str], classes: tuple[str, str], path: Path) -> None:
    """`kubectl get nodes,pods,pvc,pv,storageclass,csinode -o yaml`: every node the live schedulers
    saw (other tests' nodes too: they are in the "0/N nodes" count), the test's pods, claims and
    volumes, the pods without their ``schedulerName``."""
    del nodes
    items: list[dict[str, Any]] = []
    for kind, api, collection in (("Node", "v1", "/api/v1/nodes"),
                                  ("CSINode", "storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes")):
        items += [{**o, "apiVersion": api, "kind": kind} for o in cp.get(collection)["items"]
                  if not o["metadata"].get("deletionTimestamp")]
    for pod in pods_in(cp, ns):  # one scheduler for the replay: the default one
        pod["spec"].pop("schedulerName", None)
        items.append({**pod, "apiVersion": "v1", "kind": "Pod"})
    items += [{**o, "apiVersion": "v1", "kind": "PersistentVolumeClaim"}
              for o in cp.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"]]
    items += [{**o, "apiVersion": "v1", "kind": "PersistentVolume"}
              for o in cp.get("/api/v1/persistentvolumes")["items"] if o["spec"].get("storageClassName") in classes]
    items += [{**cp.get(f"/apis/storage.k8s.io/v1/storageclasses/{sc}"), "apiVersion": "storage.k8s.io/v1",
               "kind": "StorageClass"} for sc in classes]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


def _cleanup(cp: ControlPlane, ns: str, classes: tuple[str, str], nodes: list[str]) -> None:
    for c in cp.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"]:
        cp.api("DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{c['metadata']['name']}")
    for pv in cp.get("/api/v1/persistentvolumes")["items"]:
        if pv["spec"].get("storageClassName") in classes:
            cp.api("DELETE", f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
    for sc in classes:
        cp.api("DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{sc}")
    for n in nodes:
        cp.api("DELETE", f"/apis/storage.k8s.io/v1/csinodes/{n}")


def test_volume_binding_matches_kube_scheduler_and_replays_in_the_simulator(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    zone_of = _nodes(cp, ns, nodes_to_delete)
    classes = _storage_classes(cp, ns)
    try:
        oracle, ours = run_both(cp, ns, tmp_path, sa_kubeconfig, lambda name: _scenario(cp, ns, classes, zone_of, name))
        print(f"\n[differential-volumes] kube-scheduler: {oracle}\n[differential-volumes] kubesched:      {ours}")
        expected_zones = {"web-0": "za", "web-1": "za", "web-2": "zb", "reader": "za"}
        assert oracle["bound_zones"] == ours["bound_zones"] == expected_zones
        assert oracle["reader_beside_web_0"] and ours["reader_beside_web_0"]
        assert oracle["violations"] == ours["violations"] == []
        assert oracle["claims_bound"] == ours["claims_bound"] == ["reader", "rwop-reader", "web-0", "web-1", "web-2"]
        assert oracle["dyn_selected_zone"] == ours["dyn_selected_zone"] == "zb"
        assert not oracle["dyn_selected_beside_web_2"] and not ours["dyn_selected_beside_web_2"]
        assert oracle["pending_without_reason"] == ours["pending_without_reason"] == ["dyn-0"]  # in PreBind
        assert ours["reasons"] == oracle["reasons"]
        assert NO_PV in ours["reasons"]["web-3"]
        assert RWOP_CONFLICT in ours["reasons"]["rwop-reader"]

        # kubesched's cluster as a dump, replayed: the pending pods get the same messages, and dyn-0
        # (provisioned by the simulator) binds on the node kubesched selected.
        dump = tmp_path / "dump.yaml"
        _dump(cp, ns, list(zone_of), classes, dump)
        config, registry = load_scheduler_config(None)
        cluster = load_cluster(dump, profiles_object_kinds(registry, config.profiles))
        result = asyncio.run(Simulation(config, registry, cluster).run())
        by_name = {r.key.split("/", 1)[1]: r for r in result.records.values()}
        assert {n: r.message for n, r in by_name.items() if not r.node} == ours["reasons"]
        assert by_name["dyn-0"].node == ours["selected_node"]
    finally:
        _cleanup(cp, ns, classes, list(zone_of))
