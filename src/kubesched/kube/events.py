"""Telling the user: Scheduled / FailedScheduling Events and the pod's PodScheduled condition.

Like kube-scheduler, events are ``events.k8s.io/v1`` Events (``reportingController`` = the profile's
scheduler name, ``action`` Binding / Scheduling, ``regarding`` the pod) and an unschedulable pod gets
``PodScheduled=False`` with reason ``Unschedulable`` (``SchedulerError`` for errors) and the upstream
"0/N nodes are available: …" message through a strategic-merge patch of ``pods/status`` (conditions
merge by ``type``).

All of it is written off the scheduling path: the observer hooks only enqueue, a few worker tasks
drain a bounded queue (writes are dropped and counted when it is full, never blocking scheduling),
through their own rate-limited client. Failure writes are rate-limited per pod: at most one per
``interval`` (30 s) unless the message changed. A repeat of the same message after that updates the
previous Event's ``series`` (count, lastObservedTime) instead of creating a new object, as the
events API's recorder does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubesched.api.timestamps import micro_time, rfc3339
from kubesched.framework.handle import Preemptor
from kubesched.framework.objects import ObjectEvent, ObjectKind
from kubesched.kube.api import STRATEGIC_MERGE_PATCH, ApiClient, ApiError
from kubesched.kube.ratelimit import Now, PerKeyRateLimiter
from kubesched.snapshot.pod import PodInfo

log = logging.getLogger(__name__)

Write = Callable[[], Awaitable[None]]

EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{ns}/events"
#: Pauses before retrying a write that failed for a connection error, 5xx or 429.
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)


def scheduled_message(pod: PodInfo, node: str) -> str:
    return f"Successfully assigned {pod.namespace}/{pod.name} to {node}"


def build_event(
    pod: PodInfo,
    *,
    reason: str,
    note: str,
    action: str,
    event_type: str,
    controller: str,
    instance: str,
    wall: float | None = None,
) -> dict[str, Any]:
    wall = time.time() if wall is None else wall
    meta = pod.raw.get("metadata") or {}
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod.name}.{int(wall * 1e9):x}", "namespace": pod.namespace},
        "eventTime": micro_time(wall),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "resourceVersion": str(meta.get("resourceVersion", "")),
        },
        "note": note[:1024],  # the events API rejects notes over 1 kB
        "type": event_type,
    }


def build_object_event(
    kind: ObjectKind, ev: ObjectEvent, instance: str, wall: float | None = None
) -> dict[str, Any]:
    """An Event regarding a declared object (``Plugin.object_events``, e.g. a PodGroup); events of
    a cluster-scoped object go to the ``default`` namespace, as client-go's recorder does."""
    wall = time.time() if wall is None else wall
    namespace, _, name = ev.key.partition("/") if kind.namespaced else ("default", "", ev.key)
    regarding: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind, "name": name}
    if kind.namespaced:
        regarding["namespace"] = namespace
    if ev.uid:
        regarding["uid"] = ev.uid
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{int(wall * 1e9):x}", "namespace": namespace},
        "eventTime": micro_time(wall),
        "reportingController": ev.controller or "kubesched",
        "reportingInstance": instance,
        "action": ev.action,
        "reason": ev.reason,
        "regarding": regarding,
        "note": ev.note[:1024],
        "type": ev.event_type,
    }


