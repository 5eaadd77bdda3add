"""The extender's own view of the cluster (nodeCacheCapable: true, exact pod counts, bind).

Nodes and bound pods are kept in a SchedulerCache by the shared list+watch informers
(kubesched.kube), pending pods in a map of their own (``handle.pending_pods``), and the objects the
profile's plugins declare (e.g. PodGroups for Coscheduling) for ``handle.objects(kind)``; binds go
through ``pods/binding``.

One pod informer, as kube-scheduler has (pkg/scheduler/scheduler.go ``newPodInformer``: the pods
not Succeeded or Failed), routed by ``spec.nodeName``: a bind is one update that moves the pod from
the pending map to the cache. Two informers split by ``spec.nodeName`` cost each pod two more watch
events (its delete from the pending one, its add to the bound one), decoded by the extender and
encoded by the apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from kubesched.backend.cache import SchedulerCache
from kubesched.framework.objects import ObjectKind
from kubesched.framework.types import ActionType
from kubesched.kube.api import ApiClient, ApiError, load_connection
from kubesched.kube.informer import UNFINISHED_PODS, Handlers, Informer
from kubesched.kube.objects import ObjectInformers
from kubesched.snapshot.pod import PodInfo, raw_pod_uid

log = logging.getLogger("kubesched.extender")

#: What a pod's write changes besides what it was for: TypeMeta (a watch sends it, kube-scheduler's
#: extender requests do not), the apiserver's bookkeeping, and ``generation``, which follows spec
#: changes (the spec is compared itself).
_NOT_READ = frozenset(("apiVersion", "kind", "status"))
_VOLATILE_METADATA = frozenset(("resourceVersion", "managedFields", "generation"))


def status_update(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether pod ``new`` differs from ``old`` in its status and bookkeeping alone: not in the
    spec (``nodeName`` included), labels, annotations, ``deletionTimestamp`` (a terminating pod
    leaves PodTopologySpread's counts) or any other metadata or field."""
    if old.get("spec") != new.get("spec"):
        return False
    keys = (old.keys() | new.keys()) - _NOT_READ
    if any(old.get(k) != new.get(k) for k in keys - {"spec", "metadata"}):
        return False
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return all(om.get(k) == nm.get(k) for k in (om.keys() | nm.keys()) - _VOLATILE_METADATA)


def _bound(raw: dict[str, Any]) -> bool:
    """Whether the pod object names a node (bound, or finished there)."""
    return bool((raw.get("spec") or {}).get("nodeName"))


