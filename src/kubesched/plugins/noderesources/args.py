"""Arguments of NodeResourcesFit and NodeResourcesBalancedAllocation.

Field names, defaults and validation follow upstream:

* types: ``staging/src/k8s.io/kube-scheduler/config/v1/types_pluginargs.go``
  (``NodeResourcesFitArgs``, ``ScoringStrategy``, ``ResourceSpec``, ``UtilizationShapePoint``,
  ``NodeResourcesBalancedAllocationArgs``);
* defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` (``SetDefaults_NodeResourcesFitArgs``,
  ``SetDefaults_NodeResourcesBalancedAllocationArgs``);
* validation: ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
  (``ValidateNodeResourcesFitArgs``, ``validateFunctionShape``, ``validateResources``,
  ``ValidateNodeResourcesBalancedAllocationArgs``).

Error messages reproduce upstream's ``field.Error`` strings (``<path>: Invalid value: <v>: <detail>``)
so that a message found in upstream documentation or issues matches ours. Several errors are joined
the way ``ErrorList.ToAggregate()`` prints them (``[e1, e2]``).

Deviation: upstream does not validate that ``requestedToCapacityRatio`` is present when the type is
``RequestedToCapacityRatio`` (``NewFit`` then dereferences a nil pointer); we reject it with a clear
error instead.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from kubesched.api.validation import field_invalid, field_not_supported, go_value, validate_label_name

__all__ = [
    "LEAST_ALLOCATED",
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MOST_ALLOCATED",
    "REQUESTED_TO_CAPACITY_RATIO",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
]

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
_SUPPORTED_STRATEGIES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

#: pkg/scheduler/apis/config/types.go MaxCustomPriorityScore: shape scores are 0..10 and are scaled
#: to 0..MaxNodeScore by the RequestedToCapacityRatio scorer.
MAX_CUSTOM_PRIORITY_SCORE: Final = 10
_MAX_WEIGHT: Final = 100
_MIN_UTILIZATION, _MAX_UTILIZATION = 0, 100


class _Args(BaseModel):
    # camelCase on the wire like the upstream JSON tags; snake_case accepted from Python.
    # extra="forbid" turns a misspelt key (e.g. "ignoredResource") into an error naming it.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ResourceSpec(_Args):
    """One resource and its weight. A weight of 0 (or none) is defaulted to 1, as upstream."""

    name: str
    weight: int = 0


class UtilizationShapePoint(_Args):
    utilization: int
    score: int


class RequestedToCapacityRatioParam(_Args):
    shape: list[UtilizationShapePoint] = Field(default_factory=list)


def _default_resources() -> list[ResourceSpec]:
    # defaults.go defaultResourceSpec
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _defaulted(resources: list[ResourceSpec]) -> list[ResourceSpec]:
    """defaults.go: no resources means cpu and memory; a weight of 0 means 1 (set in place)."""
    if not resources:
        return _default_resources()
    for r in resources:
        if r.weight == 0:
            r.weight = 1
    return resources


class ScoringStrategy(_Args):
    type: str = ""
    resources: list[ResourceSpec] = Field(default_factory=list)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


def _aggregate(errs: list[str]) -> None:
    """Raise like ``ErrorList.ToAggregate()``: one error as is, several as ``[e1, e2]``."""
    if not errs:
        return
    raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")


def _shape_errors(shape: list[UtilizationShapePoint], path: str) -> list[str]:
    # validation_pluginargs.go validateFunctionShape
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    errs: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(field_invalid(f"{path}[{i}].utilization", shape[i].utilization,
                                      "values must be sorted in increasing order"))
            break
    for i, p in enumerate(shape):
        if not _MIN_UTILIZATION <= p.utilization <= _MAX_UTILIZATION:
            errs.append(field_invalid(f"{path}[{i}].utilization", p.utilization,
                                      f"not in valid range [{_MIN_UTILIZATION}, {_MAX_UTILIZATION}]"))
        if not 0 <= p.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(field_invalid(f"{path}[{i}].score", p.score,
                                      f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return errs


class NodeResourcesFitArgs(_Args):
    """``NodeResourcesFitArgs``: resources the Filter ignores, and the Score strategy.

    After validation ``scoring_strategy`` is always set (LeastAllocated over cpu and memory by
    default) and every resource weight is >= 1.
    """

    ignored_resources: list[str] = Field(default_factory=list)
    ignored_resource_groups: list[str] = Field(default_factory=list)
    scoring_strategy: ScoringStrategy = Field(
        default_factory=lambda: ScoringStrategy(type=LEAST_ALLOCATED, resources=_default_resources())
    )

    @field_validator("scoring_strategy", mode="before")
    @classmethod
    def _null_strategy(cls, v: Any) -> Any:
        # `scoringStrategy: null` means "not set" (a nil pointer upstream): default it.
        return ScoringStrategy(type=LEAST_ALLOCATED, resources=_default_resources()) if v is None else v

    @model_validator(mode="after")
    def _default_and_validate(self) -> NodeResourcesFitArgs:
        # defaults.go SetDefaults_NodeResourcesFitArgs
        s = self.scoring_strategy
        s.resources = _defaulted(s.resources)

        # validation_pluginargs.go ValidateNodeResourcesFitArgs
        errs: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            errs += validate_label_name(res, f"ignoredResources[{i}]")
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(field_invalid(path, group, "resource group name can't contain '/'"))
            errs += validate_label_name(group, path)
        if s.type not in _SUPPORTED_STRATEGIES:
            errs.append(field_not_supported("scoringStrategy.type", s.type, _SUPPORTED_STRATEGIES))
        for i, r in enumerate(s.resources):
            if not 0 < r.weight <= _MAX_WEIGHT:
                errs.append(field_invalid(f"scoringStrategy.resources[{i}].weight", r.weight,
                                          f"resource weight of {r.name} not in valid range (0, {_MAX_WEIGHT}]"))
        if s.requested_to_capacity_ratio is not None:
            # Upstream's path for the shape is "scoringStrategy.shape" (sic), kept for fidelity.
            errs += _shape_errors(s.requested_to_capacity_ratio.shape, "scoringStrategy.shape")
        elif s.type == REQUESTED_TO_CAPACITY_RATIO:
            # Deviation (see module docstring): upstream would crash in NewFit.
            errs.append("scoringStrategy.requestedToCapacityRatio: Required value: "
                        "a shape is required when the scoring strategy type is RequestedToCapacityRatio")
        _aggregate(errs)
        return self


class NodeResourcesBalancedAllocationArgs(_Args):
    """``NodeResourcesBalancedAllocationArgs``: the resources to balance (default cpu and memory)."""

    resources: list[ResourceSpec] = Field(default_factory=_default_resources)

    @model_validator(mode="after")
    def _default_and_validate(self) -> NodeResourcesBalancedAllocationArgs:
        # defaults.go SetDefaults_NodeResourcesBalancedAllocationArgs
        self.resources = _defaulted(self.resources)
        # validation_pluginargs.go ValidateNodeResourcesBalancedAllocationArgs: the scorer ignores
        # weights, so any weight other than 1 is rejected rather than silently ignored.
        errs: list[str] = []
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                errs.append(f"resources[{i}].name: Duplicate value: {go_value(r.name)}")
            seen.add(r.name)
            if r.weight != 1:
                errs.append(field_invalid(f"resources[{i}].weight", r.weight, "must be 1"))
        _aggregate(errs)
        return self
