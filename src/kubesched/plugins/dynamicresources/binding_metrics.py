"""The binding-conditions metrics kube-scheduler v1.37 records at PreBind (DRADeviceBindingConditions,
beta and on): how long PreBind waited for the devices' binding conditions and how each wait ended.

Port of pkg/scheduler/metrics/metrics.go (v1.37.1: ``DRABindingConditionsAllocationsTotal``,
``DRABindingConditionsPreBindDuration``, the ``BindingConditionsStatus*`` labels) and of what
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go's PreBind records after its
wait: per allocated device result of the pod's claims, one observation of the wait's duration;
per result whose device has binding conditions (``listBindingConditionsStatus``), one allocation
counted, both labelled with the profile, the result's driver and the outcome (``success``,
``failure``, ``timeout``, ``error``). Shells expose them through ``Plugin.metric_families``
(framework/plugin_metrics.py; the live shell on ``/metrics``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.plugin_metrics import CounterFamily, HistogramFamily, MetricFamily, exponential_buckets
from kubesched.plugins.dynamicresources.claims import allocation

#: metrics.BindingConditionsStatusSuccess (the other outcomes are BindingError.status).
STATUS_SUCCESS = "success"

_LABELS = ("profile", "driver", "status")


class BindingConditionsMetrics:
    def __init__(self) -> None:
        self.allocations = CounterFamily(
            "scheduler_dra_bindingconditions_allocations",
            "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
            _LABELS)
        self.wait = HistogramFamily(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            _LABELS, exponential_buckets(0.1, 2, 14))

    def families(self) -> Sequence[MetricFamily]:
        return (self.allocations, self.wait)

    def record(self, profile: str, claims: Sequence[Mapping[str, Any]], status: str, seconds: float) -> None:
        """PreBind's wait for ``claims`` (as last seen) ended with ``status`` after ``seconds``."""
        for claim in claims:
            alloc = allocation(claim)
            if alloc is None:
                continue
            results = (alloc.get("devices") or {}).get("results") or []
            for result in results:
                self.wait.observe(seconds, profile, str(result.get("driver", "")), status)
            for result in results:
                if result.get("bindingConditions"):
                    self.allocations.inc(profile, str(result.get("driver", "")), status)
