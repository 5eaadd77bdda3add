"""Which of the best-scored nodes a pod goes to (upstream schedule_one.go ``schedulePod``), with the
tie-breaks a simulation may ask for instead of upstream's."""

from __future__ import annotations

import hashlib
import random
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from kubesched.framework.score_totals import ScoredNodes
from kubesched.framework.sorted_nodes import heap_root
from kubesched.snapshot.table import NodeTable

__all__ = ["TIE_BREAKS", "HostSelector", "TieBreak"]

#: How the scheduler chooses among nodes with the same highest total score. ``heap``: kube-scheduler
#: v1.37's — the first node its heap of scored nodes pops, every Randomizer 0 without extenders, so
#: the pick follows the order in which the Filter search found the nodes (framework/sorted_nodes.py).
#: ``random``: uniformly, from the seeded RNG (``selectHost`` of kube-scheduler up to v1.34,
#: reservoir sampling). ``name``: the node whose name sorts first — the FGD simulator's patched ``selectHost``
#: (hkust-adsl/kubernetes-scheduler-simulator, its vendored k8s.io/kubernetes v1.20.5
#: pkg/scheduler/core/generic_scheduler.go: "for reproducibility, choose the smallest
#: lexicographical order if the score remains the same"). ``shuffled``: the node first in one
#: random order of all nodes, fixed for the run and drawn from the seed — what that simulator
#: really does, as it prefixes every node's name with its index in a seeded random permutation
#: before creating it (``pkg/simulator/simulator.go`` ``syncClusterResourceList``); its published
#: results depend on it. A node's place in the order is a hash of the seed and its name, so it
#: does not depend on when the node came.
TieBreak = Literal["heap", "random", "name", "shuffled"]
TIE_BREAKS: tuple[str, ...] = get_args(TieBreak)


class HostSelector:
    """Highest total wins; ties are broken by ``tie_break`` (``TieBreak``)."""

    def __init__(self, tie_break: TieBreak, seed: int | None, rng: random.Random) -> None:
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break {tie_break!r}: expected one of {', '.join(TIE_BREAKS)}")
        self._tie_break = tie_break
        self._seed = seed
        self._rng = rng
        #: ``shuffled``: each row's place in the run's node order, for the table's nodes at
        #: ``_tie_generation`` (node_generation), and each node name's place once hashed.
        self._tie_rank = np.zeros(0, dtype=np.uint64)
        self._tie_generation = -1
        self._tie_keys: dict[str, int] = {}

    def select(self, scored: ScoredNodes, table: NodeTable) -> int:
        """The table row of the chosen node."""
        totals = scored.totals
        best = (totals == np.maximum.reduce(totals)).nonzero()[0]  # max(), flatnonzero without wrappers
        if len(best) == 1:
            return int(scored.rows[best[0]])
        if self._tie_break == "heap":
            return int(scored.rows[heap_root(totals)])
        if self._tie_break == "name":
            names = table.names
            return int(min(scored.rows[best].tolist(), key=names.__getitem__))
        if self._tie_break == "shuffled":
            rows = scored.rows[best]
            return int(rows[np.argmin(self._shuffled_rank(table)[rows])])
        return int(scored.rows[best[self._rng.randrange(len(best))]])

    def _shuffled_rank(self, table: NodeTable) -> npt.NDArray[np.uint64]:
        """Each table row's place in the run's random node order (``TieBreak`` ``shuffled``)."""
        if self._tie_generation != table.node_generation or len(self._tie_rank) < len(table.names):
            keys = self._tie_keys
            for name in table.names:
                if name and name not in keys:
                    digest = hashlib.blake2b(f"{self._seed}/{name}".encode(), digest_size=8).digest()
                    keys[name] = int.from_bytes(digest, "big")
            empty = np.iinfo(np.uint64).max  # a free row: never tied (never scored)
            self._tie_rank = np.array([keys[n] if n else empty for n in table.names], dtype=np.uint64)
            self._tie_generation = table.node_generation
        return self._tie_rank
