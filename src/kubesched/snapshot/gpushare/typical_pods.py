"""The workload's typical pod shapes and their frequencies: FGD's target workload.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/utils/frag.go`` ``GetTypicalPods``
and ``SortTargetPodInDecreasingCount``, ``pkg/type/resource.go`` ``TargetPodList.Less`` /
``PodResource.Less``. The experiments run it with ``scripts/generate_config_and_run.py``'s
defaults: CPU-only pods included, popularity threshold 95 %, increase step 1, GPU weight 0.

Shapes are counted, the most frequent first (ties: the larger shape by milli-CPU, milli-GPU,
GPU count, model); the top ones are kept, ``increase_step`` at a time, until they cover
``popularity_threshold`` percent of the (weighted) pods, and their frequencies are normalised to
sum to 1 over the kept shapes.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kubesched.snapshot.gpushare.shapes import PodShape


class TypicalPod(BaseModel):
    """One pod shape of the target workload and how often it occurs (0-1)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    milli_cpu: int = Field(ge=0)
    milli_gpu: int = Field(default=0, ge=0, le=1000)
    gpu_count: int = Field(default=0, ge=0)
    gpu_model: str = ""
    frequency: float = Field(gt=0, le=1)

    @property
    def shape(self) -> PodShape:
        return PodShape(self.milli_cpu, self.milli_gpu, self.gpu_count, self.gpu_model)


def _order_key(item: tuple[PodShape, float]) -> tuple[float, int, int, int, str]:
    shape, count = item
    return (count, shape.milli_cpu, shape.milli_gpu, shape.gpu_count, shape.gpu_model)


def typical_pods(
    shapes: Iterable[PodShape],
    popularity_threshold: int = 95,
    increase_step: int = 1,
    include_cpu_pods: bool = True,
    gpu_res_weight: float = 0.0,
) -> list[TypicalPod]:
    """``GetTypicalPods`` over the shapes of a workload's pods."""
    counts: dict[PodShape, float] = {}
    total = 0.0
    for shape in shapes:
        if not include_cpu_pods and shape.gpu_count == 0:
            continue
        weight = 1.0
        if gpu_res_weight > 0 and shape.milli_gpu == 1000:
            weight = 1 + shape.gpu_count * gpu_res_weight
        counts[shape] = counts.get(shape, 0.0) + weight
        total += weight
    if not counts:
        return []
    ordered = sorted(counts.items(), key=_order_key, reverse=True)
    expected = popularity_threshold * total / 100.0
    kept = 0
    cumulative = 0.0
    while cumulative < expected and kept < len(ordered):
        kept = min(kept + increase_step, len(ordered))
        cumulative = sum(count for _, count in ordered[:kept])
    share = 1.0 if kept == len(ordered) else cumulative / total  # the reference renormalises only a cut list
    return [
        TypicalPod(milli_cpu=s.milli_cpu, milli_gpu=s.milli_gpu, gpu_count=s.gpu_count, gpu_model=s.gpu_model,
                   frequency=min(count / total / share, 1.0))
        for s, count in ordered[:kept]
    ]
