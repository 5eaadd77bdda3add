"""Filter verdicts shared by pods that look alike to the node-object filters.

Most pods come in families (a Deployment's replicas, a Job's workers) with the same tolerations,
node selector and affinity. The filters that only read those and the Node objects
(NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, ... — plugins that return a
``filter_signature``) give every member the same verdicts until a node changes. This cache
evaluates them once per family over all nodes and hands later members the verdicts as one array
gather, in place of one pass per plugin per attempt.

Only the leading run of signature plugins in the Filter list is cached, so the order in which
plugins reject a node (the first rejection wins, as upstream) is unchanged. A family is cached on
its second attempt: one-off pods cost no more than before.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.interfaces import FilterPlugin
from kubesched.framework.status import Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: The cycle-state key under which a pod's verdicts (or None) are kept between filter windows.
STATE_KEY: Final = "kubesched/signature-verdicts"
#: Signature part of a plugin whose PreFilter returned Skip (its Filter does not run).
_SKIPPED: Final = ("<skipped>",)
#: Bounds on remembered families; both are cleared whenever a node changes anyway.
MAX_ENTRIES: Final = 256
MAX_SEEN: Final = 4096


class SignatureVerdicts:
    """The cached plugins' verdicts for every table row: ``codes[row]`` is 0 (passes) or k > 0
    (``statuses[k - 1]``, which names its plugin)."""

    __slots__ = ("_passed_before", "_passing_rows", "codes", "passes", "statuses")

    def __init__(self, codes: npt.NDArray[np.int32], statuses: list[Status]) -> None:
        self.codes = codes
        self.statuses = statuses
        #: ``codes == 0``, once per family rather than per filter window.
        self.passes = codes == 0
        #: The passing rows in ascending order, and ``_passed_before[r]`` = how many of them are
        #: below row r: a run of consecutive rows is answered with a slice of the first (no
        #: gather). Built on first use; like ``codes``, never changed afterwards.
        self._passing_rows: Rows | None = None
        self._passed_before: npt.NDArray[np.int32] | None = None

    def keep_passing(self, rows: Rows, diagnosis: Diagnosis, *, ascending: bool = False) -> Rows:
        """The rows (in their order) that pass the cached plugins; the others are recorded in
        ``diagnosis`` with their verdicts, as runtime.run_filters records a plugin's.

        ``ascending``: the caller guarantees ``rows`` strictly increase (the scheduler's filter
        windows). Then rows that are also consecutive (last - first + 1 == len: every row in
        between is there) are answered with slices: the passing rows of that range, and the
        codes of that range, which are the codes of ``rows`` one for one."""
        if not self.statuses:  # every node passes
            return rows
        n = len(rows)
        if ascending and n:
            lo, hi = int(rows[0]), int(rows[-1])
            if hi - lo + 1 == n:
                passing, before = self._passing_rows, self._passed_before
                if passing is None or before is None:
                    passing = self._passing_rows = np.flatnonzero(self.passes)
                    before = self._passed_before = np.zeros(len(self.passes) + 1, dtype=np.int32)
                    np.cumsum(self.passes, out=before[1:])
                    # Callers get slices of these (and of ``codes``): shared, so never writable.
                    passing.flags.writeable = False
                    self.codes.flags.writeable = False
                kept: Rows = passing[before[lo] : before[hi + 1]]
                if len(kept) < n:
                    diagnosis.add_rejections(rows, self.codes[lo : hi + 1], self.statuses, n - len(kept))
                return kept
        kept = rows[self.passes.take(rows)]
        if len(kept) < n:
            diagnosis.add_rejections(rows, self.codes.take(rows), self.statuses, n - len(kept))
        return kept


class SignatureVerdictCache:
    """Per framework: signature → verdicts of ``plugins`` (the leading signature filters)."""

    def __init__(self, plugins: Sequence[FilterPlugin]) -> None:
        self.plugins = list(plugins)
        self._entries: dict[tuple[Hashable, ...], SignatureVerdicts] = {}
        self._seen: set[tuple[Hashable, ...]] = set()
        self._node_generation = -1

    def verdicts(self, state: CycleState, pod: PodInfo, table: NodeTable) -> SignatureVerdicts | None:
        """The pod's cached verdicts, computed on its family's second attempt; None means run the
        plugins one by one (no signature, a first attempt, or an error among the verdicts)."""
        if not self.plugins:
            return None
        if STATE_KEY in state:
            memo: SignatureVerdicts | None = state.get(STATE_KEY)
            return memo
        entry = self._lookup(state, pod, table)
        state.write(STATE_KEY, entry)
        return entry

    def _lookup(self, state: CycleState, pod: PodInfo, table: NodeTable) -> SignatureVerdicts | None:
        if table.node_generation != self._node_generation:
            self._entries.clear()
            self._seen.clear()
            self._node_generation = table.node_generation
        skipped = state.skip_filter_plugins
        parts: list[Hashable] = []
        for p in self.plugins:
            if p.name in skipped:
                parts.append(_SKIPPED)
                continue
            sig = p.filter_signature(state, pod)
            if sig is None:
                return None
            parts.append(sig)
        key = tuple(parts)
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        if key not in self._seen:
            if len(self._seen) >= MAX_SEEN:
                self._seen.clear()
            self._seen.add(key)
            return None
        entry = self._evaluate(state, pod, table)
        if entry is not None:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = entry
        return entry

    def _evaluate(self, state: CycleState, pod: PodInfo, table: NodeTable) -> SignatureVerdicts | None:
        """Run the plugins over every node, first rejection per node wins (as runtime.run_filters)."""
        rows = table.alive_rows()
        codes = np.zeros(len(table.names), dtype=np.int32)
        statuses: list[Status] = []
        for p in self.plugins:
            if p.name in state.skip_filter_plugins or not len(rows):
                continue
            try:
                v = p.filter_batch(state, pod, table, rows)
            except Exception:
                return None  # reported by the uncached path, which runs the plugin again
            if not v.statuses:
                continue
            if any(s.code == Code.ERROR for s in v.statuses):
                return None  # errors are reported by the uncached path, with their context
            failed = v.codes != 0
            if not failed.any():
                continue
            codes[rows[failed]] = v.codes[failed] + len(statuses)
            statuses.extend(s.with_plugin(p.name) for s in v.statuses)
            rows = rows[~failed]
        return SignatureVerdicts(codes, statuses)
