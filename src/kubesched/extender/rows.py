"""Table rows as the filter and prioritize verbs handle them: de-duplicating and membership
through masks (``unique_rows``, ``rows_in``), and ``RowEntries``, each node's encoded
HostPriority entries kept so a prioritize answer needs no per-node Python step."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt

from kubesched.extender.wire import MAX_EXTENDER_PRIORITY, host_entries, join_host_entries
from kubesched.snapshot.table import IntArray, NodeTable, Rows


def unique_rows(rows: Rows, inverse: bool = False) -> tuple[Rows, Rows | None]:
    """``np.unique(rows[, return_inverse=True])`` through a mask over the row range: rows are
    small non-negative table rows, so this is a few linear passes instead of a sort."""
    if not len(rows):
        return rows, (rows if inverse else None)
    seen = np.zeros(int(rows.max()) + 1, dtype=np.intp)
    seen[rows] = 1
    uniq = np.flatnonzero(seen)
    if not inverse:
        return uniq, None
    seen[uniq] = np.arange(len(uniq), dtype=np.intp)
    return uniq, seen[rows]


def rows_in(rows: Rows, members: Rows) -> npt.NDArray[np.bool_]:
    """``np.isin(rows, members)`` for table rows, through a mask."""
    if not len(rows):
        return np.zeros(0, dtype=np.bool_)
    mask = np.zeros(int(rows.max()) + 1, dtype=np.bool_)
    mask[members[members < len(mask)]] = True
    return mask[rows]


class RowEntries:
    """Per row of the live node table, the node's encoded HostPriority entry for each score
    0..MaxExtenderPriority (wire.host_entries), so a prioritize answer is one fancy index into an
    object array and a join, with no per-node Python step.

    Valid while the table's row → name assignment is the one it was seen with; that changes only
    when nodes come or go (rows are reused), and comparing the name lists is a C loop over mostly
    identical objects, so it is checked on every use. When it differs the rows are emptied and
    filled again as requests need them (a node joining a 5,000-node cluster costs the next
    prioritize its own rows, not 5,000)."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._entries: npt.NDArray[np.object_] = np.empty((0, MAX_EXTENDER_PRIORITY + 1), dtype=object)

    def encode(self, table: NodeTable, rows: Rows, scores: IntArray) -> bytes:
        """The HostPriorityList for ``rows`` of ``table`` with ``scores`` (each in 0..10)."""
        if table.names != self._names:
            self._names = list(table.names)
            self._entries = np.empty((len(self._names), MAX_EXTENDER_PRIORITY + 1), dtype=object)  # all None
        picked: list[bytes | None] = self._entries[rows, scores].tolist()
        if not all(picked):  # rows not encoded since the last change
            for i in [i for i, e in enumerate(picked) if e is None]:
                row = int(rows[i])
                self._entries[row] = host_entries(self._names[row])
                picked[i] = self._entries[row, scores[i]]
        return join_host_entries(cast(list[bytes], picked))
