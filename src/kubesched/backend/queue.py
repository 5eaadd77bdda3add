"""The scheduling queue: active heap, backoff heap and unschedulable pods.

Port of pkg/scheduler/backend/queue/scheduling_queue.go (PriorityQueue) without goroutines: time
comes from the injected clock and the shell calls ``flush(now)`` and asks ``next_wakeup()``, so the
simulator can run it in virtual time.

- active: ordered by the profile's QueueSort ``less``; ``pop()`` takes the head.
- backoff: pods that failed wait ``initial * 2^(attempts-1)`` seconds, capped at the maximum.
- unschedulable: pods rejected by plugins wait for a cluster event one of those plugins registered
  interest in, or for ``max_unschedulable_seconds`` (upstream podMaxInUnschedulablePodsDuration).
- Events received while pods are in flight (popped, their attempt not yet reported) are kept; a
  pod whose attempt fails goes to backoff, not to unschedulable, when one of them is an event a
  plugin that rejected it registered, so an event that raced with the attempt is not lost
  (upstream's inFlightEvents and determineSchedulingHintForInFlightPod, v1.37: an event that
  plugin did not register no longer counts, as the older moveRequestCycle counted any event).
- gated: pods a PreEnqueue plugin refused (e.g. SchedulingGates while ``spec.schedulingGates`` is
  not empty). PreEnqueue runs where upstream runs it (runPreEnqueuePlugins, with the
  SchedulerPopFromBackoffQ gate on as in v1.37): when a pod is added, and whenever it is about to
  enter active or backoff — not when it leaves backoff for active. A gated pod is checked again
  when it is updated, on a cluster event its gating plugin registered, and at the unschedulable
  flush; it never gets an attempt while gated.
- The nominator (``Nominator``, upstream backend/queue/nominator.go) remembers the node preemption
  nominated for a pending pod; a pod leaving the queue (bound, deleted) loses its nomination.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.clock import Clock
from kubesched.framework.status import Status
from kubesched.framework.types import ClusterEvent, QueuedPodInfo
from kubesched.snapshot.pod import PodInfo

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
#: Runs the PreEnqueue plugins of the pod's profile, the named one first (""): Success, or the
#: gating plugin's Status (framework/runtime.py Framework.run_pre_enqueue).
PreEnqueue = Callable[[PodInfo, str], Status]

#: Upstream DefaultPodMaxInUnschedulablePodsDuration.
DEFAULT_MAX_UNSCHEDULABLE_SECONDS = 5 * 60.0


@dataclass(slots=True)
class _ActiveItem:
    qpi: QueuedPodInfo
    less: Less
    #: Insertion order: pods the QueueSort plugin ranks equal pop first-in, first-out.
    seq: int
    valid: bool = True

    def __lt__(self, other: _ActiveItem) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        return not self.less(other.qpi, self.qpi) and self.seq < other.seq


@dataclass(order=True, slots=True)
class _BackoffItem:
    expiry: float
    seq: int
    qpi: QueuedPodInfo = field(compare=False)
    valid: bool = field(default=True, compare=False)


def nominated_node_name(pod: PodInfo) -> str:
    """``status.nominatedNodeName`` of the pod's object ("" when unset)."""
    status = pod.raw.get("status")
    return str(status.get("nominatedNodeName") or "") if status else ""


