"""Storage objects the volume plugins read, and the upstream helpers over them.

The kinds (declared by VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits; every
shell feeds them, framework/objects.py) and ports of:

* ``k8s.io/component-helpers/storage/volume`` (helpers.go, pv_helpers.go): claim and volume
  classes, ``CheckNodeAffinity``, ``IsVolumeBoundToClaim``, ``GetBindVolumeToClaim``,
  ``CheckVolumeModeMismatches``, ``CheckAccessModes``, the annotations;
* ``k8s.io/component-helpers/storage/ephemeral``: ``VolumeClaimName``, ``VolumeIsForPod``;
* the lister "not found" errors as ``apierrors.NewNotFound`` prints them.

A pod's volumes are parsed once (:func:`pod_volumes`, kept in ``pod.memo``), so a pod without
claims costs one dict lookup per plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.quantity import parse_quantity, value
from kubesched.framework.objects import ObjectKind
from kubesched.plugins.helpers.node_selector import NodeSelectorTerm, compile_terms, node_matches_terms
from kubesched.snapshot.pod import PodInfo

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


def _check_pvc(raw: dict[str, Any]) -> None:
    requests = ((raw.get("spec") or {}).get("resources") or {}).get("requests") or {}
    if "storage" in requests:
        try:
            parse_quantity(requests["storage"], from_json=True)
        except ValueError as e:
            raise ValueError(f"spec.resources.requests.storage: {e}") from None


def _check_pv(raw: dict[str, Any]) -> None:
    capacity = (raw.get("spec") or {}).get("capacity") or {}
    if "storage" in capacity:
        try:
            parse_quantity(capacity["storage"], from_json=True)
        except ValueError as e:
            raise ValueError(f"spec.capacity.storage: {e}") from None


def uses_claims(pod: Mapping[str, Any]) -> bool:
    """Whether a raw pod has a ``persistentVolumeClaim`` or ``ephemeral`` volume (the pods for which
    a dump without claims, volumes or classes is incomplete)."""
    vols = (pod.get("spec") or {}).get("volumes") or ()
    return any(isinstance(v, dict) and (v.get("persistentVolumeClaim") or v.get("ephemeral")) for v in vols)


PVC_KIND = ObjectKind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", validate=_check_pvc,
                      needed_by=uses_claims, when_missing="pods with claims wait for them")
PV_KIND = ObjectKind("PersistentVolume", "", "v1", "persistentvolumes", namespaced=False, validate=_check_pv,
                     needed_by=uses_claims, when_missing="claims have no volume to be bound to")
STORAGE_CLASS_KIND = ObjectKind("StorageClass", "storage.k8s.io", "v1", "storageclasses", namespaced=False,
                                needed_by=uses_claims, when_missing="claims have no class to provision from")
CSI_NODE_KIND = ObjectKind("CSINode", "storage.k8s.io", "v1", "csinodes", namespaced=False)
CSI_DRIVER_KIND = ObjectKind("CSIDriver", "storage.k8s.io", "v1", "csidrivers", namespaced=False)
CSI_STORAGE_CAPACITY_KIND = ObjectKind("CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities")
VOLUME_ATTACHMENT_KIND = ObjectKind("VolumeAttachment", "storage.k8s.io", "v1", "volumeattachments",
                                    namespaced=False)


def not_found(resource: str, name: str) -> str:
    """apierrors.NewNotFound(...).Error(): ``persistentvolumeclaim "data" not found``."""
    return f'{resource} "{name}" not found'


PVC_RESOURCE = "persistentvolumeclaim"
PV_RESOURCE = "persistentvolume"
STORAGE_CLASS_RESOURCE = "storageclass.storage.k8s.io"


# -- the pod's volumes --------------------------------------------------------------------------

#: Inline volume sources VolumeRestrictions checks for conflicts (needsRestrictionsCheck).
RESTRICTED_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What the volume plugins read of a pod's ``spec.volumes``, in order."""

    #: (claim name, is generic ephemeral) per PVC-backed volume (``persistentVolumeClaim`` or
    #: ``ephemeral``: the claim is ``<pod>-<volume>``).
    claims: tuple[tuple[str, bool], ...]
    #: Claim names of ``persistentVolumeClaim`` volumes only (upstream PodPVCKeys).
    pvc_names: tuple[str, ...]
    #: The inline volumes VolumeRestrictions checks (raw v1.Volume dicts).
    restricted: tuple[dict[str, Any], ...]
    has_volumes: bool


_NO_VOLUMES = PodVolumes((), (), (), False)
_MEMO_KEY = "volumes"


