"""NodeAffinityArgs (k8s.io/kube-scheduler/config/v1 NodeAffinityArgs) with upstream validation
(pkg/scheduler/apis/config/validation ValidateNodeAffinityArgs: the added affinity must parse)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kubesched.plugins.helpers.node_selector import compile_node_selector, compile_preferred_terms

_CONFIG = ConfigDict(populate_by_name=True, extra="forbid")


class NodeSelectorRequirement(BaseModel):
    model_config = _CONFIG
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(BaseModel):
    model_config = _CONFIG
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list, alias="matchExpressions")
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list, alias="matchFields")


class NodeSelector(BaseModel):
    model_config = _CONFIG
    node_selector_terms: list[NodeSelectorTerm] = Field(alias="nodeSelectorTerms")


class PreferredSchedulingTerm(BaseModel):
    model_config = _CONFIG
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(BaseModel):
    """v1.NodeAffinity."""

    model_config = _CONFIG
    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, alias="requiredDuringSchedulingIgnoredDuringExecution"
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list, alias="preferredDuringSchedulingIgnoredDuringExecution"
    )

    def raw_required(self) -> dict[str, Any] | None:
        r = self.required_during_scheduling_ignored_during_execution
        return None if r is None else r.model_dump(by_alias=True)

    def raw_preferred(self) -> list[dict[str, Any]]:
        return [t.model_dump(by_alias=True) for t in self.preferred_during_scheduling_ignored_during_execution]


class NodeAffinityArgs(BaseModel):
    model_config = _CONFIG
    #: Node affinity applied to every pod of the profile, in addition to the pod's own
    #: (upstream addedAffinity; default none).
    added_affinity: NodeAffinity | None = Field(default=None, alias="addedAffinity")

    @model_validator(mode="after")
    def _validate(self) -> NodeAffinityArgs:
        if self.added_affinity is None:
            return self
        errs: list[str] = []
        required = self.added_affinity.raw_required()
        if required is not None:
            errs += compile_node_selector(
                required, "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution").errors
        preferred = self.added_affinity.raw_preferred()
        if preferred:
            errs += compile_preferred_terms(
                preferred, "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution")[1]
        if errs:
            raise ValueError("; ".join(errs))
        return self
