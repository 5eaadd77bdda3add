"""The simulator's PersistentVolume controller and dynamic provisioner, in virtual time.

On a real cluster kube-controller-manager's PV controller binds claims and an external
provisioner creates volumes; the scheduler only proposes (VolumeBinding's PreBind sets a PV's
``claimRef``, or a claim's ``volume.kubernetes.io/selected-node``) and waits. Here the in-memory
cluster plays both parts at once, the moment the scheduler writes:

* **binding** (pkg/controller/volume/persistentvolume ``bind``): a PV whose ``claimRef`` names an
  existing claim becomes ``Bound`` to it; the claim gets ``spec.volumeName``, the
  ``pv.kubernetes.io/bind-completed`` annotation, ``status.phase: Bound`` and the PV's capacity
  and access modes;
* **provisioning** (external-provisioner with delayed binding): a claim with a selected node and
  a class whose provisioner is not ``kubernetes.io/no-provisioner`` gets a new PV
  ``pvc-<claim uid>`` of the requested size, in the node's topology (the values on the selected
  node of the driver's CSINode ``topologyKeys``, as a CSI driver reports accessible topology; no
  node affinity when the driver declares none), then is bound to it;
* at load, what the controller would have done before any pod was scheduled: claims of an
  ``Immediate`` class (or of no class) are bound to the smallest matching Available PV, or
  provisioned without topology; PVs without a phase become ``Available`` (or ``Bound`` when a
  bound claim names them).

Every write bumps ``metadata.resourceVersion`` (a counter above the largest in the input), so
the scheduler's assumed objects and binding checks compare versions as they do live.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kubesched.api.quantity import value

PVC = "PersistentVolumeClaim"
PV = "PersistentVolume"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"

Objects = dict[str, dict[str, dict[str, Any]]]
#: Called with (kind, key, new object) after every write.
OnWrite = Callable[[str, str, dict[str, Any]], None]


def _rv(obj: dict[str, Any]) -> int:
    try:
        return int(str((obj.get("metadata") or {}).get("resourceVersion")))
    except (TypeError, ValueError):
        return 0


def _bytes(raw: Any) -> int:
    try:
        return value(raw, from_json=True)
    except ValueError:
        return 0


def _claim_class(pvc: dict[str, Any]) -> str:
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    return str(ann.get(ANN_BETA_CLASS) or (pvc.get("spec") or {}).get("storageClassName") or "")


def _pv_class(pv: dict[str, Any]) -> str:
    ann = (pv.get("metadata") or {}).get("annotations") or {}
    return str(ann.get(ANN_BETA_CLASS) or (pv.get("spec") or {}).get("storageClassName") or "")


def _key(pvc: dict[str, Any]) -> str:
    meta = pvc.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


class VolumeController:
    def __init__(self, objects: Objects, nodes: dict[str, dict[str, Any]], on_write: OnWrite) -> None:
        self.objects = objects
        self.nodes = nodes
        self._on_write = on_write
        top = max((_rv(o) for kind in (PVC, PV) for o in objects.get(kind, {}).values()), default=0)
        self._versions = itertools.count(top + 1)
        self.provisioned = 0
        self.bound = 0

    def write(self, kind: str, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` with a new resourceVersion and tell the scheduler."""
        stored = {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": str(next(self._versions))}}
        self.objects.setdefault(kind, {})[key] = stored
        self._on_write(kind, key, stored)
        return stored

    # -- reacting to the scheduler's writes --------------------------------------------------------
    def react(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == PV:
            ref = (obj.get("spec") or {}).get("claimRef") or {}
            pvc = self.objects.get(PVC, {}).get(f"{ref.get('namespace') or 'default'}/{ref.get('name', '')}")
            if pvc is not None and not (pvc.get("spec") or {}).get("volumeName"):
                self._bind(pvc, obj)
        elif kind == PVC:
            node = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANN_SELECTED_NODE)
            if node and not (obj.get("spec") or {}).get("volumeName"):
                self._provision(obj, str(node))

    def _bind(self, pvc: dict[str, Any], pv: dict[str, Any]) -> None:
        pv_meta = pv.get("metadata") or {}
        pv_name = str(pv_meta.get("name", ""))
        pvc_meta = dict(pvc.get("metadata") or {})
        ref = {"kind": PVC, "namespace": pvc_meta.get("namespace") or "default", "name": pvc_meta.get("name", ""),
               "uid": pvc_meta.get("uid", ""), "apiVersion": "v1"}
        pv_spec = {**(pv.get("spec") or {}), "claimRef": {**((pv.get("spec") or {}).get("claimRef") or {}), **ref}}
        self.write(PV, pv_name, {**pv, "spec": pv_spec, "status": {**(pv.get("status") or {}), "phase": "Bound"}})
        ann = {**(pvc_meta.get("annotations") or {}), ANN_BIND_COMPLETED: "yes"}
        if not (pvc.get("spec") or {}).get("volumeName"):
            ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        pvc_meta["annotations"] = ann
        status = {**(pvc.get("status") or {}), "phase": "Bound",
                  "accessModes": list(pv_spec.get("accessModes") or []),
                  "capacity": dict(pv_spec.get("capacity") or {})}
        self.write(PVC, _key(pvc), {**pvc, "metadata": pvc_meta, "spec": {**(pvc.get("spec") or {}),
                                                                             "volumeName": pv_name},
                                   "status": status})
        self.bound += 1

    def _provision(self, pvc: dict[str, Any], node_name: str | None) -> None:
        sc = self.objects.get(STORAGE_CLASS, {}).get(_claim_class(pvc))
        provisioner = str((sc or {}).get("provisioner") or "")
        if sc is None or not provisioner or provisioner == NO_PROVISIONER:
            return
        meta = pvc.get("metadata") or {}
        spec = pvc.get("spec") or {}
        name = f"pvc-{meta.get('uid') or _key(pvc).replace('/', '-')}"
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "accessModes": list(spec.get("accessModes") or []),
            "storageClassName": _claim_class(pvc),
            "persistentVolumeReclaimPolicy": (sc or {}).get("reclaimPolicy") or "Delete",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "csi": {"driver": provisioner, "volumeHandle": name},
        }
        terms = self._topology(provisioner, node_name) if node_name else None
        if terms:
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": terms}]}}
        pv = {"apiVersion": "v1", "kind": PV,
              "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
              "spec": pv_spec, "status": {"phase": "Available"}}
        stored = self.write(PV, name, pv)
        self.provisioned += 1
        self._bind(pvc, stored)

    def _topology(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        """The selected node's values of the driver's CSINode topologyKeys."""
        labels = ((self.nodes.get(node_name) or {}).get("metadata") or {}).get("labels") or {}
        csi_node = self.objects.get(CSI_NODE, {}).get(node_name) or {}
        for d in (csi_node.get("spec") or {}).get("drivers") or []:
            if d.get("name") == driver:
                return [{"key": k, "operator": "In", "values": [labels[k]]}
                        for k in d.get("topologyKeys") or [] if k in labels]
        return []

    # -- at load ------------------------------------------------------------------------------------
    def settle(self) -> None:
        """What the controller does before any pod is scheduled (see the module docstring)."""
        pvs = self.objects.get(PV, {})
        pvcs = self.objects.get(PVC, {})
        claimed = {str((c.get("spec") or {}).get("volumeName")) for c in pvcs.values()
                   if (c.get("spec") or {}).get("volumeName")}
        for name, pv in list(pvs.items()):
            status = pv.get("status") or {}
            if not status.get("phase"):
                phase = "Bound" if name in claimed else "Available"
                pvs[name] = {**pv, "status": {**status, "phase": phase}}
        classes = self.objects.get(STORAGE_CLASS, {})
        for pvc in sorted(pvcs.values(), key=_key):
            spec = pvc.get("spec") or {}
            if spec.get("volumeName"):
                continue
            sc = classes.get(_claim_class(pvc))
            if sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                continue
            match = self._match(pvc)
            if match is not None:
                self._bind(pvc, match)
            elif sc is not None:
                self._provision(pvc, None)

    def _match(self, pvc: dict[str, Any]) -> dict[str, Any] | None:
        spec = pvc.get("spec") or {}
        want = _bytes(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
        modes = set(spec.get("accessModes") or ())
        best: dict[str, Any] | None = None
        for pv in self.objects.get(PV, {}).values():
            pv_spec = pv.get("spec") or {}
            if pv_spec.get("claimRef") or (pv.get("status") or {}).get("phase") != "Available":
                continue
            if _pv_class(pv) != _claim_class(pvc) or not modes <= set(pv_spec.get("accessModes") or ()):
                continue
            size = _bytes((pv_spec.get("capacity") or {}).get("storage"))
            if size >= want and (best is None or size < _bytes(((best.get("spec") or {}).get("capacity") or {})
                                                                 .get("storage"))):
                best = pv
        return best
