"""Per-GPU used milli of every node, kept in step with the pods the node table counts.

One ledger per node table (``GpuLedger.of(table)``), shared by every profile and by the policy
plugins that read it: which GPU a pod uses is a fact about the cluster, not a profile's setting.
It follows the table through a pod observer (``NodeTable.observe_pods``), so assume, forget,
bind, delete, a node leaving and returning, and preemption's dry runs keep it exact, and a
scheduler that starts on a running cluster rebuilds it from the bound pods' ``gpu-index``.

Where a pod's GPUs come from, in order: the choice GpuShare's Reserve made (kept in
``pod.memo``, which the assumed and bound copies share); the pod's ``gpu-index`` annotation
(pods bound earlier, by us or by another gpushare scheduler); otherwise the pod waits in
``_unplaced`` and is put where the reference's ``NodeResource.Sub`` would put it — the tightest
GPUs, first in index order — the next time anyone reads the ledger. The pod GpuShare is reserving
is taken out of ``_unplaced`` before that (Reserve follows assume with nothing in between), so
only pods nobody chose GPUs for are placed that way: bound by another scheduler without
``gpu-index``, or placed by a profile without GpuShare. The reference's cache skips such pods
(``GpuNodeInfo.addOrUpdatePod`` logs and ignores a pod without an index), which would let the
next pod over-commit their GPUs. A pod that fits nowhere (its node is over-committed already) is
counted on no GPU and listed by ``overcommitted()``.

Reference: hkust-adsl/kubernetes-scheduler-simulator ``pkg/type/open-gpu-share/cache/cache.go``,
``gpunodeinfo.go``, ``deviceinfo.go`` (per-device pod maps, used milli per device) and
``pkg/type/resource.go`` ``NodeResource.Sub``.
"""

from __future__ import annotations

import numpy as np

from kubesched.snapshot.gpushare.model import (
    GPU_MODEL,
    MILLI,
    GpuRequest,
    annotated_gpu_index,
    gpu_request_or_none,
    node_gpu_count,
)
from kubesched.snapshot.gpushare.selection import choose_gpus
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows

COUNT_COLUMN = "GpuShare/gpu-count"
_MEMO_KEY = "GpuShare/ledger"
#: ``pod.memo`` key of the GPUs Reserve chose: (node name, indices).
ASSIGNED_KEY = "GpuShare/assigned"


def assignment_of(pod: PodInfo) -> tuple[int, ...] | None:
    chosen = pod.memo.get(ASSIGNED_KEY)
    if chosen is not None and chosen[0] == pod.node_name:
        indices: tuple[int, ...] = chosen[1]
        return indices
    return annotated_gpu_index(pod)


