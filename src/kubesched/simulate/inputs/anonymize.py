"""Anonymise a cluster dump (``kubesched dump --anonymize``) without changing what the scheduler decides.

Every identifier is replaced by a salted hash of itself, and by the same hash wherever it
appears, so every relation the scheduler follows still holds: a pod's ``spec.nodeName`` still
names its Node, a selector still matches the pods (or nodes, or namespaces) it matched, a
spread constraint still counts the same pods per domain, a claim still names its volume. With the
same ``--salt`` two dumps hash alike (and can be compared); without the salt a hash cannot be
looked up in a list of likely names.

What is hashed (``x`` and 16 hex digits, a valid name and label value):

* object names, namespaces and uids; ``ownerReferences`` names and uids; ``spec.nodeName``,
  ``status.nominatedNodeName``, ``priorityClassName``, claim, volume and storage class names,
  service accounts, the identifiers of in-tree and CSI volumes (disk names, volume IDs, handles);
* label and annotation values (keys are kept: plugins read labels by key), and with them the
  values in every label selector, node selector and affinity term, ``nodeSelector``, toleration
  values, taint values, and the namespaces an affinity term lists;
* image names (after upstream's ``:latest`` normalisation, and tagged ``:latest`` again, so
  ImageLocality still matches the images a node reports).

What is kept: resource quantities, ports, taint and label keys, priorities, phases, timestamps,
scheduler names, topology keys, CSI driver names; the values of keys in the
``kubernetes.io`` and ``k8s.io`` domains (zone, region, os, arch, instance type, binding state:
they describe the platform, not the workload) except those that hold an object's name
(``kubernetes.io/hostname``, ``kubernetes.io/metadata.name``, the selected node, ...); values that
are integers (NodeAffinity's ``Gt``/``Lt`` compare them as numbers) and the empty string; the
names ``default``, ``kube-system``, ``kube-public``, ``kube-node-lease`` and the two built-in
``system-*`` PriorityClasses.

What is dropped (free text the scheduler never reads): containers' commands, arguments,
environment, probes and mounts (a container keeps its name, image, resources, ports, restart and
resize policy), pod hostnames and IPs, node addresses, machine and boot IDs, provider IDs, pod
CIDRs, condition messages, StorageClass parameters, CSI volume attributes, Service IPs.

Kinds this module does not know (a plugin's own, e.g. PodGroups) get their metadata anonymised
and the rest kept as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Anonymizer"]

#: Names that identify nothing: the built-in namespaces and PriorityClasses.
KEPT_NAMES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "system-node-critical", "system-cluster-critical"}
)
#: Keys of the kubernetes.io / k8s.io domains whose value is an object's name: hashed as names are.
NAME_VALUED_KEYS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/metadata.name",
        "volume.kubernetes.io/selected-node",
        "volume.beta.kubernetes.io/storage-class",
        "statefulset.kubernetes.io/pod-name",
        "batch.kubernetes.io/job-name",
        "batch.kubernetes.io/controller-uid",
        "kubernetes.io/service-name",
        "kubectl.kubernetes.io/last-applied-configuration",
    }
)
#: What a container keeps.
CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy", "resizePolicy")
CONTAINER_STATUS_FIELDS = ("name", "ready", "started", "restartCount", "allocatedResources", "resources")
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


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _well_known(key: str) -> bool:
    """A key in the kubernetes.io or k8s.io domains (``topology.kubernetes.io/zone``, ...)."""
    prefix, slash, _ = key.partition("/")
    if not slash:
        return False
    return prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io"))


def normalized_image_name(name: str) -> str:
    """``:latest`` appended to a reference without tag or digest, as upstream's ImageLocality
    (pkg/scheduler/framework/plugins/imagelocality/image_locality.go ``normalizedImageName``)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


