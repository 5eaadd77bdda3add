"""The live scheduler's informer handlers: the cluster as its watches report it, fed to the
scheduler core (run on the event loop, between scheduling batches). A mixin of
:class:`~kubesched.live.runner.LiveScheduler`, which owns the state they use."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.framework.types import ActionType, ClusterEvent
from kubesched.kube.events import EventWriter
from kubesched.kube.informer import Obj, object_key
from kubesched.kube.objects import ObjectInformers
from kubesched.live.early import PreparedPods
from kubesched.live.metrics import SchedulerMetrics
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo, PodSpecError, raw_pod_uid
from kubesched.snapshot.table import NodeSpecError

#: The runner's logger: what the handlers log (a pod or node that does not parse) is the runner's.
log = logging.getLogger("kubesched.live.runner")

_IGNORED_META = ("resourceVersion", "managedFields", "generation")
#: The status fields that do matter to an unassigned pod: the claims kube-controller-manager created
#: from its ResourceClaimTemplates (upstream's UpdatePodGeneratedResourceClaim event,
#: pkg/scheduler/framework/events.go extractPodGeneratedResourceClaimChange), which lift
#: DynamicResources' PreEnqueue gate ("ResourceClaim not created yet").
_RELEVANT_STATUS = ("resourceClaimStatuses", "extendedResourceClaimStatus")


def scheduling_relevant_update(old: Obj, new: Obj) -> bool:
    """Whether an update of a pod may change its scheduling (upstream isPodUpdated): for a pod that
    stays unassigned, changes to status or bookkeeping metadata only (e.g. our own PodScheduled
    condition patch) must not requeue it, except its generated claims (``_RELEVANT_STATUS``).
    Assigned pods always count (phase frees resources)."""
    if (old.get("spec") or {}).get("nodeName") or (new.get("spec") or {}).get("nodeName"):
        return True
    if old.get("spec") != new.get("spec"):
        return True
    os_, ns_ = old.get("status") or {}, new.get("status") or {}
    if any(os_.get(k) != ns_.get(k) for k in _RELEVANT_STATUS):
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    keys = (set(om) | set(nm)).difference(_IGNORED_META)
    return any(om.get(k) != nm.get(k) for k in keys)


class ClusterFeed:
    """The handlers of the node, pod, finished-pod and object informers."""

    scheduler: Scheduler
    metrics: SchedulerMetrics
    events: EventWriter
    objects: ObjectInformers
    #: The first list's pods parsed as they streamed in.
    _prepared: PreparedPods
    #: Set on every change: the scheduling loop wakes to look again.
    _wake: asyncio.Event
    #: uid → when its scheduling attempt started (for the attempt metrics).
    _attempt_start: dict[str, float]

    # -- plugins' view of other objects --------------------------------------------------------------
    def _objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        return self.objects.objects(kind)

    # -- informer handlers (run on the loop, between scheduling batches) -----------------------------
    def _parse(self, raw: Obj, previous: PodInfo | None = None) -> PodInfo | None:
        try:
            prepared = self._prepared.take(raw)  # parsed as the first list streamed in
            return prepared if prepared is not None else PodInfo.from_raw(raw, previous)
        except PodSpecError as e:
            log.warning("event=bad_pod err=%r", str(e))
            return None

    def _pod_add(self, raw: Obj) -> None:
        self.metrics.informer_event("pods")
        pod = self._parse(raw)
        if pod is not None:
            self.scheduler.on_pod_add(pod)
            self._wake.set()

    def _pod_update(self, old: Obj, raw: Obj) -> None:
        self.metrics.informer_event("pods")
        if not scheduling_relevant_update(old, raw):
            return
        # A bound pod's status updates keep its parsed fields (no re-parse).
        pod = self._parse(raw, self.scheduler.cache.table.pod(raw_pod_uid(raw)))
        if pod is not None:
            if pod.node_name:
                self._attempt_start.pop(pod.uid, None)
            self.scheduler.on_pod_update(pod)
            self._wake.set()

    def _pod_delete(self, raw: Obj) -> None:
        self.metrics.informer_event("pods")
        uid = raw_pod_uid(raw)
        # With the unfinished-pods selector a pod that turns Succeeded/Failed leaves this watch as
        # a DELETED event too, and is a deleted pod here, as in kube-scheduler. Plugins that count
        # finished pods hear of it from the finished-pods informer alone: one watch, so its
        # finishing and its deletion reach them in order (two watches may deliver them swapped,
        # and a deleted pod would then be counted for ever).
        self.scheduler.on_pod_delete(uid)
        self.events.forget(uid)
        self._attempt_start.pop(uid, None)
        self._wake.set()

    def _finished_pod(self, raw: Obj) -> None:
        """A Succeeded/Failed pod listed or updated by the finished-pods informer: reported as any
        terminal pod is (the hooks count it, the cache drops it if it held it; never queued)."""
        self.metrics.informer_event("finished-pods")
        pod = self._parse(raw)
        # The selector guarantees a terminal pod; the check keeps anything else (a pod this
        # informer would see by mistake) out of the queue and the cache, which it would enter.
        if pod is not None and pod.terminal:
            self.scheduler.on_pod_update(pod)
            self._wake.set()

    def _finished_pod_deleted(self, raw: Obj) -> None:
        """A Succeeded/Failed pod deleted (or gone from a relist): the plugins that counted it
        forget it, as scheduler-plugins' PodGroup controller counts the pods it lists."""
        self.metrics.informer_event("finished-pods")
        pod = self._parse(raw)
        if pod is not None:
            self.scheduler.on_finished_pod_delete(pod)

    def _node_add(self, raw: Obj) -> None:
        self.metrics.informer_event("nodes")
        try:
            self.scheduler.on_node_add_or_update(raw)
        except NodeSpecError as e:
            log.warning("event=bad_node err=%r", str(e))
        self._wake.set()

    def _node_update(self, old: Obj, raw: Obj) -> None:
        self._node_add(raw)

    def _node_delete(self, raw: Obj) -> None:
        self.metrics.informer_event("nodes")
        name = object_key(raw)
        # Pods assumed on the node and waiting at Permit would be bound to a node that no longer
        # exists once allowed: reject them now so they are scheduled again (as a preemption victim
        # waiting there is). Found by the chaos suite (bench/chaos_assumed.py).
        waiting = self.scheduler.waiting_pods
        for wp in [wp for wp in waiting if wp.node_name == name and not wp.decided]:
            waiting.reject(wp.pod.uid, "", f"node {name} was deleted")
        self.scheduler.on_node_delete(name)
        self._wake.set()

    def _object_changed(self, kind: ObjectKind, action: ActionType) -> None:
        self.metrics.informer_event(kind.name)
        label = {ActionType.ADD: "Add", ActionType.DELETE: "Delete"}.get(action, "Update")
        self.scheduler.queue.move_all_to_active_or_backoff(ClusterEvent(kind.name, action, f"{kind.kind}{label}"))
        self._wake.set()