class GpuLedger:
    """``used[row, gpu]`` milli per GPU, per-node counts of GPU pods by kind, for one table."""

    @classmethod
    def of(cls, table: NodeTable) -> GpuLedger:
        ledger = table.memo.get(_MEMO_KEY)
        if not isinstance(ledger, GpuLedger):
            ledger = table.memo[_MEMO_KEY] = GpuLedger(table)
        return ledger

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        table.register_node_column(COUNT_COLUMN, node_gpu_count)
        self._used: IntArray = np.zeros((len(table.alive), 8), dtype=np.int64)
        #: GPU pods per row by ``GpuRequest.affinity_tag`` (GpuClustering reads it).
        self._tags: IntArray = np.zeros((len(table.alive), 4), dtype=np.int64)
        self._tag_index: dict[str, int] = {}
        #: uid → (row, milli per GPU, indices) counted in ``_used``.
        self._counted: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        #: uid → (row, pod, request) of pods on a node whose GPUs nobody chose yet.
        self._unplaced: dict[str, tuple[int, PodInfo, GpuRequest]] = {}
        #: uid → row of pods whose GPUs did not fit on their node (counted nowhere).
        self._overcommitted: dict[str, int] = {}
        #: Per row, bumped whenever a pod comes or goes there or its GPUs change: caches of
        #: per-row values read from the ledger and the row's requests (FGD's scores) compare it.
        self._versions: IntArray = np.zeros(len(table.alive), dtype=np.int64)
        #: (node generation, rows) when ``_ensure_shape`` last checked the GPU counts.
        self._shape_checked: tuple[int, int] = (-1, -1)
        #: ``free()`` of every row (None: to build again, after the shape or a node's GPU count
        #: changed), and the rows whose used milli changed since: Filter and Score read the whole
        #: matrix on every attempt, pods change a few rows between two.
        self._free: IntArray | None = None
        #: ``_free`` summed per row (kept with it: the free milli of a whole node).
        self._free_totals: IntArray = np.zeros(0, dtype=np.int64)
        self._free_stale: set[int] = set()
        #: Bumped with every row's counter in ``_versions``: unchanged, no GPU was taken or given
        #: back anywhere (the replay's metrics skip their per-row comparison).
        self.changes = 0
        #: Sets handed out by ``watch_rows``: each gets every row whose counter moves.
        self._row_watchers: list[set[int]] = []
        table.observe_pods(self._observe)

    def watch_rows(self) -> set[int]:
        """A set the ledger adds every row to whose change counter moves (``versions``), for a
        reader that keeps per-row values: it reads and empties the set instead of comparing
        every row's counter."""
        rows: set[int] = set()
        self._row_watchers.append(rows)
        return rows

    def _bump(self, row: int) -> None:
        self._versions[row] += 1
        self.changes += 1
        self.table.touch_row(row)  # the table's per-row change log covers the GPUs too
        for watcher in self._row_watchers:
            watcher.add(row)

    # -- shape -------------------------------------------------------------------------------------
    def _ensure_shape(self, gpus: int = 0) -> None:
        rows = len(self.table.alive)
        key = (self.table.node_generation, rows)
        if gpus <= self._used.shape[1] and key == self._shape_checked:
            return  # no node came, went or changed since the last check: the shape still holds
        self._shape_checked = key
        self._free = None
        if gpus <= self._used.shape[1]:
            counts = self.table.node_column(COUNT_COLUMN)
            gpus = max(gpus, int(counts.max()) if len(counts) else 0)
        extra_rows, extra_cols = rows - self._used.shape[0], gpus - self._used.shape[1]
        if extra_rows > 0 or extra_cols > 0:
            self._used = np.pad(self._used, ((0, max(extra_rows, 0)), (0, max(extra_cols, 0))))
        if rows > self._tags.shape[0]:
            self._tags = np.pad(self._tags, ((0, rows - self._tags.shape[0]), (0, 0)))
        if rows > len(self._versions):
            self._versions = np.pad(self._versions, (0, rows - len(self._versions)))

    # -- the observer ------------------------------------------------------------------------------
    def _observe(self, row: int, pod: PodInfo, sign: int) -> None:
        self._ensure_shape()
        self._bump(row)
        request = gpu_request_or_none(pod)
        if request is None:
            return
        self._tag(row, request.affinity_tag, sign)
        self._release(pod.uid)
        if sign < 0:
            return
        indices = assignment_of(pod)
        count = int(self.table.node_column(COUNT_COLUMN)[row])
        if indices is not None and len(indices) == request.count and max(indices) < count:
            self._count(pod.uid, row, request.milli, indices)
        else:
            self._unplaced[pod.uid] = (row, pod, request)

    def _tag(self, row: int, tag: str, sign: int) -> None:
        col = self._tag_index.get(tag)
        if col is None:
            col = self._tag_index[tag] = len(self._tag_index)
            if col >= self._tags.shape[1]:
                self._tags = np.pad(self._tags, ((0, 0), (0, self._tags.shape[1])))
        self._tags[row, col] += sign

    def _count(self, uid: str, row: int, milli: int, indices: tuple[int, ...]) -> None:
        self._ensure_shape(max(indices) + 1)
        used = self._used
        # One or a few GPUs: scalar steps cost less than a fancy index (which counts a repeated
        # index once: so do these).
        for gpu in dict.fromkeys(indices):
            used[row, gpu] += milli
        self._bump(row)
        self._free_stale.add(row)
        self._counted[uid] = (row, milli, indices)

    def _release(self, uid: str) -> None:
        counted = self._counted.pop(uid, None)
        if counted is not None:
            row, milli, indices = counted
            used = self._used
            for gpu in dict.fromkeys(indices):
                used[row, gpu] -= milli
            self._bump(row)
            self._free_stale.add(row)
        self._unplaced.pop(uid, None)
        self._overcommitted.pop(uid, None)

    def settle(self) -> None:
        """Put every unplaced pod on the tightest GPUs of its node (``NodeResource.Sub``)."""
        while self._unplaced:
            uid = next(iter(self._unplaced))
            row, _pod, request = self._unplaced.pop(uid)
            indices = choose_gpus(self._free_row(row).tolist(), request, "best")
            if indices is None:
                self._overcommitted[uid] = row
            else:
                self._count(uid, row, request.milli, indices)

    # -- Reserve / Unreserve -----------------------------------------------------------------------
    def free_without(self, pod: PodInfo, row: int) -> IntArray:
        """Free milli per GPU of ``row`` as if ``pod`` (assumed there) had no GPUs yet."""
        self._release(pod.uid)
        self.settle()
        return self._free_row(row)

    def assign(self, pod: PodInfo, row: int, request: GpuRequest, indices: tuple[int, ...]) -> None:
        pod.memo[ASSIGNED_KEY] = (pod.node_name, indices)
        self._release(pod.uid)
        self._count(pod.uid, row, request.milli, indices)

    def unassign(self, pod: PodInfo) -> None:
        """Undo ``assign`` (idempotent). A pod the table still counts waits to be placed again."""
        chosen = pod.memo.get(ASSIGNED_KEY)
        if chosen is not None and chosen[0] == pod.node_name:
            del pod.memo[ASSIGNED_KEY]
        counted = self._counted.get(pod.uid)
        self._release(pod.uid)
        request = gpu_request_or_none(pod)
        if counted is not None and request is not None and self.table.pod(pod.uid) is not None:
            self._unplaced[pod.uid] = (counted[0], pod, request)

    @property
    def unsettled(self) -> bool:
        """Whether pods wait to be put on GPUs (``settle``, at the next read)."""
        return bool(self._unplaced)

    def assigned(self, uid: str) -> tuple[int, ...] | None:
        counted = self._counted.get(uid)
        return counted[2] if counted is not None else None

    # -- reads ---------------------------------------------------------------------------------
    def _free_row(self, row: int) -> IntArray:
        count = int(self.table.node_column(COUNT_COLUMN)[row])
        free: IntArray = np.maximum(MILLI - self._used[row, :count], 0)
        return free

    def free(self, rows: Rows) -> IntArray:
        """Free milli per GPU, ``(len(rows), max GPUs)``; 0 past a node's last GPU. A new array."""
        free: IntArray = self._fresh_free().take(rows, axis=0)
        return free

    def free_totals(self, rows: Rows) -> IntArray:
        """Free milli of each row's GPUs in all (``free(rows).sum(axis=1)``, kept per row)."""
        self._fresh_free()
        totals: IntArray = self._free_totals.take(rows)
        return totals

    def _fresh_free(self) -> IntArray:
        """The free-milli matrix of every row, rows whose used milli changed read again."""
        self.settle()
        self._ensure_shape()
        table_free = self._free
        if table_free is None or table_free.shape != self._used.shape:
            table_free = self._free = self._free_of(np.arange(len(self._used)))
            self._free_totals = table_free.sum(axis=1)
            self._free_stale.clear()
        elif self._free_stale:
            stale = np.fromiter(self._free_stale, dtype=np.intp, count=len(self._free_stale))
            self._free_stale.clear()
            table_free[stale] = fresh = self._free_of(stale)
            self._free_totals[stale] = fresh.sum(axis=1)
        return table_free

    def _free_of(self, rows: Rows) -> IntArray:
        counts = self.table.node_column(COUNT_COLUMN)[rows]
        exists = np.arange(self._used.shape[1]) < counts[:, None]
        free: IntArray = np.where(exists, np.maximum(MILLI - self._used[rows], 0), 0)
        return free

    def versions(self, rows: Rows) -> IntArray:
        """The change counter of each row (settled first): equal counters, equal pods and GPUs."""
        self.settle()
        self._ensure_shape()
        versions: IntArray = self._versions[rows]
        return versions

    def gpu_counts(self, rows: Rows) -> IntArray:
        counts: IntArray = self.table.node_column(COUNT_COLUMN)[rows]
        return counts

    def models(self, rows: Rows) -> list[str]:
        """The GPU model label of each row ('' for none)."""
        col = self.table.label_column(GPU_MODEL)
        names = {code: value for value, code in col.values.items()}
        return [names.get(int(c), "") for c in col.codes[rows]]

    def tag_counts(self, rows: Rows, tag: str) -> tuple[IntArray, IntArray]:
        """(GPU pods of kind ``tag``, distinct kinds of GPU pods) on each row."""
        self._ensure_shape()
        tags = self._tags[rows]
        col = self._tag_index.get(tag)
        same: IntArray = tags[:, col] if col is not None else np.zeros(len(rows), dtype=np.int64)
        kinds: IntArray = (tags > 0).sum(axis=1).astype(np.int64)
        return same, kinds

    def used(self, row: int) -> list[int]:
        """Used milli per GPU of one row (for tests and explanations)."""
        self.settle()
        count = int(self.table.node_column(COUNT_COLUMN)[row])
        return [int(v) for v in self._used[row, :count]]

    def row_milli(self, row: int) -> tuple[list[int], int]:
        """(free milli of each GPU ``row`` has, milli its pods hold on them) as Python values:
        ``free`` and ``allocated_milli`` of one row without their dozen numpy calls, for a reader
        of a row or two at a time."""
        self.settle()
        self._ensure_shape()
        count = int(self.table.node_column(COUNT_COLUMN)[row])
        used: list[int] = self._used[row, :count].tolist()
        return [max(MILLI - u, 0) for u in used], sum(used)

    def free_lists(self, rows: list[int]) -> list[tuple[int, list[int]]]:
        """(GPU count, ``free(rows)``'s row: free milli per GPU, 0 past the node's last GPU) of
        each row, read in Python (for a few rows: ``free`` costs a dozen numpy calls)."""
        self.settle()
        self._ensure_shape()
        width = self._used.shape[1]
        counts = self.table.node_column(COUNT_COLUMN)
        out: list[tuple[int, list[int]]] = []
        for row in rows:
            count = int(counts[row])
            used: list[int] = self._used[row, :count].tolist()
            out.append((count, [max(MILLI - u, 0) for u in used] + [0] * (width - len(used))))
        return out

    def allocated_milli(self, rows: Rows) -> int:
        """Milli-GPU the pods on ``rows`` hold on GPUs (over-committed pods not included)."""
        self.settle()
        self._ensure_shape()
        counts = self.table.node_column(COUNT_COLUMN)[rows]
        exists = np.arange(self._used.shape[1]) < counts[:, None]
        return int(np.where(exists, self._used[rows], 0).sum())

    def overcommitted_milli(self) -> int:
        """Milli-GPU of the pods whose GPUs fit nowhere on their node (``overcommitted()``)."""
        total = 0
        for uid in self.overcommitted():
            pod = self.table.pod(uid)
            request = gpu_request_or_none(pod) if pod is not None else None
            total += request.total_milli if request is not None else 0
        return total

    def overcommitted(self) -> dict[str, int]:
        """uid → row of bound pods whose GPUs fit nowhere on their node."""
        self.settle()
        return dict(self._overcommitted)
