"""GpuShare's args (``pluginConfig``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class GpuShareArgs(BaseModel):
    """``gpuSelMethod``: which GPUs of the chosen node a pod gets at Reserve — ``best`` (the
    tightest GPU that fits, the reference's default), ``worst``, ``random`` (the scheduler's seeded
    RNG), or the name of a Score plugin of the same profile that chooses GPUs itself (``FGD``;
    the reference sets its ``gpuSelMethod`` to the policy's name the same way)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    gpu_sel_method: str = Field(default="best", min_length=1)