def pod_volumes(pod: PodInfo) -> PodVolumes:
    cached = pod.memo.get(_MEMO_KEY)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    vols = pod.spec.get("volumes") or []
    if not vols:
        pod.memo[_MEMO_KEY] = _NO_VOLUMES
        return _NO_VOLUMES
    claims: list[tuple[str, bool]] = []
    pvc_names: list[str] = []
    restricted: list[dict[str, Any]] = []
    for v in vols:
        if not isinstance(v, dict):
            continue
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict):
            name = str(pvc.get("claimName") or "")
            claims.append((name, False))
            pvc_names.append(name)
        elif v.get("ephemeral") is not None:
            claims.append((f"{pod.name}-{v.get('name', '')}", True))
        if any(v.get(src) is not None for src in RESTRICTED_SOURCES):
            restricted.append(v)
    out = PodVolumes(tuple(claims), tuple(pvc_names), tuple(restricted), True)
    pod.memo[_MEMO_KEY] = out
    return out


def volume_is_for_pod(pod: PodInfo, pvc: Mapping[str, Any]) -> str | None:
    """ephemeral.VolumeIsForPod: None, or the error message."""
    meta = pvc.get("metadata") or {}
    owned = any(
        ref.get("controller") is True and ref.get("uid") == pod.uid for ref in meta.get("ownerReferences") or []
    )
    if meta.get("namespace", "default") != pod.namespace or not owned:
        return (f"PVC {meta.get('namespace', '')}/{meta.get('name', '')} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)")
    return None


# -- claims and volumes -------------------------------------------------------------------------

def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def claim_class(pvc: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation, else spec.storageClassName, else ""."""
    ann = annotations_of(pvc)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


def volume_class(pv: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClass."""
    ann = annotations_of(pv)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def requested_storage(pvc: Mapping[str, Any]) -> int:
    """spec.resources.requests.storage in bytes (0 when absent), rounded up as Quantity.Value()."""
    raw = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return quantity_bytes(raw)


def capacity_storage(pv: Mapping[str, Any]) -> int:
    return quantity_bytes(((pv.get("spec") or {}).get("capacity") or {}).get("storage"))


def quantity_bytes(raw: Any) -> int:
    if raw is None:
        return 0
    try:
        return value(raw, from_json=True)
    except ValueError:
        return 0


def has_storage_request(pvc: Mapping[str, Any]) -> bool:
    return "storage" in ((((pvc.get("spec") or {}).get("resources") or {}).get("requests")) or {})


def is_fully_bound(pvc: Mapping[str, Any]) -> bool:
    """volumeBinder.isPVCFullyBound: spec.volumeName set and the bind-completed annotation."""
    return bool((pvc.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


def is_volume_bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    if ref.get("name") != name_of(pvc) or (ref.get("namespace") or "") != namespace_of(pvc):
        return False
    return not ref.get("uid") or ref.get("uid") == uid_of(pvc)


def bind_volume_to_claim(pv: dict[str, Any], pvc: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """GetBindVolumeToClaim: a copy of ``pv`` with claimRef set to ``pvc`` (and the
    bound-by-controller annotation when it was not pre-bound), and whether anything changed."""
    should_set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    clone = {**pv, "metadata": dict(pv.get("metadata") or {}), "spec": dict(pv.get("spec") or {})}
    dirty = False
    ref = clone["spec"].get("claimRef") or {}
    if (not ref or ref.get("name") != name_of(pvc) or ref.get("namespace") != namespace_of(pvc)
            or ref.get("uid") != uid_of(pvc)):
        meta = pvc.get("metadata") or {}
        clone["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim", "namespace": namespace_of(pvc), "name": name_of(pvc),
            "uid": uid_of(pvc), "apiVersion": "v1", "resourceVersion": str(meta.get("resourceVersion") or ""),
        }
        dirty = True
    ann = dict(clone["metadata"].get("annotations") or {})
    if should_set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in ann:
        ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        clone["metadata"]["annotations"] = ann
        dirty = True
    return clone, dirty


def volume_mode_mismatch(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """CheckVolumeModeMismatches (Filesystem when unset)."""
    want = (pvc.get("spec") or {}).get("volumeMode") or "Filesystem"
    have = (pv.get("spec") or {}).get("volumeMode") or "Filesystem"
    return bool(want != have)


def access_modes_ok(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """CheckAccessModes: every mode the claim asks for is one the volume has."""
    have = set((pv.get("spec") or {}).get("accessModes") or ())
    return all(m in have for m in (pvc.get("spec") or {}).get("accessModes") or ())


def pv_affinity_terms(pv: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
    """The PV's spec.nodeAffinity.required terms, compiled (None: no constraint)."""
    required = (((pv.get("spec") or {}).get("nodeAffinity")) or {}).get("required")
    if not isinstance(required, dict):
        return None
    return compile_terms(required.get("nodeSelectorTerms") or [])


def check_node_affinity(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity (labels only: upstream builds a Node without a name)."""
    terms = pv_affinity_terms(pv)
    return terms is None or node_matches_terms(terms, labels, "")


def storage_class(classes: Mapping[str, dict[str, Any]], name: str) -> dict[str, Any] | None:
    return classes.get(name)


def resource_version(obj: Mapping[str, Any]) -> int:
    """metadata.resourceVersion as an integer (0 when absent or opaque, e.g. a simulator input)."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(rv))
    except (TypeError, ValueError):
        return 0
