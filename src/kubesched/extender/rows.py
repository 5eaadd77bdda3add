"""Table rows as the filter and prioritize verbs handle them: de-duplicating and membership
through masks (``unique_rows``, ``rows_in``), ``NameWindows``, the rows (and the all-passed filter
answer) of the NodeNames lists kube-scheduler keeps sending, and ``RowEntries``, each node's
encoded HostPriority entries kept so a prioritize answer needs no per-node Python step."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from itertools import repeat
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


class NameWindow:
    """One NodeNames list, its rows, and what filter and prioritize derive from the rows alone:
    whether every name is known, ``unique_rows(rows, inverse=True)`` and the filter answer when
    every node passed (each made once)."""

    __slots__ = ("_unique", "all_known", "names", "passed_answer", "rows")

    def __init__(self, names: list[str], rows: Rows) -> None:
        self.names = names
        self.rows = rows
        self.all_known = not len(rows) or bool(rows.min() >= 0)
        self.passed_answer: bytes | None = None
        self._unique: tuple[Rows, Rows] | None = None

    def unique(self) -> tuple[Rows, Rows]:
        """``unique_rows(self.rows, inverse=True)``."""
        if self._unique is None:
            uniq, inverse = unique_rows(self.rows, inverse=True)
            assert inverse is not None
            self._unique = (uniq, inverse)
        return self._unique


class NameWindows:
    """The rows of the NodeNames lists filter requests carry, for the lists that recur.

    kube-scheduler sends filter the feasible nodes it found walking its node list from a start
    index that moves on by the nodes it examined (pkg/scheduler/schedule_one.go
    ``findNodesThatPassFilters``, ``nextStartNodeIndex``): while its nodes pass its own filters the
    lists are windows of one order with a few dozen distinct starts, so each list recurs. Looking a
    list up by its first name and length and comparing it with the one kept (a C loop over the
    strings) replaces hashing every name of every request. Valid while the table's name → row
    assignment is the one the rows were read with: nodes coming or going bump node_generation,
    which empties the windows."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._windows: OrderedDict[tuple[str, int], NameWindow] = OrderedDict()
        self._table: NodeTable | None = None
        self._generation = -1

    def window(self, table: NodeTable, names: list[str]) -> NameWindow:
        """``names`` with their rows in ``table`` (-1 for a name the table does not hold)."""
        self._check(table)
        key = (names[0] if names else "", len(names))
        known = self._windows.get(key)
        if known is not None and known.names == names:
            return known
        rows = np.fromiter(map(table.index.get, names, repeat(-1)), dtype=np.intp, count=len(names))
        window = NameWindow(names, rows)
        if window.all_known:  # a list naming unknown nodes is an error, not kept
            self._keep(key, window)
        return window

    def add(self, table: NodeTable, names: list[str], rows: Rows) -> None:
        """Remember ``names`` at ``rows`` of ``table``: the nodes a filter passed, which prioritize
        is sent next."""
        self._check(table)
        self._keep((names[0] if names else "", len(names)), NameWindow(names, rows))

    def _check(self, table: NodeTable) -> None:
        if table is not self._table or table.node_generation != self._generation:
            self._windows.clear()
            self._table, self._generation = table, table.node_generation

    def _keep(self, key: tuple[str, int], window: NameWindow) -> None:
        self._windows[key] = window
        self._windows.move_to_end(key)
        if len(self._windows) > self._size:
            self._windows.popitem(last=False)

    @staticmethod
    def passed_answer(window: NameWindow, encode: Callable[[list[str]], bytes]) -> bytes:
        """The filter answer when every node of ``window`` passed: ``encode(names)``, made once."""
        if window.passed_answer is None:
            window.passed_answer = encode(window.names)
        return window.passed_answer


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
