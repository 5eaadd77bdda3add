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

Also ``dynamic_resource_allocation_resourceclaim_creates_total`` (v1.37.1: pkg/scheduler/metrics
``ResourceClaimCreatesTotal``, which is k8s.io/dynamic-resource-allocation/resourceclaim/metrics
``ResourceClaimCreate``, shared with kube-controller-manager; it replaced 1.35's
``scheduler_resourceclaim_creates_total``): PreBind's creation of the claim for DRA-backed extended
resources, counted ``success`` or ``failure`` with ``admin_access="false"``, no owner API group and
owner kind ``Pod``, as extendeddynamicresources.go ``createExtendedResourceClaimInAPI`` counts it.
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

        self.claim_creates = CounterFamily(
            "dynamic_resource_allocation_resourceclaim_creates",
            "Number of ResourceClaims creation requests, categorized by creation status, admin access, and owning "
            "API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
            ("status", "admin_access", "owner_api_group", "owner_api_kind"))

    def families(self) -> Sequence[MetricFamily]:
        # The claim creates appear once counted: a CounterVec without series is not gathered
        # upstream either (extendeddynamicresources_test.go expects "not found" before any create).
        return (self.allocations, self.wait, *((self.claim_creates,) if self.claim_creates.values else ()))

    def claim_created(self, succeeded: bool) -> None:
        """PreBind's create of a pod's extended resources claim succeeded or failed."""
        self.claim_creates.inc("success" if succeeded else "failure", "false", "", "Pod")

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
