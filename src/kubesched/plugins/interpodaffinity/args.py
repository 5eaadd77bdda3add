"""InterPodAffinityArgs with upstream defaults and validation.

* type: ``staging/src/k8s.io/kube-scheduler/config/v1/types_pluginargs.go`` ``InterPodAffinityArgs``
  (``hardPodAffinityWeight`` *int32, ``ignorePreferredTermsOfExistingPods`` bool);
* defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_InterPodAffinityArgs``
  (an unset ``hardPodAffinityWeight`` is 1; an explicit 0 stays 0);
* validation: ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``
  ``ValidateInterPodAffinityArgs`` / ``validateHardPodAffinityWeight``:
  ``hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]`` (the configuration
  loader prefixes ``profiles[i].pluginConfig[j].args``).
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from kubesched.api.validation import field_invalid

DEFAULT_HARD_POD_AFFINITY_WEIGHT: Final = 1
MIN_HARD_POD_AFFINITY_WEIGHT: Final = 0
MAX_HARD_POD_AFFINITY_WEIGHT: Final = 100


class InterPodAffinityArgs(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # SetDefaults_InterPodAffinityArgs: a null hardPodAffinityWeight means the default.
        if isinstance(data, dict):
            for k in ("hardPodAffinityWeight", "hard_pod_affinity_weight"):
                if k in data and data[k] is None:
                    data = {**data, k: DEFAULT_HARD_POD_AFFINITY_WEIGHT}
            for k in ("ignorePreferredTermsOfExistingPods", "ignore_preferred_terms_of_existing_pods"):
                if k in data and data[k] is None:
                    data = {**data, k: False}
        return data

    @model_validator(mode="after")
    def _validate(self) -> InterPodAffinityArgs:
        w = self.hard_pod_affinity_weight
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise ValueError(field_invalid(
                "hardPodAffinityWeight", w,
                f"not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
            ))
        return self
