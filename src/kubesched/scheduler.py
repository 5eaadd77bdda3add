"""The scheduler: one pod at a time through the framework, top to bottom.

    pop → PreFilter → Filter (a rotating window of nodes, percentageOfNodesToScore) → PostFilter
    when nothing fits → PreScore/Score → select (ties broken by a seeded RNG, or by node name with
    ``tie_break="name"``) → assume → Reserve →
    Permit → binding cycle, asynchronously: wait on Permit → PreBind → Bind → PostBind.

Every failure path unreserves, forgets the assumed pod and requeues the pod with backoff. Port of
pkg/scheduler/schedule_one.go. The core does no I/O: shells feed cluster events in (``on_*``),
supply a ClusterClient for binding, drive time with ``tick(now)`` and run the binding coroutines.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Collection, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.backend.cache import SchedulerCache
from kubesched.backend.host_selection import HostSelector, TieBreak
from kubesched.backend.queue import DEFAULT_MAX_UNSCHEDULABLE_SECONDS, SchedulingQueue
from kubesched.framework.batch import OPPORTUNISTIC_BATCHING, OpportunisticBatch
from kubesched.framework.clock import Clock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import NO_NODES_MSG, Diagnosis, fit_error_message
from kubesched.framework.eager import start_eagerly
from kubesched.framework.feasible_nodes import FeasibleNodeSearch
from kubesched.framework.handle import BindConflictError, ClusterClient, Handle, PodGoneError, Preemptor
from kubesched.framework.interfaces import Plugin
from kubesched.framework.objects import ObjectKind, gated_kinds, kinds_of_plugins
from kubesched.framework.podgroup import GENERIC_WORKLOAD, group_key
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework, ProfileSpec, plugin_error
from kubesched.framework.score_totals import ScoredNodes
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import EVENT_POD_DELETE, ClusterEvent, QueuedPodInfo
from kubesched.framework.waiting import WaitingPods
from kubesched.scheduler_preemption import PreemptionExecutor
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import Rows

log = logging.getLogger(__name__)

@dataclass(slots=True)
class ScheduleResult:
    """A successful scheduling cycle: the chosen node and how it was chosen."""

    node_name: str
    evaluated_nodes: int
    feasible_nodes: int
    scored: ScoredNodes | None
    diagnosis: Diagnosis


@dataclass(slots=True)
class ScheduleFailure:
    """A failed attempt: the upstream-format message and, for rejections, the diagnosis."""

    status: Status
    message: str
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    num_all_nodes: int = 0
    #: The pod's ``status.nominatedNodeName`` after this failure (upstream NominatingInfo): a node
    #: preemption nominated, "" to clear it (every failure but a PostFilter's), None to leave it
    #: (a PostFilter that nominated nothing). A live shell patches it when it differs.
    nominated_node_name: str | None = ""

    @property
    def unschedulable(self) -> bool:
        return self.status.is_rejected


class SchedulerObserver:
    """Hooks for shells (events, metrics, simulator records). Methods are no-ops by default."""

    def scheduled(self, pod: PodInfo, profile: str, result: ScheduleResult) -> None: ...

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None: ...

    def bound(self, pod: PodInfo, profile: str, node_name: str) -> None: ...

    def preempted(
        self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
        cleared: Sequence[PodInfo], by: Preemptor, in_memory: Collection[str] = (),
    ) -> None:
        """A PostFilter plugin preempted ``victims`` on ``node_name`` for ``preemptor`` (called
        before ``failed`` for the preemptor, whose failure then carries the nomination); ``by``:
        who the victims are told preempted them (framework/handle.py Preemptor: the pod, or its
        PodGroup when a group preempts). Victims
        waiting at Permit were rejected in memory (their uids: ``in_memory``; upstream's event
        says so); the others are being evicted through the
        client's ``evict`` (framework/handle.py EvictingClient). ``cleared``: lower-priority pods
        nominated to the candidate (that node; none for a group, whose candidate is ``cluster``),
        whose nomination was dropped (a live shell patches their ``status.nominatedNodeName`` to
        "")."""

    def object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        """The core changed status fields of a declared object: ``kind`` as ``handle.objects``
        names it, ``key`` namespace/name, ``uid`` the object's. E.g. the PodGroup cycle's
        ``PodGroupInitiallyScheduled`` condition (framework/podgroup_condition.py) as
        ``{"conditions": [condition]}``. A live shell strategic-merge patches the fields into the
        object's ``status`` subresource, as upstream does."""


