"""The GPU-sharing object model of Alibaba's gpushare as the FGD simulator
(hkust-adsl/kubernetes-scheduler-simulator) uses it, read by the trace adapter, the inflation and
the replay's GPU metrics.

* Node: ``status.capacity``/``allocatable`` ``alibabacloud.com/gpu-count`` (GPUs) and
  ``alibabacloud.com/gpu-milli`` (1000 per GPU); label ``alibabacloud.com/gpu-card-model``
  (reference: ``pkg/type/open-gpu-share/utils/node.go``).
* Pod: annotations ``alibabacloud.com/gpu-milli`` (milli of each GPU, 0-1000),
  ``alibabacloud.com/gpu-count`` and ``alibabacloud.com/gpu-card-model`` (acceptable models joined
  by ``|``; empty: any; ``pkg/type/open-gpu-share/utils/pod.go``, ``pkg/utils/utils.go``
  ``IsNodeAccessibleToPodByType``); ``alibabacloud.com/gpu-index`` (``2-3``) names the GPUs chosen.
  The reference's pods request only cpu and memory (``data/pod_csv_to_yaml.py``): GPU demand lives
  in the annotations alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_COUNT = "alibabacloud.com/gpu-count"
GPU_MODEL = "alibabacloud.com/gpu-card-model"
GPU_INDEX = "alibabacloud.com/gpu-index"
#: Milli of one whole GPU.
MILLI = 1000


@dataclass(frozen=True, slots=True)
class PodGpu:
    """What a pod asks of GPUs: ``milli`` of each of ``count`` GPUs, of one of ``models`` (empty: any)."""

    milli: int
    count: int
    models: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.milli * self.count

    def accepts(self, node_model: str) -> bool:
        """``IsNodeAccessibleToPodByType``: any model when none is named; else the node's must be one."""
        return not self.models or node_model in self.models


NO_GPU = PodGpu(0, 0)


def _int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def pod_gpu(raw: dict[str, Any]) -> PodGpu:
    """The pod's GPU request from its annotations (unparseable values count as 0, as the
    reference's ``GetGpuMilliFromPodAnnotation``/``GetGpuCountFromPodAnnotation`` read them)."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    count = _int(annotations.get(GPU_COUNT, 0))
    milli = _int(annotations.get(GPU_MILLI, 0))
    if count <= 0 or milli <= 0:
        return NO_GPU
    models = tuple(m for m in str(annotations.get(GPU_MODEL) or "").split("|") if m)
    return PodGpu(milli, count, models)


def gpu_index(raw: dict[str, Any]) -> list[int] | None:
    """The GPUs named by the pod's ``gpu-index`` annotation (None: absent or not ``i-j-...``)."""
    value = ((raw.get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX)
    if not value:
        return None
    try:
        return [int(part) for part in str(value).split("-")]
    except ValueError:
        return None


def node_gpus(raw: dict[str, Any]) -> tuple[int, str]:
    """The node's GPU count (``capacity``, as ``GetGpuCountOfNode``) and model label."""
    capacity = (raw.get("status") or {}).get("capacity") or {}
    labels = (raw.get("metadata") or {}).get("labels") or {}
    return max(0, _int(capacity.get(GPU_COUNT, 0))), str(labels.get(GPU_MODEL) or "")
