"""Incremental Filter passes: a pod shape's verdicts kept per node and judged again only on the
nodes changed since that shape's last pass.

A replay places pods one after another, and pods come in few shapes (the ATC '23 openb replay:
151 shapes, 14,714 Filter passes over 1,213 nodes, a median of 6 pods placed between two passes
of one shape). When every Filter that runs judges a node from that node's row alone, the verdicts
of the nodes no pod or node change touched since a pass are that pass's verdicts. This store keeps,
per shape, each row's verdict — which filter rejected it and with which status, or that it passed
them all — and the table's per-row change log (``NodeTable.row_versions``) says which rows to
judge again: the plugins run on those rows only, and the pass's node statuses are rebuilt from the
kept verdicts in the shape the full pass gives (a chunk per rejecting filter over the rows that
reached it, in evaluation order; the leading signature filters as one chunk, from their own
cache), so messages, counts and records are the ones the full pass would give.

The key is what the pass reads besides the rows: the pod's shape (``filter_outcome.pod_shape``),
for each PreFilter and Filter plugin that runs its ``filter_signature`` or else its
``filter_row_key`` (a plugin without one turns the store off for the attempt), and the plugins
whose PreFilter returned Skip. Used where the reuse of failed passes is (framework/filter_outcome.py:
the pod's own cycle, PreFilter narrowed nothing, no pod nominated), and only when the search
filters every node in one window (``percentageOfNodesToScore`` 100, or fewer nodes than the
minimum to find): a sampled search stops part way, so judging every changed row would call the
plugins on rows the full pass never reaches. An error from a plugin drops the shape's verdicts and
the attempt runs the full pass, which reports it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.filter_cache import SignatureVerdictCache, SignatureVerdicts
from kubesched.framework.interfaces import FilterPlugin, Plugin
from kubesched.framework.status import Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: ``RowVerdicts.stage_of`` of a row never judged for the shape (or added since).
UNKNOWN: Final = -2
#: ``RowVerdicts.stage_of`` of a row the leading signature filters rejected when it was judged
#: (the later filters did not run on it).
SIGNATURE: Final = -1
#: Bound on the shapes kept (emptied when full).
MAX_ENTRIES: Final = 512
_ERROR = Code.ERROR


class RowVerdicts:
    """One shape's verdicts per table row: ``stage_of[row]`` is the index of the filter (among the
    stages: the Filter plugins after the signature run that do not Skip) that rejected it,
    ``len(stages)`` if all passed it (or ``UNKNOWN``, ``SIGNATURE``); ``code_of[row]`` its code in
    ``statuses[stage]``. ``clock``: the table's ``row_clock`` when they were last brought up to date."""

    __slots__ = ("_lut", "clock", "code_of", "stage_of", "statuses")

    def __init__(self, stages: int, size: int) -> None:
        self.clock = -1
        self.stage_of: npt.NDArray[np.int32] = np.full(size, UNKNOWN, dtype=np.int32)
        self.code_of: npt.NDArray[np.int32] = np.zeros(size, dtype=np.int32)
        #: Per stage, the statuses its codes index (1-based), in the order first seen: a copy of the
        #: plugin's list (never the plugin's own: this one is appended to), extended as new
        #: statuses come.
        self.statuses: list[list[Status]] = [[] for _ in range(stages)]
        #: Per stage, the last list of statuses a call returned and the code map made for it.
        self._lut: list[tuple[list[Status], int, npt.NDArray[np.int32]] | None] = [None] * stages

    def _fit(self, size: int) -> None:
        if size > len(self.stage_of):
            extra = size - len(self.stage_of)
            self.stage_of = np.concatenate((self.stage_of, np.full(extra, UNKNOWN, dtype=np.int32)))
            self.code_of = np.concatenate((self.code_of, np.zeros(extra, dtype=np.int32)))

    def _code_map(self, stage: int, statuses: list[Status]) -> npt.NDArray[np.int32]:
        """Codes of a call's ``statuses`` → codes in ``self.statuses[stage]`` (equal statuses share
        a code; new ones are appended). Kept for the list object while it does not grow."""
        last = self._lut[stage]
        if last is not None and last[0] is statuses and last[1] == len(statuses):
            return last[2]
        kept = self.statuses[stage]
        lut = np.zeros(len(statuses) + 1, dtype=np.int32)
        for i, st in enumerate(statuses, start=1):
            for j, known in enumerate(kept, start=1):
                if known is st or known == st:
                    lut[i] = j
                    break
            else:
                kept.append(st)
                lut[i] = len(kept)
        self._lut[stage] = (statuses, len(statuses), lut)
        return lut

    def refresh(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows,
        stages: Sequence[FilterPlugin], sig: SignatureVerdicts | None,
    ) -> int | None:
        """Judge again the rows of ``rows`` changed since ``clock`` (and those never judged, or
        rejected by the signature filters then and passing them now); how many. None on a
        plugin's error (or exception): these verdicts are then not to be used."""
        clock = table.row_clock  # rows a plugin touches meanwhile are judged again next time
        self._fit(len(table.alive))
        stage_of = self.stage_of
        seen = stage_of[rows]
        stale = (table.row_versions[rows] > self.clock) | (seen == UNKNOWN)
        if sig is not None:
            stale |= (seen == SIGNATURE) & sig.passes[rows]
        todo = rows[stale]
        judged = len(todo)
        if judged:
            if sig is not None:
                passes = sig.passes[todo]
                stage_of[todo[~passes]] = SIGNATURE
                todo = todo[passes]
            for i, p in enumerate(stages):
                if not len(todo):
                    break
                try:
                    verdicts = p.filter_batch(state, pod, table, todo)
                except Exception:
                    return None
                if not verdicts.statuses:
                    continue
                codes = verdicts.codes
                passing = codes == 0
                if passing.all():
                    continue
                statuses = verdicts.statuses  # named by their plugin, as the full pass names them
                if any(s.plugin != p.name for s in statuses):
                    statuses = [s.with_plugin(p.name) for s in statuses]
                for code, s in enumerate(statuses, start=1):
                    if s.code == _ERROR and bool((codes == code).any()):
                        return None
                rejected = ~passing
                out = todo[rejected]
                stage_of[out] = i
                self.code_of[out] = self._code_map(i, statuses).take(codes[rejected])
                todo = todo[passing]
            stage_of[todo] = len(stages)
        self.clock = clock
        return judged


