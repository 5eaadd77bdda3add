"""The live ClusterClient: bind through ``pods/binding``, as upstream's DefaultBinder does, and
evict preemption victims as upstream's preemption executor does."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kubesched.api.timestamps import rfc3339
from kubesched.framework.handle import BindConflictError, PodGoneError, Preemptor
from kubesched.framework.objects import ObjectKind, object_key
from kubesched.kube.api import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiClient, ApiError
from kubesched.snapshot.pod import PodInfo


class LiveClusterClient:
    """Implements :class:`kubesched.framework.handle.ClusterClient` against the apiserver.

    Binds are independent coroutines: the core spawns one task per binding cycle, so the next pods
    are scheduled while binds are in flight (bounded only by the client's QPS limiter).
    """

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.bound = 0
        self.conflicts = 0
        self.gone = 0
        self.evicted = 0

    async def bind(self, pod: PodInfo, node_name: str, annotations: Mapping[str, str] | None = None) -> None:
        metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if annotations:  # copied onto the pod by the apiserver (framework/handle.py add_binding_annotations)
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}/binding"
        try:
            await self.api.request("POST", path, body)
        except ApiError as e:
            if e.status == 409:
                # Already bound (by us before a restart, or by someone else), or the name now
                # belongs to a different pod (uid precondition): the informer has the truth.
                self.conflicts += 1
                raise BindConflictError(str(e)) from None
            if e.status == 404:
                self.gone += 1
                raise PodGoneError(str(e)) from None
            raise
        self.bound += 1

    async def annotate_pod(self, pod: PodInfo, annotations: Mapping[str, str]) -> None:
        """A JSON merge patch of ``metadata.annotations`` (other annotations kept). The patch
        carries the pod's uid, so a newer pod of the same name is never annotated (the apiserver
        refuses the uid change); a pod that is gone raises PodGoneError."""
        path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}"
        patch = {"metadata": {"uid": pod.uid, "annotations": dict(annotations)}}
        try:
            await self.api.request("PATCH", path, patch, content_type=MERGE_PATCH)
        except ApiError as e:
            if e.status == 404:
                raise PodGoneError(str(e)) from None
            raise

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT a declared object (framework/objects.py ObjectWriter), e.g. VolumeBinding's PV
        claimRef and PVC selected-node updates; its resourceVersion makes a stale write a 409."""
        path = kind.object_path(object_key(obj, kind.namespaced))
        stored = await self.api.request("PUT", path, obj)
        return stored if isinstance(stored, dict) else obj

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT a declared object's status subresource (framework/objects.py StatusWriter), e.g.
        DynamicResources' ResourceClaim allocation; its resourceVersion makes a stale write a 409."""
        path = kind.object_path(object_key(obj, kind.namespaced), "status")
        stored = await self.api.request("PUT", path, obj)
        return stored if isinstance(stored, dict) else obj

    async def create_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """POST a declared object (framework/objects.py ObjectCreator), e.g. DynamicResources' claim
        for extended resources backed by DRA; ``generateName`` names it."""
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        stored = await self.api.request("POST", kind.collection_path_in(namespace), obj)
        return stored if isinstance(stored, dict) else obj

    async def delete_object(self, kind: ObjectKind, key: str) -> None:
        """DELETE a declared object by key; a 404 (already gone) is not an error."""
        try:
            await self.api.request("DELETE", kind.object_path(key))
        except ApiError as e:
            if e.status != 404:
                raise

    async def patch_pod_status(self, pod: PodInfo, status: Mapping[str, Any]) -> None:
        """A JSON merge patch of ``pods/status`` (framework/objects.py PodStatusPatcher), with the
        pod's uid, so a newer pod of the same name is never patched."""
        path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}/status"
        try:
            await self.api.request("PATCH", path, {"metadata": {"uid": pod.uid}, "status": dict(status)},
                                   content_type=MERGE_PATCH)
        except ApiError as e:
            if e.status == 404:
                raise PodGoneError(str(e)) from None
            raise

    async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None:
        """Preempt ``pod`` as upstream's executor does (framework/preemption/executor.go): the
        ``DisruptionTarget`` condition on its status, then a graceful delete with a UID
        precondition (never a newer pod of the same name). A pod already gone is done."""
        base = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}"
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": preemptor.disruption_message,
            "lastTransitionTime": rfc3339(time.time()),
        }
        try:
            await self.api.request("PATCH", f"{base}/status", {"status": {"conditions": [condition]}},
                                   content_type=STRATEGIC_MERGE_PATCH)
        except ApiError as e:
            if e.status == 404:  # gone: nothing to evict
                return
            raise  # e.g. a 409 after the apiserver's patch retries: the eviction failed
        try:
            await self.api.request("DELETE", base, {"apiVersion": "v1", "kind": "DeleteOptions",
                                                    "preconditions": {"uid": pod.uid}})
        except ApiError as e:
            if e.status in (404, 409):  # gone, or the name is another pod now: nothing to evict
                return
            raise
        self.evicted += 1
