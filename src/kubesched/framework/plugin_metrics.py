"""Metrics a plugin keeps itself, for the shells to expose (upstream plugins record into
pkg/scheduler/metrics directly, e.g. DynamicResources' ``dra_bindingconditions_*``).

The core stays free of Prometheus: a plugin owns ``CounterFamily`` / ``HistogramFamily`` objects,
records into them (cumulative values per label tuple, so nothing is lost between scrapes and the
memory is bounded by the labels' values), and lists them in ``Plugin.metric_families``. A shell that
serves metrics reads them at scrape time (the live shell: kubesched/live/metrics.py); the others
never look. Names are the full exposition names, as upstream's (subsystem included).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class CounterFamily:
    """A CounterVec: ``name`` without the ``_total`` suffix the exposition adds."""

    name: str
    help: str
    labels: tuple[str, ...]
    values: dict[tuple[str, ...], float] = field(default_factory=dict)

    def inc(self, *label_values: str, amount: float = 1.0) -> None:
        key = _key(self.labels, label_values)
        self.values[key] = self.values.get(key, 0.0) + amount


@dataclass(slots=True)
class HistogramSeries:
    #: Observations per bucket (not cumulative): ``buckets[i]`` counts values <= bounds[i] and
    #: > bounds[i-1]; the last entry counts those above every bound.
    buckets: list[int]
    sum: float = 0.0


@dataclass(slots=True)
class HistogramFamily:
    """A HistogramVec with fixed upper bounds (``+Inf`` implied)."""

    name: str
    help: str
    labels: tuple[str, ...]
    bounds: tuple[float, ...]
    series: dict[tuple[str, ...], HistogramSeries] = field(default_factory=dict)

    def observe(self, value: float, *label_values: str) -> None:
        key = _key(self.labels, label_values)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = HistogramSeries([0] * (len(self.bounds) + 1))
        s.buckets[bisect.bisect_left(self.bounds, value)] += 1
        s.sum += value


MetricFamily = CounterFamily | HistogramFamily


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """metrics.ExponentialBuckets."""
    return tuple(start * factor**i for i in range(count))


def _key(labels: Sequence[str], values: Sequence[str]) -> tuple[str, ...]:
    if len(values) != len(labels):
        raise ValueError(f"expected {len(labels)} label values ({', '.join(labels)}), got {len(values)}")
    return tuple(values)