class IncrementalPass:
    """One attempt's Filter pass answered from a shape's verdicts (brought up to date)."""

    __slots__ = ("_sig", "_stages", "_verdicts")

    def __init__(self, verdicts: RowVerdicts, stages: int, sig: SignatureVerdicts | None) -> None:
        self._verdicts = verdicts
        self._stages = stages
        self._sig = sig

    def run_filters(self, rows: Rows, diagnosis: Diagnosis, *, ascending: bool = False) -> Rows:
        """What ``Framework.run_filters`` gives for ``rows`` (the passing rows in their order) and
        records in ``diagnosis``: the signature filters' chunk, then one chunk per stage that
        rejects a row, over the rows that reached it."""
        if self._sig is not None:
            kept = self._sig.keep_passing(rows, diagnosis, ascending=ascending)
            if not len(kept) and len(rows):
                return kept
            rows = kept
        v = self._verdicts
        stage = v.stage_of.take(rows)
        for i in range(self._stages):
            here = stage == i
            failed = int(np.count_nonzero(here))
            if not failed:
                continue
            codes = np.where(here, v.code_of.take(rows), 0).astype(np.int32, copy=False)
            diagnosis.add_rejections(rows, codes, v.statuses[i], failed)
            keep = stage > i
            rows, stage = rows[keep], stage[keep]
            if not len(rows):
                break
        return rows


class RowVerdictStore:
    """One framework's shapes' verdicts."""

    def __init__(self, pre_filter: Sequence[Plugin], filters: Sequence[FilterPlugin],
                 signature_cache: SignatureVerdictCache) -> None:
        #: Every plugin whose PreFilter or Filter may run, once, in order.
        self.plugins: list[Plugin] = list(dict.fromkeys([*pre_filter, *filters]))
        self._signature_cache = signature_cache
        #: The Filter plugins after the signature run: the stages, less those that Skip.
        self._after_signature = list(filters[len(signature_cache.plugins):])
        self._entries: dict[tuple[Hashable, ...], RowVerdicts] = {}
        self._table: NodeTable | None = None
        #: Attempts answered and rows judged, for tests and benchmarks.
        self.passes = 0
        self.judged = 0

    def prepare(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, shape: bytes
    ) -> IncrementalPass | None:
        """The attempt's pass over ``rows`` (every row of the table) answered from the shape's
        verdicts, or None when a plugin that runs cannot say what it reads (or errs)."""
        skipped = state.skip_filter_plugins
        parts: list[Hashable] = []
        for p in self.plugins:
            if p.name in skipped:
                continue
            part = p.filter_signature(state, pod) if isinstance(p, FilterPlugin) else None
            if part is None:
                part = p.filter_row_key(state, pod)
                if part is None:
                    return None
                part = ("key", part)
            parts.append(part)
        sig = None
        if self._signature_cache.plugins:
            sig = self._signature_cache.verdicts(state, pod, table)
            if sig is None:  # a family's first attempt: the full pass runs them one by one
                return None
        if table is not self._table:
            self._entries.clear()
            self._table = table
        stages = [f for f in self._after_signature if f.name not in skipped]
        key = (shape, tuple(parts), frozenset(skipped))
        verdicts = self._entries.get(key)
        if verdicts is None:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            verdicts = self._entries[key] = RowVerdicts(len(stages), len(table.alive))
        judged = verdicts.refresh(state, pod, table, rows, stages, sig)
        if judged is None:
            del self._entries[key]
            return None
        self.passes += 1
        self.judged += judged
        return IncrementalPass(verdicts, len(stages), sig)
