"""Run a scheduler configuration over a cluster in virtual time.

The loop: feed nodes, pre-bound pods and pending pods (in creation order) to the scheduler; schedule
while pods are active; when none are, jump the virtual clock to the next backoff expiry or Permit
deadline. When only pods waiting for a cluster event are left and one of them was refused by a
plugin other than a Filter (a gang's PreFilter or Permit: group backoffs, Permit timeouts), the
clock jumps to the unschedulable flush (``podMaxInUnschedulablePodsDuration``, 5 minutes) and they
are retried, as upstream retries them. Filter verdicts need no flush: they change only with the
nodes and the pods on them, which reach the queue as events. The replay ends when no future event
can bind another pod: nothing is left to retry, or a flush ends in a state already seen since the
last bind (retrying again would repeat it). Deterministic for a given seed.

With a scenario (inputs/scenario.py), the clock also wakes at its events (engine/timeline.py):
pods arrive, leave a lifetime after their bind, nodes come, go and are cordoned; the replay ends
once no event is left and nothing more can bind. The metrics are sampled before every jump of the
clock. Pods refused by a non-Filter plugin wait for the flush until the scenario's events are over.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.backend.host_selection import TieBreak
from kubesched.config.load import SchedulerConfig
from kubesched.framework.clock import FakeClock
from kubesched.framework.explain import Explanation, explain, waiting_notes
from kubesched.framework.podgroup import COMPOSITE_POD_GROUP_OBJECTS, POD_GROUP_OBJECTS
from kubesched.framework.registry import Registry, profiles_object_kinds
from kubesched.scheduler import QueueSettings, Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.records import GATED, PRE_BOUND, SCHEDULED, PodRecord, PreemptionRecord, Recorder
from kubesched.simulate.engine.timeline import Timeline, scenario_input
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.gc_pause import fewer_young_collections, paused_gc
from kubesched.simulate.inputs.scenario import Scenario
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

#: Pods scheduled between two chances for binding tasks and the progress callback to run.
_BATCH = 256


@dataclass(repr=False)  # asyncio may repr a task's result; this one holds the whole cluster
class SimulationResult:
    config: SchedulerConfig
    cluster: SimulatedCluster
    scheduler: Scheduler
    records: dict[str, PodRecord]
    requested_before: npt.NDArray[np.int64]
    pods_before: dict[str, int]
    wall_seconds: float
    virtual_seconds: float
    interrupted: bool
    input: ClusterInput
    #: Pending pods whose schedulerName matched no profile and were run with the first profile.
    reassigned: dict[str, int] = field(default_factory=dict)
    explanation: Explanation | None = None
    attempts: int = 0
    #: The run stopped because pods kept being retried without any bind for ``max_idle`` virtual
    #: seconds (e.g. a gang that can never complete, retried with backoff for ever).
    stalled: bool = False
    #: What plugins report about the objects they declare (``object_report()``), kind → key →
    #: report: e.g. each PodGroup's status and, for a gang left unplaced, why.
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: Unschedulable flushes simulated (each a 5-minute jump of the virtual clock).
    flushes: int = 0
    #: Preemptions, in the order they happened (simulate/engine/records.py PreemptionRecord).
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    #: The scenario replayed and its metrics over time (None: a static cluster).
    timeline: Timeline | None = None

    @property
    def pod_groups(self) -> dict[str, dict[str, Any]]:
        return self.objects.get("PodGroup", {})

    @property
    def workload_pod_groups(self) -> dict[str, dict[str, Any]]:
        """The Workload API's PodGroups (``scheduling.k8s.io``): minCount, members, placed,
        waiting at Permit, pending and, for a gang not placed, why it waits."""
        return self.objects.get(POD_GROUP_OBJECTS, {})

    @property
    def workload_composite_pod_groups(self) -> dict[str, dict[str, Any]]:
        """The CompositePodGroups (CompositePodGroup gate): children ready and placed against
        minGroupCount, members and, for one not placed, why it waits."""
        return self.objects.get(COMPOSITE_POD_GROUP_OBJECTS, {})

    @property
    def underlay_ip_pools(self) -> dict[str, dict[str, Any]]:
        return self.objects.get("UnderlayIPPool", {})


def _rows_now(
    table: NodeTable, before: npt.NDArray[np.int64], rows_before: dict[str, int]
) -> npt.NDArray[np.int64]:
    """What each node had requested when the simulation started, in the rows the table has at the
    end: a replay's node events add nodes (which had nothing), remove them and reuse their rows,
    and grow the table past the rows copied at the start."""
    aligned = np.zeros((len(table.requested), before.shape[1]), dtype=before.dtype)  # columns as they were
    for name, old in rows_before.items():
        row = table.row_of(name)
        if row is not None:
            aligned[row] = before[old]
    return aligned


class Simulation:
    def __init__(
        self,
        config: SchedulerConfig,
        registry: Registry,
        cluster_input: ClusterInput | Scenario,
        seed: int = 0,
        explain_pod: str | None = None,
        strict_scheduler_name: bool = False,
        progress: Callable[[int, int], None] | None = None,
        top_k: int = 5,
        max_idle_virtual_seconds: float = 900.0,
        per_node: bool = False,
        unfreeze_gc: bool = True,
        feed: Callable[[Simulation], list[PodInfo]] | None = None,
        on_attempt: Callable[[PodInfo, str, str | None], None] | None = None,
        tie_break: TieBreak = "random",
    ) -> None:
        self.config = config
        scenario: Scenario | None = None
        if isinstance(cluster_input, Scenario):
            scenario, cluster_input = cluster_input, scenario_input(cluster_input)
        self.input = cluster_input
        self.clock = FakeClock(0.0)
        # The controllers that act on pods for the kinds the profiles' plugins read (e.g.
        # ResourceClaims stamped from templates): the cluster runs them as pods arrive.
        self.cluster = SimulatedCluster(
            [k for k in profiles_object_kinds(registry, config.profiles, config.feature_gates)
             if k.pod_controller is not None])
        self.scheduler = Scheduler.build(
            config.profiles,
            registry,
            self.clock,
            client=self.cluster,
            queue_settings=QueueSettings(config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds),
            parallelism=config.parallelism,
            feature_gates=config.feature_gates,
            seed=seed,
            objects=self.cluster.kind,
            eager_binding=True,  # binds complete in memory: no Task per pod
            tie_break=tie_break,
        )
        self.cluster.attach(self.scheduler)
        self._explain_pod = explain_pod
        self._explanation: Explanation | None = None
        # per_node: keep every evaluated node's verdict and the top_k scores of each pod (memory
        # grows with pods × rejecting nodes); else its reasons and the chosen node's score only.
        self.recorder = Recorder(
            self.scheduler.cache.table, self.clock, top_k, self._maybe_explain, give_up=self._give_up,
            per_node=per_node, object_status=self.cluster.patch_object_status,
        )
        self.scheduler.observer = self.recorder
        self._strict = strict_scheduler_name
        self._progress = progress
        self._stop = False
        self._max_idle = max_idle_virtual_seconds
        self._stalled = False
        self._flushes = 0
        #: False: the loaded cluster stays out of the cyclic GC after the run (a process that
        #: exits after reporting this one simulation; saves a full collection, ~0.6 s at 5,000
        #: nodes). True: unfrozen, so a process running several simulations gets their cycles freed.
        self._unfreeze_gc = unfreeze_gc
        #: Called whenever the replay has nothing left to do: more pending pods to schedule, in
        #: order (none: the run ends). Capacity questions feed replicas in batches this way.
        self._feed = feed
        #: Called after every scheduling attempt with the node chosen (None: it failed).
        self._on_attempt = on_attempt
        self._reassigned: dict[str, int] = {}
        self.timeline = None if scenario is None else Timeline(
            scenario, self.cluster, self.scheduler.cache.table, self.clock.now, self._admit,
            lambda: len(self.scheduler.queue),
        )

    # -- explain hook: capture the full picture at the moment the pod is decided ------------------
    def _matches(self, pod: PodInfo) -> bool:
        want = self._explain_pod
        return want is not None and (pod.key == want or (pod.name == want and "/" not in want))

    def _maybe_explain(self, pod: PodInfo, profile: str, chosen: str | None) -> None:
        if self._on_attempt is not None:
            self._on_attempt(pod, profile, chosen)
        if self._matches(pod):
            self._explanation = explain(self.scheduler.frameworks[profile], pod, chosen)

    def _give_up(self, pod: PodInfo) -> None:
        self.scheduler.queue.delete(pod.uid)

    # -- the run ------------------------------------------------------------------------------------
    def _load(self) -> tuple[list[PodInfo], dict[str, int]]:
        for kind, objs in self.input.objects.items():
            for key, raw in objs.items():
                self.cluster.add_object(kind, key, raw)
        for raw in self.input.nodes:
            self.cluster.add_node(raw)
        self.cluster.settle_volumes()
        pending: list[PodInfo] = []
        for raw in self.input.pods:
            pod = PodInfo.from_raw(raw)
            if pod.terminal:
                self.scheduler.on_pod_add(pod)  # not placed, but plugins may count it (e.g. a group's succeeded)
                continue
            if pod.node_name:
                self.cluster.add_pod(pod)
                rec = self.recorder.record(pod, pod.scheduler_name)
                rec.status, rec.node = PRE_BOUND, pod.node_name
                continue
            if self._admit(pod):
                pending.append(pod)
        pending.sort(key=lambda p: p.creation_ts)  # stable: file order breaks ties
        return pending, self._reassigned

    def _admit(self, pod: PodInfo) -> bool:
        """Record a pending pod; one whose schedulerName matches no profile is run with the first
        profile, or with --strict-scheduler-name left pending (False: not to be scheduled)."""
        profiles = self.scheduler.frameworks
        if pod.scheduler_name not in profiles:
            if self._strict:
                self.recorder.record(pod, pod.scheduler_name).message = (
                    f"schedulerName {pod.scheduler_name!r} matches no profile; left pending"
                )
                return False
            self._reassigned[pod.scheduler_name] = self._reassigned.get(pod.scheduler_name, 0) + 1
            pod.scheduler_name = next(iter(profiles))
        self.recorder.record(pod, pod.scheduler_name)  # Pending until its first attempt
        return True

    async def run(self) -> SimulationResult:
        started = time.perf_counter()
        # The loaded cluster lives until the end: built with the cyclic GC paused, then frozen so
        # no collection scans it again while pods are scheduled (about 15 % of a 10,000-pod run).
        with paused_gc(freeze=True):
            pending, reassigned = self._load()
            table = self.scheduler.cache.table
            requested_before = table.requested.copy()
            pods_before = {table.names[r]: len(table.pods[r]) for r in table.alive_rows()}
            rows_before = {table.names[r]: r for r in table.alive_rows().tolist()}
            for pod in pending:
                self.cluster.add_pod(pod)
            arrivals = self.timeline.arrival_pods if self.timeline is not None else ()
            self.scheduler.announce_workload(itertools.chain(pending, arrivals))
        await self.scheduler.start_plugins()
        gc.freeze()  # and what the plugins built at start
        try:
            with fewer_young_collections():
                await self._loop(len(pending) + (self.timeline.total_arrivals if self.timeline else 0))
                while self._feed is not None and not self._stop:
                    more = self._feed(self)
                    if not more:
                        break
                    for pod in more:
                        self.recorder.record(pod, pod.scheduler_name)
                        self.cluster.add_pod(pod)
                    await self._loop(len(more))
        except asyncio.CancelledError:
            # Ctrl-C: asyncio.run cancels the main task; report what was done so far.
            self._stop = True
        finally:
            if self._unfreeze_gc:
                gc.unfreeze()
            await self.scheduler.drain()
            await self.scheduler.stop_plugins()
        if self.timeline is not None:
            self.timeline.sample(self.clock.now())
        if self._explain_pod is not None and self._explanation is None:
            self._explain_now()
        self._explain_waiting()
        self._record_gated()
        return SimulationResult(
            config=self.config,
            cluster=self.cluster,
            scheduler=self.scheduler,
            records=self.recorder.records,
            requested_before=_rows_now(table, requested_before, rows_before),
            pods_before=pods_before,
            wall_seconds=time.perf_counter() - started,
            virtual_seconds=self.clock.now(),
            interrupted=self._stop,
            input=self.input,
            reassigned=reassigned,
            explanation=self._explanation,
            attempts=self.recorder.attempts,
            stalled=self._stalled,
            objects=self._object_report(),
            flushes=self._flushes,
            preemptions=self.recorder.preemptions,
            timeline=self.timeline,
        )

    def _record_gated(self) -> None:
        """Pods a PreEnqueue plugin still holds back are reported as gated, with the plugin's
        message (``waiting for scheduling gates: [...]``), not as pending or unschedulable."""
        for qpi in self.scheduler.queue.gated_pods():
            rec = self.recorder.record(qpi.pod, qpi.pod.scheduler_name)
            rec.status = GATED
            rec.message = qpi.gating_status.message if qpi.gating_status is not None else ""

    def _object_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for plugin in self.scheduler.plugins():
            for kind, objs in plugin.object_report().items():
                out.setdefault(kind, {}).update((key, dict(fields)) for key, fields in objs.items())
        return out

    def _explain_waiting(self) -> None:
        """The explained pod, if left unplaced: why plugins hold it as the run ends (it was
        explained when attempted, before e.g. its gang's verdict)."""
        if self._explanation is None:
            return
        for pod in self.cluster.pods.values():
            if self._matches(pod) and not pod.node_name:
                frameworks = self.scheduler.frameworks
                fwk = frameworks.get(self._explanation.profile) or next(iter(frameworks.values()))
                self._explanation.waiting = waiting_notes(fwk, pod)
                return

    def _explain_now(self) -> None:
        for pod in self.cluster.pods.values():
            if self._matches(pod):
                frameworks = self.scheduler.frameworks
                fwk = frameworks.get(pod.scheduler_name) or next(iter(frameworks.values()))
                self._explanation = explain(fwk, pod)
                return

    async def _loop(self, total: int) -> None:
        sched = self.scheduler
        last_bound, last_progress = -1, self.clock.now()
        #: Fingerprints of the quiet states (only unschedulable pods left) since the last bind.
        seen: set[int] = set()
        timeline = self.timeline
        while not self._stop:
            if timeline is not None and timeline.apply_due(self.clock.now()):
                last_progress = self.clock.now()  # the scenario moved on: not a stall
                seen.clear()
            if self.recorder.bound_count != last_bound:
                last_bound, last_progress = self.recorder.bound_count, self.clock.now()
                seen.clear()
            elif self.clock.now() - last_progress > self._max_idle:
                self._stalled = True  # retrying without any bind: a static replay will not change
                return
            self.cluster.advance(self.clock.now())  # preemption victims whose grace period ended
            sched.tick(self.clock.now())
            if sched.binds_in_flight:
                await sched.drain()  # Permit waits that just expired release their reservations now
            n = 0
            while sched.schedule_one():
                n += 1
                if sched.binds_in_flight and self._decided_waiting():
                    # A gang was rejected (or allowed) at Permit: release (or bind) it before the
                    # next pod, so a rejected gang's reservations never keep another pod out.
                    await asyncio.sleep(0)
                if n % _BATCH == 0:
                    await asyncio.sleep(0)  # let in-memory binds finish, keep memory flat
                    self._report(total)
                    if self._stop:
                        return
            await sched.drain()
            await asyncio.sleep(0)  # a chance for cancellation (Ctrl-C) on every pass
            self._report(total)
            if sched.queue.has_active():
                continue
            # Nothing to do now: jump to the next backoff expiry or Permit deadline.
            wake = sched.next_wakeup(include_unschedulable=False)
            for due in (self.cluster.next_eviction(), timeline.next_time() if timeline is not None else None):
                if due is not None:
                    wake = due if wake is None else min(wake, due)
            if timeline is not None:
                timeline.sample(self.clock.now())
            if wake is None:
                # Only pods waiting for a cluster event are left (if any). Upstream retries them
                # after podMaxInUnschedulablePodsDuration; so does the replay, as long as that can
                # change the outcome: a state seen before since the last bind would repeat.
                fingerprint = self._fingerprint()
                if fingerprint is None or fingerprint in seen or not self._flush_may_help():
                    return
                seen.add(fingerprint)
                wake = sched.next_wakeup(include_unschedulable=True)
                if wake is None:
                    return
                self._flushes += 1
            self.clock.set(max(wake, self.clock.now()))

    def _flush_may_help(self) -> bool:
        """Whether retrying the unschedulable pods may change anything: Filter verdicts depend on
        the nodes and the pods on them, whose changes reach the queue as cluster events (a static
        replay has no other); a pod refused by another plugin (at PreFilter, Reserve or Permit:
        groups, quotas, backoffs, timeouts) may pass on a retry, as upstream's flush would find."""
        filters = {p.name for fwk in self.scheduler.frameworks.values() for p in fwk.filter}
        return any(
            plugin not in filters
            for qpi in self.scheduler.queue.unschedulable_pods()
            for plugin in qpi.unschedulable_plugins
        )

    def _decided_waiting(self) -> bool:
        return any(wp.decided for wp in self.scheduler.waiting_pods)

    def _fingerprint(self) -> int | None:
        """The outcome so far of the pods not bound (None: none is left to retry)."""
        if not self.scheduler.queue.counts()["unschedulable"]:
            return None
        return hash(
            (
                self.recorder.bound_count,
                tuple(
                    (rec.uid, rec.status, rec.message)
                    for rec in self.recorder.records.values()
                    if rec.status not in (SCHEDULED, PRE_BOUND)
                ),
            )
        )

    def _report(self, total: int) -> None:
        if self._progress is not None:
            self._progress(self.recorder.bound_count, total)

    def interrupt(self) -> None:
        self._stop = True

