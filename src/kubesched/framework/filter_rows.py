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

A pass that finds no node is remembered with the shape's verdicts (its frozen statuses, where the
search started) until a verdict changes: rows judged again that give their verdicts back leave
the chunks a pass records as they were, so the next failing pass from the same start adopts those
statuses, and what was derived from them (messages, the rejecting plugins, preemption's split),
as a kept failed pass is adopted (framework/filter_outcome.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, NodeToStatus
from kubesched.framework.filter_cache import SignatureVerdictCache, SignatureVerdicts
from kubesched.framework.filter_outcome import plugin_key_parts
from kubesched.framework.interfaces import FilterPlugin, Plugin
from kubesched.framework.status import Code, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: Bound on the shapes kept (emptied when full).
MAX_ENTRIES: Final = 512
_ERROR = Code.ERROR
#: Up to this many rows to judge again, ``refresh`` keeps their verdicts row by row in Python.
_FEW_ROWS: Final = 16


class RowVerdicts:
    """One shape's verdicts per table row, as one code array per stage (the Filter plugins after
    the signature run that do not Skip): ``codes[stage][row]`` is 0 where that stage passed the
    row (or never judged it: an earlier filter rejected it), else its code in
    ``statuses[stage]``. ``clock``: the table's ``row_clock`` when they were last brought up to
    date; ``sig``: the signature filters' verdicts they were judged after."""

    __slots__ = ("_code_of", "_lut", "clock", "codes", "failed_pass", "sig", "statuses")

    def __init__(self, stages: int, size: int) -> None:
        self.clock = -1
        self.sig: SignatureVerdicts | None = None
        self.codes: list[npt.NDArray[np.int32]] = [np.zeros(size, dtype=np.int32) for _ in range(stages)]
        #: Per stage, the statuses its codes index (1-based), in the order first seen: a copy of the
        #: plugin's list (never the plugin's own: this one is appended to), extended as new
        #: statuses come.
        self.statuses: list[list[Status]] = [[] for _ in range(stages)]
        #: Per stage, each of those statuses → its code (they are distinct: equal ones share one).
        self._code_of: list[dict[Status, int]] = [{} for _ in range(stages)]
        #: The last pass of these verdicts that found no node, while no verdict changed since:
        #: (where the search started, the rows, its frozen statuses) — ``IncrementalPass.failed_pass``.
        self.failed_pass: tuple[int, Rows, NodeToStatus] | None = None
        #: Per stage, the last list of statuses a call returned and the code map made for it.
        self._lut: list[tuple[list[Status], int, npt.NDArray[np.int32], list[int]] | None] = [None] * stages

    def _fit(self, size: int) -> None:
        for i, codes in enumerate(self.codes):
            if size > len(codes):
                self.codes[i] = np.concatenate((codes, np.zeros(size - len(codes), dtype=np.int32)))

    def _code_map(self, stage: int, plugin: str, statuses: list[Status]) -> tuple[npt.NDArray[np.int32], list[int]]:
        """Codes of a call's ``statuses`` → codes in ``self.statuses[stage]`` (equal statuses share
        a code; new ones are appended, named by their plugin as the full pass names them), and
        the call's codes of errors. Kept while a call returns the same statuses (NodeResourcesFit
        returns one list, hundreds long, until it grows; GpuShare a new list of the same three)."""
        last = self._lut[stage]
        if last is not None and last[1] == len(statuses) and (
                last[0] is statuses or all(a is b for a, b in zip(last[0], statuses, strict=True))):
            return last[2], last[3]
        kept = self.statuses[stage]
        code_of = self._code_of[stage]
        lut = np.zeros(len(statuses) + 1, dtype=np.int32)
        errors: list[int] = []
        for i, st in enumerate(statuses, start=1):
            if st.plugin != plugin:
                st = st.with_plugin(plugin)
            if st.code == _ERROR:
                errors.append(i)
            code = code_of.get(st)
            if code is None:
                kept.append(st)
                code = code_of[st] = len(kept)
            lut[i] = code
        self._lut[stage] = (statuses, len(statuses), lut, errors)
        return lut, errors

    def refresh(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows,
        stages: Sequence[FilterPlugin], sig: SignatureVerdicts | None,
    ) -> int | None:
        """Judge again the rows of ``rows`` (every row of the table) changed since ``clock`` — all
        of them the first time, or after the signature filters' verdicts were made again (a node
        changed) — and say how many. None on a plugin's error (or exception): these verdicts are
        then not to be used."""
        clock = table.row_clock  # rows a plugin touches meanwhile are judged again next time
        if clock == self.clock and sig is self.sig:
            return 0
        self._fit(len(table.alive))
        if self.clock < 0 or sig is not self.sig:
            todo = rows
        else:
            changed = (table.row_versions > self.clock).nonzero()[0]
            todo = changed[table.alive.take(changed)]
        judged = len(todo)
        if self.clock < 0 or sig is not self.sig:
            self.failed_pass = None
        elif 0 < judged <= _FEW_ROWS:  # the usual: the rows a pod or two went to since
            if not self._judge_few(state, pod, table, todo.tolist(), stages, sig):
                return None
            self.clock = clock
            return judged
        if judged:
            before = [codes.take(todo) for codes in self.codes] if self.failed_pass is not None else None
            judged_rows = todo
            for codes in self.codes:
                codes[todo] = 0
            if sig is not None:
                todo = todo[sig.passes.take(todo)]
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
                rejected = codes.nonzero()[0]
                if not len(rejected):
                    continue
                lut, errors = self._code_map(i, p.name, verdicts.statuses)
                if errors and bool(np.isin(codes, errors).any()):
                    return None
                self.codes[i][todo.take(rejected)] = lut.take(codes.take(rejected))
                todo = todo[codes == 0]
            if before is not None and not all(np.array_equal(old, codes.take(judged_rows))
                                              for old, codes in zip(before, self.codes, strict=True)):
                self.failed_pass = None  # a verdict changed: the statuses a pass records changed
        self.clock = clock
        self.sig = sig
        return judged

    def _judge_few(
        self, state: CycleState, pod: PodInfo, table: NodeTable, todo: list[int],
        stages: Sequence[FilterPlugin], sig: SignatureVerdicts | None,
    ) -> bool:
        """``refresh``'s judging of a few rows, row by row in Python (numpy's per-call cost is the
        work for a row or two): the same plugin calls on the same rows, the same codes kept.
        False on a plugin's error (or exception)."""
        stage_codes = self.codes
        before = [[int(codes[row]) for row in todo] for codes in stage_codes] if self.failed_pass is not None else None
        judged_rows = todo
        for codes in stage_codes:
            for row in todo:
                codes[row] = 0
        if sig is not None:
            passes = sig.passes
            todo = [row for row in todo if passes[row]]
        for i, p in enumerate(stages):
            if not todo:
                break
            try:
                verdicts = p.filter_batch(state, pod, table, np.array(todo, dtype=np.intp))
            except Exception:
                return False
            if not verdicts.statuses:
                continue
            codes = verdicts.codes.tolist()
            if not any(codes):
                continue
            lut, errors = self._code_map(i, p.name, verdicts.statuses)
            if errors and any(code in errors for code in codes):
                return False
            kept = stage_codes[i]
            passing: list[int] = []
            for row, code in zip(todo, codes, strict=True):
                if code:
                    kept[row] = lut[code]
                else:
                    passing.append(row)
            todo = passing
        if before is not None and any([int(codes[row]) for row in judged_rows] != old
                                      for old, codes in zip(before, stage_codes, strict=True)):
            self.failed_pass = None  # a verdict changed: the statuses a pass records changed
        return True


class IncrementalPass:
    """One attempt's Filter pass answered from a shape's verdicts (brought up to date)."""

    __slots__ = ("_sig", "_verdicts")

    def __init__(self, verdicts: RowVerdicts, sig: SignatureVerdicts | None) -> None:
        self._verdicts = verdicts
        self._sig = sig

    def failed_pass(self, start: int, rows: Rows) -> NodeToStatus | None:
        """The frozen statuses of this shape's last pass over ``rows`` from ``start`` that found
        no node, if no verdict changed since (rows judged again gave their verdicts back): this
        pass would record the very same chunks (``run_filters``), so it may adopt them and what
        was derived from them (messages, preemption's split), as a kept failed pass is adopted."""
        kept = self._verdicts.failed_pass
        if kept is None or kept[0] != start or len(kept[1]) != len(rows):
            return None
        if kept[1] is not rows and not np.array_equal(kept[1], rows):
            return None
        return kept[2]

    def remember_failure(self, start: int, rows: Rows, statuses: NodeToStatus) -> None:
        """This pass over ``rows`` from ``start`` found no node; ``statuses`` (frozen) are what it
        recorded."""
        self._verdicts.failed_pass = (start, rows, statuses)

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
        for i, stage_codes in enumerate(v.codes):
            codes = stage_codes.take(rows)
            failed = int(np.count_nonzero(codes))
            if not failed:
                continue
            diagnosis.add_rejections(rows, codes, v.statuses[i], failed)
            rows = rows[codes == 0]
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
        parts = plugin_key_parts(self.plugins, state, pod, lambda p: p.filter_row_key(state, pod))
        if parts is None:
            return None
        sig = None
        if self._signature_cache.plugins:
            sig = self._signature_cache.verdicts(state, pod, table)
            if sig is None:  # a family's first attempt: the full pass runs them one by one
                return None
        if table is not self._table:
            self._entries.clear()
            self._table = table
        stages = [f for f in self._after_signature if f.name not in skipped]
        key = (shape, parts, frozenset(skipped))
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
        return IncrementalPass(verdicts, sig)
