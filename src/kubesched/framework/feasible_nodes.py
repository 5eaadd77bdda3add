"""Which nodes a pod is scored on: upstream's numFeasibleNodesToFind and the rotating search of
findNodesThatPassFilters (pkg/scheduler/schedule_one.go), with the Filter plugins run over whole
windows of node-table rows instead of node by node in parallel."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, NodeToStatus
from kubesched.framework.filter_outcome import pod_shape
from kubesched.framework.filter_rows import IncrementalPass
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import Rows

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework

#: Upstream minFeasibleNodesToFind / minFeasibleNodesPercentageToFind (schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """Upstream numFeasibleNodesToFind: adaptive 50 - nodes/125 % (floor 5 %), at least 100 nodes."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        pct = max(pct, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if pct >= 100:
        return num_all_nodes
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


def _rotated(rows: Rows, start: int, lo: int, hi: int, ascending: bool = True) -> tuple[Rows, bool]:
    """Positions [lo, hi) of ``rows`` rotated left by ``start`` (hi <= len(rows)): a view unless
    the range wraps around the end, and whether it ascends (``rows`` do and it does not wrap)."""
    a, b, n = start + lo, start + hi, len(rows)
    if b <= n:
        return rows[a:b], ascending
    if a >= n:
        return rows[a - n : b - n], ascending
    return np.concatenate((rows[a:], rows[: b - n])), False


def _rotated_position(rows: Rows, start: int, row: int) -> int | None:
    """Where ``row`` is in ``rows`` rotated left by ``start`` (None: not there)."""
    at = np.flatnonzero(rows == row)
    return (int(at[0]) - start) % len(rows) if len(at) else None


def _position(chunk: Rows, row: int, ascending: bool) -> int:
    """Index of ``row`` in ``chunk`` (an ascending run of rows, or two when it wrapped)."""
    if not ascending:
        return int((chunk == row).nonzero()[0][0])
    first = int(chunk[0])  # consecutive rows need no search
    return row - first if int(chunk[-1]) - first + 1 == len(chunk) else int(chunk.searchsorted(row))


def _moved_share(share: float, first_window_share: float) -> float:
    """The recent share of nodes passing Filter after a search whose first window had this share."""
    return max(0.8 * share + 0.2 * first_window_share, 0.02)


class FeasibleNodeSearch:
    """One scheduler's search state: where the next search starts (upstream nextStartNodeIndex)
    and the recent share of nodes passing Filter (a moving average that sizes the first window)."""

    __slots__ = ("feasible_share", "next_start_node_index")

    def __init__(self) -> None:
        self.next_start_node_index = 0
        self.feasible_share = 0.5

    def find(
        self, fwk: Framework, state: CycleState, pod: PodInfo, rows: Rows, num_all: int, diagnosis: Diagnosis,
        *, reuse: bool = False, tried: tuple[int, Status] | None = None,
    ) -> tuple[Rows, Status]:
        """Filter nodes from a rotating start until enough feasible ones are found.

        Upstream evaluates nodes in parallel from nextStartNodeIndex and stops after
        numFeasibleNodesToFind; here whole windows are filtered as vectors. The first window is
        sized from the share of nodes that passed recently (so it usually holds just enough), and
        a further one from what is still missing, so a 5,000-node cluster usually costs one small
        window.

        ``tried``: the node the cycle tried first (its nomination or batching hint) and the
        status that rejected it. Upstream's evaluateNominatedNode records it in the Diagnosis the
        search then fills, so a search that stops before reaching that node still counts it among
        the nodes processed (nextStartNodeIndex moves one further) and in the FitError.

        ``reuse``: ``rows`` are all the table's rows (PreFilter narrowed none) and ``diagnosis`` is
        empty: a pass that finds no node may be kept, and one kept for an identical pod on the same
        table answers in its place (framework/filter_outcome.py).
        """
        n = len(rows)
        if n == 0:
            return rows, SUCCESS
        # Without Score plugins there is nothing to choose between: the first feasible node is
        # taken (kubesched runs no extenders, so upstream's hasExtenderFilters is false).
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n) if fwk.score else 1
        start = self.next_start_node_index % n
        table = fwk.handle.table
        # Upstream's node order is the rows' own unless zones interleave (snapshot/node_tree.py);
        # rows narrowed from it keep its order.
        ascending = table.search_rows() is table.alive_rows()
        if not fwk.filter:
            # Every node fits: upstream takes the nodes from the start index, and its caller
            # moves the index past them (processedNodes).
            self.next_start_node_index = (self.next_start_node_index + to_find) % max(num_all, 1)
            return _rotated(rows, start, 0, to_find)[0], SUCCESS
        key = None
        incremental: IncrementalPass | None = None
        if reuse and not fwk.handle.nominated:
            shape = pod_shape(pod)
            key = fwk.filter_outcomes.key(
                state, pod, table, start, None if to_find >= n else self.feasible_share, shape)
            kept = fwk.filter_outcomes.get(key, table) if key is not None else None
            if kept is not None:
                return self._adopt_failed_pass(diagnosis, kept, rows, num_all)
            if to_find >= n:  # one window of every node: the shape's kept verdicts answer it
                incremental = fwk.row_verdicts.prepare(state, pod, table, rows, shape)
                same = incremental.failed_pass(start, rows) if incremental is not None else None
                if same is not None and key is not None:
                    # The shape's last failed pass, no verdict changed since (as for a kept pass
                    # above), and kept for this generation too.
                    fwk.filter_outcomes.put(key, table, same)
                    return self._adopt_failed_pass(diagnosis, same, rows, num_all)
        found: list[Rows] = []
        count = 0
        pos = 0
        window = n if to_find >= n else min(n, max(int(to_find / self.feasible_share * 1.15) + 16, 64))
        processed = n
        first = True
        while pos < n:
            chunk, chunk_ascends = _rotated(rows, start, pos, min(pos + window, n), ascending)
            if incremental is not None:
                passing = incremental.run_filters(chunk, diagnosis, ascending=chunk_ascends)
            else:
                passing, st = fwk.run_filters(state, pod, chunk, diagnosis, ascending=chunk_ascends)
                if not st.is_success:
                    return rows[:0], st
            if first:
                self.feasible_share = _moved_share(self.feasible_share, len(passing) / len(chunk))
                first = False
            if count + len(passing) >= to_find:
                need = to_find - count
                passing = passing[:need]
                # Nodes after the last one kept were evaluated here but would not have been
                # upstream; the rotation resumes right after the last node kept.
                last = _position(chunk, int(passing[-1]), chunk_ascends) if need else -1
                processed = pos + last + 1
                found.append(passing)
                count += len(passing)
                break
            found.append(passing)
            count += len(passing)
            pos += len(chunk)
            # Size the next window for what is still missing at the share seen so far (doubling
            # would evaluate up to twice the nodes needed when the first window fell just short).
            seen_share = max(count / pos, 0.02)
            window = max(int((to_find - count) / seen_share * 1.15) + 16, 64)
        at = _rotated_position(rows, start, tried[0]) if tried is not None else None
        if tried is not None and (at is None or at >= processed):
            if at is not None:  # one PreFilter left out is recorded already
                diagnosis.node_to_status.add_all(np.array([tried[0]], dtype=np.intp), tried[1])
                if tried[1].plugin:
                    diagnosis.unschedulable_plugins.add(tried[1].plugin)
            processed += 1
        self.next_start_node_index = (self.next_start_node_index + processed) % max(num_all, 1)
        if key is not None and count == 0:
            fwk.filter_outcomes.put(key, fwk.handle.table, diagnosis.node_to_status)
            if incremental is not None:
                incremental.remember_failure(start, rows, diagnosis.node_to_status)
        if len(found) == 1:
            return found[0], SUCCESS
        feasible = np.concatenate(found) if found else rows[:0]
        return feasible, SUCCESS

    def _adopt_failed_pass(
        self, diagnosis: Diagnosis, statuses: NodeToStatus, rows: Rows, num_all: int,
    ) -> tuple[Rows, Status]:
        """What an identical failed pass would have done: every node rejected (its statuses
        adopted), the rotation moved by all of them, the share moved towards the first window's
        (none passed)."""
        diagnosis.adopt(statuses)
        self.feasible_share = _moved_share(self.feasible_share, 0.0)
        self.next_start_node_index = (self.next_start_node_index + len(rows)) % max(num_all, 1)
        return rows[:0], SUCCESS