class ExtenderCluster:
    def __init__(self, api: ApiClient, object_kinds: Sequence[ObjectKind] = ()) -> None:
        self.api = api
        #: Informer events that may change what plugins read, and pending-pod events (ClusterView).
        self.changes = 0
        self.pending_changes = 0
        self._objects = ObjectInformers(api, object_kinds, on_change=self._object_changed)
        self._cache = SchedulerCache()
        self.nodes = Informer(
            api,
            "/api/v1/nodes",
            Handlers(self._node_upsert, lambda _old, new: self._node_upsert(new), self._node_delete),
            name="nodes",
        )
        self.pods = Informer(
            api,
            "/api/v1/pods",
            Handlers(self._pod_upsert, lambda _old, new: self._pod_upsert(new), self._pod_delete),
            name="pods",
            params={"fieldSelector": UNFINISHED_PODS},
        )
        #: Pods not yet bound: what ``handle.pending_pods()`` answers, so a plugin that counts
        #: pending pods (Coscheduling's gang members) sees them here too.
        self._pending: dict[str, PodInfo] = {}
        #: The same pods by priority, each in the order the informer first saw them (next_pending).
        self._pending_by_priority: dict[int, dict[str, PodInfo]] = {}
        self.binds = 0

    @staticmethod
    async def connect(
        kubeconfig: str | None, object_kinds: Sequence[ObjectKind] = (), qps: float = 50.0, burst: int = 100
    ) -> ExtenderCluster:
        conn = await load_connection(kubeconfig)
        return ExtenderCluster(ApiClient(conn, qps, burst, user_agent="kubesched-extender"), object_kinds)

    @property
    def cache(self) -> SchedulerCache:
        return self._cache

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Declared objects of ``kind`` (what ``handle.objects(kind)`` answers in the extender)."""
        return self._objects.objects(kind)

    def pending_pods(self) -> Iterator[PodInfo]:
        return iter(list(self._pending.values()))

    def pending_pod(self, uid: str) -> PodInfo | None:
        return self._pending.get(uid)

    def next_pending(self, skip: Container[str], limit: int = 64) -> PodInfo | None:
        """The pending pod kube-scheduler most likely takes next: the highest priority, then the
        first the watch showed (its queue sorts by priority, then by when the pod was added:
        pkg/scheduler/framework/plugins/queuesort/priority_sort.go), among the first ``limit``
        of those not in ``skip`` (pods the extender already answered for). A guess: only what
        the extender computes ahead depends on it, never an answer."""
        if not self._pending_by_priority:
            return None
        bucket = self._pending_by_priority[max(self._pending_by_priority)]
        for i, (uid, pod) in enumerate(bucket.items()):
            if i == limit:
                break
            if uid not in skip:
                return pod
        return None

    @property
    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    async def start(self, sync_timeout: float = 60.0) -> None:
        self.nodes.start()
        self.pods.start()
        await self._objects.start()
        try:
            await asyncio.wait_for(
                asyncio.gather(self.nodes.synced.wait(), self.pods.synced.wait()),
                sync_timeout,
            )
        except TimeoutError:
            log.warning("extender: node/pod cache not synced after %.0fs; still trying", sync_timeout)
        else:
            log.info(
                "extender: cache synced: %d nodes, %d bound pods",
                len(self._cache.table),
                sum(len(self._cache.table.pods[r]) for r in self._cache.table.alive_rows()),
            )

    async def stop(self) -> None:
        for inf in (self.nodes, self.pods):
            with contextlib.suppress(Exception):
                await inf.stop()
        await self._objects.stop()
        await self.api.close()

    async def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None = None
    ) -> None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:  # copied onto the pod by the apiserver (framework/handle.py add_binding_annotations)
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.api.request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding", body)
        except ApiError as e:
            raise RuntimeError(str(e)) from None
        self.binds += 1

    # -- informer handlers -------------------------------------------------------------------------
    def _object_changed(self, _kind: ObjectKind, _action: ActionType) -> None:
        self.changes += 1

    def _node_upsert(self, raw: dict[str, Any]) -> None:
        self.changes += 1
        self._cache.add_or_update_node(raw)

    def _node_delete(self, raw: dict[str, Any]) -> None:
        self.changes += 1
        self._cache.remove_node(str((raw.get("metadata") or {}).get("name", "")))

    def _pod_upsert(self, raw: dict[str, Any]) -> None:
        if not _bound(raw):
            self._pending_upsert(raw)
            return
        uid = raw_pod_uid(raw)
        if uid in self._pending:  # bound: the one update that moves it from pending to the cache
            self.pending_changes += 1
            self._forget_pending(uid)
        self._bound_upsert(raw)

    def _pod_delete(self, raw: dict[str, Any]) -> None:
        uid, bound = raw_pod_uid(raw), _bound(raw)
        if uid in self._pending or not bound:
            self.pending_changes += 1
            self._forget_pending(uid)
        if bound:
            self.changes += 1
            self._cache.remove_pod(uid)

    def _bound_upsert(self, raw: dict[str, Any]) -> None:
        # A bound pod's status updates keep its parsed fields (no re-parse); no plugin reads a
        # bound pod's status (a terminal phase removes the pod, which the table's generation shows).
        previous = self._cache.table.pod(raw_pod_uid(raw))
        if previous is None or not status_update(previous.raw, raw):
            self.changes += 1
        self._cache.add_or_update_pod(PodInfo.from_raw(raw, previous))

    def _pending_upsert(self, raw: dict[str, Any]) -> None:
        self.pending_changes += 1
        try:
            pod = PodInfo.from_raw(raw, self._pending.get(raw_pod_uid(raw)))
        except Exception as e:  # a pod the scheduler would reject anyway; never stop the informer
            log.warning("extender: skipping pending pod %s: %s", raw_pod_uid(raw), e)
            return
        if pod.terminal or pod.node_name:
            self._forget_pending(pod.uid)
        else:
            old = self._pending.get(pod.uid)
            if old is not None and old.priority != pod.priority:
                self._forget_pending(pod.uid)
            self._pending[pod.uid] = pod
            self._pending_by_priority.setdefault(pod.priority, {})[pod.uid] = pod

    def _forget_pending(self, uid: str) -> None:
        pod = self._pending.pop(uid, None)
        if pod is not None:
            bucket = self._pending_by_priority[pod.priority]
            del bucket[uid]
            if not bucket:
                del self._pending_by_priority[pod.priority]
