"""The extender's Prometheus metrics (``GET /metrics``).

The per-request ones (requests by verb and code, the latency histogram, errors by kind) are
counted in plain numbers and turned into Prometheus metric families when scraped
(``RequestMetrics``), with the same names, labels, buckets and ``_created`` samples as
prometheus_client's Counter and Histogram would expose. Each request counts twice or three times;
the client's metric children take a lock and, for the histogram, walk its buckets on every call,
about as much CPU as the no-op extender spends decoding a request (bench/extender_replay.py). The
server answers on one thread, so nothing here needs a lock.
"""

from __future__ import annotations

import bisect
import functools
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from kubesched.extender.service import ExtenderService

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _Counted:
    """One labelled counter's value and when it was created."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0
        self.created = time.time()


class _Observed:
    """One labelled histogram's observations per bucket (not cumulative), their sum, and when it
    was created."""

    __slots__ = ("counts", "created", "sum")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.sum = 0.0
        self.created = time.time()


class RequestMetrics(Collector):
    """kubesched_extender_requests{verb,code}, kubesched_extender_request_duration_seconds{verb}
    and kubesched_extender_errors{verb,kind}."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, str], _Counted] = {}
        self._errors: dict[tuple[str, str], _Counted] = {}
        self._latency: dict[str, _Observed] = {}
        #: Upper bounds, +Inf last (a value goes to the first bound it does not exceed).
        self._bounds = (*LATENCY_BUCKETS, float("inf"))
        #: Their ``le`` labels, as prometheus_client writes them.
        self._le = tuple(floatToGoString(b) for b in self._bounds)  # type: ignore[no-untyped-call]

    def count(self, verb: str, code: str) -> None:
        counted = self._requests.get((verb, code))
        if counted is None:
            counted = self._requests[verb, code] = _Counted()
        counted.value += 1

    def error(self, verb: str, kind: str) -> None:
        counted = self._errors.get((verb, kind))
        if counted is None:
            counted = self._errors[verb, kind] = _Counted()
        counted.value += 1

    def observe(self, verb: str, seconds: float) -> None:
        observed = self._latency.get(verb)
        if observed is None:
            observed = self._latency[verb] = _Observed(len(self._bounds))
        observed.counts[bisect.bisect_left(self._bounds, seconds)] += 1
        observed.sum += seconds

    def collect(self) -> Iterator[Metric]:
        yield _counter("kubesched_extender_requests", "Extender requests by verb and HTTP status code.",
                       ("verb", "code"), self._requests)
        latency = Metric("kubesched_extender_request_duration_seconds",
                         "Time to answer an extender request, by verb.", "histogram")
        for verb, observed in self._latency.items():
            total = 0
            for le, n in zip(self._le, observed.counts, strict=True):
                total += n
                latency.add_sample(latency.name + "_bucket", {"verb": verb, "le": le}, float(total))
            latency.add_sample(latency.name + "_count", {"verb": verb}, float(total))
            latency.add_sample(latency.name + "_sum", {"verb": verb}, observed.sum)
            latency.add_sample(latency.name + "_created", {"verb": verb}, observed.created)
        yield latency
        yield _counter("kubesched_extender_errors", "Requests answered with an Error, by verb and kind.",
                       ("verb", "kind"), self._errors)


def _counter(name: str, documentation: str, labels: tuple[str, str], values: dict[tuple[str, str], _Counted]
             ) -> Metric:
    metric = Metric(name, documentation, "counter")
    for key, counted in values.items():
        named = dict(zip(labels, key, strict=True))
        metric.add_sample(name + "_total", named, float(counted.value))
        metric.add_sample(name + "_created", named, counted.created)
    return metric


class Metrics:
    """What ``/metrics`` shows: the request metrics, the node-table cache and the pods in flight."""

    def __init__(self, service: ExtenderService, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = RequestMetrics()
        self.registry.register(self.requests)
        self.count, self.observe, self.error = self.requests.count, self.requests.observe, self.requests.error
        builds = Gauge(
            "kubesched_extender_node_table_builds", "Node tables built from request Node objects (LRU misses).",
            registry=self.registry,
        )
        builds.set_function(lambda: service.table_builds)
        hits = Gauge(
            "kubesched_extender_node_table_hits", "Requests served from a cached node table (LRU hits).",
            registry=self.registry,
        )
        hits.set_function(lambda: service.table_hits)
        holds = service.holds
        if holds is not None:
            in_flight = Gauge(
                "kubesched_extender_pods_in_flight",
                "Pods held on the node the extender approved until its watch sees them bound.",
                registry=self.registry,
            )
            in_flight.set_function(lambda: len(holds))
            ended = Gauge(
                "kubesched_extender_in_flight_ended",
                "Holds ended, by why: confirmed, elsewhere, deleted, retried, bind_failed, expired.",
                ["reason"], registry=self.registry,
            )
            for reason in holds.ended:
                ended.labels(reason).set_function(functools.partial(holds.ended.__getitem__, reason))
