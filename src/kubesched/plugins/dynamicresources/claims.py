"""The DRA object kinds and a pod's ResourceClaims.

Ports k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go (v0.37.1: ``Name``,
``IsForPod``, ``IsReservedForPod``) and the plugin's ``foreachPodResourceClaim``
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, v1.37.1), messages word for word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.plugins.dynamicresources.capacity import AllocatedState, CapacityError
from kubesched.plugins.dynamicresources.claim_controller import stamp_claims
from kubesched.snapshot.pod import PodInfo

GROUP = "resource.k8s.io"


def _check_metadata(obj: dict[str, Any]) -> None:
    if not isinstance(obj.get("metadata"), dict) or not (obj["metadata"].get("name")):
        raise ValueError("metadata.name: required")


def _check_claim(obj: dict[str, Any]) -> None:
    _check_metadata(obj)
    devices = (obj.get("spec") or {}).get("devices") or {}
    if not isinstance(devices, dict) or not isinstance(devices.get("requests") or [], list):
        raise ValueError("spec.devices.requests: must be a list")


def _check_slice(obj: dict[str, Any]) -> None:
    _check_metadata(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not spec.get("driver"):
        raise ValueError("spec.driver: required")
    if not isinstance(spec.get("pool"), dict) or not spec["pool"].get("name"):
        raise ValueError("spec.pool.name: required")
    if not isinstance(spec.get("devices") or [], list):
        raise ValueError("spec.devices: must be a list")


#: PreBind updates a claim (its finalizer) and its status (allocation, reservedFor); v1.37's
#: apiserver lets a status write change allocation or reservedFor only with ``update`` on
#: ``resourceclaims/binding`` (DRAResourceClaimGranularStatusAuthorization, on by default; upstream's
#: system:kube-scheduler role has it: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
#: PreBind creates the claim for DRA-backed extended resources; Unreserve and PostFilter delete it.
RESOURCE_CLAIM = ObjectKind("ResourceClaim", GROUP, "v1", "resourceclaims", writes_status=True,
                            writes=("create", "delete", "update"), status_writes=("update",),
                            subresource_writes=(("binding", ("update",)),), validate=_check_claim,
                            pod_controller=stamp_claims)
RESOURCE_CLAIM_TEMPLATE = ObjectKind("ResourceClaimTemplate", GROUP, "v1", "resourceclaimtemplates",
                                     validate=_check_metadata)
RESOURCE_SLICE = ObjectKind("ResourceSlice", GROUP, "v1", "resourceslices", namespaced=False, validate=_check_slice)
DEVICE_CLASS = ObjectKind("DeviceClass", GROUP, "v1", "deviceclasses", namespaced=False, validate=_check_metadata)
#: Only read: its taints are added to the devices it selects (taints.py). v1, as upstream's
#: scheduler watches it (pkg/scheduler/scheduler.go: ``Resource().V1().DeviceTaintRules()`` when
#: DRADeviceTaintRules is on, GA and on by default in v1.37, pkg/features/kube_features.go); v1 is
#: served by default (v1alpha3, off by default, would be a 404 on every informer retry).
DEVICE_TAINT_RULE = ObjectKind("DeviceTaintRule", GROUP, "v1", "devicetaintrules",
                               namespaced=False, validate=_check_metadata)

#: resourceapi.Finalizer
FINALIZER = "resource.kubernetes.io/delete-protection"


class ClaimError(Exception):
    """A claim of the pod is missing, being deleted or not the pod's (upstream's error text)."""


def pod_claims(pod: PodInfo, lookup: Callable[[str], dict[str, Any] | None]) -> list[dict[str, Any]]:
    """foreachPodResourceClaim: the pod's claims in ``spec.resourceClaims`` order (a template whose
    claim was deliberately not created is skipped). Raises ClaimError with upstream's message."""
    claims: list[dict[str, Any]] = []
    statuses = (pod.raw.get("status") or {}).get("resourceClaimStatuses") or []
    for pod_claim in pod.spec.get("resourceClaims") or []:
        pod_claim_name = str(pod_claim.get("name", ""))
        must_check_owner = False
        if pod_claim.get("resourceClaimName"):
            name: str | None = str(pod_claim["resourceClaimName"])
        elif pod_claim.get("resourceClaimTemplateName"):
            found = [s for s in statuses if s.get("name") == pod_claim_name]
            if not found:
                raise ClaimError(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
            name = found[0].get("resourceClaimName")
            must_check_owner = True
        else:
            raise ClaimError(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pod_claim_name}": '
                             "none of the supported fields are set")
        if not name:
            continue
        claim = lookup(f"{pod.namespace}/{name}")
        if claim is None:
            # assumecache.NotFoundError of scheduler.go's "ResourceClaim" cache
            raise ClaimError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        meta = claim.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise ClaimError(f'resourceclaim "{name}" is being deleted')
        if must_check_owner and not _controlled_by(meta, pod.uid):
            raise ClaimError(f"ResourceClaim {pod.namespace}/{name} was not created for Pod "
                             f"{pod.namespace}/{pod.name} (Pod is not owner)")
        claims.append(claim)
    return claims


def _controlled_by(meta: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("controller") and ref.get("uid") == uid for ref in meta.get("ownerReferences") or [])


def allocation(claim: Mapping[str, Any]) -> dict[str, Any] | None:
    alloc = (claim.get("status") or {}).get("allocation")
    return alloc if isinstance(alloc, dict) else None


def is_reserved_for(claim: Mapping[str, Any], pod: PodInfo) -> bool:
    return any(r.get("uid") == pod.uid for r in (claim.get("status") or {}).get("reservedFor") or [])


def claim_key(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def claim_uid(claim: Mapping[str, Any]) -> str:
    return str((claim.get("metadata") or {}).get("uid") or claim_key(claim))


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def allocated_devices(claims: Mapping[str, Any]) -> AllocatedState:
    """What the allocations of these claims hold (GatherAllocatedState): devices given whole but
    those with admin access, shared devices and the capacity their shares consume
    (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go foreachAllocatedDevice)."""
    state = AllocatedState()
    for claim in claims.values():
        alloc = allocation(claim)
        if alloc is None:
            continue
        for r in (alloc.get("devices") or {}).get("results") or []:
            try:
                state.add_result(r)
            except CapacityError:
                continue  # kube-apiserver validates consumedCapacity; a broken one counts as nothing
    return state
