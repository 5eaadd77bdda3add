"""A small fake registry for the config tests: dummy plugins named like kubesched's built-ins (and the
out-of-tree plugins of the reference designs), implementing the same extension points as upstream, with
tiny args models. The loader only looks at names, base classes and ``args_model``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _F:
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS


class _S:
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 0, SUCCESS


# -- built-ins --------------------------------------------------------------------------------------


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"


class NodeUnschedulable(_F, FilterPlugin):
    name = "NodeUnschedulable"


class NodeName(_F, FilterPlugin):
    name = "NodeName"


class TaintToleration(_F, _S, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "TaintToleration"


class NodeAffinityArgs(_Args):
    added_affinity: dict[str, Any] | None = Field(None, alias="addedAffinity")


class NodeAffinity(_F, _S, PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "NodeAffinity"
    args_model = NodeAffinityArgs


class NodePorts(_F, PreFilterPlugin, FilterPlugin):
    name = "NodePorts"


class ResourceSpec(_Args):
    name: str
    weight: int = 1


class Shape(_Args):
    utilization: int
    score: int


class RequestedToCapacityRatio(_Args):
    shape: list[Shape] = Field(default_factory=list)


class ScoringStrategy(_Args):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = Field(
        default_factory=lambda: [ResourceSpec(name="cpu"), ResourceSpec(name="memory")]
    )
    requested_to_capacity_ratio: RequestedToCapacityRatio | None = Field(None, alias="requestedToCapacityRatio")


class NodeResourcesFitArgs(_Args):
    ignored_resources: list[str] = Field(default_factory=list, alias="ignoredResources")
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy, alias="scoringStrategy")


class NodeResourcesFit(_F, _S, PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "NodeResourcesFit"
    args_model = NodeResourcesFitArgs


class BalancedAllocationArgs(_Args):
    resources: list[ResourceSpec] = Field(
        default_factory=lambda: [ResourceSpec(name="cpu"), ResourceSpec(name="memory")]
    )


class NodeResourcesBalancedAllocation(_S, PreScorePlugin, ScorePlugin):
    name = "NodeResourcesBalancedAllocation"
    args_model = BalancedAllocationArgs


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"


# -- out-of-tree plugins of the reference designs ---------------------------------------------------


class CoschedulingArgs(_Args):
    """scheduler-plugins CoschedulingArgs (older releases also had deniedPGExpirationTimeSeconds)."""

    permit_waiting_time_seconds: int = Field(60, alias="permitWaitingTimeSeconds")
    denied_pg_expiration_time_seconds: int = Field(20, alias="deniedPGExpirationTimeSeconds")
    pod_group_backoff_seconds: int = Field(0, alias="podGroupBackoffSeconds")


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, PermitPlugin, ReservePlugin):
    name = "Coscheduling"
    args_model = CoschedulingArgs


class MemRealUsageArgs(_Args):
    prometheus_api_addr: str = Field(alias="prometheusApiAddr")
    query_metric_time_seconds: int = Field(10, alias="queryMetricTimeSeconds")
    query_metric_interval_seconds: int = Field(10, alias="queryMetricIntervalSeconds")


class MemRealUsage(_S, ScorePlugin):
    name = "MemRealUsage"
    args_model = MemRealUsageArgs


class UnderlayIPArgs(_Args):
    ips_per_node: int = Field(10, alias="ipsPerNode")


class UnderlayIP(_F, _S, FilterPlugin, ScorePlugin, ReservePlugin):
    name = "UnderlayIP"
    args_model = UnderlayIPArgs


BUILTINS: tuple[type[Any], ...] = (
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    NodeResourcesBalancedAllocation,
    DefaultBinder,
)
OUT_OF_TREE: tuple[type[Any], ...] = (Coscheduling, MemRealUsage, UnderlayIP)


def make_registry(*, out_of_tree: bool = True) -> Registry:
    return Registry(BUILTINS + (OUT_OF_TREE if out_of_tree else ()))
