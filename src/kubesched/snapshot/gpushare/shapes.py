"""A pod as the GPU policies, FGD's target workload and the replay's metrics see it: the
reference's ``PodResource`` (hkust-adsl/kubernetes-scheduler-simulator ``pkg/type/resource.go``)
read as ``pkg/utils/utils.go`` ``GetPodResource`` reads it."""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.snapshot.gpushare.model import gpu_request_or_none
from kubesched.snapshot.pod import PodInfo


@dataclass(frozen=True, slots=True)
class PodShape:
    """The reference's ``PodResource``: what a policy sees of a pod."""

    milli_cpu: int
    milli_gpu: int = 0
    gpu_count: int = 0
    gpu_model: str = ""  # one model, or several separated by "|", or "" for any

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(m for m in self.gpu_model.split("|") if m)

    @property
    def total_milli_gpu(self) -> int:
        return self.milli_gpu * self.gpu_count

    @property
    def shared(self) -> bool:
        return self.gpu_count == 1 and self.milli_gpu < 1000


def pod_shape(pod: PodInfo) -> PodShape:
    """``GetPodResource``: non-zero CPU request (100m for a container without one), gpushare
    annotations (a pod with invalid ones asks for no GPU here; GpuShare's PreFilter refuses it)."""
    request = gpu_request_or_none(pod)
    cpu = pod.requests.non_zero_milli_cpu
    if request is None:
        return PodShape(cpu)
    return PodShape(cpu, request.milli, request.count, "|".join(request.models))
