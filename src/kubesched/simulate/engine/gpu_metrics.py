"""The replay's GPU metrics over time (engine/timeline.py), read from the snapshot's GPU-share
model: the per-GPU ledger the GpuShare plugin keeps (``kubesched.snapshot.gpushare.ledger``) and
FGD's fragmentation measure (``.fragmentation``) over the workload's typical pods
(``.typical_pods``). One model: the replay measures the very GPUs the scheduler chose.

A bound pod's GPUs are the ones GpuShare chose (or its ``gpu-index`` names); a pod bound by a
profile without GpuShare is placed as the reference's ``NodeResource.Sub`` places it, and one that
fits no GPU of its node counts as ``unplaced``. Fragmentation is the reference's
``NodeGpuShareFragAmount(...).FragAmountSumExceptQ3()`` summed over the nodes
(hkust-adsl/kubernetes-scheduler-simulator ``pkg/simulator/analysis.go`` ``ClusterGpuFragReport``,
``frag_gpu_milli``), with the typical pods computed once from the scenario's arrivals as
``GetTypicalPods`` with the experiments' settings (``scripts/generate_config_and_run.py``);
only the nodes changed since the last sample are measured again.
"""

from __future__ import annotations

import numpy as np

from kubesched.snapshot.gpushare.fragmentation import NodeStates, fragmentation, state_measure
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import GPU_MODEL, MILLI
from kubesched.snapshot.gpushare.resources import model_access, node_resources
from kubesched.snapshot.gpushare.typical_pods import TypicalPod
from kubesched.snapshot.table import CPU, NodeTable

__all__ = ["GpuMetrics"]

#: Up to this many rows changed since the last sample, they are read one by one in Python
#: (``GpuLedger.row_milli``, ``StateMeasure``): for a row or two numpy's per-call cost is the work.
_FEW_ROWS = 16


