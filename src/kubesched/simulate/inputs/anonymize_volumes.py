"""The anonymiser's rules for volumes and devices (inputs/anonymize.py describes what is hashed,
kept and dropped): PersistentVolumes and claims, StorageClasses, CSI objects, and the dynamic
resources kinds. Functions of the :class:`Anonymizer` whose hashes they use; each changes one
object in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.simulate.inputs.anonymize import Anonymizer

#: Fields of a volume source (pod volume or PersistentVolume) that identify a disk, share or object.
VOLUME_IDENTIFIERS = frozenset(
    {
        "claimName", "secretName", "name", "pdName", "volumeID", "diskName", "diskURI", "image", "pool",
        "iqn", "targetPortal", "server", "path", "volumeHandle", "shareName", "datasetName", "user",
        "keyring", "secretFile", "volumePath", "storagePolicyName", "registry", "volume", "gateway",
        "system", "protectionDomain", "storagePool", "volumeName", "datasetUUID", "fsName",
    }
)
VOLUME_LIST_IDENTIFIERS = frozenset({"monitors", "portals", "targetWWNs", "wwids"})
#: Dropped wherever they appear in a volume source.
VOLUME_DROPPED = frozenset({"volumeAttributes", "items", "sources", "options"})


def dicts(items: Any) -> list[dict[str, Any]]:
    """The mappings of a list field (anything else, e.g. a missing field, gives none)."""
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def rename(obj: dict[str, Any], key: str, how: Callable[[str], str]) -> None:
    value = obj.get(key)
    if isinstance(value, str):
        obj[key] = how(value)


def volume_source(a: Anonymizer, source: dict[str, Any]) -> None:
    """An in-tree or CSI volume source (of a pod or a PV), in place: identifiers hashed."""
    for key in list(source):
        value = source[key]
        if key in VOLUME_DROPPED:
            del source[key]
        elif isinstance(value, str) and key in VOLUME_IDENTIFIERS:
            source[key] = a.name(value)
        elif isinstance(value, list) and key in VOLUME_LIST_IDENTIFIERS:
            source[key] = [a.name(v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict):  # secretRef, nodeStageSecretRef, ...
            volume_source(a, value)


def pvc(a: Anonymizer, pvc: dict[str, Any]) -> None:
    if isinstance(pvc.get("spec"), dict):
        pvc_spec(a, pvc["spec"])
    if isinstance(pvc.get("status"), dict):
        a.conditions(pvc["status"])


def pvc_spec(a: Anonymizer, spec: dict[str, Any]) -> None:
    for key in ("volumeName", "storageClassName"):
        rename(spec, key, a.name)
    a.label_selector(spec.get("selector"))
    for key in ("dataSource", "dataSourceRef"):
        if isinstance(spec.get(key), dict):
            rename(spec[key], "name", a.name)
            rename(spec[key], "namespace", a.name)


def pv(a: Anonymizer, pv: dict[str, Any]) -> None:
    spec = pv.get("spec")
    if not isinstance(spec, dict):
        return
    claim = spec.get("claimRef")
    if isinstance(claim, dict):
        for key in ("name", "namespace", "uid"):
            rename(claim, key, a.name)
    rename(spec, "storageClassName", a.name)
    for key in ("mountOptions",):
        spec.pop(key, None)
    node_affinity = spec.get("nodeAffinity")
    if isinstance(node_affinity, dict):
        a.node_selector(node_affinity.get("required"))
    for key, source in spec.items():
        if key not in ("claimRef", "nodeAffinity", "capacity") and isinstance(source, dict):
            volume_source(a, source)


def storage_class(a: Anonymizer, sc: dict[str, Any]) -> None:
    sc.pop("parameters", None)
    sc.pop("mountOptions", None)
    for term in dicts(sc.get("allowedTopologies")):
        for req in dicts(term.get("matchLabelExpressions")):
            key = str(req.get("key") or "")
            if isinstance(req.get("values"), list):
                req["values"] = [a.value(key, v) if isinstance(v, str) else v for v in req["values"]]


def csi_node(a: Anonymizer, csi_node: dict[str, Any]) -> None:
    spec = csi_node.get("spec")
    if isinstance(spec, dict):
        for driver in dicts(spec.get("drivers")):
            rename(driver, "nodeID", a.name)


def csi_storage_capacity(a: Anonymizer, capacity: dict[str, Any]) -> None:
    rename(capacity, "storageClassName", a.name)
    a.label_selector(capacity.get("nodeTopology"))


def volume_attachment(a: Anonymizer, attachment: dict[str, Any]) -> None:
    spec = attachment.get("spec")
    if isinstance(spec, dict):
        rename(spec, "nodeName", a.name)
        source = spec.get("source")
        if isinstance(source, dict):
            rename(source, "persistentVolumeName", a.name)
            inline = source.get("inlineVolumeSpec")
            if isinstance(inline, dict):
                pv(a, {"spec": inline})
    attachment.pop("status", None)  # attach metadata and error messages


def device_claim_spec(a: Anonymizer, spec: Any) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return
    for request in dicts(spec["devices"].get("requests")):
        for exact in (request.get("exactly"), request):
            if isinstance(exact, dict):
                rename(exact, "deviceClassName", a.name)
        for alternative in dicts(request.get("firstAvailable")):
            rename(alternative, "deviceClassName", a.name)


def resource_claim(a: Anonymizer, claim: dict[str, Any]) -> None:
    device_claim_spec(a, claim.get("spec"))
    status = claim.get("status")
    if not isinstance(status, dict):
        return
    for ref in dicts(status.get("reservedFor")):
        rename(ref, "name", a.name)
        rename(ref, "uid", a.name)
    allocation = status.get("allocation")
    if isinstance(allocation, dict):
        a.node_selector(allocation.get("nodeSelector"))
        devices = allocation.get("devices")
        for result in dicts(devices.get("results") if isinstance(devices, dict) else None):
            rename(result, "pool", a.name)
    status.pop("devices", None)  # drivers' per-device status: addresses, free text


def resource_claim_template(a: Anonymizer, template: dict[str, Any]) -> None:
    spec = template.get("spec")
    if isinstance(spec, dict):
        if isinstance(spec.get("metadata"), dict):
            a.object_metadata(spec["metadata"])
        device_claim_spec(a, spec.get("spec"))


def resource_slice(a: Anonymizer, resource_slice: dict[str, Any]) -> None:
    spec = resource_slice.get("spec")
    if isinstance(spec, dict):
        rename(spec, "nodeName", a.name)
        a.node_selector(spec.get("nodeSelector"))
        if isinstance(spec.get("pool"), dict):
            rename(spec["pool"], "name", a.name)


def device_taint_rule(a: Anonymizer, rule: dict[str, Any]) -> None:
    spec = rule.get("spec")
    selector = spec.get("deviceSelector") if isinstance(spec, dict) else None
    if isinstance(selector, dict):
        rename(selector, "deviceClassName", a.name)
        rename(selector, "pool", a.name)