class Anonymizer:
    """Hashes the identifiers of Kubernetes objects with one salt (see the module docstring)."""

    def __init__(self, salt: str) -> None:
        self._key = hashlib.blake2b(salt.encode()).digest()
        self._kinds: dict[str, Callable[[dict[str, Any]], None]] = {
            "Pod": self._pod,
            "Node": self._node,
            "PersistentVolumeClaim": self._pvc,
            "PersistentVolume": self._pv,
            "StorageClass": self._storage_class,
            "CSINode": self._csi_node,
            "CSIStorageCapacity": self._csi_storage_capacity,
            "VolumeAttachment": self._volume_attachment,
            "PodDisruptionBudget": self._pdb,
            "PriorityClass": self._drop_description,
            "Service": self._service,
            "ReplicationController": self._replication_controller,
            "ReplicaSet": self._workload,
            "StatefulSet": self._workload,
        }

    # -- the hashes --------------------------------------------------------------------------------

    def name(self, text: str) -> str:
        """An object's name (or anything that names one), hashed; see :data:`KEPT_NAMES`."""
        if not text or text in KEPT_NAMES or _is_int(text):
            return text
        return "x" + hashlib.blake2b(text.encode(), key=self._key, digest_size=8).hexdigest()

    def value(self, key: str, text: str) -> str:
        """The value of a label, annotation or taint with this key."""
        if _well_known(key) and key not in NAME_VALUED_KEYS:
            return text
        return self.name(text)

    def image(self, reference: str) -> str:
        """An image reference: the hash of its normalised form, tagged ``:latest`` because a node
        reports its images by tagged names (the CRI's RepoTags), compared as they are."""
        if not reference:
            return reference
        return self.name(normalized_image_name(reference)) + ":latest"

    # -- objects -----------------------------------------------------------------------------------

    def anonymize(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` (with its ``kind``) anonymised in place; returned for convenience."""
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            ephemeral = _ephemeral_claim(meta) if kind == "PersistentVolumeClaim" else None
            self._metadata(meta, keep_name=kind == "CSIDriver")  # a CSIDriver is named by its driver
            if ephemeral is not None:
                # A generic ephemeral volume's claim is named <pod>-<volume> (upstream
                # ephemeral.VolumeClaimName): only the pod's part is hashed, so the claim name
                # the scheduler derives from the anonymised pod still finds it.
                meta["name"] = f"{self.name(ephemeral[0])}-{ephemeral[1]}"
        handler = self._kinds.get(kind)
        if handler is not None:
            handler(obj)
        return obj

    def _metadata(self, meta: dict[str, Any], keep_name: bool = False) -> None:
        for key in ("generateName", "selfLink", "managedFields"):
            meta.pop(key, None)
        if isinstance(meta.get("name"), str) and not keep_name:
            meta["name"] = self.name(meta["name"])
        _rename(meta, "namespace", self.name)
        _rename(meta, "uid", self.name)  # a uid also appears in logs and events: it would link back
        for field_name in ("labels", "annotations"):
            if isinstance(meta.get(field_name), dict):
                meta[field_name] = self._labels(meta[field_name])
        for ref in _dicts(meta.get("ownerReferences")):
            _rename(ref, "name", self.name)
            _rename(ref, "uid", self.name)

    def _labels(self, labels: Mapping[str, Any]) -> dict[str, Any]:
        return {k: self.value(k, v) if isinstance(v, str) else v for k, v in labels.items()}

    def label_selector(self, selector: Any) -> None:
        """A metav1.LabelSelector, in place."""
        if not isinstance(selector, dict):
            return
        if isinstance(selector.get("matchLabels"), dict):
            selector["matchLabels"] = self._labels(selector["matchLabels"])
        self._requirements(selector.get("matchExpressions"))

    def _requirements(self, requirements: Any) -> None:
        for req in _dicts(requirements):
            key = str(req.get("key") or "")
            if isinstance(req.get("values"), list):
                req["values"] = [self.value(key, v) if isinstance(v, str) else v for v in req["values"]]

    def node_selector_term(self, term: Any) -> None:
        if not isinstance(term, dict):
            return
        self._requirements(term.get("matchExpressions"))
        for req in _dicts(term.get("matchFields")):  # the only field is metadata.name
            if isinstance(req.get("values"), list):
                req["values"] = [self.name(v) if isinstance(v, str) else v for v in req["values"]]

    def node_selector(self, selector: Any) -> None:
        """A v1.NodeSelector (``nodeSelectorTerms``), in place."""
        if isinstance(selector, dict):
            for term in _dicts(selector.get("nodeSelectorTerms")):
                self.node_selector_term(term)

    def _affinity_term(self, term: Any) -> None:
        if not isinstance(term, dict):
            return
        self.label_selector(term.get("labelSelector"))
        self.label_selector(term.get("namespaceSelector"))
        if isinstance(term.get("namespaces"), list):
            term["namespaces"] = [self.name(n) if isinstance(n, str) else n for n in term["namespaces"]]

    # -- pods --------------------------------------------------------------------------------------

    def _pod(self, pod: dict[str, Any]) -> None:
        if isinstance(pod.get("spec"), dict):
            self.pod_spec(pod["spec"])
        status = pod.get("status")
        if isinstance(status, dict):
            for key in ("podIP", "podIPs", "hostIP", "hostIPs", "message", "resourceClaimStatuses"):
                status.pop(key, None)
            _rename(status, "nominatedNodeName", self.name)
            self._conditions(status)
            for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
                if isinstance(status.get(key), list):
                    status[key] = [_only(s, CONTAINER_STATUS_FIELDS) for s in _dicts(status[key])]

    def pod_spec(self, spec: dict[str, Any]) -> None:
        """A v1.PodSpec (of a pod or a pod template), in place."""
        for key in ("hostname", "subdomain", "hostAliases", "dnsConfig"):
            spec.pop(key, None)
        for key in ("nodeName", "priorityClassName", "serviceAccountName", "serviceAccount"):
            _rename(spec, key, self.name)
        if isinstance(spec.get("nodeSelector"), dict):
            spec["nodeSelector"] = self._labels(spec["nodeSelector"])
        for ref in _dicts(spec.get("imagePullSecrets")):
            _rename(ref, "name", self.name)
        affinity = spec.get("affinity")
        if isinstance(affinity, dict):
            node_affinity = affinity.get("nodeAffinity")
            if isinstance(node_affinity, dict):
                self.node_selector(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
                for pref in _dicts(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")):
                    self.node_selector_term(pref.get("preference"))
            for kind in ("podAffinity", "podAntiAffinity"):
                terms = affinity.get(kind)
                if not isinstance(terms, dict):
                    continue
                for term in _dicts(terms.get("requiredDuringSchedulingIgnoredDuringExecution")):
                    self._affinity_term(term)
                for pref in _dicts(terms.get("preferredDuringSchedulingIgnoredDuringExecution")):
                    self._affinity_term(pref.get("podAffinityTerm"))
        for constraint in _dicts(spec.get("topologySpreadConstraints")):
            self.label_selector(constraint.get("labelSelector"))
        self._tolerations_or_taints(spec.get("tolerations"))
        for key in ("containers", "initContainers", "ephemeralContainers"):
            if isinstance(spec.get(key), list):
                spec[key] = [self._container(c) for c in _dicts(spec[key])]
        for volume in _dicts(spec.get("volumes")):
            for source_name, source in list(volume.items()):
                if source_name == "ephemeral" and isinstance(source, dict):
                    template = source.get("volumeClaimTemplate")
                    if isinstance(template, dict):
                        if isinstance(template.get("metadata"), dict):
                            self._metadata(template["metadata"])
                        if isinstance(template.get("spec"), dict):
                            self._pvc_spec(template["spec"])
                elif source_name == "image" and isinstance(source, dict):  # an OCI image volume
                    _rename(source, "reference", self.image)
                elif source_name != "name" and isinstance(source, dict):
                    self._volume_source(source)

    def _container(self, container: dict[str, Any]) -> dict[str, Any]:
        kept = _only(container, CONTAINER_FIELDS)
        _rename(kept, "image", self.image)
        return kept

    def _tolerations_or_taints(self, items: Any) -> None:
        for item in _dicts(items):
            if isinstance(item.get("value"), str):
                item["value"] = self.value(str(item.get("key") or ""), item["value"])

    def _conditions(self, status: dict[str, Any]) -> None:
        for condition in _dicts(status.get("conditions")):
            condition.pop("message", None)

    def _volume_source(self, source: dict[str, Any]) -> None:
        """An in-tree or CSI volume source (of a pod or a PV), in place: identifiers hashed."""
        for key in list(source):
            value = source[key]
            if key in VOLUME_DROPPED:
                del source[key]
            elif isinstance(value, str) and key in VOLUME_IDENTIFIERS:
                source[key] = self.name(value)
            elif isinstance(value, list) and key in VOLUME_LIST_IDENTIFIERS:
                source[key] = [self.name(v) if isinstance(v, str) else v for v in value]
            elif isinstance(value, dict):  # secretRef, nodeStageSecretRef, ...
                self._volume_source(value)

    # -- nodes -------------------------------------------------------------------------------------

    def _node(self, node: dict[str, Any]) -> None:
        spec = node.get("spec")
        if isinstance(spec, dict):
            for key in ("providerID", "podCIDR", "podCIDRs", "configSource", "externalID"):
                spec.pop(key, None)
            self._tolerations_or_taints(spec.get("taints"))
        status = node.get("status")
        if isinstance(status, dict):
            for key in ("addresses", "volumesAttached", "volumesInUse", "config", "daemonEndpoints"):
                status.pop(key, None)
            self._conditions(status)
            info = status.get("nodeInfo")
            if isinstance(info, dict):
                for key in ("machineID", "systemUUID", "bootID"):
                    info.pop(key, None)
            for image in _dicts(status.get("images")):
                if isinstance(image.get("names"), list):
                    image["names"] = [self.image(n) if isinstance(n, str) else n for n in image["names"]]

    # -- storage -----------------------------------------------------------------------------------

    def _pvc(self, pvc: dict[str, Any]) -> None:
        if isinstance(pvc.get("spec"), dict):
            self._pvc_spec(pvc["spec"])
        if isinstance(pvc.get("status"), dict):
            self._conditions(pvc["status"])

    def _pvc_spec(self, spec: dict[str, Any]) -> None:
        for key in ("volumeName", "storageClassName"):
            _rename(spec, key, self.name)
        self.label_selector(spec.get("selector"))
        for key in ("dataSource", "dataSourceRef"):
            if isinstance(spec.get(key), dict):
                _rename(spec[key], "name", self.name)
                _rename(spec[key], "namespace", self.name)

    def _pv(self, pv: dict[str, Any]) -> None:
        spec = pv.get("spec")
        if not isinstance(spec, dict):
            return
        claim = spec.get("claimRef")
        if isinstance(claim, dict):
            for key in ("name", "namespace", "uid"):
                _rename(claim, key, self.name)
        _rename(spec, "storageClassName", self.name)
        for key in ("mountOptions",):
            spec.pop(key, None)
        node_affinity = spec.get("nodeAffinity")
        if isinstance(node_affinity, dict):
            self.node_selector(node_affinity.get("required"))
        for key, source in spec.items():
            if key not in ("claimRef", "nodeAffinity", "capacity") and isinstance(source, dict):
                self._volume_source(source)

    def _storage_class(self, sc: dict[str, Any]) -> None:
        sc.pop("parameters", None)
        sc.pop("mountOptions", None)
        for term in _dicts(sc.get("allowedTopologies")):
            for req in _dicts(term.get("matchLabelExpressions")):
                key = str(req.get("key") or "")
                if isinstance(req.get("values"), list):
                    req["values"] = [self.value(key, v) if isinstance(v, str) else v for v in req["values"]]

    def _csi_node(self, csi_node: dict[str, Any]) -> None:
        spec = csi_node.get("spec")
        if isinstance(spec, dict):
            for driver in _dicts(spec.get("drivers")):
                _rename(driver, "nodeID", self.name)

    def _csi_storage_capacity(self, capacity: dict[str, Any]) -> None:
        _rename(capacity, "storageClassName", self.name)
        self.label_selector(capacity.get("nodeTopology"))

    def _volume_attachment(self, attachment: dict[str, Any]) -> None:
        spec = attachment.get("spec")
        if isinstance(spec, dict):
            _rename(spec, "nodeName", self.name)
            source = spec.get("source")
            if isinstance(source, dict):
                _rename(source, "persistentVolumeName", self.name)
                inline = source.get("inlineVolumeSpec")
                if isinstance(inline, dict):
                    self._pv({"spec": inline})
        attachment.pop("status", None)  # attach metadata and error messages

    # -- the rest ----------------------------------------------------------------------------------

    def _pdb(self, pdb: dict[str, Any]) -> None:
        if isinstance(pdb.get("spec"), dict):
            self.label_selector(pdb["spec"].get("selector"))
        status = pdb.get("status")
        if isinstance(status, dict):
            self._conditions(status)
            if isinstance(status.get("disruptedPods"), dict):
                status["disruptedPods"] = {self.name(k): v for k, v in status["disruptedPods"].items()}

    def _drop_description(self, obj: dict[str, Any]) -> None:
        obj.pop("description", None)

    def _service(self, service: dict[str, Any]) -> None:
        spec = service.get("spec")
        if isinstance(spec, dict):
            if isinstance(spec.get("selector"), dict):
                spec["selector"] = self._labels(spec["selector"])
            for key in ("clusterIP", "clusterIPs", "externalIPs", "loadBalancerIP", "externalName",
                        "loadBalancerSourceRanges"):
                spec.pop(key, None)
        service.pop("status", None)  # load-balancer addresses

    def _replication_controller(self, rc: dict[str, Any]) -> None:
        spec = rc.get("spec")
        if isinstance(spec, dict):
            if isinstance(spec.get("selector"), dict):
                spec["selector"] = self._labels(spec["selector"])
            self._template(spec.get("template"))

    def _workload(self, workload: dict[str, Any]) -> None:
        """ReplicaSets and StatefulSets: their selector and pod template."""
        spec = workload.get("spec")
        if isinstance(spec, dict):
            self.label_selector(spec.get("selector"))
            self._template(spec.get("template"))
            _rename(spec, "serviceName", self.name)
            for claim in _dicts(spec.get("volumeClaimTemplates")):
                if isinstance(claim.get("metadata"), dict):
                    self._metadata(claim["metadata"])
                if isinstance(claim.get("spec"), dict):
                    self._pvc_spec(claim["spec"])
                claim.pop("status", None)

    def _template(self, template: Any) -> None:
        if isinstance(template, dict):
            if isinstance(template.get("metadata"), dict):
                self._metadata(template["metadata"])
            if isinstance(template.get("spec"), dict):
                self.pod_spec(template["spec"])


def _ephemeral_claim(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pod name, volume name) of a claim a pod owns and that is named ``<pod>-<volume>``."""
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    for ref in _dicts(meta.get("ownerReferences")):
        owner = ref.get("name")
        if ref.get("kind") == "Pod" and isinstance(owner, str) and name.startswith(owner + "-"):
            volume = name[len(owner) + 1 :]
            if volume:
                return owner, volume
    return None


def _dicts(items: Any) -> list[dict[str, Any]]:
    """The mappings of a list field (anything else, e.g. a missing field, gives none)."""
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _only(obj: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {k: obj[k] for k in fields if k in obj}


def _rename(obj: dict[str, Any], key: str, how: Callable[[str], str]) -> None:
    value = obj.get(key)
    if isinstance(value, str):
        obj[key] = how(value)
