"""Explain a placement: every filter plugin's verdict on every node and every score plugin's
score on every feasible node, in one one-off cycle.

Unlike the scheduling cycle, nothing stops at the first rejection and percentageOfNodesToScore
is ignored, so the answer to "why is my pod pending / why did it land there" is complete. The pod
itself is taken off the table while it is explained (a bound pod is explained as if unplaced).
Shared by ``kubesched simulate --explain`` and ``kubesched explain`` on a live cluster.

Rejected nodes are ranked by how close they came (``Explanation.near_misses``): fewest failing
plugins first, then the smallest shortfall of the pod's requests, each relative to its request and
summed (a node missing 1 of 8 requested GPUs comes before one missing all 8, and one short of
memory alone before one short of memory and cpu), so a pending pod's explanation on
thousands of nodes opens with the nodes a small change would open up, not with the first names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, fit_error_message
from kubesched.framework.interfaces import Plugin
from kubesched.framework.runtime import Framework, narrowed_out_status, plugin_error
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows


@dataclass(slots=True)
class NodeExplanation:
    node: str
    #: Filter plugin → its rejection, or None when the node passed that plugin.
    filters: dict[str, Status | None] = field(default_factory=dict)
    #: Score plugin → weighted score (feasible nodes only).
    scores: dict[str, int] = field(default_factory=dict)
    total: int = 0
    #: Plugin → what it saw on this node (``Plugin.explain_nodes``), e.g. domain counts and skew.
    notes: dict[str, str] = field(default_factory=dict)
    #: Resource → how much of the pod's request the node's free capacity lacks (cpu in
    #: millicores, else units; ``pods``: a free pod slot), whichever plugin rejected the node.
    shortfall: dict[str, int] = field(default_factory=dict)
    #: ``shortfall`` relative to the requests, summed over resources (0: every request fits).
    shortfall_ratio: float = 0.0

    @property
    def failing_plugins(self) -> int:
        return sum(1 for v in self.filters.values() if v is not None)

    @property
    def feasible(self) -> bool:
        return all(v is None for v in self.filters.values())

    @property
    def first_rejection(self) -> Status | None:
        """The rejection the scheduling cycle would report (the first failing plugin in order)."""
        return next((v for v in self.filters.values() if v is not None), None)


@dataclass(slots=True)
class Explanation:
    pod: str
    profile: str
    filter_plugins: list[str]
    score_plugins: list[str]
    weights: dict[str, int]
    #: PreFilter plugin → its status when not Success (Skip or a rejection).
    pre_filter: dict[str, Status] = field(default_factory=dict)
    #: Score-side plugins that raised or failed (PreScore, Score, NormalizeScore), by plugin.
    score_errors: dict[str, Status] = field(default_factory=dict)
    skipped_filters: list[str] = field(default_factory=list)
    skipped_scores: list[str] = field(default_factory=list)
    nodes: list[NodeExplanation] = field(default_factory=list)
    #: The upstream-format message when no node fits, else "".
    message: str = ""
    #: The node the scheduling cycle chose, when known (ties are broken at random).
    chosen: str | None = None
    #: Plugin → why it holds the pod whatever the nodes say (``Plugin.explain_wait``), e.g. the
    #: gang the pod waits for: a pod can fit a node and still wait.
    waiting: dict[str, str] = field(default_factory=dict)

    @property
    def feasible(self) -> list[NodeExplanation]:
        """Feasible nodes, the chosen one first, then by total score."""
        return sorted((n for n in self.nodes if n.feasible), key=lambda n: (n.node != self.chosen, -n.total, n.node))

    @property
    def rejected(self) -> list[NodeExplanation]:
        return [n for n in self.nodes if not n.feasible]

    @property
    def near_misses(self) -> list[NodeExplanation]:
        """Rejected nodes, closest first: fewest failing plugins, then the smallest shortfall
        relative to the request, then the order the nodes were evaluated in."""
        return sorted(self.rejected, key=lambda n: (n.failing_plugins, n.shortfall_ratio))


def explain(fwk: Framework, pod: PodInfo, chosen: str | None = None) -> Explanation:
    table = fwk.handle.table
    placed = table.remove_pod(pod.uid)
    try:
        out = _explain(fwk, pod.with_node("") if pod.node_name else pod)
        out.chosen = chosen or (placed.node_name if placed is not None else None)
        if placed is None and not pod.node_name:
            out.waiting = waiting_notes(fwk, pod)
        return out
    finally:
        if placed is not None:
            table.add_pod(placed)


def waiting_notes(fwk: Framework, pod: PodInfo) -> dict[str, str]:
    """Plugin → why it holds the unplaced ``pod`` whatever the nodes say (``Plugin.explain_wait``),
    e.g. the gang it waits for. A shell that explains a pod as it is attempted asks again once the
    pod's fate is known (a gang's verdict comes after its members' attempts)."""
    notes: dict[str, str] = {}
    for plugin in fwk.plugins.values():
        note = plugin.explain_wait(pod)
        if note:
            notes[plugin.name] = note
    return notes


