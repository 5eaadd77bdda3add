"""The embedded in-memory cluster: the simulator's stand-in for the apiserver.

It holds the raw objects, binds pods (the ClusterClient the DefaultBinder calls) and tells the
scheduler about every change exactly as the live informers would, so the same framework code runs
unchanged.
"""

from __future__ import annotations

from typing import Any

from kubesched.framework.handle import BindConflictError, PodGoneError
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo


class SimulatedCluster:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, PodInfo] = {}
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        self.scheduler: Scheduler | None = None
        self.binds = 0

    def attach(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """Objects of a declared kind (e.g. PodGroup), keyed namespace/name, for ``handle.objects``."""
        return self.objects.get(kind, {})

    # -- the ClusterClient the binder uses ---------------------------------------------------------
    async def bind(self, pod: PodInfo, node_name: str) -> None:
        current = self.pods.get(pod.uid)
        if current is None:
            raise PodGoneError(f"pod {pod.key} not found")
        if current.node_name:
            raise BindConflictError(f"pod {pod.key} is already assigned to node {current.node_name!r}")
        if node_name not in self.nodes:
            raise PodGoneError(f"node {node_name!r} not found")
        # The scheduler hands over its assumed copy (current + nodeName); when the stored pod has
        # not changed since, that copy is the bound pod: no second copy of the object.
        same = pod.node_name == node_name and pod.raw.get("metadata") is current.raw.get("metadata")
        bound = pod if same else current.with_node(node_name)
        self.pods[pod.uid] = bound
        self.binds += 1
        if self.scheduler is not None:
            self.scheduler.on_pod_update(bound)

    # -- cluster changes ---------------------------------------------------------------------------
    def add_node(self, raw: dict[str, Any]) -> None:
        self.nodes[raw["metadata"]["name"]] = raw
        if self.scheduler is not None:
            self.scheduler.on_node_add_or_update(raw)

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        if self.scheduler is not None:
            self.scheduler.on_node_delete(name)

    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        if self.scheduler is not None:
            self.scheduler.on_pod_add(pod)

    def delete_pod(self, uid: str) -> None:
        if self.pods.pop(uid, None) is not None and self.scheduler is not None:
            self.scheduler.on_pod_delete(uid)

    def add_object(self, kind: str, key: str, raw: dict[str, Any]) -> None:
        """Add or replace an object of a declared kind under its key (``namespace/name`` or ``name``)."""
        self.objects.setdefault(kind, {})[key] = raw
