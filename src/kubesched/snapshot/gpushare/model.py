"""The Alibaba gpushare object model the openb trace and the FGD simulator use: what a pod asks
for, what a node has, and how chosen GPUs are written.

Reference: hkust-adsl/kubernetes-scheduler-simulator ``pkg/type/open-gpu-share/utils/const.go``
(the annotation and resource names, ``MILLI``, ``DevIdSep``), ``.../utils/pod.go``
(``GetGpuMilliFromPodAnnotation``, ``GetGpuCountFromPodAnnotation``, ``GpuIdStrToIntList``,
``GetGpuAffinityFromPodAnnotation``), ``.../utils/node.go`` (a node's GPUs are its
``status.capacity`` ``alibabacloud.com/gpu-count``, its model the *label*
``alibabacloud.com/gpu-card-model``) and ``pkg/utils/utils.go`` ``IsNodeAccessibleToPodByType``
(a pod may name several models separated by ``|``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.api.quantity import value as quantity_value
from kubesched.snapshot.pod import PodInfo

GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_COUNT = "alibabacloud.com/gpu-count"
GPU_MODEL = "alibabacloud.com/gpu-card-model"
GPU_INDEX = "alibabacloud.com/gpu-index"
#: One whole GPU in milli-GPU (the reference's ``MILLI``).
MILLI = 1000
#: Separator of GPU indices in ``gpu-index`` ("0-1-2-3"; the reference's ``DevIdSep``).
INDEX_SEPARATOR = "-"
#: The reference's ``MaxSpecGpu``/``MaxSpecCpu``: the largest node, used to normalise scores.
MAX_SPEC_MILLI_GPU = 8000
MAX_SPEC_MILLI_CPU = 128000

_MEMO_KEY = "GpuShare/request"


class GpuAnnotationError(ValueError):
    """A pod's gpushare annotations cannot be honoured (the message names the annotation)."""


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a GPU pod asks for: ``count`` GPUs with ``milli`` free each, of one of ``models``."""

    milli: int
    count: int
    models: tuple[str, ...] = ()

    @property
    def shared(self) -> bool:
        """A share pod: part of one GPU (the reference's ``PodResource.IsGpuShare``)."""
        return self.count == 1 and self.milli < MILLI

    @property
    def total_milli(self) -> int:
        return self.milli * self.count

    @property
    def affinity_tag(self) -> str:
        """The reference's ``GetGpuAffinityFromPodAnnotation``: ``share-gpu`` or ``<n>-gpu``."""
        return "share-gpu" if self.shared else f"{self.count}-gpu"

    def accepts_model(self, node_model: str) -> bool:
        """``IsNodeAccessibleToPodByType``: no model asked → any node; else the node's model
        must be one of them (a node without a model label is a CPU node)."""
        return not self.models or (bool(node_model) and node_model in self.models)


def _annotations(raw: dict[str, Any]) -> dict[str, Any]:
    ann = (raw.get("metadata") or {}).get("annotations") or {}
    return ann if isinstance(ann, dict) else {}


def parse_gpu_request(pod: PodInfo) -> GpuRequest | None:
    """The pod's request (None: the pod asks for no GPU), parsed once and kept in ``pod.memo``.

    As the reference (``GetGpuMilliFromPodAnnotation``, ``GetGpuCountFromPodAnnotation``,
    ``GetPodResource``), a pod asks for GPUs only with both annotations, gpu-milli > 0 and
    gpu-count > 0. Raises GpuAnnotationError for annotations the reference would silently misread:
    a milli that is not a quantity in 1..1000, a count that is not a non-negative integer, or
    several GPUs each shared (gpu-count > 1 with gpu-milli < 1000)."""
    memo = pod.memo.get(_MEMO_KEY)
    if memo is not None:
        if isinstance(memo, GpuAnnotationError):
            raise memo
        return memo if isinstance(memo, GpuRequest) else None
    try:
        request = _parse(pod)
    except GpuAnnotationError as e:
        pod.memo[_MEMO_KEY] = e
        raise
    pod.memo[_MEMO_KEY] = request if request is not None else False
    return request


def _parse(pod: PodInfo) -> GpuRequest | None:
    return request_from_annotations(_annotations(pod.raw), pod.key)


def request_from_annotations(ann: dict[str, Any], pod_key: str) -> GpuRequest | None:
    """The request the annotations make (None: no GPU); GpuAnnotationError naming ``pod_key``."""
    raw_milli = ann.get(GPU_MILLI)
    if raw_milli is None:
        return None
    where = f"pod {pod_key}: annotation {GPU_MILLI}"
    try:
        milli = quantity_value(str(raw_milli))
    except ValueError:
        raise GpuAnnotationError(f"{where}: invalid value {raw_milli!r}: must be a quantity") from None
    if milli <= 0:
        return None  # the reference treats gpu-milli <= 0 as "no GPU"
    if milli > MILLI:
        raise GpuAnnotationError(f"{where}: invalid value {raw_milli!r}: must be at most {MILLI} (milli-GPU per GPU)")
    raw_count = ann.get(GPU_COUNT)
    if raw_count is None:
        return None  # the reference's GetGpuCountFromPodAnnotation reads an absent count as 0: no GPU
    try:
        count = int(str(raw_count))
    except ValueError:
        count = -1
    if count == 0:
        return None  # as gpu-milli <= 0: the reference's GetPodResource makes it a CPU pod
    if count < 0:
        raise GpuAnnotationError(
            f"pod {pod_key}: annotation {GPU_COUNT}: invalid value {raw_count!r}: must be a non-negative integer")
    if count > 1 and milli < MILLI:
        raise GpuAnnotationError(
            f"pod {pod_key}: annotation {GPU_COUNT}: invalid value {raw_count!r}: "
            f"a pod sharing GPUs ({GPU_MILLI} {milli} < {MILLI}) may use only one")
    models = tuple(m for m in str(ann.get(GPU_MODEL) or "").split("|") if m)
    return GpuRequest(milli, count, models)


def gpu_request_or_none(pod: PodInfo) -> GpuRequest | None:
    """``parse_gpu_request`` for accounting: a pod with invalid annotations uses no GPU."""
    try:
        return parse_gpu_request(pod)
    except GpuAnnotationError:
        return None


def raw_gpu_request(raw: dict[str, Any]) -> GpuRequest | None:
    """The request of a pod not parsed into a ``PodInfo`` (workload inputs read many), None for no
    GPU or invalid annotations, as ``gpu_request_or_none``."""
    try:
        return request_from_annotations(_annotations(raw), "")
    except GpuAnnotationError:
        return None


def gpu_demand_milli(raw: dict[str, Any]) -> int:
    """The milli-GPU a pod asks for in all (0: none), e.g. a workload's arrived GPU demand."""
    request = raw_gpu_request(raw)
    return request.total_milli if request is not None else 0


def format_gpu_index(indices: tuple[int, ...]) -> str:
    """``(0, 1)`` → ``"0-1"``, the reference's ``AllocateExclusiveGpuId`` format."""
    return INDEX_SEPARATOR.join(str(i) for i in indices)


def parse_gpu_index(value: object) -> tuple[int, ...] | None:
    """``"0-1"`` → ``(0, 1)`` (the reference's ``GpuIdStrToIntList``); None when malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        indices = tuple(int(part) for part in value.split(INDEX_SEPARATOR))
    except ValueError:
        return None
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        return None
    return indices


def annotated_gpu_index(pod: PodInfo) -> tuple[int, ...] | None:
    return parse_gpu_index(_annotations(pod.raw).get(GPU_INDEX))


def node_gpu_count(node: dict[str, Any]) -> int:
    """The reference's ``GetGpuCountOfNode``: ``status.capacity`` ``alibabacloud.com/gpu-count``
    (``status.allocatable`` when capacity lacks it); 0 when absent or malformed."""
    status = node.get("status") or {}
    for field in ("capacity", "allocatable"):
        value = (status.get(field) or {}).get(GPU_COUNT)
        if value is not None:
            try:
                return max(quantity_value(str(value)), 0)
            except ValueError:
                return 0
    return 0


def node_gpu_model(labels: dict[str, str]) -> str:
    return labels.get(GPU_MODEL, "")