@dataclass(frozen=True, slots=True)
class QueueSettings:
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
    max_unschedulable_seconds: float = DEFAULT_MAX_UNSCHEDULABLE_SECONDS


class Scheduler:
    def __init__(
        self,
        frameworks: dict[str, Framework],
        cache: SchedulerCache,
        clock: Clock,
        waiting_pods: WaitingPods,
        queue_settings: QueueSettings = QueueSettings(),
        seed: int | None = None,
        observer: SchedulerObserver | None = None,
        eager_binding: bool = False,
        feature_gates: Mapping[str, bool] | None = None,
        tie_break: TieBreak = "random",
    ) -> None:
        if not frameworks:
            raise ValueError("a scheduler needs at least one profile")
        self.frameworks = frameworks
        self.cache = cache
        self.clock = clock
        self.waiting_pods = waiting_pods
        self.observer = observer or SchedulerObserver()
        self._rng = random.Random(seed)
        #: Picks among the best-scored nodes; ``random`` draws from ``_rng``, shared with preemption.
        self._host_selector = HostSelector(tie_break, seed, self._rng)
        #: Preemptions actuated and under way (scheduler_preemption.py).
        self.preemption = PreemptionExecutor(self, bool((feature_gates or {}).get(GENERIC_WORKLOAD)))
        first = next(iter(frameworks.values()))
        plugin_events: dict[str, list[ClusterEvent]] = {}
        for fwk in frameworks.values():
            for plugin, events in fwk.events_to_register().items():
                plugin_events.setdefault(plugin, events)
        gating = sorted({p.name for fwk in frameworks.values() for p in fwk.pre_enqueue})
        self.queue = SchedulingQueue(
            first.less,
            clock,
            queue_settings.initial_backoff_seconds,
            queue_settings.max_backoff_seconds,
            queue_settings.max_unschedulable_seconds,
            plugin_events,
            first.queue_sort_key,
            self._pre_enqueue if gating else None,
            gating,
            group_key if (feature_gates or {}).get(GENERIC_WORKLOAD) else None,
        )
        for fwk in frameworks.values():
            fwk.handle.feature_gates = dict(feature_gates or {})
            fwk.handle.attach_queue(self.queue.activate, self._pending_pods)
            fwk.handle.attach_nominator(self.queue.nominator)
            fwk.handle.attach_preemption(self.preemption.for_framework(fwk), self._rng, self.preemption.running,
                                         self.preemption.evicted.__contains__)
        #: Step binding cycles synchronously until they first wait (framework/eager.py). Only for
        #: in-memory binding (the simulator): until a Task exists, code in the binding cycle sees
        #: the scheduling loop's task as asyncio.current_task(), which timeouts would cancel.
        self._eager_binding = eager_binding
        self._tasks: set[asyncio.Task[None]] = set()
        #: Pods between pop and the end of their binding cycle; value = deleted meanwhile.
        self.in_flight: dict[str, bool] = {}
        #: GenericWorkload: a pod naming a PodGroup is scheduled with its group's queued members in
        #: one PodGroup cycle (scheduler_podgroup.py). Imported here: that module imports this one.
        from kubesched.scheduler_podgroup import PodGroupCycle

        gates = feature_gates or {}
        #: The feature gates this scheduler runs with (objects.py: kinds served under a gate).
        self.feature_gates = dict(gates)
        self._pod_group_cycle = PodGroupCycle(self, gates) if gates.get(GENERIC_WORKLOAD) else None
        #: The nodes of the placement a PodGroup cycle is trying (None: every node).
        self.placement_rows: Rows | None = None
        #: OpportunisticBatching: beta and on by default in v1.37 (config/features.py).
        self._batching = bool(gates.get(OPPORTUNISTIC_BATCHING, True))
        #: The rotating start index and the recent pass rate (upstream nextStartNodeIndex).
        self._feasible_nodes = FeasibleNodeSearch()
        #: Plugins that count finished pods (e.g. a PodGroup's succeeded/failed members) override
        #: ``Plugin.pod_terminated``: the cache drops terminal pods, so no other view shows them.
        self._finished_pod_counters: list[Plugin] = [
            p for p in self.plugins() if type(p).pod_terminated is not Plugin.pod_terminated
        ]

    @staticmethod
    def build(
        profiles: Iterable[ProfileSpec],
        registry: Registry,
        clock: Clock,
        client: ClusterClient | None = None,
        cache: SchedulerCache | None = None,
        queue_settings: QueueSettings = QueueSettings(),
        parallelism: int = 16,
        seed: int | None = None,
        observer: SchedulerObserver | None = None,
        objects: Callable[[str], Any] | None = None,
        eager_binding: bool = False,
        feature_gates: Mapping[str, bool] | None = None,
        tie_break: TieBreak = "random",
    ) -> Scheduler:
        """A scheduler with one framework per configured profile, sharing one cache and queue."""
        cache = cache or SchedulerCache()
        waiting = WaitingPods()
        frameworks: dict[str, Framework] = {}
        for profile in profiles:
            handle = Handle(cache.table, clock, waiting, client, profile.scheduler_name, parallelism, objects)
            frameworks[profile.scheduler_name] = Framework.build(profile, registry, handle)
        return Scheduler(
            frameworks, cache, clock, waiting, queue_settings, seed, observer, eager_binding, feature_gates, tie_break)

    def _pre_enqueue(self, pod: PodInfo, first: str) -> Status:
        """The queue's PreEnqueue check: the plugins of the pod's profile (upstream
        preEnqueuePluginMap[schedulerName])."""
        fwk = self.frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue(pod, first) if fwk is not None else SUCCESS

    # -- cluster events (fed by the shells) ---------------------------------------------------------
    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.frameworks

    def on_pod_add(self, pod: PodInfo) -> None:
        self.preemption.seen(pod)
        if pod.node_name:
            self.queue.delete(pod.uid)
            self._move(self.cache.add_or_update_pod(pod))
        elif self._may_queue(pod) and not pod.deleting:
            self.queue.add(pod)
        if pod.terminal:
            self._terminated(pod)

    def on_pod_update(self, pod: PodInfo) -> None:
        self.preemption.seen(pod)
        if pod.node_name:
            self.queue.delete(pod.uid)
            self._move(self.cache.add_or_update_pod(pod))
        elif self._may_queue(pod):
            self.queue.update(pod)
        if pod.terminal:
            self._terminated(pod)

    @property
    def counts_finished_pods(self) -> bool:
        """Some plugin counts finished pods (overrides ``Plugin.pod_terminated``): a shell must then
        report every Succeeded/Failed pod, those that finished before it started included."""
        return bool(self._finished_pod_counters)

    def _terminated(self, pod: PodInfo) -> None:
        for plugin in self._finished_pod_counters:
            plugin.pod_terminated(pod)

    def on_finished_pod_delete(self, pod: PodInfo) -> None:
        """A Succeeded/Failed pod was deleted (the shell watches finished pods when
        ``counts_finished_pods``): the plugins that counted it forget it. Nothing else holds it."""
        for plugin in self._finished_pod_counters:
            plugin.finished_pod_deleted(pod)

    def _may_queue(self, pod: PodInfo) -> bool:
        """An unassigned pod of one of our profiles that is not already being placed."""
        return (
            self.responsible_for(pod)
            and not pod.terminal
            and pod.uid not in self.in_flight
            and not self.cache.is_assumed(pod.uid)
        )

    def on_pod_delete(self, uid: str) -> None:
        self.preemption.forget(uid)
        self.queue.delete(uid)
        if uid in self.in_flight:
            self.in_flight[uid] = True
            self.waiting_pods.reject(uid, "", "pod was deleted")
        self._move(self.cache.remove_pod(uid))

    def on_node_add_or_update(self, raw: dict[str, Any]) -> None:
        self._move(self.cache.add_or_update_node(raw))

    def on_node_delete(self, name: str) -> None:
        self._move(self.cache.remove_node(name))

    def _move(self, event: ClusterEvent | None) -> None:
        if event is not None:
            self.queue.move_all_to_active_or_backoff(event)

    # -- time ---------------------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> None:
        """Flush backoff/unschedulable pods and expire Permit waits whose deadline passed."""
        now = self.clock.now() if now is None else now
        self.queue.flush(now)
        self.waiting_pods.expire(now)

    def next_wakeup(self, include_unschedulable: bool = True) -> float | None:
        times = [
            t
            for t in (self.queue.next_wakeup(include_unschedulable), self.waiting_pods.next_deadline())
            if t is not None
        ]
        return min(times) if times else None

    @property
    def binds_in_flight(self) -> int:
        return len(self._tasks)

    def object_kinds(self) -> list[ObjectKind]:
        """The cluster objects this scheduler's plugins declare (framework/objects.py)."""
        return gated_kinds(kinds_of_plugins(type(p) for p in self.plugins()), self.feature_gates)

    def plugins(self) -> list[Plugin]:
        """Every plugin instance once, across profiles."""
        unique = {id(p): p for fwk in self.frameworks.values() for p in fwk.plugins.values()}
        return list(unique.values())

    def announce_workload(self, pods: Iterable[PodInfo]) -> None:
        """Tell every plugin that implements ``Plugin.expect_workload`` the pods that will come
        (a shell that knows them ahead calls this once, before scheduling starts). ``pods`` is
        only read when some plugin listens."""
        listeners = [p for p in self.plugins() if type(p).expect_workload is not Plugin.expect_workload]
        if not listeners:
            return
        workload = tuple(pods)
        for plugin in listeners:
            plugin.expect_workload(workload)

    async def start_plugins(self) -> None:
        """Start plugins' background work (e.g. metric polling); every shell calls this before
        scheduling and ``stop_plugins`` at shutdown."""
        for plugin in self.plugins():
            await plugin.start()

    async def stop_plugins(self) -> None:
        for plugin in self.plugins():
            await plugin.stop()

    def _pending_pods(self) -> Iterator[PodInfo]:
        return (qpi.pod for qpi in self.queue.pending_pods())

    async def drain(self) -> None:
        """Wait for every binding cycle in flight, except those parked at Permit.

        A pod waiting at Permit (an undecided WaitingPod) only moves on when a plugin allows or
        rejects it or ``tick`` expires its wait, so waiting for it here would never return (the
        simulator drains, then jumps the clock to the next Permit deadline).
        """
        while self._tasks:
            parked = sum(1 for wp in self.waiting_pods if not wp.decided)
            if len(self._tasks) <= parked:
                return
            await asyncio.wait(list(self._tasks), return_when=asyncio.FIRST_COMPLETED)

    def binds_in_progress(self) -> int:
        """Binding cycles in flight that are not parked at Permit (those wait for other pods)."""
        parked = sum(1 for wp in self.waiting_pods if not wp.decided)
        return max(len(self._tasks) - parked, 0)

    async def wait_for_binds_below(self, limit: int) -> None:
        """Wait until fewer than ``limit`` binding cycles are in progress (Permit-parked ones are
        not counted: a gang waiting for members must never block scheduling those members)."""
        while self._tasks and self.binds_in_progress() >= limit:
            await asyncio.wait(list(self._tasks), return_when=asyncio.FIRST_COMPLETED)

    def spawn_task(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine of the core (a binding cycle, an eviction) as a task it keeps track of."""
        # Eager: a binding cycle that never waits (the simulator's in-memory bind) costs no Task.
        task = start_eagerly(coro) if self._eager_binding else asyncio.get_running_loop().create_task(coro)
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- the scheduling cycle ----------------------------------------------------------------------
    def schedule_one(self) -> bool:
        """Schedule the next active pod. False when no pod is active."""
        qpi = self.queue.pop()
        if qpi is None:
            return False
        pod = qpi.pod
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None or pod.deleting or self.cache.table.pod(pod.uid) is not None:
            self.queue.done(pod.uid)
            return True  # not ours, going away, or already placed: nothing to do
        if self._pod_group_cycle is not None and (key := group_key(pod)) is not None:
            self._pod_group_cycle.run(fwk, qpi, key)
            return True
        cycle = self.queue.scheduling_cycle
        self.in_flight[pod.uid] = False
        state = CycleState()
        try:
            outcome = self.schedule_pod(fwk, state, pod, reuse_filter_outcome=True)
        except Exception as e:  # a bug outside the plugins' calls: fail this pod (with backoff), never the scheduler
            status = Status.from_exception(e)
            status = Status(status.code, (f"scheduling cycle: {status.message}",), "", e)
            outcome = ScheduleFailure(status, status.message)
        if isinstance(outcome, ScheduleFailure):
            if outcome.unschedulable and outcome.num_all_nodes and fwk.post_filter:
                result, st = fwk.run_post_filter(state, pod, outcome.diagnosis)
                if st.message:  # upstream sets PostFilterMsg whatever the code
                    outcome.diagnosis.post_filter_msg = st.message
                    outcome.message = fit_error_message(outcome.num_all_nodes, outcome.diagnosis)
                outcome.nominated_node_name = None if result is None else result.nominated_node_name
            self.fail(fwk, qpi, outcome, cycle)
            return True

        self.start_binding(fwk, state, qpi, outcome, cycle)
        return True

    def start_binding(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, outcome: ScheduleResult,
                      cycle: int) -> None:
        """prepareForBindingCycle and the binding cycle: assume, Reserve, Permit, then bind
        asynchronously; a rejection unreserves, forgets and requeues the pod."""
        pod, node = qpi.pod, outcome.node_name
        assumed = self.cache.assume(pod, node)
        if self.queue.nominator.by_node:
            self.queue.nominator.delete(pod.uid)  # an assumed pod is no longer nominated (assume)
        st = fwk.run_reserve(state, assumed, node)
        if st.is_success:
            st = fwk.run_permit(state, assumed, node)
        if not (st.is_success or st.is_wait):
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget(pod.uid)
            self.fail(fwk, qpi, self.single_node_failure(node, st), cycle)
            return
        self.observer.scheduled(assumed, fwk.profile_name, outcome)
        self.spawn_task(self._binding_cycle(fwk, state, qpi, assumed, node, cycle))

    def schedule_pod(
        self, fwk: Framework, state: CycleState, pod: PodInfo, *, reuse_filter_outcome: bool = False,
    ) -> ScheduleResult | ScheduleFailure:
        """Pick a node for pod or explain why none fits (upstream schedulePod). ``reuse_filter_outcome``
        (the pod's own cycle, not a PodGroup's): a Filter pass that found no node may be kept and
        reused by an identical pod while nothing it read changes (framework/filter_outcome.py)."""
        table = self.cache.table
        # A PodGroup cycle trying a placement sees that placement's nodes only (AssumePlacement).
        # In upstream's snapshot order (zones round robin): the search walks it from a rotating start.
        all_rows = table.search_rows() if self.placement_rows is None else self.placement_rows
        num_all = len(all_rows)
        if num_all == 0:
            return ScheduleFailure(Status.unschedulable(NO_NODES_MSG), NO_NODES_MSG)
        diagnosis = Diagnosis()

        rows, st = fwk.pre_filter_rows(state, pod, all_rows, diagnosis)
        if not st.is_success:
            if not st.is_rejected:
                return ScheduleFailure(st, plugin_error("PreFilter", st), diagnosis, num_all)
            return ScheduleFailure(st, fit_error_message(num_all, diagnosis), diagnosis, num_all)

        # OpportunisticBatching (framework/batch.py), in a pod's own cycle: the node a previous
        # identical pod's cycle ranked next is tried first, as a nominated node is.
        batch = fwk.batch if self._batching and reuse_filter_outcome and self.placement_rows is None else None
        signature, hint = None, ""
        tried: tuple[int, Status] | None = None
        if batch is not None:
            signature = fwk.signer.sign(pod)
            hint = batch.get_node_hint(state, pod, signature, self.queue.scheduling_cycle)
        if self.queue.nominator.by_node or hint:
            # evaluateNominatedNode: a pod nominated by an earlier preemption tries that node first.
            nominated = self._nominated_row(pod, rows) if self.queue.nominator.by_node else None
            if nominated is None and hint:
                nominated = table.row_of(hint)
            if nominated is not None:
                st = fwk.filter_node(state, pod, nominated)
                if st.is_success:
                    result = ScheduleResult(table.names[nominated], 1, 1, None, diagnosis)
                    return self._stored(batch, signature, hint, result)
                if st.is_rejected:  # an error is only logged upstream: the search goes on without it
                    tried = (nominated, st)

        reuse = reuse_filter_outcome and rows is all_rows and self.placement_rows is None
        feasible, st = self._feasible_nodes.find(fwk, state, pod, rows, num_all, diagnosis, reuse=reuse, tried=tried)
        if not st.is_success:
            return ScheduleFailure(st, plugin_error("Filter", st), diagnosis, num_all)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 0:
            status = Status.unschedulable(fit_error_message(num_all, diagnosis))
            return ScheduleFailure(status, status.reasons[0], diagnosis, num_all)
        if len(feasible) == 1:
            return self._stored(batch, signature, hint,
                                ScheduleResult(table.names[int(feasible[0])], evaluated, 1, None, diagnosis))

        st = fwk.run_pre_score(state, pod, feasible)
        if not st.is_success:
            return ScheduleFailure(st, plugin_error("PreScore", st), diagnosis, num_all)
        scored = fwk.run_score(state, pod, feasible)
        if isinstance(scored, Status):
            return ScheduleFailure(scored, plugin_error("Score", scored), diagnosis, num_all)
        chosen = self._host_selector.select(scored, table)
        return self._stored(batch, signature, hint,
                            ScheduleResult(table.names[chosen], evaluated, len(feasible), scored, diagnosis))

    def _stored(self, batch: OpportunisticBatch | None, signature: bytes | None, hint: str,
                result: ScheduleResult) -> ScheduleResult:
        """StoreScheduleResults after a cycle that picked a node (with OpportunisticBatching on)."""
        if batch is not None:
            batch.store_schedule_results(signature, hint, result.node_name, result.scored, self.queue.scheduling_cycle)
        return result

    def single_node_failure(self, node: str, st: Status) -> ScheduleFailure:
        """Reserve/Permit rejections are reported as a FitError over the one chosen node."""
        if not st.is_rejected:
            return ScheduleFailure(st, st.message)
        diagnosis = Diagnosis()
        row = self.cache.table.row_of(node)
        if row is not None:
            diagnosis.node_to_status.add_all(np.array([row], dtype=np.intp), st)
        else:  # the node is gone (its deletion is what rejected the waiting pod): still say why
            diagnosis.node_to_status.absent_status = st
        diagnosis.unschedulable_plugins.add(st.plugin)
        return ScheduleFailure(st, fit_error_message(1, diagnosis), diagnosis, 1)

    def fail(self, fwk: Framework, qpi: QueuedPodInfo, failure: ScheduleFailure, cycle: int) -> None:
        """Requeue a failed pod (unless deleted meanwhile) and tell the observer."""
        deleted = self.in_flight.pop(qpi.pod.uid, False)
        if failure.unschedulable:
            qpi.unschedulable_plugins = set(failure.diagnosis.unschedulable_plugins)
            qpi.failed_with_error = False
        else:
            qpi.unschedulable_plugins = set()
            qpi.failed_with_error = True
        if not deleted:
            self.queue.add_unschedulable(qpi, cycle)
            nominated = failure.nominated_node_name
            if nominated or (nominated == "" and self.queue.nominator.by_node):
                self.queue.nominator.add(qpi.pod, nominated)
        self.observer.failed(qpi.pod, fwk.profile_name, failure)

    # -- preemption --------------------------------------------------------------------------------
    def _nominated_row(self, pod: PodInfo, rows: Rows) -> int | None:
        node = self.queue.nominator.node_of(pod.uid)
        row = self.cache.table.row_of(node) if node else None
        return row if row is not None and bool((rows == row).any()) else None

    # -- the binding cycle -------------------------------------------------------------------------
    async def _binding_cycle(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo, node: str, cycle: int
    ) -> None:
        uid = assumed.uid
        try:
            # Only a pod Permit parked awaits (upstream WillWaitOnPermit): no coroutine for the rest.
            st = await fwk.wait_on_permit(assumed) if fwk.handle.waiting_pods.get(uid) is not None else SUCCESS
            if st.is_success:
                st = await fwk.run_pre_bind(state, assumed, node)
            if st.is_success:
                st = await fwk.run_bind(state, assumed, node)
        except (BindConflictError, PodGoneError) as e:
            # Bound by someone else (the informer will account the real placement), or gone.
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget(uid)
            self.in_flight.pop(uid, None)
            self.queue.done(uid)
            if isinstance(e, PodGoneError):
                self.queue.delete(uid)
            return
        except Exception as e:  # a bug must not kill the scheduler: requeue with backoff
            st = Status.from_exception(e)
            st = Status(st.code, (f"binding cycle: {st.message}",), "", e)
        if not st.is_success:
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget(uid)
            # An Error's message is the pod's as it is (handleSchedulingFailure: status.Message(),
            # e.g. 'running PreBind plugin "DynamicResources": device binding failed: ...').
            failure = self.single_node_failure(node, st) if st.is_rejected else ScheduleFailure(st, st.message)
            # Requeue the pod first, then let the freed resources help the others (upstream
            # handleBindingCycleError moves with AssignedPodDelete, leaving this pod out), so a
            # pod rejected at Permit waits for an event instead of racing into backoff.
            self.fail(fwk, qpi, failure, cycle)
            self.queue.move_all_to_active_or_backoff(EVENT_POD_DELETE, exclude_uid=uid)
            return
        self.in_flight.pop(uid, None)
        self.queue.done(uid)
        fwk.run_post_bind(state, assumed, node)
        self.observer.bound(assumed, fwk.profile_name, node)

