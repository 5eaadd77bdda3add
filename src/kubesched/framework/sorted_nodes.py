"""Scored nodes in kube-scheduler v1.37's order: the heap its scheduling cycle pops the chosen node
from (pkg/scheduler/framework/sorted_nodes.go ``NewSortedScoredNodes``, schedule_one.go
``schedulePod``), which replaced ``selectHost``'s uniform pick among the best since v1.35.

The heap orders by total score, then by ``Randomizer``; prioritizeNodes draws a Randomizer
(``rand.Int()``) only for nodes an extender scored, so without extenders every Randomizer is 0 and
equal totals are ordered by Go's container/heap itself: ``heap.Init`` over the nodes in the order
the Filter search found them, then ``Pop``. The winner among equal best totals is therefore not
random: it is decided by the nodes' positions in that list (the earlier one, mostly). Ported
exactly: :func:`heap_root` for the scheduling cycle (numpy, no heap built), :class:`SortedScoredNodes`
for OpportunisticBatching, which keeps popping the same heap (framework/batch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ScoredNode", "SortedScoredNodes", "heap_root"]


def heap_root(totals: npt.NDArray[np.int64]) -> int:
    """Position in ``totals`` of the node ``heap.Init`` puts at the root (the first ``Pop``) with
    every Randomizer 0: a subtree's root stays unless a child's subtree holds a strictly higher
    total; of two children the left wins unless the right is strictly higher (container/heap
    ``down``). Computed level by level from the bottom of the implicit tree."""
    n = len(totals)
    best = np.array(totals, dtype=np.int64)
    ident = np.arange(n)
    depth = max(n.bit_length() - 1, 0)
    for level in range(depth - 1, -1, -1):
        lo, hi = (1 << level) - 1, min((1 << (level + 1)) - 1, n)
        i = np.arange(lo, hi)
        left = 2 * i + 1
        i, left = i[left < n], left[left < n]
        if not len(i):
            continue
        right = left + 1
        has_right = right < n
        right = np.where(has_right, right, left)
        child = np.where(has_right & (best[right] > best[left]), right, left)
        up = best[child] > best[i]
        best[i[up]] = best[child[up]]
        ident[i[up]] = ident[child[up]]
    return int(ident[0])


@dataclass(slots=True)
class ScoredNode:
    """A node's total score and its Randomizer (0 unless an extender scored it)."""

    name: str
    total: int
    randomizer: int = 0


class SortedScoredNodes:
    """framework.SortedScoredNodes: a max-heap by (total, randomizer) with Go's container/heap's
    exact moves, so equal nodes come out in the order kube-scheduler pops them."""

    __slots__ = ("_h",)

    def __init__(self, nodes: Sequence[ScoredNode]) -> None:
        self._h = list(nodes)
        n = len(self._h)
        for i in range(n // 2 - 1, -1, -1):
            self._down(i, n)

    def _less(self, i: int, j: int) -> bool:
        a, b = self._h[i], self._h[j]
        return a.total > b.total or (a.total == b.total and a.randomizer > b.randomizer)

    def _down(self, i0: int, n: int) -> None:
        h, i = self._h, i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n:
                return
            j = j1
            if j1 + 1 < n and self._less(j1 + 1, j1):
                j = j1 + 1
            if not self._less(j, i):
                return
            h[i], h[j] = h[j], h[i]
            i = j

    def pop(self) -> ScoredNode:
        """The best node (heap.Pop: the root swapped with the last, sifted down, taken)."""
        h = self._h
        n = len(h) - 1
        h[0], h[n] = h[n], h[0]
        self._down(0, n)
        return h.pop()

    def __len__(self) -> int:
        return len(self._h)

    def unordered(self) -> list[ScoredNode]:
        """Every node left, in the heap's internal order (UnorderedList)."""
        return list(self._h)
