"""Kubernetes label selectors (metav1.LabelSelector: matchLabels + matchExpressions).

Port of k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector semantics: an
empty selector matches everything; a null selector (None) matches nothing is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LabelSelectorRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    operator: str = Field(pattern="^(In|NotIn|Exists|DoesNotExist)$")
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_match_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        for r in self.match_expressions:
            has = r.key in labels
            if r.operator == "In" and (not has or labels[r.key] not in r.values):
                return False
            if r.operator == "NotIn" and has and labels[r.key] in r.values:
                return False
            if r.operator == "Exists" and not has:
                return False
            if r.operator == "DoesNotExist" and has:
                return False
        return True
