"""The ClusterClient ``kubesched run`` hands the scheduler core: binds and evictions through the
live client, counted into metrics, and no bind to a node the informer has seen deleted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.framework.handle import BindConflictError, PodGoneError, Preemptor
from kubesched.framework.objects import ObjectKind
from kubesched.live.client import LiveClusterClient
from kubesched.live.metrics import SchedulerMetrics
from kubesched.snapshot.pod import PodInfo


class NodeGoneError(RuntimeError):
    """The node a pod was assumed on was deleted before its bind was sent."""


class MeteredBindClient:
    """The ClusterClient handed to the core: counts bind results into metrics, and refuses a bind
    to a node the informer has seen deleted (the apiserver would accept it: pods/binding does not
    check the node; upstream then leaves the pod to PodGC). The pod is scheduled again instead."""

    def __init__(self, client: LiveClusterClient, metrics: SchedulerMetrics, node_exists: Callable[[str], bool]
                 ) -> None:
        self.client = client
        self.metrics = metrics
        self.node_exists = node_exists

    async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None:
        await self.client.evict(pod, preemptor)
        self.metrics.preemption_victims.inc()

    async def annotate_pod(self, pod: PodInfo, annotations: Mapping[str, str]) -> None:
        """Passed through (GpuShare's PreBind writes ``gpu-index`` on the live pod)."""
        await self.client.annotate_pod(pod, annotations)

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """ObjectWriter, passed through: without it VolumeBinding's PreBind (PV claimRef, PVC
        selected-node) would fail every pod with an unbound claim."""
        return await self.client.update_object(kind, obj)

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """StatusWriter, passed through (DynamicResources' PreBind writes claims' allocations)."""
        return await self.client.update_object_status(kind, obj)

    async def create_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """ObjectCreator, passed through (DynamicResources' claim for DRA-backed extended resources)."""
        return await self.client.create_object(kind, obj)

    async def delete_object(self, kind: ObjectKind, key: str) -> None:
        await self.client.delete_object(kind, key)

    async def patch_pod_status(self, pod: PodInfo, status: Mapping[str, Any]) -> None:
        """PodStatusPatcher, passed through (``status.extendedResourceClaimStatus``)."""
        await self.client.patch_pod_status(pod, status)

    async def bind(self, pod: PodInfo, node_name: str, annotations: Mapping[str, str] | None = None) -> None:
        if not self.node_exists(node_name):
            self.metrics.bind("node_gone")
            raise NodeGoneError(f"node {node_name} was deleted before the pod could be bound to it")
        try:
            await self.client.bind(pod, node_name, annotations)
        except BindConflictError:
            self.metrics.bind("conflict")
            raise
        except PodGoneError:
            self.metrics.bind("not_found")
            raise
        except Exception:
            self.metrics.bind("error")
            raise
        self.metrics.bind("ok")