def _explain(fwk: Framework, pod: PodInfo) -> Explanation:
    table = fwk.handle.table
    rows = table.alive_rows()
    names = table.node_names(rows)
    out = Explanation(
        pod=pod.key,
        profile=fwk.profile_name,
        filter_plugins=[p.name for p in fwk.filter],
        score_plugins=[p.name for p in fwk.score],
        weights=dict(fwk.score_weights),
    )
    nodes = [NodeExplanation(n) for n in names]
    out.nodes = nodes
    _add_shortfalls(table, pod, rows, nodes)
    state = CycleState()
    diagnosis = Diagnosis()
    # The same PreFilter step as the scheduling cycle: the same candidate rows and messages.
    candidates, st = fwk.pre_filter_rows(state, pod, rows, diagnosis)
    for name in sorted(state.skip_filter_plugins):
        out.pre_filter[name] = Status.skip().with_plugin(name)
    if not st.is_success:
        if not st.is_rejected:
            out.pre_filter[st.plugin] = st
            out.message = plugin_error("PreFilter", st)
            return out
        out.pre_filter.update(state.pre_filter_rejecting)
        for n in nodes:
            n.filters[st.plugin] = st
        out.message = fit_error_message(len(nodes), diagnosis)
        return out
    if len(candidates) < len(rows):
        narrowed = narrowed_out_status(sorted(set(state.pre_filter_narrowing)))
        left_out = set(candidates.tolist())
        for i, row in enumerate(rows.tolist()):
            if row not in left_out:
                nodes[i].filters["PreFilter"] = narrowed
    for fp in fwk.filter:
        if fp.name in state.skip_filter_plugins:
            out.skipped_filters.append(fp.name)
            continue
        try:
            verdicts = fp.filter_batch(state, pod, table, rows)
        except Exception as e:  # shown on every node, as the cycle would report it; never a crash
            failed = Status.from_exception(e, fp.name)
            for n in nodes:
                n.filters[fp.name] = failed
            continue
        for i, code in enumerate(verdicts.codes.tolist()):
            nodes[i].filters[fp.name] = verdicts.statuses[code - 1].with_plugin(fp.name) if code else None
    feasible_idx = [i for i, n in enumerate(nodes) if n.feasible]
    if not feasible_idx:
        _add_notes(fwk.filter, state, pod, table, rows, nodes)
        for i, n in enumerate(nodes):
            rejection = n.first_rejection
            if rejection is not None:
                diagnosis.node_to_status.add_all(rows[i : i + 1], rejection)
        out.message = fit_error_message(len(nodes), diagnosis)
        return out
    frows = rows[np.array(feasible_idx, dtype=np.intp)]
    for ps in fwk.pre_score:
        try:
            skipped = ps.pre_score(state, pod, table, frows).is_skip
        except Exception as e:
            out.score_errors[ps.name] = Status.from_exception(e, ps.name)
            skipped = True
        if skipped:
            state.skip_score_plugins.add(ps.name)
    for p in fwk.score:
        if p.name in state.skip_score_plugins:
            out.skipped_scores.append(p.name)
            continue
        try:
            scores = p.score_batch(state, pod, table, frows)
            if isinstance(scores, Status):
                continue
            p.normalize_score(state, pod, table, frows, scores)
        except Exception as e:
            out.score_errors[p.name] = Status.from_exception(e, p.name)
            continue
        weighted = scores * fwk.score_weights[p.name]
        for j, i in enumerate(feasible_idx):
            nodes[i].scores[p.name] = int(weighted[j])
            nodes[i].total += int(weighted[j])
    # After PreScore, so plugins can describe both their hard (PreFilter) and soft (PreScore) state.
    _add_notes(list({p.name: p for p in (*fwk.filter, *fwk.score)}.values()), state, pod, table, rows, nodes)
    return out


def _add_shortfalls(table: NodeTable, pod: PodInfo, rows: Rows, nodes: list[NodeExplanation]) -> None:
    """Each node's shortfall of the pod's requests against its free capacity (allocatable minus
    what its pods request), a pod slot included. Read from the table without adding columns: a
    resource no node has is missing in full everywhere."""
    wanted = {**pod.requests.as_dict(), "pods": 1}
    names = list(wanted)
    requested = np.array([wanted[r] for r in names], dtype=np.int64)
    free = np.zeros((len(rows), len(names)), dtype=np.int64)
    for j, r in enumerate(names):
        col = table.resource_index.get(r)
        if col is not None:
            free[:, j] = table.available[rows, col]
    short = np.maximum(requested - free, 0)
    ratios = (short / requested).sum(axis=1)
    for i in np.flatnonzero(short.any(axis=1)).tolist():
        nodes[i].shortfall = {r: int(v) for r, v in zip(names, short[i].tolist(), strict=True) if v}
        nodes[i].shortfall_ratio = float(ratios[i])


def _add_notes(
    plugins: Sequence[Plugin], state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows,
    nodes: list[NodeExplanation],
) -> None:
    """Each plugin's per-node notes (``Plugin.explain_nodes``); a plugin whose notes fail is skipped."""
    for p in plugins:
        if p.name in state.skip_filter_plugins and p.name in state.skip_score_plugins:
            continue
        try:
            notes = p.explain_nodes(state, pod, table, rows)
        except Exception:  # notes are a courtesy: never lose the explanation over them
            continue
        if notes:
            for n, note in zip(nodes, notes, strict=False):
                if note:
                    n.notes[p.name] = note
