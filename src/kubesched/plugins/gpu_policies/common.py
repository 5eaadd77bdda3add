"""What the six GPU policies read: the reference's ``NodeResource`` and ``PodResource`` as arrays
over the candidate rows.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/type/resource.go`` (``PodResource``:
non-zero milli-CPU, milli-GPU per GPU, GPU count, GPU model; ``NodeResource``: milli-CPU left =
allocatable - requested, capacity, free milli per GPU), ``pkg/utils/utils.go``
``GetPodResource``, ``GetNodeResourceViaNodeInfo`` and ``IsNodeAccessibleToPodByType``,
``pkg/simulator/plugin/plugin_utils.go`` (``NormalizeScore``, ``sigmoid``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.plugins.gpushare.ledger import GpuLedger
from kubesched.plugins.gpushare.model import GPU_MODEL, gpu_request_or_none
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, IntArray, NodeTable, Rows

BoolArray = np.ndarray


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


@dataclass(frozen=True, slots=True)
class NodeResources:
    """``NodeResource`` of each candidate row: ``free`` is ``(rows, max GPUs)``, 0 past a node's
    last GPU; ``exists`` marks the GPUs a node has."""

    cpu_left: IntArray
    cpu_capacity: IntArray
    free: IntArray
    exists: BoolArray
    gpu_count: IntArray
    model_codes: IntArray

    @property
    def total_free(self) -> IntArray:
        total: IntArray = self.free.sum(axis=1)
        return total


def node_resources(table: NodeTable, rows: Rows) -> NodeResources:
    ledger = GpuLedger.of(table)
    free = ledger.free(rows)
    counts = ledger.gpu_counts(rows)
    exists = np.arange(free.shape[1]) < counts[:, None]
    return NodeResources(
        cpu_left=table.available_by_resource[CPU].take(rows),
        cpu_capacity=table.allocatable_by_resource[CPU].take(rows),
        free=free,
        exists=exists,
        gpu_count=counts,
        model_codes=table.label_column(GPU_MODEL).codes[rows].astype(np.int64),
    )


def accessible(table: NodeTable, model_codes: IntArray, gpu_model: str) -> BoolArray:
    """``IsNodeAccessibleToPodByType`` per row: any node when no model is asked, else a node
    labelled with one of the models."""
    models = [m for m in gpu_model.split("|") if m]
    if not models:
        return np.ones(len(model_codes), dtype=np.bool_)
    allowed = table.label_column(GPU_MODEL).codes_for(models)
    return np.isin(model_codes, allowed)


def go_div(a: IntArray, b: int) -> IntArray:
    """Go's integer division (truncates toward zero) for an int64 array and a positive int."""
    q: IntArray = np.sign(a) * (np.abs(a) // b)
    return q


def sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def normalize_min_max(scores: IntArray) -> None:
    """``plugin_utils.go`` ``NormalizeScore``, in place: lowest → 0, highest → 100 (integer
    arithmetic), all 0 when every score is the same."""
    if len(scores) == 0:
        return
    lowest, highest = int(scores.min()), int(scores.max())
    if highest == lowest:
        scores[:] = MIN_NODE_SCORE
        return
    scores[:] = (scores - lowest) * (MAX_NODE_SCORE - MIN_NODE_SCORE) // (highest - lowest) + MIN_NODE_SCORE