def pod_scheduled_false_patch(
    pod: PodInfo, reason: str, message: str, wall: float | None = None, already_false: bool = False
) -> dict[str, Any]:
    """The status patch kube-scheduler sends for a failed attempt (podutil.UpdatePodCondition).

    lastTransitionTime only moves when the condition's status changes (``already_false``: we set it
    before, even if the pod object we hold predates that write).
    """
    cond: dict[str, Any] = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
    }
    current = next(
        (c for c in (pod.raw.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
    if not already_false and (
        current is None or current.get("status") != "False" or not current.get("lastTransitionTime")
    ):
        cond["lastTransitionTime"] = rfc3339(wall)
    return {"status": {"conditions": [cond]}}


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    message: str
    count: int


@dataclass(slots=True)
class EventStats:
    events: int = 0
    series_updates: int = 0
    condition_patches: int = 0
    object_status_patches: int = 0
    suppressed: int = 0
    dropped: int = 0
    errors: int = 0


class EventWriter:
    def __init__(
        self,
        api: ApiClient,
        instance: str,
        interval: float = 30.0,
        max_queue: int = 10_000,
        workers: int = 4,
        now: Now = time.monotonic,
    ) -> None:
        self.api = api
        self.instance = instance
        self.limiter = PerKeyRateLimiter(interval, now)
        #: (lane, sequence, object, write): nominations (lane 0) go before Events and conditions
        #: (lane 1), first in first out within a lane. A nomination is what other schedulers and
        #: users act on while a preemption runs; behind a burst of Preempted/FailedScheduling
        #: Events it used to arrive after the bind (35 of 1,000 seen on a watch in the
        #: PreemptionBasic benchmark). ``object``: what the write changes ("" for a new Event).
        self._queue: asyncio.PriorityQueue[tuple[int, int, str, Write]] = asyncio.PriorityQueue(max_queue)
        #: Object → its writes taken while another write to it was in flight. Two writes to one
        #: object never run at once, so they land in the order they were queued: with several
        #: workers, a PodGroup's True condition once landed before the False queued a moment
        #: earlier, and the group stayed False after its gang was bound (fresh-clone CI, stop 37).
        self._in_flight: dict[str, deque[Write]] = {}
        #: Writes waiting in those deques: they count against ``max_queue`` as queued ones do.
        self._parked = 0
        self._max_queue = max_queue
        self._sequence = itertools.count()
        self._workers_n = workers
        self._workers: list[asyncio.Task[None]] = []
        self._series: dict[str, _Series] = {}
        #: Pods whose PodScheduled=False we wrote (so lastTransitionTime is not moved again).
        self._condition_false: set[str] = set()
        self.stats = EventStats()

    # -- called from the scheduling path: enqueue only -----------------------------------------------
    def scheduled(self, pod: PodInfo, node: str, controller: str) -> None:
        self.forget(pod.uid)
        event = build_event(
            pod,
            reason="Scheduled",
            note=scheduled_message(pod, node),
            action="Binding",
            event_type="Normal",
            controller=controller,
            instance=self.instance,
        )
        self._put(lambda: self._create_event(event))

    def preempted(self, victim: PodInfo, preemptor: Preemptor, controller: str, in_memory: bool = False) -> None:
        """Upstream's event on a preemption victim (preemption/executor.go ``PreemptPod``):
        regarding the victim, related to the preemptor (the PodGroup preempting as a group; none
        for a pod), ``Preempted by <pod|podgroup> <uid> on node <node|cluster>``, with
        `` (in kube-scheduler memory).`` for a victim rejected while it waited at Permit."""
        event = build_event(
            victim,
            reason="Preempted",
            note=preemptor.event_message + (" (in kube-scheduler memory)." if in_memory else ""),
            action="Preempting",
            event_type="Normal",
            controller=controller,
            instance=self.instance,
        )
        if preemptor.related:
            event["related"] = dict(preemptor.related)
        self._put(lambda: self._create_event(event))

    def object_event(self, kind: ObjectKind, ev: ObjectEvent) -> None:
        """An Event a plugin reports about an object of a kind it declares (the plugin rate-limits)."""
        event = build_object_event(kind, ev, self.instance)
        self._put(lambda: self._create_event(event))

    def object_status(self, kind: ObjectKind, key: str, uid: str, status: Mapping[str, Any]) -> None:
        """Status fields the core changed on a declared object (``SchedulerObserver.object_status``,
        e.g. a PodGroup's ``PodGroupInitiallyScheduled`` condition): a strategic merge patch of its
        ``status`` subresource, as upstream's PatchPodGroupStatus sends (conditions merge by
        ``type``). The uid in the patch keeps a newer object of the same name from being patched."""
        patch: dict[str, Any] = {"status": dict(status)}
        if uid:
            patch["metadata"] = {"uid": uid}
        path = kind.object_path(key, "status")
        self._put(lambda: self._patch_object_status(path, patch), path)

    def nominated(self, pod: PodInfo, node: str) -> None:
        """Set ``status.nominatedNodeName`` (``node``) or clear it (""), as upstream's
        updatePod does for a preemptor and for pods whose nomination a preemption dropped."""
        patch = {"status": {"nominatedNodeName": node or None}}
        self._put(lambda: self._patch_nomination(pod, patch), _pod_status(pod), urgent=True)

    async def _patch_nomination(self, pod: PodInfo, patch: dict[str, Any]) -> None:
        try:
            await self._patch_status(pod, patch)
        except ApiError as e:
            # The pod was bound while the patch waited behind other writes (this queue never
            # delays a bind): a bound pod has no nomination to set, so there is nothing to do.
            if e.status == 422 and "already bound" in str(e):
                log.debug("pod=%s event=nomination_skipped reason=bound", pod.key)
                return
            raise

    def failed(self, pod: PodInfo, controller: str, message: str, unschedulable: bool) -> None:
        if not self.limiter.allow(pod.uid, message):
            self.stats.suppressed += 1
            return
        series = self._series.get(pod.uid)
        if series is not None and series.message == message:
            series.count += 1
            bump = {"series": {"count": series.count, "lastObservedTime": micro_time()}}
            ns, name = series.namespace, series.name
            self._put(lambda: self._patch_series(ns, name, bump), f"event/{ns}/{name}")
        else:
            event = build_event(
                pod,
                reason="FailedScheduling",
                note=message,
                action="Scheduling",
                event_type="Warning",
                controller=controller,
                instance=self.instance,
            )
            name = event["metadata"]["name"]
            self._series[pod.uid] = _Series(pod.namespace, name, message, 1)
            # Keyed as its series updates are: an update never overtakes the Event it counts.
            self._put(lambda: self._create_event(event), f"event/{pod.namespace}/{name}")
        reason = "Unschedulable" if unschedulable else "SchedulerError"
        condition = pod_scheduled_false_patch(pod, reason, message, already_false=pod.uid in self._condition_false)
        self._condition_false.add(pod.uid)
        self._put(lambda: self._patch_status(pod, condition), _pod_status(pod))

    def forget(self, uid: str) -> None:
        """The pod is gone: drop its rate-limit and series state."""
        self.limiter.forget(uid)
        self._series.pop(uid, None)
        self._condition_false.discard(uid)

    def _put(self, write: Write, obj: str = "", urgent: bool = False) -> None:
        if self._parked and self._parked + self._queue.qsize() >= self._max_queue:
            self.stats.dropped += 1
            return
        try:
            self._queue.put_nowait((0 if urgent else 1, next(self._sequence), obj, write))
        except asyncio.QueueFull:
            self.stats.dropped += 1

    # -- workers ------------------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        while len(self._workers) < self._workers_n:
            self._workers.append(loop.create_task(self._work(), name="event-writer"))

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued write was attempted (True) or ``timeout`` passed (False)."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
            return True
        except TimeoutError:
            return False

    async def stop(self, flush_timeout: float = 5.0) -> None:
        if self._workers:
            await self.flush(flush_timeout)
        for w in self._workers:
            w.cancel()
        for w in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await w
        self._workers = []

    @property
    def pending(self) -> int:
        return self._queue.qsize() + self._parked

    async def _work(self) -> None:
        while True:
            _, _, obj, write = await self._queue.get()
            if obj:
                waiting = self._in_flight.get(obj)
                if waiting is not None:
                    waiting.append(write)  # the worker writing this object runs it next
                    self._parked += 1
                    continue
                self._in_flight[obj] = deque()
            try:
                await self._attempt(write)
                while obj and (waiting := self._in_flight[obj]):
                    self._parked -= 1
                    await self._attempt(waiting.popleft())
            finally:
                if obj:
                    # Cancelled (stop after its flush timed out): what still waits is dropped.
                    for _ in self._in_flight.pop(obj):
                        self._parked -= 1
                        self.stats.dropped += 1
                        self._queue.task_done()

    async def _attempt(self, write: Write) -> None:
        """One queued write, retried while the apiserver may be restarting; marked done after."""
        try:
            for attempt in range(len(RETRY_DELAYS) + 1):
                try:
                    await write()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    retryable = not isinstance(e, ApiError) or e.status >= 500 or e.status == 429
                    if retryable and attempt < len(RETRY_DELAYS):
                        await asyncio.sleep(RETRY_DELAYS[attempt])  # the apiserver may be restarting
                        continue
                    self.stats.errors += 1
                    if not (isinstance(e, ApiError) and e.status == 404):  # 404: the pod went away
                        log.warning("event=write_failed err=%r", f"{type(e).__name__}: {e}")
                    return
        finally:
            self._queue.task_done()

    async def _create_event(self, event: dict[str, Any]) -> None:
        ns = event["metadata"]["namespace"]
        try:
            await self.api.request("POST", EVENTS_PATH.format(ns=quote(ns)), event)
        except ApiError as e:
            # 409 on a retry: the first attempt was written before its connection was reset
            # (the event names are unique per occurrence), so it is there: done.
            if e.status != 409:
                raise
        self.stats.events += 1

    async def _patch_series(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        path = EVENTS_PATH.format(ns=quote(ns)) + "/" + quote(name)
        await self.api.request("PATCH", path, patch, content_type="application/merge-patch+json")
        self.stats.series_updates += 1

    async def _patch_object_status(self, path: str, patch: dict[str, Any]) -> None:
        await self.api.request("PATCH", path, patch, content_type=STRATEGIC_MERGE_PATCH)
        self.stats.object_status_patches += 1

    async def _patch_status(self, pod: PodInfo, patch: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}/status"
        await self.api.request("PATCH", path, patch, content_type=STRATEGIC_MERGE_PATCH)
        self.stats.condition_patches += 1


def _pod_status(pod: PodInfo) -> str:
    """The object a pod's status patches change (their ordering key)."""
    return f"pod/{pod.uid}"