class Nominator:
    """Pods nominated to run on nodes (upstream nominator.go): pod uid → node, and per node the
    nominated pods. ``by_node`` is shared with the framework's Handle (two-pass filters)."""

    __slots__ = ("_node_of", "by_node")

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def node_of(self, uid: str) -> str | None:
        return self._node_of.get(uid)

    def add(self, pod: PodInfo, node_name: str) -> None:
        """addNominatedPodUnlocked: replace any nomination of the pod; "" only clears it. A pod
        already assigned is not nominated."""
        self.delete(pod.uid)
        if not node_name or pod.node_name:
            return
        self._node_of[pod.uid] = node_name
        self.by_node.setdefault(node_name, {})[pod.uid] = pod

    def update(self, old: PodInfo | None, pod: PodInfo) -> None:
        """UpdateNominatedPod: a nominatedNodeName added, changed or removed in the object wins;
        when neither version carries one, the in-memory nomination is kept (the object may lag
        behind the scheduler's own nomination). The stored pod is refreshed either way."""
        new = nominated_node_name(pod)
        if new or (old is not None and nominated_node_name(old)):
            self.add(pod, new)
            return
        node = self._node_of.get(pod.uid)
        if node is not None:
            self.add(pod, node)

    def delete(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self.by_node.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self.by_node[node]

    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        pods = self.by_node.get(node_name)
        return list(pods.values()) if pods else []


class SchedulingQueue:
    def __init__(
        self,
        less: Less,
        clock: Clock,
        initial_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 10.0,
        max_unschedulable_seconds: float = DEFAULT_MAX_UNSCHEDULABLE_SECONDS,
        plugin_events: Mapping[str, Sequence[ClusterEvent]] | None = None,
        sort_key: Callable[[QueuedPodInfo], Any] | None = None,
        pre_enqueue: PreEnqueue | None = None,
        gating_plugins: Sequence[str] = (),
        group_of: Callable[[PodInfo], str | None] | None = None,
    ) -> None:
        self._less = less
        #: When the QueueSort plugin offers a sort key, heap entries are (key, seq, item) tuples
        #: compared in C; otherwise (item,) tuples ordered by ``less`` through _ActiveItem.__lt__.
        self._sort_key = sort_key
        self._clock = clock
        self.initial_backoff = initial_backoff_seconds
        self.max_backoff = max_backoff_seconds
        self.max_unschedulable = max_unschedulable_seconds
        #: Plugin name → events that may make pods it rejected schedulable.
        self._plugin_events = dict(plugin_events or {})
        #: None: no profile has a PreEnqueue plugin, so no pod is ever gated.
        self._pre_enqueue = pre_enqueue
        #: Names of the PreEnqueue plugins, to skip the gated pods on events none registered.
        self._gating_plugins = tuple(gating_plugins)
        self._active: list[tuple[Any, ...]] = []
        self._active_index: dict[str, _ActiveItem] = {}
        self._backoff: list[_BackoffItem] = []
        self._backoff_index: dict[str, _BackoffItem] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        #: Whether ``_unschedulable`` is in timestamp order (its insertion order: each entry's
        #: timestamp is the clock when it went in), so ``flush`` reads only the expired head; False
        #: once a clock went back (until the map empties), and every entry is read again.
        self._unschedulable_ordered = True
        self._unschedulable_last = -math.inf
        self._gated: dict[str, QueuedPodInfo] = {}
        self._seq = itertools.count()
        #: Incremented on every pop; a pod's attempt carries the cycle it was popped in.
        self.scheduling_cycle = 0
        #: Pods popped and not yet reported back (uid → the cycle they were popped in), and the
        #: cluster events received meanwhile (the cycle then, the event), oldest first.
        self._in_flight: dict[str, int] = {}
        self._in_flight_events: list[tuple[int, ClusterEvent]] = []
        self.nominator = Nominator()
        #: The PodGroup a pod names (None: in no group), when the scheduler schedules groups
        #: together; then ``_members`` indexes the queued pods by group for ``take_group``.
        self._group_of = group_of
        self._members: dict[str, set[str]] = {}

    # -- sizes ---------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Pending pods per queue, as the upstream metric scheduler_pending_pods{queue}."""
        return {
            "active": len(self._active_index),
            "backoff": len(self._backoff_index),
            "unschedulable": len(self._unschedulable),
            "gated": len(self._gated),
        }

    def __len__(self) -> int:
        return sum(self.counts().values())

    def __contains__(self, uid: str) -> bool:
        return (
            uid in self._active_index or uid in self._backoff_index or uid in self._unschedulable or uid in self._gated
        )

    def has_active(self) -> bool:
        return bool(self._active_index)

    def unschedulable_pods(self) -> Iterator[QueuedPodInfo]:
        return iter(list(self._unschedulable.values()))

    def gated_pods(self) -> Iterator[QueuedPodInfo]:
        """Pods a PreEnqueue plugin holds back (``gating_status`` says which and why)."""
        return iter(list(self._gated.values()))

    def pending_pods(self) -> Iterator[QueuedPodInfo]:
        yield from (i.qpi for i in self._active_index.values())
        yield from (i.qpi for i in self._backoff_index.values())
        yield from self._unschedulable.values()
        yield from self._gated.values()

    # -- adding --------------------------------------------------------------------------------
    def add(self, pod: PodInfo) -> None:
        """A new pending pod: to active, or to gated when a PreEnqueue plugin refuses it."""
        if pod.uid in self:
            self.update(pod)
            return
        qpi = QueuedPodInfo(pod=pod, timestamp=self._clock.now())
        self._index_member(qpi.pod)
        if pod.raw.get("status") and nominated_node_name(pod):
            self.nominator.add(pod, nominated_node_name(pod))
        self._to_active(qpi)

    def _gate(self, qpi: QueuedPodInfo) -> bool:
        """Run the PreEnqueue plugins (upstream runPreEnqueuePlugins). True: a plugin refused the
        pod, which is now in the gated map; False: it may go on (its gating fields cleared)."""
        if self._pre_enqueue is None:
            return False
        st = self._pre_enqueue(qpi.pod, qpi.gating_plugin)
        if st.is_success:
            qpi.gated, qpi.gating_plugin, qpi.gating_status = False, "", None
            return False
        qpi.gated, qpi.gating_plugin, qpi.gating_status = True, st.plugin, st
        qpi.unschedulable_plugins.add(st.plugin)
        self._gated[qpi.pod.uid] = qpi
        return True

    def _to_active(self, qpi: QueuedPodInfo) -> None:
        """moveToActiveQ: PreEnqueue first; a gated pod waits in the gated map instead."""
        if not self._gate(qpi):
            self._push_active(qpi)

    def _to_backoff(self, qpi: QueuedPodInfo) -> None:
        """moveToBackoffQ (SchedulerPopFromBackoffQ on): PreEnqueue runs on entering backoff, so
        leaving it for active needs no second check."""
        if not self._gate(qpi):
            self._push_backoff(qpi)

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        item = _ActiveItem(qpi, self._less, next(self._seq))
        self._active_index[qpi.pod.uid] = item
        key = self._sort_key
        heapq.heappush(self._active, (key(qpi), item.seq, item) if key is not None else (item,))

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        item = _BackoffItem(self.backoff_expiry(qpi), next(self._seq), qpi)
        self._backoff_index[qpi.pod.uid] = item
        heapq.heappush(self._backoff, item)

    def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, or None when nothing is active (the shell waits/flushes)."""
        while self._active:
            item: _ActiveItem = heapq.heappop(self._active)[-1]
            if not item.valid:
                continue
            del self._active_index[item.qpi.pod.uid]
            qpi = item.qpi
            self._unindex_member(qpi.pod)
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self._clock.now()
            self.scheduling_cycle += 1
            self._in_flight[qpi.pod.uid] = self.scheduling_cycle
            return qpi
        return None

    def done(self, uid: str) -> None:
        """The pod's attempt is over without coming back to the queue (placed, or not ours):
        events kept only for it are dropped (upstream Done)."""
        if self._in_flight.pop(uid, None) is not None:
            self._prune_in_flight_events()

    def _prune_in_flight_events(self) -> None:
        if not self._in_flight:
            self._in_flight_events.clear()
            return
        oldest = min(self._in_flight.values())
        events = self._in_flight_events
        if events and events[0][0] < oldest:
            self._in_flight_events = [e for e in events if e[0] >= oldest]

    def take_group(self, key: str, scheduler_name: str) -> list[QueuedPodInfo]:
        """The members of PodGroup ``key`` (of the profile ``scheduler_name``) waiting in active,
        backoff or unschedulable, taken out as ``pop`` takes one (an attempt counted, no new
        scheduling cycle): scheduled with the member just popped (upstream queues a group as one
        entity). Gated members stay: PreEnqueue still holds them."""
        taken: list[QueuedPodInfo] = []
        for uid in sorted(self._members.get(key, ())):
            if (a := self._active_index.get(uid)) is not None:
                qpi = a.qpi
                if qpi.pod.scheduler_name == scheduler_name:
                    del self._active_index[uid]
                    a.valid = False
                    taken.append(qpi)
            elif (b := self._backoff_index.get(uid)) is not None:
                if b.qpi.pod.scheduler_name == scheduler_name:
                    del self._backoff_index[uid]
                    b.valid = False
                    taken.append(b.qpi)
            elif (u := self._unschedulable.get(uid)) is not None and u.pod.scheduler_name == scheduler_name:
                del self._unschedulable[uid]
                taken.append(u)
        now = self._clock.now()
        for qpi in taken:
            self._in_flight[qpi.pod.uid] = self.scheduling_cycle
            self._unindex_member(qpi.pod)
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = now
        return taken

    def group_members(self, key: str) -> list[str]:
        """The uids of PodGroup ``key``'s members waiting in the queue, gated ones included."""
        return sorted(self._members.get(key, ()))

    def _index_member(self, pod: PodInfo) -> None:
        if self._group_of is not None and (key := self._group_of(pod)) is not None:
            self._members.setdefault(key, set()).add(pod.uid)

    def _unindex_member(self, pod: PodInfo) -> None:
        if self._group_of is not None and (key := self._group_of(pod)) is not None:
            members = self._members.get(key)
            if members is not None:
                members.discard(pod.uid)
                if not members:
                    del self._members[key]

    def add_unschedulable(self, qpi: QueuedPodInfo, pod_scheduling_cycle: int) -> None:
        """A failed attempt. With no rejecting plugin (an error), or an event one of its
        rejecting plugins registered received since it was popped, the pod backs off; otherwise
        it waits for a relevant event."""
        uid = qpi.pod.uid
        raced = (
            not qpi.unschedulable_plugins
            or qpi.failed_with_error
            or any(cycle >= pod_scheduling_cycle and self._interested(qpi, event)
                   for cycle, event in self._in_flight_events)
        )
        self.done(uid)
        if uid in self:
            return
        self._index_member(qpi.pod)
        qpi.timestamp = self._clock.now()
        if raced:
            self._to_backoff(qpi)
        else:
            if not self._unschedulable:
                self._unschedulable_ordered, self._unschedulable_last = True, -math.inf
            if qpi.timestamp < self._unschedulable_last:
                self._unschedulable_ordered = False
            self._unschedulable_last = qpi.timestamp
            self._unschedulable[uid] = qpi

    def requeue_after_error(self, qpi: QueuedPodInfo) -> None:
        """A pod whose binding failed: back off and retry."""
        qpi.failed_with_error = True
        qpi.unschedulable_plugins = set()
        self.add_unschedulable(qpi, self.scheduling_cycle)

    # -- updates and deletes -------------------------------------------------------------------
    def update(self, pod: PodInfo) -> None:
        """A pending pod changed: refresh it; an unschedulable or gated one gets another chance."""
        uid = pod.uid
        if self.nominator.by_node or (pod.raw.get("status") and nominated_node_name(pod)):
            self.nominator.update(self._queued_pod(uid), pod)
        if uid in self._gated:
            # The update may lift the gate (e.g. the last scheduling gate removed): check again.
            qpi = self._gated.pop(uid)
            qpi.pod = pod
            self._move(qpi)
            return
        if uid in self._active_index:
            # The stale heap entry keeps its old QueuedPodInfo: changing it in place would move
            # its sort key under the heap and break the heap order.
            item = self._active_index[uid]
            item.valid = False
            self._push_active(dataclasses.replace(item.qpi, pod=pod))
            return
        if uid in self._backoff_index:
            self._backoff_index[uid].qpi.pod = pod
            return
        if uid in self._unschedulable:
            qpi = self._unschedulable.pop(uid)
            qpi.pod = pod
            self._move(qpi)
            return
        self.add(pod)

    def _queued_pod(self, uid: str) -> PodInfo | None:
        for index in (self._active_index, self._backoff_index):
            item = index.get(uid)
            if item is not None:
                return item.qpi.pod
        qpi = self._unschedulable.get(uid) or self._gated.get(uid)
        return None if qpi is None else qpi.pod

    def delete(self, uid: str) -> None:
        """The pod left the queue for good (bound, deleted): its nomination goes too."""
        if self.nominator.by_node:
            self.nominator.delete(uid)
        self.done(uid)
        queued: QueuedPodInfo | None = None
        if (a := self._active_index.pop(uid, None)) is not None:
            a.valid = False
            queued = a.qpi
        if (b := self._backoff_index.pop(uid, None)) is not None:
            b.valid = False
            queued = b.qpi
        queued = self._unschedulable.pop(uid, None) or self._gated.pop(uid, None) or queued
        if queued is not None:
            self._unindex_member(queued.pod)

    # -- moving ----------------------------------------------------------------------------------
    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi.attempts)

    def backoff_duration(self, attempts: int) -> float:
        """Upstream calculateBackoffDuration: initial doubled per attempt after the first, capped."""
        if attempts <= 0:
            return 0.0
        d = self.initial_backoff
        for _ in range(1, attempts):
            if d > self.max_backoff - d:
                return self.max_backoff
            d += d
        return min(d, self.max_backoff)

    def _move(self, qpi: QueuedPodInfo) -> None:
        """requeueEntityWithQueueingStrategy: to backoff while the pod's backoff lasts, else to
        active; PreEnqueue decides first either way."""
        if self.backoff_expiry(qpi) > self._clock.now():
            self._to_backoff(qpi)
        else:
            self._to_active(qpi)

    def _gating_interested(self, plugin: str, event: ClusterEvent) -> bool:
        """Whether ``event`` may lift ``plugin``'s gate: an event it registered (every event when
        it registered none)."""
        registered = self._plugin_events.get(plugin)
        return registered is None or any(r.matches(event) for r in registered)

    def _interested(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        if not qpi.unschedulable_plugins:
            return True
        for plugin in qpi.unschedulable_plugins:
            for registered in self._plugin_events.get(plugin, ()):
                if registered.matches(event):
                    return True
        # Plugins that registered nothing get every event (always correct, never stuck).
        return any(plugin not in self._plugin_events for plugin in qpi.unschedulable_plugins)

    def move_all_to_active_or_backoff(self, event: ClusterEvent, exclude_uid: str | None = None) -> int:
        """A cluster event: unschedulable pods that a relevant plugin rejected get another try
        (all but ``exclude_uid``, the pod whose own failure caused the event)."""
        moved = 0
        # A pod moved here may activate others (a PreEnqueue plugin such as GangScheduling lets a
        # completed group's members in): those are skipped, already gone from their map.
        for uid, qpi in list(self._unschedulable.items()):
            if uid != exclude_uid and self._interested(qpi, event):
                if self._unschedulable.pop(uid, None) is None:
                    continue
                self._move(qpi)
                moved += 1
        if self._gated and any(self._gating_interested(p, event) for p in self._gating_plugins):
            # Upstream skips gated pods on events unrelated to their gating plugin.
            for uid, qpi in list(self._gated.items()):
                if self._gating_interested(qpi.gating_plugin, event):
                    if self._gated.pop(uid, None) is None:
                        continue
                    self._move(qpi)
                    moved += 0 if qpi.gated else 1
        if self._in_flight:
            # Pods being scheduled now may have missed this event (addEventIfAnyInFlight).
            self._in_flight_events.append((self.scheduling_cycle, event))
        return moved

    def activate(self, uids: Sequence[str]) -> None:
        """Move the named pods to active right away (upstream Activate, used by Coscheduling)."""
        for uid in uids:
            qpi = self._unschedulable.pop(uid, None) or self._gated.pop(uid, None)
            if qpi is not None:
                self._to_active(qpi)  # PreEnqueue still decides (upstream Activate)
            elif (b := self._backoff_index.pop(uid, None)) is not None:
                b.valid = False
                self._push_active(b.qpi)

    def flush(self, now: float) -> None:
        """Move completed backoffs to active and long-unschedulable pods back (upstream's periodic
        flushBackoffQCompleted and flushUnschedulablePodsLeftover)."""
        while self._backoff and self._backoff[0].expiry <= now:
            item = heapq.heappop(self._backoff)
            if item.valid:
                del self._backoff_index[item.qpi.pod.uid]
                self._push_active(item.qpi)
        for uid, qpi in self._expired_unschedulable(now):
            if self._unschedulable.pop(uid, None) is None:
                continue  # activated by a pod moved before it
            self._move(qpi)
        for uid, qpi in list(self._gated.items()):
            # Gated pods are checked again at the same period, counted from the last check.
            if now - max(qpi.timestamp, qpi.flush_timestamp or 0.0) >= self.max_unschedulable:
                if self._gated.pop(uid, None) is None:
                    continue  # activated by a pod moved before it
                qpi.flush_timestamp = now
                self._move(qpi)

    def _expired_unschedulable(self, now: float) -> list[tuple[str, QueuedPodInfo]]:
        """The unschedulable pods waiting ``max_unschedulable`` or longer, in map order; in
        timestamp order only the head is read (``now - t`` falls as ``t`` rises)."""
        if not self._unschedulable_ordered:
            return [(uid, q) for uid, q in self._unschedulable.items() if now - q.timestamp >= self.max_unschedulable]
        expired: list[tuple[str, QueuedPodInfo]] = []
        for uid, qpi in self._unschedulable.items():
            if now - qpi.timestamp < self.max_unschedulable:
                break
            expired.append((uid, qpi))
        return expired

    def next_wakeup(self, include_unschedulable: bool = True) -> float | None:
        """When ``flush`` next has work: the earliest backoff expiry (and unschedulable timeout)."""
        times: list[float] = []
        while self._backoff and not self._backoff[0].valid:
            heapq.heappop(self._backoff)
        if self._backoff:
            times.append(self._backoff[0].expiry)
        if include_unschedulable and self._unschedulable:
            oldest = (next(iter(self._unschedulable.values())).timestamp if self._unschedulable_ordered
                      else min(q.timestamp for q in self._unschedulable.values()))
            times.append(oldest + self.max_unschedulable)
        return min(times) if times else None

