"""Extended resources backed by DRA: the special ResourceClaim kube-scheduler allocates for them.

Port of pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go (v1.37.1,
DRAExtendedResource, GA and on). A pod asking for an extended resource that a DeviceClass maps
(``spec.extendedResourceName``, or ``deviceclass.resource.kubernetes.io/<class>``) gets one claim
for all such resources:

* PreFilter (``pre_filter_claim``): the claim an earlier attempt created (annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"``, controlled by the pod), else an
  in-memory claim named ``<extended-resources>`` without requests;
* Filter (``node_claim``): on a node whose allocatable lacks the resource (0), its requests are
  what the containers ask of it (``container-<i>-request-<j>``, ExactCount of the class); a node
  offering it through a device plugin leaves it to NodeResourcesFit;
* PreBind creates the claim (``generateName: <pod>-extended-resources-``, owned by the pod),
  writes its allocation and reservation, and sets the pod's ``status.extendedResourceClaimStatus``
  (the request of each container and resource);
* Unreserve and PostFilter delete a claim an attempt created.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api.quantity import QuantityError, parse_quantity
from kubesched.plugins.helpers.device_classes import is_dra_extended_resource_name
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo

#: specialClaimInMemName: not a valid object name, so no real claim has it.
SPECIAL_CLAIM_NAME = "<extended-resources>"
#: resourceapi.ExtendedResourceClaimAnnotation
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def mapped_resources(pod: PodInfo, resolver: Mapping[str, dict[str, Any]]) -> dict[str, int]:
    """hasDeviceClassMappedExtendedResource and podScalarResources: the pod's non-zero scalar
    requests when at least one of them is backed by a DeviceClass (else nothing)."""
    scalar = pod.requests.scalar
    if not any(amount and is_dra_extended_resource_name(name) and name in resolver
               for name, amount in scalar.items()):
        return {}
    return dict(scalar)


def find_extended_claim(pod: PodInfo, claims: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """findExtendedResourceClaim: the annotated claim the pod controls (name and uid)."""
    for claim in claims.values():
        meta = claim.get("metadata") or {}
        if (meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or []:
            if ref.get("name") == pod.name and ref.get("controller") is True and ref.get("uid") == pod.uid:
                return claim
    return None


def in_memory_claim(pod: PodInfo) -> dict[str, Any]:
    """The claim PreBind creates, before it has a name: upstream gives it a random temporary uid;
    kubesched derives one from the pod's (only the in-flight bookkeeping reads it)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": SPECIAL_CLAIM_NAME,
            "uid": f"{SPECIAL_CLAIM_NAME}/{pod.uid}",
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                 "controller": True}],
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
        },
        "spec": {},
    }


def is_special(claim: Mapping[str, Any]) -> bool:
    return (claim.get("metadata") or {}).get("name") == SPECIAL_CLAIM_NAME


def has_requests(claim: Mapping[str, Any]) -> bool:
    return bool(((claim.get("spec") or {}).get("devices") or {}).get("requests"))


@dataclass(frozen=True, slots=True)
class NodeClaim:
    """filterExtendedResources' answer for one node: the claim with this node's requests and the
    container mappings (None: nothing to allocate by DRA here), or the reason the node is refused."""

    claim: dict[str, Any] | None = None
    mappings: tuple[dict[str, str], ...] = ()
    refusal: str = ""
    #: Which resources the node provides by DRA (the claims of nodes with equal keys ask alike).
    requests_key: tuple[tuple[str, int], ...] = ()


