"""GpuShare: GPUs shared by milli-GPU with per-GPU accounting (Alibaba gpushare, as the FGD
simulator implements it in hkust-adsl/kubernetes-scheduler-simulator
``pkg/simulator/plugin/open_gpu_share.go``).

- PreFilter parses the pod's ``gpu-milli``/``gpu-count``/``gpu-card-model`` annotations
  (Skip for a pod without GPUs; a pod whose annotations cannot be honoured is refused with a
  message naming the annotation).
- Filter (the reference's ``Filter`` + ``GpuNodeInfo.AllocateGpuId``): the node has at least
  ``gpu-count`` GPUs, of a requested model, and ``gpu-count`` of them each have ``gpu-milli``
  free (a share pod needs one GPU with that much free; whole-GPU pods need whole free GPUs).
- Reserve chooses the GPUs (``gpuSelMethod``: best, worst, random, or a policy plugin that
  chooses, e.g. FGD) and counts them in the ledger at once, so the next pod sees them taken;
  Unreserve gives them back.
- PreBind writes ``alibabacloud.com/gpu-index`` ("3", "0-1") so a device plugin can honour it.

The per-GPU free milli lives in :class:`~kubesched.snapshot.gpushare.ledger.GpuLedger`, kept in
step with the node table. No shell is imported: the same plugin runs in the simulator and live.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import FilterPlugin, Plugin, PreBindPlugin, PreFilterPlugin, ReservePlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.gpushare.args import GpuShareArgs
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import (
    GPU_INDEX,
    GPU_MODEL,
    GpuAnnotationError,
    GpuRequest,
    format_gpu_index,
    parse_gpu_request,
)
from kubesched.snapshot.gpushare.resources import model_mask
from kubesched.snapshot.gpushare.selection import BUILTIN_METHODS, choose_gpus
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows

NAME = "GpuShare"
REASON_TOO_FEW_GPUS = "node(s) didn't have enough GPUs"
REASON_MODEL = "node(s) didn't have the requested GPU model"
REASON_INSUFFICIENT = "Insufficient alibabacloud.com/gpu-milli"
_STATE_KEY = "PreFilterGpuShare"


@runtime_checkable
class GpuChooser(Protocol):
    """A plugin that picks a pod's GPUs on a node itself (named by GpuShare's ``gpuSelMethod``).

    ``free`` is the node's free milli per GPU without the pod; at Reserve the node table already
    counts the pod's cpu and memory on ``row``. Return the GPU indices, or None if it does not fit."""

    def choose_gpus(self, pod: PodInfo, request: GpuRequest, row: int, free: IntArray) -> tuple[int, ...] | None: ...


#: Up to this many rows, Filter judges them one by one in Python (numpy's per-call cost is the
#: work for a row or two).
_FEW_ROWS = 8


class GpuShare(PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin):
    name = NAME
    args_model = GpuShareArgs

    def __init__(self, args: GpuShareArgs | None, handle: Handle) -> None:
        super().__init__(args or GpuShareArgs(), handle)
        self.args: GpuShareArgs = self.args
        self.ledger = GpuLedger.of(handle.table)
        self._too_few = Status.unresolvable(REASON_TOO_FEW_GPUS)
        self._model = Status.unresolvable(REASON_MODEL)
        self._insufficient = Status.unschedulable(REASON_INSUFFICIENT)
        #: Filter's statuses, one list for every call (nothing appends to a Verdicts' list): a
        #: caller that maps them once per list, as the incremental pass does, maps them once.
        self._filter_statuses = [self._too_few, self._model, self._insufficient]
        #: The last plugin found to be a ``GpuChooser``, as the plugin and as the chooser (a
        #: runtime-checked Protocol: the check looks at every member, once per pod otherwise).
        self._checked: Plugin | None = None
        self._chooser: GpuChooser | None = None

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_LABEL),
        )

    def _request(self, state: CycleState, pod: PodInfo) -> GpuRequest | None:
        request = state.get(_STATE_KEY)
        if isinstance(request, GpuRequest):
            return request
        try:
            return parse_gpu_request(pod)
        except GpuAnnotationError:
            return None

    # -- PreFilter / Filter ------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        try:
            request = parse_gpu_request(pod)
        except GpuAnnotationError as e:
            return None, Status.unresolvable(str(e))
        if request is None:
            return None, Status.skip()
        state.write(_STATE_KEY, request)
        return None, SUCCESS

    def filter_outcome_key(self, state: CycleState, pod: PodInfo) -> Hashable:
        """PreFilter reads the pod's annotations, Filter the table and the ledger: its change
        counter moves whenever a GPU is taken or given back."""
        return self.ledger.changes

    def filter_row_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """The verdict on a node reads that node's row alone: its GPU count and model, and its
        GPUs in the ledger, which marks the row changed in the table whenever they change. Not
        while pods wait to be put on GPUs: the ledger places them at its next read, which a full
        pass makes now and an incremental one might not (``GpuLedger.settle``)."""
        return None if self.ledger.unsettled else ()

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        request = self._request(state, pod)
        if request is None:
            return Verdicts.all_pass(len(rows))
        if len(rows) <= _FEW_ROWS:
            return self._filter_few(table, request, rows)
        free = self.ledger.free(rows)
        fits = (free >= request.milli).sum(axis=1) >= request.count
        codes = np.zeros(len(rows), dtype=np.int32)
        codes[~fits] = 3
        if request.models:
            codes[~model_mask(table, request.models, table.label_column(GPU_MODEL).codes[rows])] = 2
        codes[self.ledger.gpu_counts(rows) < request.count] = 1
        return Verdicts(codes, self._filter_statuses)

    def _filter_few(self, table: NodeTable, request: GpuRequest, rows: Rows) -> Verdicts:
        """``filter_batch`` of a few rows (an incremental pass judges the rows changed since, often
        one or two), row by row in Python: the same codes, by the same precedence (too few GPUs,
        then the model, then no room on enough GPUs)."""
        models = table.label_column(GPU_MODEL)
        allowed = set(models.codes_for(request.models).tolist()) if request.models else None
        codes: list[int] = []
        for row in rows.tolist():
            free, _ = self.ledger.row_milli(row)  # the node's own GPUs
            if len(free) < request.count:
                codes.append(1)
            elif allowed is not None and int(models.codes[row]) not in allowed:
                codes.append(2)
            elif sum(1 for milli in free if milli >= request.milli) < request.count:
                codes.append(3)
            else:
                codes.append(0)
        return Verdicts(np.array(codes, dtype=np.int32), self._filter_statuses)

    # -- Reserve / Unreserve -----------------------------------------------------------------------
    def _choose(self, pod: PodInfo, request: GpuRequest, row: int, free: IntArray) -> tuple[int, ...] | None:
        method = self.args.gpu_sel_method
        if method in BUILTIN_METHODS:
            return choose_gpus(free.tolist(), request, method, self.handle.rng)
        framework = self.handle.framework
        chooser = framework.plugins.get(method) if framework is not None else None
        known = self._chooser
        if known is None or chooser is None or chooser is not self._checked:
            if not isinstance(chooser, GpuChooser):
                raise LookupError(f"gpuSelMethod {method!r}: neither best, worst, random nor a plugin of this "
                                  "profile that chooses GPUs")
            self._checked, known = chooser, chooser
            self._chooser = known
        return known.choose_gpus(pod, request, row, free)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        request = self._request(state, pod)
        if request is None:
            return SUCCESS
        row = self.handle.table.row_of(node_name)
        if row is None:
            return Status.error(f"node {node_name!r} not found")
        free = self.ledger.free_without(pod, row)
        try:
            indices = self._choose(pod, request, row, free)
        except LookupError as e:
            self.ledger.unassign(pod)
            return Status.error(str(e))
        if indices is None or any(free[i] < request.milli for i in indices) or len(indices) != request.count:
            self.ledger.unassign(pod)
            return self._insufficient
        self.ledger.assign(pod, row, request, indices)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.ledger.unassign(pod)

    # -- PreBind ----------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        request = self._request(state, pod)
        if request is None:
            return Status.skip()
        indices = self.ledger.assigned(pod.uid)
        if indices is None:
            return Status.error(f"pod {pod.key} has no GPUs reserved on node {node_name!r}")
        annotations = {GPU_INDEX: format_gpu_index(indices)}
        client = self.handle.client
        if client is not None:  # the shell's ClusterClient: the live pod, the simulator's stored pod
            try:
                await client.annotate_pod(pod, annotations)
            except Exception as e:  # any API failure fails the binding, as upstream
                return Status.error(f"writing {GPU_INDEX} on pod {pod.key}: {e}")
        meta = pod.raw.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        return SUCCESS
