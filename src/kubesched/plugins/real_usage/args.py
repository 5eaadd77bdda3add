"""RealUsageArgs / MemRealUsageArgs: where to read real node usage and how to weigh it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

Resource = Literal["memory", "cpu"]

#: node-exporter PromQL per resource; ``{label}`` is replaced by ``nodeLabel``. Each must return an
#: instant vector of used fractions (0–1) with the node label on every sample.
DEFAULT_QUERIES: dict[str, str] = {
    "memory": "1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes",
    "cpu": '1 - avg by ({label}) (rate(node_cpu_seconds_total{{mode="idle"}}[1m]))',
}


class ResourceWeight(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Resource
    weight: int = Field(1, ge=1, le=100)


class RealUsageArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    #: Prometheus base URL, e.g. http://prometheus.monitoring:9090 (the reference's name).
    prometheus_api_addr: str = Field(min_length=1)
    #: Timeout of one query, in seconds (the reference's name).
    query_metric_time_seconds: float = Field(10, gt=0, le=300)
    #: Seconds between two polls of Prometheus (the reference's name).
    query_metric_interval_seconds: float = Field(10, gt=0, le=3600)
    #: Which real usage to score, with weights (score = weighted mean of per-resource scores).
    resources: list[ResourceWeight] = Field(default_factory=lambda: [ResourceWeight(name="memory")], min_length=1)
    #: Optional Filter: nodes whose real usage of a resource is above this fraction are refused.
    max_utilization: dict[Resource, float] = Field(default_factory=dict)
    #: A node's value older than this (seconds since the poll that last returned it) is ignored.
    metric_stale_seconds: float | None = Field(None, gt=0)
    #: PromQL per resource (defaults: node-exporter, see DEFAULT_QUERIES).
    queries: dict[Resource, str] = Field(default_factory=dict)
    #: The sample label naming the node: ``node`` (the reference relabels node-exporter so) or
    #: e.g. ``instance`` (its ``:port`` is stripped; values may be node names or node addresses).
    node_label: str = Field("node", min_length=1)
    #: Score of a node without a fresh value (missing, stale, Prometheus down).
    neutral_score: int = Field(50, ge=0, le=100)

    @field_validator("prometheus_api_addr")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/")

    @field_validator("max_utilization")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for res, frac in v.items():
            if not 0 < frac <= 1:
                raise ValueError(f"{res}: a fraction in (0, 1] is expected, got {frac}")
        return v

    @model_validator(mode="after")
    def _unique_resources(self) -> RealUsageArgs:
        names = [r.name for r in self.resources]
        if len(set(names)) != len(names):
            raise ValueError(f"resources: each resource once, got {names}")
        return self

    @property
    def stale_seconds(self) -> float:
        return self.metric_stale_seconds or 3 * self.query_metric_interval_seconds

    def query(self, resource: str) -> str:
        q = self.queries.get(resource)  # type: ignore[call-overload]
        return str(q) if q else DEFAULT_QUERIES[resource].format(label=self.node_label)


class MemRealUsageArgs(RealUsageArgs):
    """The reference's MemRealUsage: real memory only."""

    @model_validator(mode="after")
    def _memory_only(self) -> MemRealUsageArgs:
        if [r.name for r in self.resources] != ["memory"]:
            raise ValueError("MemRealUsage scores real memory only; use the RealUsage plugin for cpu")
        return self
