"""``kubesched run``: the scheduler core driven by informers against a real apiserver.

Start-up order (restart safety): the health server, then the node informer is listed, then the pod
informer (``kubesched run`` sends their requests before it decodes its configuration, live/early.py,
but what they get is handed on only from here) — so every assigned pod is accounted on its node
before the first scheduling cycle,
whatever state a previous process died in. A pod the previous process was binding when it died is
either seen bound (accounted) or scheduled again; a second bind of an already-bound pod gets 409 and
is forgotten. Then, when electing, the lease is acquired (the cache stays warm on standbys, and
``/readyz`` is green on them too).

The loop::

    while running:
        scheduler.tick()                       # backoff / unschedulable flushes, Permit deadlines
        while scheduler.schedule_one():        # sync scheduling cycles, no I/O
            every N pods or 50 ms: await asyncio.sleep(0)   # let informers, binds and writers run
        wait for (an informer event | the next backoff expiry | 1 s)

Binds run as tasks spawned by the core; events and status patches go through a background writer.
SIGTERM: stop scheduling, drain in-flight binds, flush event writes, release the lease, exit 0.
Losing the lease: stop scheduling at once and exit 1, as kube-scheduler does (the pod restarts and
rejoins as a candidate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kubesched.config.load import SchedulerConfig
from kubesched.framework.clock import RealClock
from kubesched.framework.handle import Preemptor
from kubesched.framework.objects import merge_object_kinds
from kubesched.framework.registry import Registry
from kubesched.kube.api import ApiClient
from kubesched.kube.events import EventWriter
from kubesched.kube.informer import Handlers, Informer
from kubesched.kube.objects import ObjectInformers
from kubesched.kube.status import StatusPublisher
from kubesched.live.bind_client import MeteredBindClient
from kubesched.live.client import LiveClusterClient
from kubesched.live.cluster_feed import ClusterFeed
from kubesched.live.coalesced_events import CoalescedEvents
from kubesched.live.early import EarlyInformers, PreparedPods, backlog_informers, finished_pods_informer
from kubesched.live.health import HealthServer
from kubesched.live.leader import DEFAULT_SCHEDULER_NAME, LeaderElector, LeaseLock, kube_scheduler_holds_lease
from kubesched.live.metrics import SchedulerMetrics, instrument_framework
from kubesched.live.settings import (
    EXIT_CONFLICT,
    EXIT_LOST_LEASE,
    EXIT_OK,
    LiveOptions,
    RunStats,
    end_startup_gc,
    lease_name_for,
)
from kubesched.scheduler import QueueSettings, ScheduleFailure, Scheduler, ScheduleResult, SchedulerObserver
from kubesched.snapshot.pod import PodInfo

log = logging.getLogger(__name__)

class LiveScheduler(ClusterFeed, SchedulerObserver):
    def __init__(
        self,
        config: SchedulerConfig,
        registry: Registry,
        api: ApiClient,
        options: LiveOptions | None = None,
        early: EarlyInformers | None = None,
    ) -> None:
        self.config = config
        self.api = api
        self.options = options or LiveOptions()
        self.metrics = SchedulerMetrics()
        self.client = LiveClusterClient(api)
        cc = config.client_connection
        # Events and the Lease have clients of their own (rate limiter and connection pool), as
        # upstream's: a backlog of binds must never delay a renewal (the lease would be lost and
        # the process restart into the same backlog) nor would an event storm delay a bind.
        self.events_api = api.sibling(cc.qps, cc.burst, user_agent=f"{api.user_agent}/events", max_connections=8)
        self.lease_api = api.sibling(
            cc.qps, cc.burst, user_agent=f"{api.user_agent}/leader-election", max_connections=2
        )
        self.events = EventWriter(self.events_api, self.options.identity, self.options.event_interval)
        self.clock = RealClock()
        self.scheduler = Scheduler.build(
            config.profiles,
            registry,
            self.clock,
            client=MeteredBindClient(self.client, self.metrics, lambda node: node in self.node_informer.store),
            queue_settings=QueueSettings(config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds),
            parallelism=config.parallelism,
            feature_gates=config.feature_gates,
            observer=self,
            objects=self._objects,
            tie_break=self.options.tie_break,
        )
        kinds = merge_object_kinds([*self.scheduler.object_kinds(), *self.options.extra_object_kinds])
        self._kinds_by_name = {k.name: k for k in kinds}
        for fwk in self.scheduler.frameworks.values():
            instrument_framework(fwk, self.metrics)
        self.metrics.watch_queue(self.scheduler.queue)
        self.metrics.watch_plugins(self.scheduler.plugins())

        le = config.leader_election
        elect = le.leader_elect if self.options.leader_elect is None else self.options.leader_elect
        self.elector: LeaderElector | None = None
        if elect:
            name = lease_name_for(le.resource_name, self.options.lease_name)
            self.elector = LeaderElector(
                LeaseLock(self.lease_api, le.resource_namespace, name, timeout=le.renew_deadline),
                self.options.identity,
                le.lease_duration,
                le.renew_deadline,
                le.retry_period,
            )

        rt = self.options.watch_read_timeout
        #: Informers started early (live/early.py) hand nothing on before run() starts them.
        self._early = early
        if early is not None:
            self.node_informer, self.pod_informer = early.nodes, early.pods
        else:
            self.node_informer, self.pod_informer = backlog_informers(api, rt)
        #: Set once the backlog moves (its first bind answered, or nothing to schedule) or this
        #: replica waits for the lease: the nodes' and pods' lists are interned from then on, not
        #: in turns with the hand-on and the first cycles (~0.1 s of a start with a large backlog).
        self._backlog_moving = asyncio.Event()
        self.node_informer.intern_after = self.pod_informer.intern_after = self._backlog_moving
        self.node_informer.handlers = Handlers(self._node_add, self._node_update, self._node_delete)
        #: The first list's pods parsed as they stream in (from process start when started early).
        self._prepared = early.prepared if early is not None else PreparedPods()
        self.pod_informer.handlers = Handlers(self._pod_add, self._pod_update, self._pod_delete,
                                              self._prepared.prepare)
        #: The Succeeded/Failed pods, listed only when a plugin counts them (early.py
        #: finished_pods_informer): the pod informer's selector leaves them out, and a restart must
        #: still count the members that finished before it; and those deleted since are forgotten.
        self.finished_pod_informer: Informer | None = None
        if self.scheduler.counts_finished_pods:
            self.finished_pod_informer = finished_pods_informer(api, rt)
            self.finished_pod_informer.intern_after = self._backlog_moving
            self.finished_pod_informer.handlers = Handlers(
                self._finished_pod, lambda _old, raw: self._finished_pod(raw), self._finished_pod_deleted)
        self._object_events = CoalescedEvents(self._object_changed)
        self.objects = ObjectInformers(api, kinds, self._object_events.add, read_timeout=rt)
        self.status = StatusPublisher(api, self.scheduler.plugins(), kinds, emit=self.events.object_event)
        self.health = HealthServer(self.options.health_addr, self.metrics.registry, self._readiness, self._liveness)
        self.metrics.watch_connectivity(
            self._informers, lambda: self.elector.attempts if self.elector is not None else {"ok": 0, "failed": 0}
        )
        self._loop_beat = time.monotonic()
        self._awaiting_binds = False
        self.stats = RunStats()
        self.exit_code = EXIT_OK
        self.synced = False
        self.leading = asyncio.Event()
        self._wake = asyncio.Event()
        self._stop = False
        self._lost = False
        #: Set with _stop or _lost: ends a wait on binds at once (a lost lease must stop scheduling now).
        self._halt = asyncio.Event()
        self._cycle_start = 0.0
        self._attempt_start: dict[str, float] = {}
        self._errors_logged: set[str] = set()
        #: Starts the status publisher once what it counts is listed (_publish_status).
        self._status_start: asyncio.Task[None] | None = None

    # -- observer hooks (called by the core inside scheduling / binding cycles) ----------------------
    def scheduled(self, pod: PodInfo, profile: str, result: ScheduleResult) -> None:
        self.stats.scheduled += 1
        self._attempt_start[pod.uid] = self._cycle_start
        log.debug("pod=%s node=%s profile=%s event=assumed", pod.key, result.node_name, profile)

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.stats.failed += 1
        started = self._attempt_start.pop(pod.uid, self._cycle_start)
        result = "unschedulable" if failure.unschedulable else "error"
        self.metrics.attempt(result, profile, time.perf_counter() - started)
        exc = failure.status.exception
        if exc is not None and failure.message not in self._errors_logged:
            # A plugin bug: said once per distinct message at warning level (the pod's
            # FailedScheduling event carries it each time), with the traceback under --debug.
            if len(self._errors_logged) >= 1024:  # messages may carry values: keep the set bounded
                self._errors_logged.clear()
            self._errors_logged.add(failure.message)
            log.warning("pod=%s profile=%s event=plugin_error msg=%r", pod.key, profile, failure.message,
                        exc_info=exc if self.options.debug else None)
        else:
            log.debug("pod=%s profile=%s event=%s msg=%r", pod.key, profile, result, failure.message)
        self.events.failed(pod, profile, failure.message, failure.unschedulable)
        nominated = failure.nominated_node_name
        current = str((pod.raw.get("status") or {}).get("nominatedNodeName") or "")
        if nominated is not None and nominated != current:
            self.events.nominated(pod, nominated)

    def preempted(
        self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
        cleared: Sequence[PodInfo], by: Preemptor, in_memory: Collection[str] = (),
    ) -> None:
        log.info("pod=%s node=%s profile=%s event=preempting victims=%d", preemptor.key, node_name, profile,
                 len(victims))
        for victim in victims:
            if victim.deleting:  # upstream's executor skips a victim already being deleted: no event
                continue
            self.events.preempted(victim, by, profile, in_memory=victim.uid in in_memory)
        for pod in cleared:
            self.events.nominated(pod, "")

    def object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        declared = self._kinds_by_name.get(kind)
        if declared is None:  # the core names only kinds its plugins declared; never expected
            log.warning("event=status_of_undeclared_kind kind=%s object=%s", kind, key)
            return
        self.events.object_status(declared, key, uid, status)

    def bound(self, pod: PodInfo, profile: str, node_name: str) -> None:
        now = time.monotonic()
        self.stats.bound += 1
        if not self.stats.first_bound_at:
            self.stats.first_bound_at = now
            self._backlog_moving.set()
            # When a restart's backlog starts to move, and how much of the wait came once the
            # caches were synced and the lease held (a cycle and a bind) rather than before
            # (imports, lists, a standby's wait for the lease).
            ready = max(self.stats.synced_at, self.stats.leader_at)
            log.info("pod=%s node=%s event=first_bind after_ready_ms=%.0f", pod.key, node_name,
                     1000 * (now - ready) if ready else -1)
        self.stats.last_bound_at = now
        started = self._attempt_start.pop(pod.uid, self._cycle_start)
        self.metrics.attempt("scheduled", profile, time.perf_counter() - started)
        log.debug("pod=%s node=%s profile=%s event=bound", pod.key, node_name, profile)
        self.events.scheduled(pod, node_name, profile)

    # -- health ----------------------------------------------------------------------------------------
    def _informers(self) -> list[Informer]:
        return [*self._pod_informers(), *self.objects.informers.values()]

    def _pod_informers(self) -> list[Informer]:
        """The node and pod informers, and the finished pods' when a plugin counts them."""
        finished = [self.finished_pod_informer] if self.finished_pod_informer is not None else []
        return [self.node_informer, self.pod_informer, *finished]

    def _disconnected(self, threshold: float) -> str:
        now = time.monotonic()
        for inf in self._informers():
            gone = inf.disconnected_for(now)
            if gone > threshold:
                return f"informer {inf.name} cannot reach the apiserver for {gone:.0f}s: {inf.stats.last_error}"
        return ""

    def _liveness(self) -> tuple[bool, str]:
        why = self._disconnected(self.options.informer_dead_seconds)
        if why:
            return False, why
        if self.leading.is_set() and not (self._stop or self._lost or self._awaiting_binds):
            stalled = time.monotonic() - self._loop_beat
            if stalled > self.options.loop_stall_seconds:
                return False, f"scheduling loop stalled for {stalled:.0f}s"
        return True, "ok"

    def _readiness(self) -> tuple[bool, str]:
        if not self.synced:
            return False, "informers not synced"
        why = self._disconnected(self.options.informer_stale_seconds)
        if why:
            return False, why
        if self.elector is not None and not self.elector.is_leader:
            return True, f"ok (standby; leader {self.elector.leader or 'unknown'})"
        return True, "ok"

    # -- lifecycle -------------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop gracefully (SIGTERM): drain binds, flush events, release the lease."""
        if not self._stop:
            log.info("event=stopping")
        self._stop = True
        self._halt.set()
        self._wake.set()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        if self.options.install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self.request_stop)
        hold: asyncio.Task[None] | None = None
        lag_watch = loop.create_task(self._watch_loop_lag())
        try:
            await self.health.start()
            conflict = "" if not self._schedules_as_default() else await kube_scheduler_holds_lease(self.lease_api)
            if conflict:
                log.error("event=refusing_to_start reason=%r", conflict)
                self.exit_code = EXIT_CONFLICT
                return await self._shutdown(hold)
            self.events.start()
            profiles = ",".join(self.scheduler.frameworks)
            log.info("identity=%s profiles=%s event=starting", self.options.identity, profiles)
            # Every informer lists at once (upstream: InformerFactory.Start, then WaitForCacheSync),
            # but pods are handed on after nodes (backlog_informers): every assigned pod lands on a
            # known node. Informers started early (live/early.py) hand on what they hold from here.
            if self._early is not None:
                self._early.hand_on()
            for inf in self._pod_informers():
                inf.start()
            objects = asyncio.ensure_future(self.objects.start())
            # Scheduling waits for the nodes and the unfinished pods, not for the finished ones (a
            # batch cluster may keep tens of thousands): no placement reads them, as none of
            # kube-scheduler's does; only the status published waits for them (_publish_status).
            if not all([await self._sync(inf) for inf in (self.node_informer, self.pod_informer)]):
                objects.cancel()
                with contextlib.suppress(BaseException):
                    await objects
                return await self._shutdown(hold)
            # The pods' first list is handed on: nothing more to take (a relist before the plugins'
            # kinds sync would otherwise parse, and keep, every pod again).
            self._prepared.close()
            await objects
            await self.scheduler.start_plugins()
            if self.options.owns_process_gc:
                end_startup_gc()
            self.synced = True
            self.stats.synced_at = time.monotonic()
            finished = self.finished_pod_informer
            log.info(
                "event=synced nodes=%d pods=%d pending=%d finished=%s",
                len(self.node_informer.store),
                len(self.pod_informer.store),
                len(self.scheduler.queue),
                "not-listed" if finished is None else len(finished.store) if finished.synced.is_set() else "listing",
            )
            if self.elector is not None:
                if not await self._acquire():
                    return await self._shutdown(hold)
                hold = loop.create_task(self._hold())
            self.metrics.is_leader.set(1)
            self.stats.leader_at = time.monotonic()
            self.leading.set()
            self._status_start = loop.create_task(self._publish_status())
            await self._loop()
            return await self._shutdown(hold)
        finally:
            if self.options.owns_process_gc:
                end_startup_gc()
            lag_watch.cancel()
            if self.options.install_signal_handlers:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                        loop.remove_signal_handler(sig)

    async def _watch_loop_lag(self, interval: float = 0.1) -> None:
        """Sleep ``interval`` again and again; how much later than asked each wake-up comes is how
        long something held the loop (a renewal due then would have waited as long)."""
        while True:
            started = time.perf_counter()
            await asyncio.sleep(interval)
            lag = max(0.0, time.perf_counter() - started - interval)
            self.metrics.loop_lag.observe(lag)
            if lag > self.stats.max_loop_lag:
                self.stats.max_loop_lag = lag

    def _schedules_as_default(self) -> bool:
        """A ``default-scheduler`` profile not told to replace kube-scheduler: it must not run while
        the real kube-scheduler holds its Lease (both would bind the same pods)."""
        return DEFAULT_SCHEDULER_NAME in self.scheduler.frameworks and not self.options.replace_default_scheduler

    async def _sync(self, inf: Informer) -> bool:
        inf.start()
        synced = asyncio.ensure_future(inf.synced.wait())
        try:
            while not self._stop:
                done, _ = await asyncio.wait({synced}, timeout=0.2)
                if done:
                    return True
            return False
        finally:
            synced.cancel()

    async def _publish_status(self) -> None:
        """The leader writes object status (e.g. PodGroup phases) from once the finished pods are
        listed too, when a plugin counts them: a group's counts published before would leave out
        the members that finished before the start."""
        finished = self.finished_pod_informer
        if finished is None or await self._sync(finished):
            self.status.start()

    async def _acquire(self) -> bool:
        assert self.elector is not None
        task = asyncio.ensure_future(self.elector.acquire())
        try:
            while not self._stop:
                done, _ = await asyncio.wait({task}, timeout=0.2)
                if done:
                    task.result()
                    return True
                self._backlog_moving.set()  # a standby: intern while it waits
            return False
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _hold(self) -> None:
        assert self.elector is not None
        await self.elector.hold()
        if not self._stop:
            self._lost = True
            self.exit_code = EXIT_LOST_LEASE
            self._halt.set()
            self._wake.set()

    async def _loop(self) -> None:
        sched = self.scheduler
        clock = self.clock
        yield_every = max(1, self.options.yield_every)
        yield_after = self.options.yield_after
        max_binds = max(1, self.options.max_binds_in_flight)
        perf = time.perf_counter
        while not (self._stop or self._lost):
            self._loop_beat = time.monotonic()
            sched.tick()
            n = 0
            last_yield = perf()
            while not (self._stop or self._lost):
                if sched.binds_in_flight >= max_binds:  # cheap test first; Permit-parked ones are discounted inside
                    # Waiting on a slow apiserver is not a stalled loop: keep the heartbeat going.
                    self._awaiting_binds = True
                    binds = asyncio.ensure_future(sched.wait_for_binds_below(max_binds))
                    halt = asyncio.ensure_future(self._halt.wait())
                    try:
                        # Not past a lost lease: binds stuck behind a partition held the loop (and
                        # the exit) for their whole request timeout (chaos suite, bench/chaos.py).
                        await asyncio.wait({binds, halt}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        binds.cancel()
                        halt.cancel()
                        self._awaiting_binds = False
                self._cycle_start = perf()
                if not sched.schedule_one():
                    self._backlog_moving.set()
                    break
                self.stats.attempts += 1
                n += 1
                # Until a first bind has been answered, yield after every cycle: each bind goes out
                # as soon as its pod is assumed, rather than after a batch of 32 cycles (or 50 ms),
                # and its answer is read as it arrives (a start with a backlog: its first bind
                # ~0.1 s sooner, measured for issue 32 item 2).
                if n % yield_every == 0 or perf() - last_yield >= yield_after or not self.stats.bound:
                    self._loop_beat = time.monotonic()
                    await asyncio.sleep(0)
                    last_yield = perf()
            if self._stop or self._lost:
                break
            self._wake.clear()
            timeout = 1.0
            wake = sched.next_wakeup()
            if wake is not None:
                timeout = min(timeout, max(0.0, wake - clock.now()))
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)

    async def _shutdown(self, hold: asyncio.Task[None] | None) -> int:
        if self._lost:
            log.error("event=leader_lease_lost: stopped scheduling, exiting with code %d", EXIT_LOST_LEASE)
        else:
            if self.scheduler.binds_in_flight:
                log.info("event=draining binds=%d", self.scheduler.binds_in_flight)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.scheduler.drain(), self.options.drain_timeout)
        if hold is not None:
            hold.cancel()
            with contextlib.suppress(BaseException):
                await hold
        self.metrics.is_leader.set(0)
        await self.events.stop(flush_timeout=2.0 if self._lost else 5.0)
        if self.elector is not None and not self._lost:
            await self.elector.release()
        for inf in self._pod_informers():
            await inf.stop()
        self._object_events.closed = True
        await self.objects.stop()
        if self._status_start is not None:
            self._status_start.cancel()
            with contextlib.suppress(BaseException):
                await self._status_start
        with contextlib.suppress(Exception):
            await self.status.stop()
        with contextlib.suppress(Exception):
            await self.scheduler.stop_plugins()
        await self.health.stop()
        for client in (self.events_api, self.lease_api):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2.0)  # bounded, as in run_live
        log.info(
            "event=stopped exit_code=%d attempts=%d bound=%d failed=%d max_loop_lag_ms=%.0f",
            self.exit_code,
            self.stats.attempts,
            self.stats.bound,
            self.stats.failed,
            self.stats.max_loop_lag * 1000,
        )
        return self.exit_code


async def run_live(
    config: SchedulerConfig,
    registry: Registry,
    kubeconfig: str | None,
    options: LiveOptions,
    on_start: Callable[[LiveScheduler], None] | None = None,
    early: EarlyInformers | None = None,
) -> int:
    """Connect (or take ``early``'s connection and informers), run until stopped or the lease is
    lost, close; returns the exit code."""
    from kubesched.kube.api import load_connection

    cc = config.client_connection
    if early is not None:
        api = early.api
        api.rate_limit(cc.qps, cc.burst)
    else:
        conn = await load_connection(kubeconfig or config.client_connection.kubeconfig or None, options.context)
        api = ApiClient(conn, cc.qps, cc.burst)
    try:
        live = LiveScheduler(config, registry, api, options, early)
        if on_start is not None:
            on_start(live)
        return await live.run()
    finally:
        if early is not None:
            early.release_logs(show=False)  # a run that ended before it started them
        # Bounded: after a lost lease the apiserver may be unreachable (a partition), and closing
        # TLS connections nobody answers could keep the process from exiting (and from being
        # replaced) for as long as the SSL shutdown timeout. Found by the chaos suite's partition.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(api.close(), 2.0)
