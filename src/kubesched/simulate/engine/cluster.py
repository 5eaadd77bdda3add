"""The embedded in-memory cluster: the simulator's stand-in for the apiserver.

It holds the raw objects, binds pods (the ClusterClient the DefaultBinder calls), evicts
preemption victims, takes plugins' object writes (VolumeBinding's PV and claim updates, answered by
the simulated PV controller of volumes.py), and tells the scheduler about every change exactly as the live informers
would, so the same framework code runs unchanged.

Eviction (``evict``, what upstream's preemption executor does through the API): the victim gets
the ``DisruptionTarget`` condition and a ``deletionTimestamp`` now, and is deleted
``terminationGracePeriodSeconds`` (default 30) later in virtual time — the runner calls
``advance(now)`` and jumps the clock to ``next_eviction()`` — so the preemptor, nominated to the
node meanwhile, binds once the victims are gone (their deletion is an AssignedPodDelete event).

Controllers: a declared kind may carry the cluster controller that makes its objects for pods
(``ObjectKind.pod_controller``, e.g. kube-controller-manager stamping ResourceClaims from
templates). The simulator runs no controllers, so ``add_pod`` runs those before the scheduler
sees the pod: their objects are stored and the pod gets the status they would write, as if the
controller had acted between the pod's creation and its first scheduling attempt.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubesched.api.timestamps import rfc3339
from kubesched.framework.handle import BindConflictError, PodGoneError, Preemptor
from kubesched.framework.objects import ObjectKind, object_key
from kubesched.framework.types import ActionType, ClusterEvent
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.volumes import VolumeController
from kubesched.snapshot.pod import PodInfo

#: k8s.io/apimachinery/pkg/util/rand: the characters generated names end with.
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
#: Upstream v1.DefaultTerminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30.0


class ClusterWatcher(Protocol):
    """Told of every change to nodes and pods after the scheduler was (a replay's metrics and
    departures, engine/timeline.py)."""

    def pod_added(self, pod: PodInfo) -> None: ...
    def pod_bound(self, pod: PodInfo) -> None: ...
    def pod_deleted(self, pod: PodInfo) -> None: ...
    def node_changed(self, raw: dict[str, Any]) -> None: ...
    def node_deleted(self, name: str) -> None: ...


class SimulatedCluster:
    def __init__(self, controlled_kinds: Sequence[ObjectKind] = ()) -> None:
        #: (kind, its pod_controller): what acts on each pod added.
        self._controllers = tuple((k, k.pod_controller) for k in controlled_kinds if k.pod_controller is not None)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, PodInfo] = {}
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        self.scheduler: Scheduler | None = None
        self.binds = 0
        #: Pending deletions of evicted pods: (virtual time due, sequence, uid).
        self._evictions: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        #: Objects created through create_object (their generated names' seed).
        self._created = itertools.count()
        self._now = 0.0
        self.evicted = 0
        #: The PV controller and provisioner (the scheduler's PreBind writes start their work).
        self.volumes = VolumeController(self.objects, self.nodes, self._object_written)
        self.watchers: list[ClusterWatcher] = []

    def attach(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """Objects of a declared kind (e.g. PodGroup), keyed namespace/name, for ``handle.objects``."""
        return self.objects.get(kind, {})

    # -- the ClusterClient the binder uses ---------------------------------------------------------
    async def bind(self, pod: PodInfo, node_name: str, annotations: Mapping[str, str] | None = None) -> None:
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
        if same and current.raw.get("status") is not bound.raw.get("status"):
            bound.raw["status"] = current.raw.get("status")  # set by patch_pod_status meanwhile
        if annotations:  # as the apiserver copies a Binding's annotations onto the pod
            meta = bound.raw.get("metadata")
            merged = {**((meta or {}).get("annotations") or {}), **annotations}
            if same and meta is not None:
                # The metadata map is the stored pod's (as annotate_pod): updated in place, the
                # assumed copy stays the bound pod and the cache confirms it without re-parsing
                # or re-accounting it (PodInfo parses no annotation).
                meta["annotations"] = merged
            else:
                bound = PodInfo.from_raw({**bound.raw, "metadata": {**(meta or {}), "annotations": merged}},
                                         previous=bound)
        self.pods[pod.uid] = bound
        self.binds += 1
        if self.scheduler is not None:
            self.scheduler.on_pod_update(bound)
        for w in self.watchers:
            w.pod_bound(bound)

    async def annotate_pod(self, pod: PodInfo, annotations: Mapping[str, str]) -> None:
        """Merge ``annotations`` into the stored pod's ``metadata.annotations``. The metadata map
        is updated in place: the scheduler's assumed copy shares it, so its bind still hands over
        the stored object (no second copy) and the bound pod carries the annotations."""
        current = self.pods.get(pod.uid)
        if current is None:
            raise PodGoneError(f"pod {pod.key} not found")
        meta = current.raw.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}

    async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None:
        """Preempt ``pod``: mark it (DisruptionTarget condition, deletionTimestamp) and delete it
        after its grace period in virtual time. A pod already gone raises PodGoneError; one already
        being deleted is left as it is."""
        current = self.pods.get(pod.uid)
        if current is None:
            raise PodGoneError(f"pod {pod.key} not found")
        if current.deleting:
            return
        grace = current.spec.get("terminationGracePeriodSeconds")
        grace_s = float(grace) if isinstance(grace, int | float) and grace >= 0 else DEFAULT_GRACE_SECONDS
        raw = dict(current.raw)
        raw["metadata"] = {**(raw.get("metadata") or {}), "deletionTimestamp": rfc3339(self._now),
                           "deletionGracePeriodSeconds": int(grace_s)}
        status = dict(raw.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": preemptor.disruption_message,
            "lastTransitionTime": rfc3339(self._now),
        })
        status["conditions"] = conditions
        raw["status"] = status
        updated = PodInfo.from_raw(raw, previous=current)
        self.pods[pod.uid] = updated
        heapq.heappush(self._evictions, (self._now + grace_s, next(self._seq), pod.uid))
        self.evicted += 1
        if self.scheduler is not None:
            self.scheduler.on_pod_update(updated)

    def next_eviction(self) -> float | None:
        """When the next evicted pod's grace period ends (None: no eviction pending)."""
        return self._evictions[0][0] if self._evictions else None

    def advance(self, now: float) -> None:
        """Virtual time is ``now``: delete the evicted pods whose grace period has ended."""
        self._now = now
        while self._evictions and self._evictions[0][0] <= now:
            _, _, uid = heapq.heappop(self._evictions)
            self.delete_pod(uid)

    # -- cluster changes ---------------------------------------------------------------------------
    def add_node(self, raw: dict[str, Any]) -> None:
        self.nodes[raw["metadata"]["name"]] = raw
        if self.scheduler is not None:
            self.scheduler.on_node_add_or_update(raw)
        for w in self.watchers:
            w.node_changed(raw)

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        if self.scheduler is not None:
            self.scheduler.on_node_delete(name)
        for w in self.watchers:
            w.node_deleted(name)

    def add_pod(self, pod: PodInfo) -> None:
        if self._controllers:
            pod = self._run_pod_controllers(pod)
        self.pods[pod.uid] = pod
        if self.scheduler is not None:
            self.scheduler.on_pod_add(pod)
        for w in self.watchers:
            w.pod_added(pod)

    def _run_pod_controllers(self, pod: PodInfo) -> PodInfo:
        """What the declared kinds' controllers do for a new pod: objects created, status written."""
        status: dict[str, Any] = {}
        for kind, controller in self._controllers:
            result = controller(pod.raw, self.kind)
            for obj in result.created:
                self.add_object(kind.name, object_key(obj, kind.namespaced), obj)
            status.update(result.pod_status)
        if not status:
            return pod
        raw = {**pod.raw, "status": {**(pod.raw.get("status") or {}), **status}}
        return PodInfo.from_raw(raw, previous=pod)

    def delete_pod(self, uid: str) -> None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        if self.scheduler is not None:
            self.scheduler.on_pod_delete(uid)
        for w in self.watchers:
            w.pod_deleted(pod)

    def add_object(self, kind: str, key: str, raw: dict[str, Any]) -> None:
        """Add or replace an object of a declared kind under its key (``namespace/name`` or ``name``)."""
        self.objects.setdefault(kind, {})[key] = raw

    def patch_object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        """Status fields the core changed (``SchedulerObserver.object_status``, e.g. a PodGroup's
        PodGroupInitiallyScheduled condition), merged as the live shell's strategic merge patch:
        conditions by ``type``, other fields replaced. An object gone, or another one of that
        name now (``uid``), is left alone."""
        current = self.objects.get(kind, {}).get(key)
        if current is None or (uid and (current.get("metadata") or {}).get("uid", uid) != uid):
            return
        merged = dict(current.get("status") or {})
        for field_name, value in status.items():
            if field_name == "conditions":
                by_type = {c.get("type"): c for c in merged.get("conditions") or []}
                by_type.update({c.get("type"): c for c in value})
                merged["conditions"] = list(by_type.values())
            else:
                merged[field_name] = value
        self.objects[kind][key] = {**current, "status": merged}

    # -- declared objects written by plugins (framework/objects.py ObjectWriter) -------------------
    def settle_volumes(self) -> None:
        """Before scheduling: bind what the PV controller would have bound already (volumes.py)."""
        if self.objects.get("PersistentVolumeClaim"):
            self.volumes.settle()

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT semantics: the stored object must have the version ``obj`` was read at (else a
        conflict, as the apiserver's), then the PV controller reacts at once (volumes.py)."""
        key, _current = self._stored_for_update(kind, obj)
        stored = self.volumes.write(kind.name, key, obj)
        self.volumes.react(kind.name, stored)
        return self.objects.get(kind.name, {}).get(key, stored)

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """StatusWriter: PUT on the status subresource, so only ``status`` changes (the stored
        metadata and spec stay); the same version precondition as ``update_object``."""
        key, current = self._stored_for_update(kind, obj)
        return self.volumes.write(kind.name, key, {**current, "status": obj.get("status") or {}})

    async def create_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """ObjectCreator: store a new object. ``generateName`` is completed as the apiserver does
        (the base cut to 58 characters, 5 more), from a hash of the base and the count of objects
        created so far instead of at random, so a replay names the same objects; a uid likewise."""
        meta = dict(obj.get("metadata") or {})
        if not meta.get("name"):
            base = str(meta.get("generateName") or "")[:58]
            seq = next(self._created)
            digest = hashlib.sha256(f"{base}/{seq}".encode()).digest()
            meta["name"] = base + "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in digest[:5])
        meta.setdefault("uid", f"simulated-{kind.resource}-{meta['name']}")
        meta.setdefault("creationTimestamp", rfc3339(self._now))
        key = object_key({"metadata": meta}, kind.namespaced)
        if key in self.objects.get(kind.name, {}):
            raise RuntimeError(f'{kind.resource} "{meta["name"]}" already exists')
        return self.volumes.write(kind.name, key, {**obj, "metadata": meta})

    async def delete_object(self, kind: ObjectKind, key: str) -> None:
        """ObjectCreator: remove the object (gone already: nothing to do)."""
        if self.objects.get(kind.name, {}).pop(key, None) is not None and self.scheduler is not None:
            self.scheduler.queue.move_all_to_active_or_backoff(
                ClusterEvent(kind.name, ActionType.DELETE, f"{kind.name}Delete"))

    async def patch_pod_status(self, pod: PodInfo, status: Mapping[str, Any]) -> None:
        """PodStatusPatcher: merge ``status`` into the stored pod's status, in place (as
        ``annotate_pod``: the scheduler's assumed copy shares the raw object and no field the
        scheduler parses changes)."""
        current = self.pods.get(pod.uid)
        if current is None:
            raise PodGoneError(f"pod {pod.key} not found")
        stored = current.raw.get("status")
        if isinstance(stored, dict):
            stored.update(status)  # the assumed copy shares this map: its bind keeps the fields
        else:
            current.raw["status"] = dict(status)  # a new map: bind carries it over

    def _stored_for_update(self, kind: ObjectKind, obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The key and stored object ``obj`` updates, checked as the apiserver does: not found, or a
        conflict when ``obj`` was read at another resourceVersion than the stored one."""
        key = object_key(obj, kind.namespaced)
        current = self.objects.get(kind.name, {}).get(key)
        if current is None:
            raise LookupError(f'{kind.resource} "{key.rpartition("/")[2]}" not found')
        have = (current.get("metadata") or {}).get("resourceVersion")
        want = (obj.get("metadata") or {}).get("resourceVersion")
        if want is not None and have is not None and str(want) != str(have):
            raise RuntimeError(
                f'Operation cannot be fulfilled on {kind.resource} "{key.rpartition("/")[2]}": the object has been '
                "modified; please apply your changes to the latest version and try again")
        return key, current

    def _object_written(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        if self.scheduler is not None:
            self.scheduler.queue.move_all_to_active_or_backoff(
                ClusterEvent(kind, ActionType.UPDATE_OTHER, f"{kind}Update"))
