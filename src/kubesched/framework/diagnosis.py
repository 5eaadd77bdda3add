"""Why a pod did not fit: per-node rejection statuses and the upstream FitError message.

Statuses are kept the way batch filters produce them — chunks of (rows, codes, statuses) — so a
rejection on 5,000 nodes costs a few arrays, and the per-node view is built only when asked for
(explain, the extender's FailedNodes, the simulator's JSON output).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.framework.status import Status
from kubesched.snapshot.table import Rows

#: Upstream framework.NoNodeAvailableMsg / SeparatorFormat (pkg/scheduler/framework/types.go).
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_MSG = "no nodes available to schedule pods"


class NodeToStatus:
    """Rejection status per node row. Rows not present passed (or were never evaluated)."""

    def __init__(self) -> None:
        self._chunks: list[tuple[Rows, npt.NDArray[np.int32], list[Status]]] = []
        self._count = 0
        self._by_row: dict[int, Status] | None = None
        #: ``reason_histogram`` of the chunks so far (None: to count again), and the FitError
        #: message's reasons made of it alone (``reasons_text``).
        self._histogram: Counter[str] | None = None
        self._reasons_text: str | None = None
        #: ``rejected()`` and ``rejecting_plugins()`` of the chunks so far (None: to build again).
        self._rejected: tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], list[Status]] | None = None
        self._rejecting: frozenset[str] | None = None
        #: Values callers derive from these statuses alone (e.g. preemption's split of the rows
        #: into Unschedulable and the others), emptied whenever a chunk is added.
        self.memo: dict[str, Any] = {}
        #: Set by ``freeze``: the statuses are shared by several attempts (framework/filter_outcome.py)
        #: and may no longer change.
        self.frozen = False
        #: Upstream NodeToStatus.absentNodesStatus: the verdict for nodes with no row of their own
        #: (a Permit rejection on a node deleted meanwhile); counted in the FitError message.
        self.absent_status: Status | None = None

    def add(self, rows: Rows, codes: npt.NDArray[np.int32], statuses: list[Status], failed: int | None = None) -> None:
        """Record verdicts: ``codes[i] > 0`` selects ``statuses[codes[i] - 1]`` for ``rows[i]``;
        rows with code 0 passed and are not recorded. ``failed`` is the number of non-zero codes
        when the caller knows it (otherwise every code must be non-zero)."""
        if self.frozen:
            raise RuntimeError("these node statuses are shared by several attempts and may not change")
        if len(rows):
            self._chunks.append((rows, codes, statuses))
            self._count += len(rows) if failed is None else failed
            self._by_row = None
            self._histogram = None
            self._reasons_text = None
            self._rejected = None
            self._rejecting = None
            self.memo.clear()

    def freeze(self) -> None:
        """No more chunks: ``add`` raises from now on, so attempts may share these statuses and
        what is derived from them (messages, preemption's split of the rows)."""
        self.frozen = True

    def add_all(self, rows: Rows, status: Status) -> None:
        self.add(rows, np.ones(len(rows), dtype=np.int32), [status])

    def __len__(self) -> int:
        return self._count

    def get(self, row: int) -> Status | None:
        if self._by_row is None:
            self._by_row = dict(self.items())
        return self._by_row.get(int(row))

    def items(self) -> Iterator[tuple[int, Status]]:
        for rows, codes, statuses in self._chunks:
            for r, c in zip(rows.tolist(), codes.tolist(), strict=True):
                if c:
                    yield r, statuses[c - 1]

    def rejected(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], list[Status]]:
        """Every rejection as two columns: the rejected rows, and for each a 0-based index into the
        returned statuses (passed rows dropped; chunks merged, their status lists appended). Kept
        until a chunk is added (preemption and the simulator's record both ask): the arrays are
        read-only, the list a new one each call."""
        if self._rejected is None:
            self._rejected = self._merge_rejected()
        rows, codes, statuses = self._rejected
        return rows, codes, list(statuses)

    def _merge_rejected(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], list[Status]]:
        rows: list[npt.NDArray[np.int32]] = []
        codes: list[npt.NDArray[np.int32]] = []
        statuses: list[Status] = []
        for chunk_rows, chunk_codes, chunk_statuses in self._chunks:
            failed = chunk_codes.nonzero()[0]  # flatnonzero of a 1-d array, without its wrappers
            rows.append(np.asarray(chunk_rows)[failed].astype(np.int32, copy=False))
            codes.append(chunk_codes[failed].astype(np.int32, copy=False) + (len(statuses) - 1))
            statuses.extend(chunk_statuses)
        # New arrays (concatenate copies), read-only because they are handed out again.
        merged_rows = np.concatenate(rows) if rows else np.zeros(0, np.int32)
        merged_codes = np.concatenate(codes) if codes else np.zeros(0, np.int32)
        merged_rows.flags.writeable = False
        merged_codes.flags.writeable = False
        return merged_rows, merged_codes, statuses

    def reason_histogram(self) -> Counter[str]:
        """How many nodes gave each reason (a node with two reasons counts in both), vectorised;
        a new Counter each call (counted once per set of chunks: a failure's message, its message
        after PostFilter and its record all ask)."""
        if self._histogram is None:
            self._histogram = self._count_reasons()
        return Counter(self._histogram)

    def reasons_text(self) -> str:
        """``reason_histogram`` as the FitError message lists it: "N reason" sorted, comma-joined
        (kept until a chunk is added: a failure's message is asked for before and after PostFilter)."""
        if self._reasons_text is None:
            if self._histogram is None:
                self._histogram = self._count_reasons()
            self._reasons_text = _joined_reasons(self._histogram)
        return self._reasons_text

    def _count_reasons(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for _rows, codes, statuses in self._chunks:
            per_code: list[int] = np.bincount(codes, minlength=len(statuses) + 1).tolist()
            for code, status in enumerate(statuses, start=1):
                n = per_code[code]
                if n:
                    for reason in status.reasons:
                        counts[reason] += n
        return counts

    def rejecting_plugins(self) -> set[str]:
        """Plugins behind the recorded rejections (statuses no row uses are not counted)."""
        if self._rejecting is None:
            out: set[str] = set()
            for _rows, codes, statuses in self._chunks:
                used = np.flatnonzero(np.bincount(codes, minlength=len(statuses) + 1)[1:])
                out.update(statuses[int(i)].plugin for i in used if statuses[int(i)].plugin)
            self._rejecting = frozenset(out)
        return set(self._rejecting)


class Diagnosis:
    __slots__ = ("_plugins", "_plugins_pending", "node_to_status", "post_filter_msg", "pre_filter_msg")

    def __init__(self) -> None:
        self.node_to_status = NodeToStatus()
        self._plugins: set[str] = set()
        #: Chunks of node_to_status whose plugins are named only when someone asks (the common,
        #: successful attempt never does).
        self._plugins_pending = 0
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    @property
    def unschedulable_plugins(self) -> set[str]:
        """Plugins that rejected the pod somewhere: only cluster events they care about requeue it."""
        if self._plugins_pending:
            self._plugins.update(self.node_to_status.rejecting_plugins())
            self._plugins_pending = 0
        return self._plugins

    def add_rejections(self, rows: Rows, codes: npt.NDArray[np.int32], statuses: list[Status], failed: int) -> None:
        """Record a filter window's verdicts (code 0: passed) and, lazily, the plugins behind them."""
        self.node_to_status.add(rows, codes, statuses, failed)
        self._plugins_pending += 1

    def adopt(self, node_to_status: NodeToStatus) -> None:
        """Take the frozen statuses of an earlier, identical Filter pass (framework/filter_outcome.py)
        in place of running it: this diagnosis must have recorded nothing yet."""
        if len(self.node_to_status) or self._plugins or self.pre_filter_msg or not node_to_status.frozen:
            raise RuntimeError("only frozen statuses are adopted, by a diagnosis that recorded nothing yet")
        self.node_to_status = node_to_status
        self._plugins_pending += 1


def _joined_reasons(histogram: Counter[str]) -> str:
    return ", ".join(sorted(f"{n} {reason}" for reason, n in histogram.items()))


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    """Upstream FitError.Error() (pkg/scheduler/framework/types.go): "0/N nodes are available: ..."."""
    msg = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        node_to_status = diagnosis.node_to_status
        absent, recorded = node_to_status.absent_status, len(node_to_status)
        if absent is not None and recorded < num_all_nodes:
            histogram = node_to_status.reason_histogram()
            for reason in absent.reasons:
                histogram[reason] += num_all_nodes - recorded
            reasons = _joined_reasons(histogram)
        else:
            reasons = node_to_status.reasons_text()
        if reasons:
            msg += f" {reasons}."
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}"  # upstream: " %v", no period of its own
    return msg
