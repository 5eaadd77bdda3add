"""VolumeBindingArgs (``k8s.io/kube-scheduler/config/v1`` types_pluginargs.go).

Defaults: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_VolumeBindingArgs``
(bindTimeoutSeconds 600; with StorageCapacityScoring — beta, on by default in 1.37 — the shape
``[{0, 10}, {100, 0}]``, i.e. prefer the node whose storage would be least used). Validation:
``validation_pluginargs.go`` ``ValidateVolumeBindingArgsWithOptions`` and ``validateFunctionShape``,
messages as ``field.Error`` prints them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from kubesched.api.validation import field_invalid

#: pkg/scheduler/apis/config/types.go MaxCustomPriorityScore.
MAX_CUSTOM_PRIORITY_SCORE = 10
DEFAULT_BIND_TIMEOUT_SECONDS = 600


class _Args(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class UtilizationShapePoint(_Args):
    utilization: int
    score: int


def _default_shape() -> list[UtilizationShapePoint]:
    return [UtilizationShapePoint(utilization=0, score=MAX_CUSTOM_PRIORITY_SCORE),
            UtilizationShapePoint(utilization=100, score=0)]


class VolumeBindingArgs(_Args):
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: list[UtilizationShapePoint] = Field(default_factory=_default_shape)

    @field_validator("bind_timeout_seconds", mode="before")
    @classmethod
    def _null_timeout(cls, v: Any) -> Any:
        return DEFAULT_BIND_TIMEOUT_SECONDS if v is None else v

    @field_validator("shape", mode="before")
    @classmethod
    def _empty_shape(cls, v: Any) -> Any:
        # An empty or null shape is defaulted (len(obj.Shape) == 0).
        return v if v else _default_shape()

    @model_validator(mode="after")
    def _validate(self) -> VolumeBindingArgs:
        errs: list[str] = []
        if self.bind_timeout_seconds < 0:
            errs.append(field_invalid("bindTimeoutSeconds", self.bind_timeout_seconds,
                                      "invalid BindTimeoutSeconds, should not be a negative value"))
        shape = self.shape
        for i in range(1, len(shape)):
            if shape[i - 1].utilization >= shape[i].utilization:
                errs.append(field_invalid(f"shape[{i}].utilization", shape[i].utilization,
                                          "values must be sorted in increasing order"))
                break
        for i, p in enumerate(shape):
            if not 0 <= p.utilization <= 100:
                errs.append(field_invalid(f"shape[{i}].utilization", p.utilization, "not in valid range [0, 100]"))
            if not 0 <= p.score <= MAX_CUSTOM_PRIORITY_SCORE:
                errs.append(field_invalid(f"shape[{i}].score", p.score,
                                          f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
        if errs:
            raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return self
