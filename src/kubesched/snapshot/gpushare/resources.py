"""A node's GPU-share resources as arrays over rows: the reference's ``NodeResource`` (milli-CPU
left = allocatable - requested, capacity, free milli per GPU) and which nodes a GPU model
request may use.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/type/resource.go`` ``NodeResource``,
``pkg/utils/utils.go`` ``GetNodeResourceViaNodeInfo`` and ``IsNodeAccessibleToPodByType``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import GPU_MODEL
from kubesched.snapshot.table import CPU, IntArray, NodeTable, Rows

BoolArray = np.ndarray


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
    return model_mask(table, models, model_codes)


def model_mask(table: NodeTable, models: Sequence[str], model_codes: npt.NDArray[np.integer]) -> BoolArray:
    """Whether each GPU model code (-1: no model label) is one of ``models``: a gather from a
    table over the codes known (``np.isin`` sorts on every call, the cost that matters for the
    few rows an incremental Filter pass judges)."""
    column = table.label_column(GPU_MODEL)
    allowed = np.zeros(len(column.values) + 1, dtype=np.bool_)  # the last entry: code -1
    allowed[column.codes_for(models)] = True
    mask: BoolArray = allowed[model_codes]
    return mask


def model_access(table: NodeTable, gpu_models: list[str]) -> BoolArray:
    """``access[code + 1, t]``: whether the node GPU model ``code`` (-1: no model label) is one
    ``gpu_models[t]`` accepts (FGD's measure reads it per typical pod)."""
    codes = np.arange(-1, len(table.label_column(GPU_MODEL).values), dtype=np.int64)
    access = np.zeros((len(codes), len(gpu_models)), dtype=np.bool_)
    for t, gpu_model in enumerate(gpu_models):
        access[:, t] = accessible(table, codes, gpu_model)
    return access