def node_claim(claim: dict[str, Any], pod: PodInfo, resources: Mapping[str, int],
               resolver: Mapping[str, dict[str, Any]], node: NodeInfo, has_user_claims: bool,
               memo: dict[Any, Any] | None = None) -> NodeClaim:
    """filterExtendedResources. A claim from an earlier attempt (it has requests) refuses every node,
    so that PostFilter deletes it and the next attempt starts anew. ``memo`` (one per pod's
    attempt) keeps the answer per set of resources the node must provide by DRA: nodes alike
    ask for the same requests."""
    if has_requests(claim):
        return NodeClaim(refusal="cannot schedule extended resource claim")
    allocatable = (node.node.get("status") or {}).get("allocatable") or {}
    extended: dict[str, int] = {}
    for name, amount in resources.items():
        if not is_dra_extended_resource_name(name) or amount == 0:
            continue
        offered = allocatable.get(name)
        backed = name in resolver
        if backed and node.allocatable(name) == 0:
            extended[name] = amount  # the node must provide it through DRA
        elif offered is None:
            # neither a device plugin's nor backed by DRA: NodeResourcesFit refuses the node too
            return NodeClaim(refusal="cannot fit resource")
    if not extended and not has_user_claims:
        return NodeClaim()
    if (claim.get("status") or {}).get("allocation") is not None:
        return NodeClaim()
    key = tuple(sorted(extended.items()))
    found: NodeClaim | None = memo.get(key) if memo is not None else None
    if found is None:
        requests, mappings = requests_and_mappings(pod, extended, resolver)
        found = NodeClaim({**claim, "spec": {"devices": {"requests": copy.deepcopy(requests)}}}, tuple(mappings),
                          requests_key=key)
        if memo is not None:
            # Nodes asking alike share one answer: nothing mutates a node's claim (Reserve and
            # PreBind build new dicts from it), and only one node of an attempt is reserved.
            memo[key] = found
    return found


def _container_count(container: Mapping[str, Any], resource: str) -> int:
    """The container's request of the resource as an integer (0: none, or not an integer)."""
    raw = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if raw is None:
        return 0
    try:
        q = parse_quantity(str(raw), from_json=True)
    except (QuantityError, ValueError):
        return 0
    return int(q) if q.denominator == 1 else 0


def _request_and_mappings(index: int, container: Mapping[str, Any], resource: str, class_name: str,
                          reusable: Sequence[dict[str, Any] | None]) -> tuple[dict[str, Any] | None,
                                                                             list[dict[str, str]]]:
    """createResourceRequestAndMappings: the container's own request of the resource (None when
    later long-lived containers' requests, which a non-sidecar init container may reuse, cover it)."""
    count = _container_count(container, resource)
    if count == 0:
        return None, []
    name = str(container.get("name", ""))
    mappings: list[dict[str, str]] = []
    covered = 0
    for r in reusable:
        if r is None:
            continue
        covered += int(r["exactly"]["count"])
        mappings.append({"containerName": name, "resourceName": resource, "requestName": str(r["name"])})
        if covered >= count:
            return None, mappings
    # The resource's index among the container's requests, sorted by name (a Go map's order is not).
    keys = sorted((container.get("resources") or {}).get("requests") or {})
    request_name = f"container-{index}-request-{keys.index(resource)}"
    request = {"name": request_name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                                 "count": count - covered}}
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return request, mappings


def requests_and_mappings(pod: PodInfo, extended: Mapping[str, int], resolver: Mapping[str, dict[str, Any]]
                          ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """createRequestsAndMappings: per resource (sorted), one request per long-lived container
    (sidecars and regular containers) and one for the largest non-sidecar init container, which
    may reuse later containers' devices; requests sorted by name."""
    init = list(pod.spec.get("initContainers") or [])
    containers = [*init, *(pod.spec.get("containers") or [])]
    short_lived = [i for i, c in enumerate(containers) if i < len(init) and c.get("restartPolicy") != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(extended):
        cls = resolver.get(resource)
        if cls is None:
            continue
        class_name = str((cls.get("metadata") or {}).get("name", ""))
        long_requests: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            request, found = _request_and_mappings(i, containers[i], resource, class_name, ())
            long_requests[i] = request
            long_mappings += found
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            request, found = _request_and_mappings(i, containers[i], resource, class_name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings += found
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            short_mappings = [{**m, "requestName": largest["name"]} if m["requestName"] in short_names else m
                              for m in short_mappings]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings
