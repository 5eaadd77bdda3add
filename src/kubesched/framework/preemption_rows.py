"""Preemption's view of a failed Filter pass: which rows are candidates (their status was
Unschedulable) and the PostFilter message when none had a victim (framework/preemption.py's
Evaluator; upstream pkg/scheduler/framework/preemption/preemption.go ``nodesWherePreemptionMightHelp``
and the FitError it returns)."""

from __future__ import annotations

import functools

import numpy as np

from kubesched.framework.diagnosis import Diagnosis, fit_error_message
from kubesched.framework.status import Code, Status
from kubesched.snapshot.table import Rows

NO_VICTIMS_MSG = "No preemption victims found for incoming pod"
NO_VICTIMS = Status.unresolvable(NO_VICTIMS_MSG)
NOT_HELPFUL_MSG = "Preemption is not helpful for scheduling"
NOT_HELPFUL = Status.unresolvable(NOT_HELPFUL_MSG)


def unschedulable_rows(diagnosis: Diagnosis, rows: Rows) -> tuple[Rows, Rows]:
    """The rows (in the order of ``rows``) whose Filter status was Unschedulable, and the other
    rows; absent nodes count as UnschedulableAndUnresolvable (NewDefaultNodeToStatus). One pass
    over the recorded chunks, a later record of a row overriding an earlier one as in
    ``NodeToStatus.get``. Kept with the statuses for these ``rows`` (the table's alive rows: the
    same array while no node comes or goes), for attempts that share them (framework/filter_outcome.py)."""
    memo = diagnosis.node_to_status.memo
    kept = memo.get(_SPLIT_MEMO)
    if kept is not None and kept[0] is rows:
        return kept[1], kept[2]
    split = _split_unschedulable(diagnosis, rows)
    memo[_SPLIT_MEMO] = (rows, *split)
    return split


#: ``NodeToStatus.memo`` key of ``unschedulable_rows``' answer (for the table's alive rows it
#: was made for).
_SPLIT_MEMO = "preemption/unschedulable-rows"


@functools.lru_cache(maxsize=1024)
def no_candidate_message(num_all: int, potential: int, others: int) -> str:
    """The PostFilter message when every one of ``potential`` rows was tried and none had a
    victim, ``others`` not helpful: it counts reasons, so it is a function of the counts."""
    fit = Diagnosis()
    fit.node_to_status.add_all(np.arange(potential, dtype=np.intp), NO_VICTIMS)
    fit.node_to_status.add_all(np.arange(potential, potential + others, dtype=np.intp), NOT_HELPFUL)
    return fit_error_message(num_all, fit)


def _split_unschedulable(diagnosis: Diagnosis, rows: Rows) -> tuple[Rows, Rows]:
    rejected, index, statuses = diagnosis.node_to_status.rejected()
    if not len(rejected) or not len(rows):
        return rows[:0], rows
    is_unschedulable = np.array([st.code == Code.UNSCHEDULABLE for st in statuses], dtype=np.int8)
    size = int(max(int(rows.max()), int(rejected.max()))) + 1
    flag = np.full(size, -1, dtype=np.int8)
    if int(np.bincount(rejected, minlength=size).max()) <= 1:
        flag[rejected] = is_unschedulable[index]  # one record per row (the usual case): no sort
    else:
        _, last = np.unique(rejected[::-1], return_index=True)  # the last record of each row
        keep = len(rejected) - 1 - last
        flag[rejected[keep]] = is_unschedulable[index[keep]]
    picked = flag[rows] == 1
    potential, others = rows[picked], rows[~picked]
    potential.flags.writeable = False  # shared through the memo
    others.flags.writeable = False
    return potential, others