class GpuMetrics:
    def __init__(self, table: NodeTable, typical: list[TypicalPod]) -> None:
        self.table = table
        self.typical = typical
        self.ledger = GpuLedger.of(table)
        #: Fragmented milli per row, measured again for the rows in ``_dirty``: every row a pod
        #: came to or left (the table's pod observer: assumed, bound, forgotten, deleted), and
        #: every row when a node came, went or changed (``node_generation`` moved).
        self._frag = np.zeros(0)
        self._dirty: set[int] = set()
        self._node_generation = -1
        #: ``model_access`` of the typical pods, for the GPU models known (a new one: again).
        self._access: tuple[int, np.ndarray] = (-1, np.zeros((0, 0), dtype=np.bool_))
        #: Per row: GPU milli allocated and idle, measured again for the rows the ledger's
        #: change counter moved on (``_touched``, from ``GpuLedger.watch_rows``); the GPU
        #: capacity of the alive rows; all for the nodes of ``_sums_generation`` (``_sums_rows`` rows).
        self._sums_generation = -1
        self._sums_rows = -1
        self._touched = self.ledger.watch_rows()
        self._allocated = np.zeros(0, dtype=np.int64)
        self._idle = np.zeros(0, dtype=np.int64)
        self._capacity = 0
        #: Their sums over the alive rows, moved by each row's change (integers: exact in any order).
        self._allocated_total = 0
        self._idle_total = 0
        #: ``ledger.changes`` when ``_refresh`` last compared the rows (-1: never), and the sum of
        #: ``_frag`` over the alive rows when ``fragmented`` last added it up (None: to add again).
        self._ledger_changes = -1
        self._frag_total: float | None = None
        table.add_pod_observer(lambda row, _pod, _sign: self._dirty.add(row))

    def _refresh(self) -> None:
        """``_capacity``, ``_allocated`` and ``_idle`` and their totals up to date: per row,
        measured again where the ledger's change counter moved since (every row after a node
        change; rows not alive are 0). Integers, so their sums are those of the whole ledger
        read at once."""
        table, ledger = self.table, self.ledger
        ledger.settle()
        reset = self._sums_generation != table.node_generation or self._sums_rows != len(table.alive)
        if not reset and ledger.changes == self._ledger_changes:
            return  # no GPU taken or given back anywhere since the last look
        self._ledger_changes = ledger.changes
        if reset:
            alive = table.alive_rows()
            self._sums_generation, self._sums_rows = table.node_generation, len(table.alive)
            self._allocated = np.zeros(len(table.alive), dtype=np.int64)
            self._idle = np.zeros(len(table.alive), dtype=np.int64)
            self._capacity = int(ledger.gpu_counts(alive).sum()) * MILLI
            changed = alive
        elif len(self._touched) <= _FEW_ROWS:  # the usual sample: a pod or two placed since the last
            alive_mask = table.alive
            changed = np.array([row for row in sorted(self._touched) if alive_mask[row]], dtype=np.intp)
        else:
            touched = np.array(sorted(self._touched), dtype=np.intp)
            changed = touched[table.alive[touched]] if len(touched) else touched
        self._touched.clear()
        if 0 < len(changed) <= _FEW_ROWS:
            for row in changed.tolist():
                free, allocated = ledger.row_milli(row)
                idle = sum(free)
                self._idle_total += idle - int(self._idle[row])
                self._allocated_total += allocated - int(self._allocated[row])
                self._idle[row], self._allocated[row] = idle, allocated
        elif len(changed):
            idle = ledger.free(changed).sum(axis=1)
            self._idle_total += int(idle.sum()) - int(self._idle[changed].sum())
            self._idle[changed] = idle
            for row in changed.tolist():
                allocated = ledger.allocated_milli(np.array([row], dtype=np.intp))
                self._allocated_total += allocated - int(self._allocated[row])
                self._allocated[row] = allocated
        if reset:
            self._allocated_total, self._idle_total = int(self._allocated.sum()), int(self._idle.sum())

    def totals(self) -> tuple[int, int, int]:
        """GPU milli of the nodes present: capacity, allocated, idle."""
        self._refresh()
        return self._capacity, self._allocated_total, self._idle_total

    def unplaced(self) -> int:
        return self.ledger.overcommitted_milli()

    def _grow(self) -> None:
        if len(self._frag) < len(self.table.alive):
            self._frag = np.pad(self._frag, (0, len(self.table.alive) - len(self._frag)))

    def fragmented(self) -> float:
        alive = self.table.alive_rows()
        if self._node_generation != self.table.node_generation:
            self._node_generation = self.table.node_generation
            self._dirty.update(alive.tolist())
            self._frag_total = None  # the nodes summed over changed too
        if not self._dirty and self._frag_total is not None:
            return self._frag_total  # no pod came to or left any node since the last sum
        self._grow()
        if self._dirty and self.typical:
            table = self.table
            column = table.label_column(GPU_MODEL)
            if self._access[0] != len(column.values):
                self._access = (len(column.values), model_access(table, [t.gpu_model for t in self.typical]))
            access = self._access[1]
            if len(self._dirty) <= _FEW_ROWS:  # one row at a time in Python: the same measure (StateMeasure)
                measure = state_measure(self.typical, access)
                cpu_left, codes, frag = table.available_by_resource[CPU], column.codes, self._frag
                alive_mask = table.alive
                for row in sorted(self._dirty):
                    if alive_mask[row]:
                        frag[row] = measure.of(int(cpu_left[row]), int(codes[row]), self.ledger.row_milli(row)[0])
            else:
                rows = np.array(sorted(self._dirty), dtype=np.intp)
                rows = rows[table.alive[rows]]
                res = node_resources(table, rows)
                self._frag[rows] = fragmentation(NodeStates(res.cpu_left, res.free, res.model_codes, access),
                                                 self.typical)
        self._dirty.clear()
        # Summed one by one in row order (an accumulation, not numpy's pairwise sum): the figures
        # stay those of adding them up in a loop. Rows 0..n-1 alive: a slice of them.
        values = self._frag[: len(alive)] if len(alive) and alive[-1] == len(alive) - 1 else self._frag[alive]
        total: float = float(np.add.accumulate(values)[-1]) if len(alive) else 0  # sum([]) is 0
        self._frag_total = total
        return total
