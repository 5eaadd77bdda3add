"""Counted pods per topology domain, kept in step with the pod events instead of recounted.

PodTopologySpread and InterPodAffinity both need, per pod, "how many matching pods are in each
domain of topology key K" (a zone, a hostname, ...). Summing a per-row count column over every
node for every pod is O(nodes). Instead, the indexes that already keep per-row counts up to date
from the table's pod observer (snapshot/topology.py, snapshot/affinity_index.py) keep a
:class:`DomainSums` per (column, row → domain mapping) as well: built with one ``np.bincount``
when first asked for, then moved by one addition per counted pod event (:func:`follow`).

Exactness: a row's domain comes from Node objects alone (a node label's value code; a mapping may
also leave rows out, -1, e.g. nodes a pod's node inclusion policy excludes). It changes only when
a node is added, removed or relabelled, and each of those bumps the table's ``node_generation``:
sums built under another generation are dropped (by :func:`follow`) or rebuilt (by the reader), so
they always equal a recount over the rows as they are now.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from kubesched.snapshot.table import IntArray, Rows

K = TypeVar("K", bound=Hashable)

#: Per table row its domain code, -1 for a row that counts nowhere.
RowDomains = npt.NDArray[np.int32]


class DomainSums:
    """The counts of some rows summed per domain of one row → domain mapping, as of one
    ``node_generation`` of the table."""

    __slots__ = ("counted", "node_generation", "row_domains", "sums")

    def __init__(self, node_generation: int, row_domains: RowDomains, rows: Rows, counts: IntArray, size: int
                 ) -> None:
        """``counts[i]`` pods on row ``rows[i]``; ``size`` domain codes (at least)."""
        inside = rows < len(row_domains)
        rows, counts = rows[inside], counts[inside]
        codes = row_domains[rows]
        has = codes >= 0
        self.node_generation = node_generation
        self.row_domains = row_domains
        self.sums: IntArray = np.rint(np.bincount(codes[has], weights=counts[has], minlength=size)).astype(np.int64)
        #: Pods counted in some domain (0: none of the rows is in a domain).
        self.counted = int(counts[has].sum())

    def move(self, row: int, sign: int) -> None:
        """One counted pod started (+1) or stopped (-1) counting on ``row``."""
        code = int(self.row_domains[row]) if row < len(self.row_domains) else -1
        if code < 0:
            return
        if code >= len(self.sums):  # defensive: a new domain comes with a new node_generation
            grown = np.zeros(code + 1, dtype=np.int64)
            grown[: len(self.sums)] = self.sums
            self.sums = grown
        self.sums[code] += sign
        self.counted += sign


def follow(kept: MutableMapping[K, DomainSums], node_generation: int, row: int, sign: int) -> None:
    """A pod counted by the column these sums belong to started (+1) or stopped (-1) counting on
    ``row``: every kept mapping follows; those of another node_generation are dropped."""
    for key, d in list(kept.items()):
        if d.node_generation != node_generation:
            del kept[key]
        else:
            d.move(row, sign)
