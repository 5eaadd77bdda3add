"""Prometheus metrics with kube-scheduler's names, kept cheap on the scheduling path.

* ``scheduler_schedule_attempts_total{result,profile}`` — result scheduled | unschedulable | error;
* ``scheduler_scheduling_attempt_duration_seconds{result,profile}`` — histogram;
* ``scheduler_pending_pods{queue}`` — active | backoff | unschedulable | gated, read from the queue
  at scrape time (a collector), so the hot path never touches it;
* ``scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`` —
  histogram per extension point, timed by wrapping each Framework's ``run_*`` methods on the
  instance (:func:`instrument_framework`: no change to the core, nothing when metrics are off);
* the plugins' own metrics (``Plugin.metric_families``, e.g. DynamicResources'
  ``scheduler_dra_bindingconditions_*``), read from the plugins at scrape time;
* plus kubesched's own ``kubesched_binds_total{result}``, ``kubesched_informer_events_total{resource}``
  and ``kubesched_is_leader``.

Label children are cached per label tuple so an observation is one dict lookup plus the histogram's
own bucket search.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kubesched.backend.queue import SchedulingQueue
from kubesched.framework.interfaces import Plugin
from kubesched.framework.plugin_metrics import CounterFamily, HistogramFamily
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Status, code_name

#: kube-scheduler's buckets (metrics.go): ExponentialBuckets(0.001, 2, 15) for attempts and
#: ExponentialBuckets(0.0001, 2, 12) for extension points.
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
EXTENSION_POINT_BUCKETS = tuple(0.0001 * 2**i for i in range(12))


class _PendingPods(Collector):
    def __init__(self, queue: Callable[[], SchedulingQueue | None]) -> None:
        self._queue = queue

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("scheduler_pending_pods", "Number of pending pods, by the queue type.", labels=["queue"])
        q = self._queue()
        counts = q.counts() if q is not None else {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
        for name, n in counts.items():
            g.add_metric([name], n)
        yield g


class _Connectivity(Collector):
    """Read at scrape time from the informers' and the lease elector's own counters."""

    def __init__(self, informers: Callable[[], Sequence[Any]], lease_attempts: Callable[[], dict[str, int]]) -> None:
        self._informers = informers
        self._lease_attempts = lease_attempts

    def collect(self) -> Iterator[Any]:
        lists = CounterMetricFamily("kubesched_informer_lists", "Full lists by an informer (start, 410, reconnect).",
                                    labels=["informer"])
        gone = CounterMetricFamily("kubesched_informer_relists_after_gone",
                                   "Relists because the watched resourceVersion was too old (410 Gone).",
                                   labels=["informer"])
        errors = CounterMetricFamily("kubesched_informer_watch_errors", "Failed lists or watches.", labels=["informer"])
        down = GaugeMetricFamily("kubesched_informer_disconnected_seconds",
                                 "Seconds since an informer last failed without reaching the apiserver since (0: "
                                 "connected).", labels=["informer"])
        for inf in self._informers():
            lists.add_metric([inf.name], inf.stats.lists)
            gone.add_metric([inf.name], inf.stats.relists_after_gone)
            errors.add_metric([inf.name], inf.stats.watch_errors)
            down.add_metric([inf.name], inf.disconnected_for())
        yield from (lists, gone, errors, down)
        lease = CounterMetricFamily("kubesched_lease_attempts", "Lease acquire or renew attempts, by the result.",
                                    labels=["result"])
        for result, n in self._lease_attempts().items():
            lease.add_metric([result], n)
        yield lease


#: prometheus_client's own text for a bucket bound (untyped there): "0.1", "+Inf".
_go_float = cast(Callable[[float], str], floatToGoString)


class _PluginMetrics(Collector):
    """The plugins' metric families at scrape time; one family per name across profiles (each
    plugin instance labels its profile)."""

    def __init__(self, plugins: Sequence[Plugin], frameworks: Sequence[Framework] = ()) -> None:
        self._plugins = [p for p in plugins if type(p).metric_families is not Plugin.metric_families]
        #: Whose OpportunisticBatching counters to serve (framework/batch.py), read at scrape time.
        self._frameworks = frameworks

    def collect(self) -> Iterator[Any]:
        counters: dict[str, CounterMetricFamily] = {}
        histograms: dict[str, HistogramMetricFamily] = {}
        families = [f for plugin in self._plugins for f in plugin.metric_families()]
        families += [f for fwk in self._frameworks for f in fwk.batch.metric_families(fwk.profile_name)]
        for family in families:
            if isinstance(family, CounterFamily):
                c = counters.get(family.name)
                if c is None:
                    c = counters[family.name] = CounterMetricFamily(family.name, family.help,
                                                                    labels=list(family.labels))
                for labels, value in sorted(family.values.items()):
                    c.add_metric(list(labels), value)
            elif isinstance(family, HistogramFamily):
                h = histograms.get(family.name)
                if h is None:
                    h = histograms[family.name] = HistogramMetricFamily(family.name, family.help,
                                                                        labels=list(family.labels))
                for labels, series in sorted(family.series.items()):
                    cumulative, buckets = 0, []
                    for bound, n in zip((*family.bounds, float("inf")), series.buckets, strict=True):
                        cumulative += n
                        buckets.append((_go_float(bound), cumulative))
                    h.add_metric(list(labels), buckets, series.sum)
        yield from counters.values()
        yield from histograms.values()


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.extension_point = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=EXTENSION_POINT_BUCKETS,
            registry=r,
        )
        self.binds = Counter("kubesched_binds", "Bind calls to the apiserver, by the result.", ["result"], registry=r)
        self.informer_events = Counter(
            "kubesched_informer_events", "Objects delivered by the informers.", ["resource"], registry=r
        )
        self.preemption_victims = Counter(
            "scheduler_preemption_victims", "Number of selected preemption victims (evicted).", registry=r
        )
        self.is_leader = Gauge("kubesched_is_leader", "1 while this replica holds the leader lease.", registry=r)
        self.loop_lag = Histogram(
            "kubesched_event_loop_lag_seconds",
            "How late a 100 ms timer fired on the event loop: how long scheduling, informers or anything "
            "else kept the loop (and so Lease renewals, binds and watches) waiting.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=r,
        )
        self._queue: SchedulingQueue | None = None
        r.register(_PendingPods(lambda: self._queue))
        self._children: dict[tuple[Any, ...], Any] = {}
        #: The frameworks instrument_framework timed: their batching counters are served too.
        self.frameworks: list[Framework] = []

    def watch_connectivity(
        self, informers: Callable[[], Sequence[Any]], lease_attempts: Callable[[], dict[str, int]]
    ) -> None:
        """Informer lists, 410 relists, errors, disconnection and lease attempts, at scrape time."""
        self.registry.register(_Connectivity(informers, lease_attempts))

    def watch_plugins(self, plugins: Sequence[Plugin]) -> None:
        """The plugins' own metrics (``Plugin.metric_families``) and the OpportunisticBatching
        counters of the frameworks :func:`instrument_framework` was given, at scrape time."""
        self.registry.register(_PluginMetrics(plugins, self.frameworks))

    def watch_queue(self, queue: SchedulingQueue) -> None:
        self._queue = queue

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self._child(self.attempts, result, profile).inc()
        self._child(self.attempt_duration, result, profile).observe(seconds)

    def extension(self, point: str, status: str, profile: str, seconds: float) -> None:
        self._child(self.extension_point, point, status, profile).observe(seconds)

    def bind(self, result: str) -> None:
        self._child(self.binds, result).inc()

    def informer_event(self, resource: str) -> None:
        self._child(self.informer_events, resource).inc()


def _status_of(result: Any) -> str:
    st: Any = result
    if isinstance(result, tuple):
        st = result[-1]
    if isinstance(st, Status):
        return code_name(st.code)
    return "Success"  # run_score returns ScoredNodes on success; unreserve/post_bind return None


_SYNC_POINTS = {
    "run_pre_filter": "PreFilter",
    "run_filters": "Filter",
    "run_post_filter": "PostFilter",
    "run_pre_score": "PreScore",
    "run_score": "Score",
    "run_reserve": "Reserve",
    "run_unreserve": "Unreserve",
    "run_permit": "Permit",
    "run_post_bind": "PostBind",
}
_ASYNC_POINTS = {"run_pre_bind": "PreBind", "run_bind": "Bind"}


def instrument_framework(fwk: Framework, metrics: SchedulerMetrics) -> None:
    """Time every extension point of ``fwk`` into ``scheduler_framework_extension_point_duration_seconds``
    (and serve its OpportunisticBatching counters with the plugins' metrics)."""
    metrics.frameworks.append(fwk)
    profile = fwk.profile_name
    perf = time.perf_counter

    def wrap_sync(attr: str, point: str) -> None:
        inner = getattr(fwk, attr)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = perf()
            result = inner(*args, **kwargs)
            metrics.extension(point, _status_of(result), profile, perf() - t0)
            return result

        setattr(fwk, attr, timed)

    def wrap_async(attr: str, point: str) -> None:
        inner = getattr(fwk, attr)

        @functools.wraps(inner)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = perf()
            status = "Error"
            try:
                result = await inner(*args, **kwargs)
                status = _status_of(result)
                return result
            finally:
                metrics.extension(point, status, profile, perf() - t0)

        setattr(fwk, attr, timed)

    for attr, point in _SYNC_POINTS.items():
        wrap_sync(attr, point)
    for attr, point in _ASYNC_POINTS.items():
        wrap_async(attr, point)
