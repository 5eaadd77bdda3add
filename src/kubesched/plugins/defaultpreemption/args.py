"""DefaultPreemptionArgs with upstream defaults and validation.

* type: ``staging/src/k8s.io/kube-scheduler/config/v1/types_pluginargs.go`` ``DefaultPreemptionArgs``
  (``minCandidateNodesPercentage``, ``minCandidateNodesAbsolute``: *int32);
* defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_DefaultPreemptionArgs``
  (10 and 100);
* validation: ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
  ``ValidateDefaultPreemptionArgs``: ``minCandidateNodesPercentage: Invalid value: 101: not in valid
  range [0, 100]``, ``minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)``,
  and both zero at once is an error on each field (aggregated as ``[e1, e2]``).
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from kubesched.api.validation import field_invalid

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: Final = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: Final = 100


class DefaultPreemptionArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # SetDefaults_DefaultPreemptionArgs: a null field means its default.
        if isinstance(data, dict):
            pct = ("minCandidateNodesPercentage", "min_candidate_nodes_percentage")
            absolute = ("minCandidateNodesAbsolute", "min_candidate_nodes_absolute")
            for keys, default in (
                (pct, DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE),
                (absolute, DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE),
            ):
                for k in keys:
                    if k in data and data[k] is None:
                        data = {**data, k: default}
        return data

    @model_validator(mode="after")
    def _validate(self) -> DefaultPreemptionArgs:
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        errs: list[str] = []
        if pct < 0 or pct > 100:
            errs.append(field_invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
        if absolute < 0:
            errs.append(field_invalid("minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"))
        if pct == 0 and absolute == 0:
            errs.append(field_invalid("minCandidateNodesPercentage", pct,
                                      "cannot be zero at the same time as minCandidateNodesAbsolute"))
            errs.append(field_invalid("minCandidateNodesAbsolute", absolute,
                                      "cannot be zero at the same time as minCandidateNodesPercentage"))
        if errs:
            raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return self
