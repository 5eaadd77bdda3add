"""PreBind's writes: a claim's allocation and reservation, the claim for DRA-backed extended
resources created and deleted.

Port of pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go ``bindClaim`` and
extendeddynamicresources.go ``createExtendedResourceClaimInAPI``, ``deleteClaim`` (v1.37.1), messages
word for word: the finalizer ``resource.kubernetes.io/delete-protection`` (update), then
``status.allocation`` (with ``allocationTimestamp``) and the pod in ``status.reservedFor`` (update of
the status subresource), re-reading the claim on a conflict (``retry.DefaultRetry``: five tries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubesched.api.timestamps import rfc3339
from kubesched.framework.objects import ObjectCreator, ObjectWriter, PodStatusPatcher, StatusWriter
from kubesched.plugins.dynamicresources.claims import FINALIZER, RESOURCE_CLAIM, ClaimError, allocation, claim_key
from kubesched.snapshot.pod import PodInfo

#: retry.DefaultRetry: five tries on a conflict.
CONFLICT_TRIES = 5

#: The plugin's view of a claim by key (its assumed writes first).
ClaimLookup = Callable[[str], dict[str, Any] | None]


def _error_text(e: BaseException) -> str:
    """The exception's message, or its type where it has none: a request that timed out (an
    ``asyncio.TimeoutError``, e.g. while the event loop was busy scheduling) left the pod's message
    ending in "add finalizer to claim ns/x: " with nothing after it."""
    return str(e) or type(e).__name__


class _Retry(Exception):
    def __init__(self, cause: BaseException, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


def is_conflict(e: BaseException) -> bool:
    status = getattr(e, "status", None)
    return status == 409 or "the object has been modified" in str(e)


async def bind_claim(client: Any, claim: dict[str, Any], alloc: dict[str, Any] | None, pod: PodInfo, now: float,
                     lookup: ClaimLookup) -> dict[str, Any]:
    """bindClaim's update loop: returns the claim as stored; raises ClaimError with upstream's text."""
    if not isinstance(client, StatusWriter) or not isinstance(client, ObjectWriter):
        raise ClaimError("binding claims: this shell's client cannot update ResourceClaims")
    key = claim_key(claim)
    for attempt in range(CONFLICT_TRIES):
        if attempt:
            fresh = lookup(key)
            if fresh is None:
                raise ClaimError(f"get updated claim {key} after conflict: not found")
            claim = fresh
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            raise ClaimError(f"claim {key} got deleted in the meantime")
        try:
            if alloc is not None:
                if allocation(claim) is not None:
                    raise ClaimError(f"claim {key} got allocated elsewhere in the meantime")
                finalizers = list((claim.get("metadata") or {}).get("finalizers") or [])
                if FINALIZER not in finalizers:
                    claim = {**claim, "metadata": {**(claim.get("metadata") or {}),
                                                    "finalizers": [*finalizers, FINALIZER]}}
                    try:
                        claim = await client.update_object(RESOURCE_CLAIM, claim)
                    except Exception as e:
                        raise _Retry(e, f"add finalizer to claim {key}: {_error_text(e)}") from e
            status = dict(claim.get("status") or {})
            if alloc is not None:
                status["allocation"] = alloc
            if status.get("allocation") is None:
                raise ClaimError(f"claim {key} got deallocated elsewhere in the meantime")
            if not status["allocation"].get("allocationTimestamp"):
                # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on in v1.37:
                # every claim PreBind reserves gets the timestamp, already allocated ones too.
                status["allocation"] = {**status["allocation"], "allocationTimestamp": rfc3339(now)}
            status["reservedFor"] = [*(status.get("reservedFor") or []),
                                     {"resource": "pods", "name": pod.name, "uid": pod.uid}]
            try:
                written: dict[str, Any] = await client.update_object_status(RESOURCE_CLAIM, {**claim, "status": status})
            except Exception as e:
                what = "add allocation and reservation to" if alloc is not None else "add reservation to"
                raise _Retry(e, f"{what} claim {key}: {_error_text(e)}") from e
        except _Retry as r:
            if is_conflict(r.cause) and attempt + 1 < CONFLICT_TRIES:
                continue
            raise ClaimError(r.message) from None
        return written
    raise ClaimError(f"claim {key}: too many conflicts")  # not reached: the last try raises


async def create_extended_claim(client: Any, claim: dict[str, Any]) -> dict[str, Any]:
    """createExtendedResourceClaimInAPI: the node's claim, without name, uid and status, created
    under its ``generateName``."""
    meta = {k: v for k, v in (claim.get("metadata") or {}).items() if k not in ("name", "uid", "resourceVersion")}
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": claim.get("spec") or {}}
    if not isinstance(client, ObjectCreator):
        raise ClaimError("create claim for extended resources: this shell's client cannot create ResourceClaims")
    try:
        return await client.create_object(RESOURCE_CLAIM, body)
    except Exception as e:
        raise ClaimError(f"create claim for extended resources {meta.get('namespace', '')}/"
                         f"{meta.get('generateName', '')}: {e}") from None


async def delete_claim(client: Any, claim: dict[str, Any], lookup: ClaimLookup) -> None:
    """deleteClaim: the finalizer removed first (an update, re-read on a conflict), then the delete;
    a claim already gone is done."""
    if not isinstance(client, ObjectCreator) or not isinstance(client, ObjectWriter):
        raise ClaimError("delete claim: this shell's client cannot delete ResourceClaims")
    key = claim_key(claim)
    for attempt in range(CONFLICT_TRIES):
        if attempt:
            fresh = lookup(key)
            if fresh is None:
                raise ClaimError(f"get resourceclaim {key}: not found")
            claim = fresh
        meta = claim.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER in finalizers:
            finalizers.remove(FINALIZER)
        try:
            await client.update_object(RESOURCE_CLAIM, {**claim, "metadata": {**meta, "finalizers": finalizers}})
        except Exception as e:
            if is_conflict(e) and attempt + 1 < CONFLICT_TRIES:
                continue
            if getattr(e, "status", None) == 404 or "not found" in str(e):
                return
            raise ClaimError(f"update resourceclaim {key}: {e}") from None
        break
    await client.delete_object(RESOURCE_CLAIM, key)


async def unreserve_claim(client: Any, claim: dict[str, Any], pod: PodInfo, lookup: ClaimLookup) -> None:
    """Unreserve's removal of the pod from an allocated claim's ``status.reservedFor`` (upstream: a
    strategic merge patch deleting the entry by uid; here the claim as last seen, without the entry,
    through the status subresource, re-read on a conflict). Failures are left to the next attempt,
    as upstream only logs them."""
    if not isinstance(client, StatusWriter):
        return
    key = claim_key(claim)
    for attempt in range(CONFLICT_TRIES):
        if attempt:
            fresh = lookup(key)
            if fresh is None:
                return
            claim = fresh
        status = dict(claim.get("status") or {})
        reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod.uid]
        if len(reserved) == len(status.get("reservedFor") or []):
            return
        status["reservedFor"] = reserved
        try:
            await client.update_object_status(RESOURCE_CLAIM, {**claim, "status": status})
        except Exception as e:
            if is_conflict(e):
                continue
            return
        return


async def patch_extended_status(client: Any, pod: PodInfo, claim: dict[str, Any],
                                mappings: Sequence[Mapping[str, str]]) -> None:
    """patchPodExtendedResourceClaimStatus: the pod's ``status.extendedResourceClaimStatus`` names
    the claim created for its DRA-backed extended resources and each container's request."""
    if not mappings:
        raise ClaimError(f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                         "ExtendedResourceClaimStatus")
    if not isinstance(client, PodStatusPatcher):
        raise ClaimError("update pod status: this shell's client cannot patch pods")
    name = str((claim.get("metadata") or {}).get("name", ""))
    try:
        await client.patch_pod_status(pod, {"extendedResourceClaimStatus": {
            "requestMappings": [dict(m) for m in mappings], "resourceClaimName": name}})
    except Exception as e:
        raise ClaimError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {e}") from None
