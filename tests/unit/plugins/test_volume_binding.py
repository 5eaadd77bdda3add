"""VolumeBinding: mirrors volumebinding/volume_binding_test.go TestVolumeBinding (PreFilter, Filter
and Score of the same pods, claims, PVs and nodes) and the bind path of binder_test.go (Reserve
assumes, Unreserve restores, PreBind writes and waits for the PV controller)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.objects import ObjectKind
from kubesched.framework.status import Code, Status
from kubesched.plugins.volumebinding import VolumeBinding
from kubesched.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, node, pod, table_of

HOST = "kubernetes.io/hostname"
WAIT = {"metadata": {"name": "wait-sc"}, "volumeBindingMode": "WaitForFirstConsumer"}
IMMEDIATE = {"metadata": {"name": "immediate-sc"}, "volumeBindingMode": "Immediate"}
WAIT_CAP = {"metadata": {"name": "wait-sc-with-storage-capacity"}, "provisioner": "driver-with-storage-capacity",
            "volumeBindingMode": "WaitForFirstConsumer"}
DRIVER = {"metadata": {"name": "driver-with-storage-capacity"}, "spec": {"storageCapacity": True}}


def pvc(name: str, sc: str, *, bound_pv: str = "", storage: str | None = None, phase: str = "",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}
    ann = dict(annotations or {})
    spec: dict[str, Any] = {"storageClassName": sc}
    if bound_pv:
        spec["volumeName"] = bound_pv
        ann["pv.kubernetes.io/bind-completed"] = "yes"
    if ann:
        meta["annotations"] = ann
    if storage:
        spec["resources"] = {"requests": {"storage": storage}}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase} if phase else {}}


def pv(name: str, sc: str, *, capacity: str = "1Gi", hosts: list[str] | None = None,
       affinity: dict[str, list[str]] | None = None, phase: str = "Available") -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": sc, "capacity": {"storage": capacity}}
    terms = dict(affinity or {})
    if hosts:
        terms[HOST] = hosts
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": v} for k, v in terms.items()]}]}}
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec, "status": {"phase": phase}}


def claims_pod(*claims: str) -> PodInfo:
    return PodInfo.from_raw(pod("pod-a", volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}}
                                                  for c in claims]))


class World:
    def __init__(self, pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]] | None = None,
                 capacities: list[dict[str, Any]] | None = None) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {
            "PersistentVolumeClaim": {f"default/{c['metadata']['name']}": c for c in pvcs},
            "PersistentVolume": {p["metadata"]["name"]: p for p in pvs or []},
            "StorageClass": {s["metadata"]["name"]: s for s in (WAIT, IMMEDIATE, WAIT_CAP)},
            "CSIDriver": {DRIVER["metadata"]["name"]: DRIVER},
            "CSIStorageCapacity": {f"default/{c['metadata']['name']}": c for c in capacities or []},
        }

    def get(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.objects.get(kind, {})


def run(world: World, p: PodInfo, nodes: list[dict[str, Any]]) -> tuple[Status, list[Status | None], list[int]]:
    t = table_of(*nodes)
    pl = new_plugin(VolumeBinding, {}, table=t, objects=world.get)
    state = CycleState()
    _, pre = pl.pre_filter(state, p, t)
    if not pre.is_success:
        return pre, [], []
    rows = np.array([t.index[n["metadata"]["name"]] for n in nodes], dtype=np.intp)
    v = pl.filter_batch(state, p, t, rows)
    statuses = [None if c == 0 else v.statuses[c - 1] for c in v.codes.tolist()]
    if not pl.pre_score(state, p, t, rows).is_success:
        return pre, statuses, []
    scores = pl.score_batch(state, p, t, rows)
    assert not isinstance(scores, Status)
    return pre, statuses, [int(s) if st is None else 0 for s, st in zip(scores, statuses, strict=True)]


def unresolvable(*reasons: str) -> tuple[Code, tuple[str, ...]]:
    return Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons


def verdicts(statuses: list[Status | None]) -> list[tuple[Code, tuple[str, ...]] | None]:
    return [None if s is None else (s.code, s.reasons) for s in statuses]


def test_pod_without_claims_is_skipped() -> None:
    pre, _, _ = run(World([]), PodInfo.from_raw(pod("pod-a")), [node("node-a")])
    assert pre.code == Code.SKIP


def test_all_bound() -> None:
    w = World([pvc("pvc-a", "wait-sc", bound_pv="pv-a")], [pv("pv-a", "wait-sc", phase="Bound")])
    pre, statuses, scores = run(w, claims_pod("pvc-a"), [node("node-a")])
    assert pre.is_success and statuses == [None] and scores == [0]


@pytest.mark.parametrize(("claims", "message"), [
    (("pvc-a",), 'persistentvolumeclaim "pvc-a" not found'),
    (("pvc-a", "pvc-b"), 'persistentvolumeclaim "pvc-b" not found'),  # part of the PVCs do not exist
])
def test_missing_claims(claims: tuple[str, ...], message: str) -> None:
    w = World([pvc("pvc-a", "wait-sc", bound_pv="pv-a")] if len(claims) == 2 else [])
    pre, _, _ = run(w, claims_pod(*claims), [node("node-a")])
    assert (pre.code, pre.reasons) == unresolvable(message)


def test_immediate_claims_not_bound() -> None:
    pre, _, _ = run(World([pvc("pvc-a", "immediate-sc")]), claims_pod("pvc-a"), [node("node-a")])
    assert (pre.code, pre.reasons) == unresolvable("pod has unbound immediate PersistentVolumeClaims")


def test_claim_lost() -> None:
    w = World([pvc("pvc-a", "wait-sc", bound_pv="pv-a", phase="Lost")])
    pre, _, _ = run(w, claims_pod("pvc-a"), [node("node-a")])
    assert (pre.code, pre.reasons) == unresolvable(
        'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"')


def test_unbound_claims_no_matches() -> None:
    _, statuses, _ = run(World([pvc("pvc-a", "wait-sc")]), claims_pod("pvc-a"), [node("node-a")])
    assert verdicts(statuses) == [unresolvable(ERR_REASON_BIND_CONFLICT)]


def test_bound_and_unbound_unsatisfied() -> None:
    w = World([pvc("pvc-a", "wait-sc", bound_pv="pv-a"), pvc("pvc-b", "wait-sc")],
              [pv("pv-a", "wait-sc", affinity={"foo": ["bar"]})])
    _, statuses, _ = run(w, claims_pod("pvc-a", "pvc-b"), [node("node-a", labels={"foo": "barbar"})])
    assert verdicts(statuses) == [unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)]


def test_pv_not_found() -> None:
    _, statuses, _ = run(World([pvc("pvc-a", "wait-sc", bound_pv="pv-a")]), claims_pod("pvc-a"), [node("node-a")])
    assert verdicts(statuses) == [unresolvable(ERR_REASON_PV_NOT_EXIST)]


LOCAL_PVS = [pv("pv-a-0", "wait-sc", capacity="200Gi", hosts=["node-a"]),
             pv("pv-a-1", "wait-sc", capacity="200Gi", hosts=["node-a"]),
             pv("pv-b-0", "wait-sc", capacity="100Gi", hosts=["node-b"]),
             pv("pv-b-1", "wait-sc", capacity="100Gi", hosts=["node-b"])]
THREE_NODES = [node("node-a"), node("node-b"), node("node-c")]


def test_local_volumes_with_close_capacity_are_preferred() -> None:
    _, statuses, scores = run(World([pvc("pvc-a", "wait-sc", storage="50Gi")], LOCAL_PVS), claims_pod("pvc-a"),
                              THREE_NODES)
    assert verdicts(statuses) == [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)]
    assert scores == [75, 50, 0]


def test_local_volumes_with_close_capacity_are_preferred_multiple_pvcs() -> None:
    w = World([pvc("pvc-0", "wait-sc", storage="50Gi"), pvc("pvc-1", "wait-hdd-sc", storage="100Gi")],
              [*LOCAL_PVS,
               pv("pv-a-2", "wait-hdd-sc", capacity="200Gi", hosts=["node-a"]),
               pv("pv-a-3", "wait-hdd-sc", capacity="200Gi", hosts=["node-a"]),
               pv("pv-b-2", "wait-hdd-sc", capacity="100Gi", hosts=["node-b"]),
               pv("pv-b-3", "wait-hdd-sc", capacity="100Gi", hosts=["node-b"])])
    w.objects["StorageClass"]["wait-hdd-sc"] = {"metadata": {"name": "wait-hdd-sc"},
                                                "volumeBindingMode": "WaitForFirstConsumer"}
    _, statuses, scores = run(w, claims_pod("pvc-0", "pvc-1"), THREE_NODES)
    assert verdicts(statuses) == [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)]
    assert scores == [63, 25, 0]  # per class (75 and 50 on node-a), averaged and rounded


ZONAL_PVS = [pv("pv-a-0", "wait-sc", capacity="200Gi", affinity={"topology.kubernetes.io/region": ["region-a"],
                                                                  "topology.kubernetes.io/zone": ["zone-a"]}),
             pv("pv-b-0", "wait-sc", capacity="100Gi", affinity={"topology.kubernetes.io/region": ["region-b"],
                                                                  "topology.kubernetes.io/zone": ["zone-b"]})]


def test_zonal_volumes_with_close_capacity_are_preferred() -> None:
    nodes = [node(n, labels={"topology.kubernetes.io/region": r, "topology.kubernetes.io/zone": z})
             for n, r, z in (("zone-a-node-a", "region-a", "zone-a"), ("zone-b-node-a", "region-b", "zone-b"),
                             ("zone-c-node-a", "region-c", "zone-c"))]
    _, statuses, scores = run(World([pvc("pvc-a", "wait-sc", storage="50Gi")], ZONAL_PVS), claims_pod("pvc-a"),
                              nodes)
    assert verdicts(statuses) == [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)]
    assert scores == [75, 50, 0]


def capacity(name: str, node_name: str, size: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "storageClassName": "wait-sc-with-storage-capacity",
            "nodeTopology": {"matchLabels": {HOST: node_name}}, "capacity": size}


def test_storage_capacity_score_and_not_enough_space() -> None:
    w = World([pvc("pvc-dynamic", "wait-sc-with-storage-capacity", storage="10Gi")], [],
              [capacity("cap-a", "node-a", "100Gi"), capacity("cap-b", "node-b", "50Gi"),
               capacity("cap-c", "node-c", "5Gi")])
    _, statuses, scores = run(w, claims_pod("pvc-dynamic"), THREE_NODES)
    assert verdicts(statuses) == [None, None, unresolvable(ERR_REASON_NOT_ENOUGH_SPACE)]
    assert scores == [90, 80, 0]  # "prefer node with least allocatable": 10/100 and 10/50 used


def test_selected_node_elsewhere_is_a_bind_conflict() -> None:
    claim = pvc("pvc-a", "wait-sc-with-storage-capacity",
                annotations={"volume.kubernetes.io/selected-node": "node-b"})
    _, statuses, _ = run(World([claim], [], [capacity("cap-b", "node-b", "50Gi")]), claims_pod("pvc-a"),
                         [node("node-a"), node("node-b")])
    assert verdicts(statuses) == [unresolvable(ERR_REASON_BIND_CONFLICT), None]


class FakeWriter:
    """An ObjectWriter that plays the PV controller: a PV's claimRef binds its claim."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.updates: list[tuple[str, str]] = []

    async def bind(self, pod: PodInfo, node_name: str) -> None: ...

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        self.updates.append((kind.kind, name))
        stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}
        if kind.kind == "PersistentVolume":
            self.world.objects["PersistentVolume"][name] = stored
            ref = obj["spec"]["claimRef"]
            key = f"{ref['namespace']}/{ref['name']}"
            claim = self.world.objects["PersistentVolumeClaim"][key]
            self.world.objects["PersistentVolumeClaim"][key] = {
                **claim, "metadata": {**claim["metadata"], "resourceVersion": "3",
                                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {**claim["spec"], "volumeName": name}}
        return stored


def test_reserve_assumes_prebind_binds_and_unreserve_restores() -> None:
    w = World([pvc("pvc-a", "wait-sc", storage="50Gi")], LOCAL_PVS)
    t = table_of(*THREE_NODES)
    writer = FakeWriter(w)
    pl = new_plugin(VolumeBinding, {}, table=t, objects=w.get, client=writer)
    p = claims_pod("pvc-a")

    def place() -> CycleState:
        state = CycleState()
        assert pl.pre_filter(state, p, t)[1].is_success
        pl.filter_batch(state, p, t, np.arange(3, dtype=np.intp))
        assert pl.reserve(state, p, "node-b").is_success
        return state

    state = place()
    # Assumed: the next pod's cycle sees pv-b-0 taken and picks pv-b-1.
    assumed = pl.pvs.get("pv-b-0")
    assert assumed is not None and assumed["spec"]["claimRef"]["name"] == "pvc-a"
    pl.unreserve(state, p, "node-b")
    assert "claimRef" not in (pl.pvs.get("pv-b-0") or {})["spec"]
    state = place()
    st = asyncio.run(pl.pre_bind(state, p, "node-b"))
    assert st.is_success, st
    assert writer.updates == [("PersistentVolume", "pv-b-0")]
    assert w.objects["PersistentVolumeClaim"]["default/pvc-a"]["spec"]["volumeName"] == "pv-b-0"


def test_prebind_without_a_writing_client_is_an_error() -> None:
    w = World([pvc("pvc-a", "wait-sc", storage="50Gi")], LOCAL_PVS)
    t = table_of(*THREE_NODES)
    pl = new_plugin(VolumeBinding, {}, table=t, objects=w.get)
    p = claims_pod("pvc-a")
    state = CycleState()
    pl.pre_filter(state, p, t)
    pl.filter_batch(state, p, t, np.arange(3, dtype=np.intp))
    pl.reserve(state, p, "node-a")
    st = asyncio.run(pl.pre_bind(state, p, "node-a"))
    assert st.is_error and "cannot update PersistentVolumes" in st.message


@pytest.mark.parametrize(("args", "message"), [
    ({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a "
                                 "negative value"),
    ({"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]},
     "shape[1].utilization: Invalid value: 10: values must be sorted in increasing order"),
    ({"shape": [{"utilization": 0, "score": 11}]}, "shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
])
def test_args_validation(args: dict[str, Any], message: str) -> None:
    from kubesched.plugins.volumebinding.args import VolumeBindingArgs

    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        VolumeBindingArgs.model_validate(args)


def test_simulator_binds_and_provisions_in_virtual_time(tmp_path: Any) -> None:
    """A WaitForFirstConsumer StatefulSet replayed: local PVs bound where they are, the dynamic
    class provisioned in the chosen node's zone, the pod left over told why."""
    import yaml

    from kubesched.app.startup import load_scheduler_config
    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.simulate.engine.runner import Simulation
    from kubesched.simulate.inputs.dump import load_cluster

    items: list[dict[str, Any]] = []
    for z in ("za", "zb"):
        name = f"n-{z}"
        items.append({**node(name, labels={"topology.kubernetes.io/zone": z})})
        items.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                      "spec": {"drivers": [{"name": "csi.example.com", "nodeID": name,
                                            "topologyKeys": ["topology.kubernetes.io/zone"]}]}})
    items += [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
               "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
              {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "csi"},
               "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"},
              {"apiVersion": "v1", "kind": "PersistentVolume", **pv("local-0", "local", capacity="10Gi",
                                                                     hosts=["n-za"])}]
    for i, sc in enumerate(("local", "local", "csi")):
        claim = pvc(f"data-{i}", sc, storage="5Gi")
        items.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim})
        zone = {"nodeSelector": {"topology.kubernetes.io/zone": "zb"}} if sc == "csi" else {}
        items.append(pod(f"web-{i}", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": f"data-{i}"}}],
                         **zone))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    config, registry = load_scheduler_config(None)
    cluster = load_cluster(path, profiles_object_kinds(registry, config.profiles))
    sim = Simulation(config, registry, cluster)
    result = asyncio.run(sim.run())
    placed = {r.key: r.node for r in result.records.values()}
    assert placed["default/web-0"] == "n-za" and placed["default/web-2"] == "n-zb"
    assert placed["default/web-1"] is None
    [left] = [r for r in result.records.values() if r.key == "default/web-1"]
    assert left.message.startswith("0/2 nodes are available: 2 node(s) didn't find available persistent volumes "
                                   "to bind.")
    claims = sim.cluster.objects["PersistentVolumeClaim"]
    assert claims["default/data-0"]["spec"]["volumeName"] == "local-0"
    provisioned = sim.cluster.objects["PersistentVolume"][claims["default/data-2"]["spec"]["volumeName"]]
    assert provisioned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zb"]}]
    assert claims["default/data-2"]["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n-zb"
