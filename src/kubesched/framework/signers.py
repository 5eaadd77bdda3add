"""Pod signatures for OpportunisticBatching: the parts of a pod that plugins' verdicts and scores
depend on, so two pods with equal signatures get the same feasibility and scores on the same nodes.

Port of staging/src/k8s.io/kube-scheduler/framework/signers.go (v1.37): the signer names (the keys
of the signature object) and the common signers, over the pod's API object. Lists are sorted where
upstream sorts them, so the order in which a pod lists its tolerations, ports or terms does not
split pods that are scheduled alike. Values are plain JSON values; the framework serialises the
whole signature with sorted keys (framework/batch.py ``sign_pod``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from kubesched.snapshot.pod import PodInfo

__all__ = [
    "DYNAMIC_RESOURCES",
    "FEATURES",
    "HOST_PORTS",
    "IMAGE_NAMES",
    "LABELS",
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_SELECTOR",
    "RESOURCES",
    "SCHEDULER_NAME",
    "TOLERATIONS",
    "VOLUMES",
    "Fragments",
    "canonical_json",
    "host_ports_signer",
    "node_affinity_signer",
    "tolerations_signer",
    "volumes_signer",
]

DYNAMIC_RESOURCES = "v1.Pod.Spec.DynamicResources"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys: equal values give equal strings."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _containers(pod: PodInfo) -> list[dict[str, Any]]:
    spec = pod.spec
    return [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]


def host_ports_signer(pod: PodInfo) -> list[int]:
    """HostPortsSigner: the distinct non-zero host ports of every container, sorted."""
    return sorted({int(p.get("hostPort") or 0) for c in _containers(pod) for p in c.get("ports") or ()} - {0})


def _requirements(reqs: list[dict[str, Any]] | None) -> list[str]:
    """NodeSelectorRequirementsSigner: each requirement with its values sorted, the list sorted."""
    return sorted(canonical_json({**r, "values": sorted(r.get("values") or ())}) for r in reqs or ())


def _term(term: dict[str, Any]) -> dict[str, list[str]]:
    """NodeSelectorTermSigner."""
    return {"MatchExpressions": _requirements(term.get("matchExpressions")),
            "MatchFields": _requirements(term.get("matchFields"))}


def node_affinity_signer(pod: PodInfo) -> dict[str, list[str]] | None:
    """NodeAffinitySigner: the required terms and the preferred (weight, term) pairs, each list
    sorted; None without node affinity."""
    node_affinity = pod.affinity.get("nodeAffinity")
    if node_affinity is None:
        return None
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    return {
        "Required": sorted(canonical_json(_term(t or {})) for t in required or ()),
        "Preferred": sorted(
            canonical_json({"Weight": int(p.get("weight") or 0), "Preference": _term(p.get("preference") or {})})
            for p in preferred
        ),
    }


def tolerations_signer(pod: PodInfo) -> list[dict[str, Any]]:
    """TolerationsSigner: the tolerations sorted by (key, value) (a stable sort, as sort.Slice on
    equal keys keeps no promise either)."""
    return sorted(pod.tolerations, key=lambda t: (str(t.get("key") or ""), str(t.get("value") or "")))


def volumes_signer(pod: PodInfo) -> list[str]:
    """VolumesSigner: the sources of the pod's volumes but its ConfigMaps and Secrets (they do not
    change scheduling, and are specific to each pod), sorted."""
    out = []
    for vol in pod.spec.get("volumes") or ():
        source = {k: v for k, v in vol.items() if k != "name"}
        if "configMap" in source or "secret" in source:
            continue
        out.append(canonical_json(source))
    return sorted(out)

#: What ``Plugin.sign_pod`` returns for a signable pod: (signer name, JSON value) pairs.
Fragments = Sequence[tuple[str, Any]]
