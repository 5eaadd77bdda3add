"""ResourceClaims from ResourceClaimTemplates, as kube-controller-manager creates them.

Port of pkg/controller/resourceclaim/controller.go (Kubernetes v1.37.1, ``handleClaim`` and
``findPodResourceClaim``) for the simulator, which runs no controllers: for each
``spec.resourceClaims`` entry naming a template, a claim the pod does not have yet is created from
the template (its spec, labels and annotations, plus ``resource.kubernetes.io/pod-claim-name``,
owned by the pod as its controller) and named in the pod's ``status.resourceClaimStatuses``.

The name is upstream's ``generateName`` (``<pod>-<claim>-``, shortened proportionally past 57
characters) with a suffix of 5 characters from the apiserver's alphabet; the apiserver's is random,
this one is a hash of the pod and claim, so a replay names the same claims every time. A claim
already named in the pod's status, or already owned by the pod for that entry (a dump taken after
the controller ran), is kept; a missing template creates nothing (PreEnqueue then keeps the pod
waiting with ``ResourceClaim not created yet``, as on a cluster where the controller fails).
Not ported: PodGroup claims (DRAWorkloadResourceClaims, alpha).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.framework.objects import PodControllerResult

#: resourceapi.PodResourceClaimAnnotation
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: k8s.io/apimachinery/pkg/util/rand: the characters generated names end with.
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_MAX_BASE_LEN = 57


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """handleClaim's generateName: ``<pod>-<claim>-``, both parts shortened past 57 characters."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) > _MAX_BASE_LEN:
        base = (pod_name[:len(pod_name) * _MAX_BASE_LEN // len(base)] + "-"
                + pod_claim_name[:len(pod_claim_name) * _MAX_BASE_LEN // len(base)])
    return base


def claim_name(namespace: str, pod_name: str, pod_uid: str, pod_claim_name: str) -> str:
    """The generated name with a deterministic 5-character suffix."""
    digest = hashlib.sha256(f"{namespace}/{pod_name}/{pod_uid}/{pod_claim_name}".encode()).digest()
    return generate_name(pod_name, pod_claim_name) + "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in digest[:5])


def _owned_claim(claims: Mapping[str, dict[str, Any]], namespace: str, pod_uid: str,
                 pod_claim_name: str) -> str | None:
    """findPodResourceClaim: a claim of the namespace controlled by the pod, for this entry."""
    for claim in claims.values():
        meta = claim.get("metadata") or {}
        if (meta.get("namespace") or "default") != namespace:
            continue
        if (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION) != pod_claim_name:
            continue
        if any(ref.get("controller") and ref.get("uid") == pod_uid for ref in meta.get("ownerReferences") or []):
            return str(meta.get("name", ""))
    return None


def stamp_claims(pod: dict[str, Any], objects: Callable[[str], Mapping[str, dict[str, Any]]]) -> PodControllerResult:
    """The claims kube-controller-manager would create for ``pod`` and its new claim statuses."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    if spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return PodControllerResult()
    entries = [c for c in spec.get("resourceClaims") or [] if c.get("resourceClaimTemplateName")]
    if not entries:
        return PodControllerResult()
    namespace = str(meta.get("namespace") or "default")
    pod_name, pod_uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    statuses: list[dict[str, Any]] = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
    named = {s.get("name") for s in statuses}
    claims = objects("ResourceClaim")
    templates = objects("ResourceClaimTemplate")
    created: list[dict[str, Any]] = []
    for entry in entries:
        pod_claim_name = str(entry.get("name", ""))
        if pod_claim_name in named:
            continue
        name = _owned_claim(claims, namespace, pod_uid, pod_claim_name)
        if name is None:
            template = templates.get(f"{namespace}/{entry['resourceClaimTemplateName']}")
            if template is None:
                continue
            t_meta = (template.get("spec") or {}).get("metadata") or {}
            name = claim_name(namespace, pod_name, pod_uid, pod_claim_name)
            annotations = {**(t_meta.get("annotations") or {}), POD_CLAIM_ANNOTATION: pod_claim_name}
            claim_meta: dict[str, Any] = {
                "name": name, "generateName": generate_name(pod_name, pod_claim_name), "namespace": namespace,
                "uid": f"{pod_uid or pod_name}-{name}", "resourceVersion": "1", "annotations": annotations,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid,
                                     "controller": True}]}
            if t_meta.get("labels"):
                claim_meta["labels"] = dict(t_meta["labels"])
            created.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta,
                            "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {})})
        statuses.append({"name": pod_claim_name, "resourceClaimName": name})
        named.add(pod_claim_name)
    if len(statuses) == len((pod.get("status") or {}).get("resourceClaimStatuses") or []):
        return PodControllerResult()
    return PodControllerResult(tuple(created), {"resourceClaimStatuses": statuses})
