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

Dynamic resources: claim, template and DeviceClass names and pools (often named after their node)
are hashed; devices, drivers, attributes and capacities kept (CEL selectors compare them).

Kinds this module does not know (a plugin's own, e.g. PodGroups) get their metadata anonymised
and the rest kept as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kubesched.simulate.inputs import anonymize_volumes as volumes
from kubesched.simulate.inputs.anonymize_volumes import dicts, rename

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
            "PersistentVolumeClaim": partial(volumes.pvc, self),
            "PersistentVolume": partial(volumes.pv, self),
            "StorageClass": partial(volumes.storage_class, self),
            "CSINode": partial(volumes.csi_node, self),
            "CSIStorageCapacity": partial(volumes.csi_storage_capacity, self),
            "VolumeAttachment": partial(volumes.volume_attachment, self),
            "PodDisruptionBudget": self._pdb,
            "PriorityClass": self._drop_description,
            "Service": self._service,
            "ReplicationController": self._replication_controller,
            "ReplicaSet": self._workload,
            "StatefulSet": self._workload,
            "ResourceClaim": partial(volumes.resource_claim, self),
            "ResourceClaimTemplate": partial(volumes.resource_claim_template, self),
            "ResourceSlice": partial(volumes.resource_slice, self),
            "DeviceTaintRule": partial(volumes.device_taint_rule, self),
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
            self.object_metadata(meta, keep_name=kind == "CSIDriver")  # a CSIDriver is named by its driver
            if ephemeral is not None:
                # A generic ephemeral volume's claim is named <pod>-<volume> (upstream
                # ephemeral.VolumeClaimName): only the pod's part is hashed, so the claim name
                # the scheduler derives from the anonymised pod still finds it.
                meta["name"] = f"{self.name(ephemeral[0])}-{ephemeral[1]}"
        handler = self._kinds.get(kind)
        if handler is not None:
            handler(obj)
        return obj

    def object_metadata(self, meta: dict[str, Any], keep_name: bool = False) -> None:
        for key in ("generateName", "selfLink", "managedFields"):
            meta.pop(key, None)
        if isinstance(meta.get("name"), str) and not keep_name:
            meta["name"] = self.name(meta["name"])
        rename(meta, "namespace", self.name)
        rename(meta, "uid", self.name)  # a uid also appears in logs and events: it would link back
        for field_name in ("labels", "annotations"):
            if isinstance(meta.get(field_name), dict):
                meta[field_name] = self._labels(meta[field_name])
        for ref in dicts(meta.get("ownerReferences")):
            rename(ref, "name", self.name)
            rename(ref, "uid", self.name)

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
        for req in dicts(requirements):
            key = str(req.get("key") or "")
            if isinstance(req.get("values"), list):
                req["values"] = [self.value(key, v) if isinstance(v, str) else v for v in req["values"]]

    def node_selector_term(self, term: Any) -> None:
        if not isinstance(term, dict):
            return
        self._requirements(term.get("matchExpressions"))
        for req in dicts(term.get("matchFields")):  # the only field is metadata.name
            if isinstance(req.get("values"), list):
                req["values"] = [self.name(v) if isinstance(v, str) else v for v in req["values"]]

    def node_selector(self, selector: Any) -> None:
        """A v1.NodeSelector (``nodeSelectorTerms``), in place."""
        if isinstance(selector, dict):
            for term in dicts(selector.get("nodeSelectorTerms")):
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
            for key in ("podIP", "podIPs", "hostIP", "hostIPs", "message"):
                status.pop(key, None)
            for claim_status in dicts(status.get("resourceClaimStatuses")):  # a template's claim
                rename(claim_status, "resourceClaimName", self.name)
            rename(status, "nominatedNodeName", self.name)
            self.conditions(status)
            for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
                if isinstance(status.get(key), list):
                    status[key] = [_only(s, CONTAINER_STATUS_FIELDS) for s in dicts(status[key])]

    def pod_spec(self, spec: dict[str, Any]) -> None:
        """A v1.PodSpec (of a pod or a pod template), in place."""
        for key in ("hostname", "subdomain", "hostAliases", "dnsConfig"):
            spec.pop(key, None)
        for key in ("nodeName", "priorityClassName", "serviceAccountName", "serviceAccount"):
            rename(spec, key, self.name)
        if isinstance(spec.get("nodeSelector"), dict):
            spec["nodeSelector"] = self._labels(spec["nodeSelector"])
        for ref in dicts(spec.get("imagePullSecrets")):
            rename(ref, "name", self.name)
        for claim in dicts(spec.get("resourceClaims")):
            rename(claim, "resourceClaimName", self.name)
            rename(claim, "resourceClaimTemplateName", self.name)
        affinity = spec.get("affinity")
        if isinstance(affinity, dict):
            node_affinity = affinity.get("nodeAffinity")
            if isinstance(node_affinity, dict):
                self.node_selector(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
                for pref in dicts(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")):
                    self.node_selector_term(pref.get("preference"))
            for kind in ("podAffinity", "podAntiAffinity"):
                terms = affinity.get(kind)
                if not isinstance(terms, dict):
                    continue
                for term in dicts(terms.get("requiredDuringSchedulingIgnoredDuringExecution")):
                    self._affinity_term(term)
                for pref in dicts(terms.get("preferredDuringSchedulingIgnoredDuringExecution")):
                    self._affinity_term(pref.get("podAffinityTerm"))
        for constraint in dicts(spec.get("topologySpreadConstraints")):
            self.label_selector(constraint.get("labelSelector"))
        self._tolerations_or_taints(spec.get("tolerations"))
        for key in ("containers", "initContainers", "ephemeralContainers"):
            if isinstance(spec.get(key), list):
                spec[key] = [self._container(c) for c in dicts(spec[key])]
        for volume in dicts(spec.get("volumes")):
            for source_name, source in list(volume.items()):
                if source_name == "ephemeral" and isinstance(source, dict):
                    template = source.get("volumeClaimTemplate")
                    if isinstance(template, dict):
                        if isinstance(template.get("metadata"), dict):
                            self.object_metadata(template["metadata"])
                        if isinstance(template.get("spec"), dict):
                            volumes.pvc_spec(self, template["spec"])
                elif source_name == "image" and isinstance(source, dict):  # an OCI image volume
                    rename(source, "reference", self.image)
                elif source_name != "name" and isinstance(source, dict):
                    volumes.volume_source(self, source)

    def _container(self, container: dict[str, Any]) -> dict[str, Any]:
        kept = _only(container, CONTAINER_FIELDS)
        rename(kept, "image", self.image)
        return kept

    def _tolerations_or_taints(self, items: Any) -> None:
        for item in dicts(items):
            if isinstance(item.get("value"), str):
                item["value"] = self.value(str(item.get("key") or ""), item["value"])

    def conditions(self, status: dict[str, Any]) -> None:
        for condition in dicts(status.get("conditions")):
            condition.pop("message", None)

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
            self.conditions(status)
            info = status.get("nodeInfo")
            if isinstance(info, dict):
                for key in ("machineID", "systemUUID", "bootID"):
                    info.pop(key, None)
            for image in dicts(status.get("images")):
                if isinstance(image.get("names"), list):
                    image["names"] = [self.image(n) if isinstance(n, str) else n for n in image["names"]]

    # -- storage -----------------------------------------------------------------------------------

    # -- dynamic resources -------------------------------------------------------------------------
    # Device names, drivers, attributes and capacities are kept (CEL selectors compare them);
    # pools are hashed as names (a node-local pool is named after its node).

    # -- the rest ----------------------------------------------------------------------------------

    def _pdb(self, pdb: dict[str, Any]) -> None:
        if isinstance(pdb.get("spec"), dict):
            self.label_selector(pdb["spec"].get("selector"))
        status = pdb.get("status")
        if isinstance(status, dict):
            self.conditions(status)
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
            rename(spec, "serviceName", self.name)
            for claim in dicts(spec.get("volumeClaimTemplates")):
                if isinstance(claim.get("metadata"), dict):
                    self.object_metadata(claim["metadata"])
                if isinstance(claim.get("spec"), dict):
                    volumes.pvc_spec(self, claim["spec"])
                claim.pop("status", None)

    def _template(self, template: Any) -> None:
        if isinstance(template, dict):
            if isinstance(template.get("metadata"), dict):
                self.object_metadata(template["metadata"])
            if isinstance(template.get("spec"), dict):
                self.pod_spec(template["spec"])


def _ephemeral_claim(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pod name, volume name) of a claim a pod owns and that is named ``<pod>-<volume>``."""
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    for ref in dicts(meta.get("ownerReferences")):
        owner = ref.get("name")
        if ref.get("kind") == "Pod" and isinstance(owner, str) and name.startswith(owner + "-"):
            volume = name[len(owner) + 1 :]
            if volume:
                return owner, volume
    return None




def _only(obj: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {k: obj[k] for k in fields if k in obj}
