"""Incremental indexes for inter-pod affinity: pod match counts per row, and the terms existing pods carry.

Upstream's InterPodAffinity walks the cluster every cycle: PreFilter visits every pod on every node
to count those matching the incoming pod's required (anti-)affinity terms
(``getIncomingAffinityAntiAffinityCounts``), and every pod with required anti-affinity
(``getExistingAntiAffinityCounts``); PreScore visits every pod when the incoming pod has preferred
terms, else every pod with affinity (``processExistingPod``). Here both answers are kept up to date
through the table's pod observer (``NodeTable.add_pod_observer``), so a cycle reads them instead:

* :func:`match_index` — ``MatchIndex.counts(clauses)[row]`` is the number of pods accounted on the
  row that satisfy *every* clause ``(namespaces, selector)`` (namespaces ``None``: any namespace).
  One clause is a term of the incoming pod with its namespaceSelector already merged into its
  namespaces (upstream ``mergeAffinityTermNamespacesIfNotEmpty``); several clauses are the
  "one pod matching all affinity terms" of required affinity. Unlike ``snapshot.topology`` (whose
  spreading counts skip terminating pods, as PodTopologySpread does), every accounted pod counts,
  terminating ones included, as upstream's ``NodeInfo.Pods`` here. A column is built on first use
  by one pass over the pods of its namespaces (every pod for a ``None`` clause), then kept exact:
  a pod event costs one selector match per column registered for the pod's namespace or for all
  namespaces. Columns beyond ``MAX_COLUMNS`` are dropped least recently used first.
  ``MatchIndex.domain_counts(clauses, key)`` sums a column per domain of a node label (what
  PreScore and PreFilter add up), kept in step by the same observer once asked for.
* :func:`term_registry` — the terms existing pods carry, grouped by identical term: for each
  ``(kind, key)`` the payload (the parsed term, shared by every pod carrying it) and
  ``rows[row]`` = how many pods on that row carry it. Replicas of one workload share one group, so a
  cycle costs one term match per *distinct* term plus the rows of the terms that match, never a
  walk over pods. ``extract(pod)`` (supplied by the plugin, which parses the terms) lists a pod's
  ``(kind, key, payload)`` items, a term twice when the pod carries it twice (upstream counts
  each); it must be deterministic for a pod object (memoise it on the pod). ``TermGroup.domain_counts``
  sums a group per domain of its topology key, kept in step the same way.

Node relabelling needs no maintenance: rows keep their pods, topology domains are read from the
table's label columns at cycle time, and per-domain sums are rebuilt once the table's
node_generation moves (a node added, removed or relabelled). One index per table (and per
registry name), shared by every profile on the table.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from kubesched.snapshot.domain_sums import DomainSums, follow
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows
from kubesched.snapshot.topology import PodSelector

#: Match-count columns kept per table before the least recently used is dropped.
MAX_COLUMNS = 256


#: (namespaces the pod must be in, None for any; the selector its labels must match)
Clause = tuple[frozenset[str] | None, PodSelector]


def clauses_signature(clauses: Sequence[Clause]) -> Hashable:
    return tuple((None if ns is None else tuple(sorted(ns)), sel.signature) for ns, sel in clauses)


def pod_matches(pod: PodInfo, clauses: Sequence[Clause]) -> bool:
    """Whether ``pod`` satisfies every clause (an empty list matches nothing, as upstream's
    ``podMatchesAllAffinityTerms``)."""
    if not clauses:
        return False
    for ns, sel in clauses:
        if ns is not None and pod.namespace not in ns:
            return False
        if not sel.matches(pod.labels):
            return False
    return True


#: topology key → pods per domain of that node label (snapshot/domain_sums.py): built on first
#: use from per-row counts, then kept in step by the pod observer that keeps those counts.
Domains = dict[str, DomainSums]


def _domain_counts(
    domains: Domains, table: NodeTable, key: str, source: Callable[[], tuple[Rows, IntArray]]
) -> IntArray | None:
    """Per value code of label ``key``, the counts of the ``(rows, counts)`` that ``source`` gives
    summed (read-only), or None when none of them is on a node with the label; cached in ``domains``."""
    d = domains.get(key)
    if d is None or d.node_generation != table.node_generation:
        rows, counts = source()
        lc = table.label_column(key)
        d = domains[key] = DomainSums(table.node_generation, lc.codes, rows, counts, len(lc.values))
    return d.sums if d.counted else None


class _Column:
    __slots__ = ("clauses", "counts", "domains", "homes", "last_used")

    def __init__(self, clauses: tuple[Clause, ...], counts: IntArray, homes: tuple[str, ...] | None,
                 last_used: int) -> None:
        self.clauses = clauses
        self.counts = counts
        #: The namespaces it is registered under (None: under "any namespace").
        self.homes = homes
        self.last_used = last_used
        self.domains: Domains = {}


class MatchIndex:
    """Match-count columns of one node table. Get it with ``match_index(table)``."""

    def __init__(self, table: NodeTable) -> None:
        self._table = weakref.ref(table)  # the table owns the index (through its observer)
        self._columns: dict[Hashable, _Column] = {}
        #: namespace → signatures of columns whose pods must be in that namespace
        self._by_ns: dict[str, dict[Hashable, _Column]] = {}
        #: columns open to every namespace
        self._any_ns: dict[Hashable, _Column] = {}
        self._tick = 0
        #: namespace → pod uid → row, for every pod accounted on a row.
        self._ns_pods: dict[str, dict[str, int]] = {}
        table.observe_pods(self._on_pod)

    def _on_pod(self, row: int, pod: PodInfo, sign: int) -> None:
        ns = pod.namespace
        pods = self._ns_pods.get(ns)
        if sign > 0:
            if pods is None:
                pods = self._ns_pods[ns] = {}
            pods[pod.uid] = row
        elif pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._ns_pods[ns]
        for group in (self._by_ns.get(ns), self._any_ns):
            if not group:
                continue
            for col in group.values():
                if pod_matches(pod, col.clauses):
                    counts = col.counts
                    if row >= len(counts):
                        counts = _grow(col, row + 1)
                    counts[row] += sign
                    if col.domains:
                        follow(col.domains, self._live_table().node_generation, row, sign)

    def counts(self, clauses: Sequence[Clause]) -> IntArray:
        """Per row (indexable by any row of the table), the pods matching every clause.
        Read-only; fetch it again after the table changes (it may be replaced when it grows)."""
        return self._column(clauses).counts

    def domain_counts(self, clauses: Sequence[Clause], key: str) -> IntArray | None:
        """The pods matching every clause per value code of node label ``key`` (read-only; nodes
        without the label count nowhere), or None when none is on a node with the label."""
        col = self._column(clauses)
        table = self._live_table()

        def nonzero_rows() -> tuple[Rows, IntArray]:
            rows = np.flatnonzero(col.counts[: len(table.alive)])
            return rows, col.counts[rows]

        return _domain_counts(col.domains, table, key, nonzero_rows)

    def _live_table(self) -> NodeTable:
        table = self._table()
        if table is None:  # pragma: no cover - the table owns the index
            raise RuntimeError("the node table of this match index is gone")
        return table

    def _column(self, clauses: Sequence[Clause]) -> _Column:
        table = self._live_table()
        self._tick += 1
        sig = clauses_signature(clauses)
        col = self._columns.get(sig)
        if col is None:
            col = self._register(table, sig, tuple(clauses))
        col.last_used = self._tick
        cap = len(table.alive)
        if len(col.counts) < cap:
            _grow(col, cap)
        return col

    def registered(self) -> int:
        return len(self._columns)

    def _register(self, table: NodeTable, sig: Hashable, clauses: tuple[Clause, ...]) -> _Column:
        if len(self._columns) >= MAX_COLUMNS:
            self._evict_lru()
        explicit = [ns for ns, _ in clauses if ns is not None]
        homes: tuple[str, ...] | None = None
        if explicit:
            smallest = min(explicit, key=len)
            homes = tuple(sorted(smallest))
        counts = np.zeros(len(table.alive), dtype=np.int64)
        if clauses:
            pods_by_row = table.pods
            for ns in (homes if homes is not None else tuple(self._ns_pods)):
                for uid, row in self._ns_pods.get(ns, {}).items():
                    pod = pods_by_row[row].get(uid)
                    if pod is not None and pod_matches(pod, clauses):
                        counts[row] += 1
        col = _Column(clauses, counts, homes, self._tick)
        self._columns[sig] = col
        if homes is None:
            self._any_ns[sig] = col
        else:
            for ns in homes:
                self._by_ns.setdefault(ns, {})[sig] = col
        return col

    def _evict_lru(self) -> None:
        sig, col = min(self._columns.items(), key=lambda kv: kv[1].last_used)
        del self._columns[sig]
        if col.homes is None:
            self._any_ns.pop(sig, None)
        else:
            for ns in col.homes:
                group = self._by_ns.get(ns)
                if group is not None:
                    group.pop(sig, None)
                    if not group:
                        del self._by_ns[ns]


def _grow(col: _Column, size: int) -> IntArray:
    grown = np.zeros(max(size, 2 * len(col.counts)), dtype=np.int64)
    grown[: len(col.counts)] = col.counts
    col.counts = grown
    return grown


def match_index(table: NodeTable) -> MatchIndex:
    """The table's match index, created (and hooked to the table) on first use."""
    index = table.indexes.get("affinity_match")
    if index is None:
        index = table.indexes["affinity_match"] = MatchIndex(table)
    result: MatchIndex = index
    return result


def recount_matches(table: NodeTable, clauses: Sequence[Clause]) -> IntArray:
    """The same column computed from scratch (upstream's per-cycle walk), for tests and checks."""
    counts = np.zeros(len(table.alive), dtype=np.int64)
    for row in table.alive_rows():
        for pod in table.pods[row].values():
            if pod_matches(pod, clauses):
                counts[row] += 1
    return counts


# -- terms carried by existing pods ----------------------------------------------------------------

#: ``extract(pod)`` → the pod's ``(kind, key, payload)`` items.
Extract = Callable[[PodInfo], Sequence[tuple[str, Hashable, Any]]]


class TermGroup:
    """One distinct term carried by existing pods: the payload and the pods carrying it per row."""

    __slots__ = ("_domains", "payload", "pods", "rows")

    def __init__(self, payload: Any) -> None:
        self.payload = payload
        #: row → pods on it carrying the term (entries are removed at 0)
        self.rows: dict[int, int] = {}
        self.pods = 0
        #: Pods carrying the term per domain of a topology key (see Domains).
        self._domains: Domains = {}

    def row_counts(self) -> tuple[Rows, IntArray]:
        """``(rows, counts)`` as arrays."""
        n = len(self.rows)
        rows = np.fromiter(self.rows.keys(), dtype=np.intp, count=n)
        counts = np.fromiter(self.rows.values(), dtype=np.int64, count=n)
        return rows, counts

    def domain_counts(self, table: NodeTable, key: str) -> IntArray | None:
        """The group's pods per value code of node label ``key`` (read-only; nodes without the
        label count nowhere), or None when no pod of the group is on a node with the label."""
        return _domain_counts(self._domains, table, key, self.row_counts)


class TermRegistry:
    """Terms of the pods accounted in one table, grouped by kind and identical term."""

    def __init__(self, table: NodeTable, extract: Extract) -> None:
        self._extract = extract
        self._table = table
        self._groups: dict[str, dict[Hashable, TermGroup]] = {}
        table.observe_pods(self._on_pod)

    def _on_pod(self, row: int, pod: PodInfo, sign: int) -> None:
        items = self._extract(pod)
        if not items:
            return
        for kind, key, payload in items:
            by_key = self._groups.get(kind)
            if by_key is None:
                if sign < 0:
                    continue
                by_key = self._groups[kind] = {}
            group = by_key.get(key)
            if sign > 0:
                if group is None:
                    group = by_key[key] = TermGroup(payload)
                group.rows[row] = group.rows.get(row, 0) + 1
                group.pods += 1
                if group._domains:
                    follow(group._domains, self._table.node_generation, row, 1)
            elif group is not None:
                left = group.rows.get(row, 0) - 1
                if left > 0:
                    group.rows[row] = left
                else:
                    group.rows.pop(row, None)
                group.pods -= 1
                if group.pods <= 0:
                    del by_key[key]
                    if not by_key:
                        del self._groups[kind]
                elif group._domains:
                    follow(group._domains, self._table.node_generation, row, -1)

    def groups(self, kind: str) -> Iterable[TermGroup]:
        """The distinct terms of ``kind`` carried by at least one pod."""
        return self._groups.get(kind, {}).values()

    def has(self, kind: str) -> bool:
        return bool(self._groups.get(kind))

    def snapshot(self) -> dict[str, dict[Hashable, dict[int, int]]]:
        """kind → key → row → pods, for tests (compare with :func:`recount_terms`)."""
        return {kind: {key: dict(g.rows) for key, g in by_key.items()} for kind, by_key in self._groups.items()}


def term_registry(table: NodeTable, name: str, extract: Extract) -> TermRegistry:
    """The table's registry called ``name`` (one per plugin), created and hooked on first use.
    Every caller of one name must pass the same ``extract``."""
    by_name: dict[str, TermRegistry] = table.indexes.setdefault("affinity_terms", {})
    reg = by_name.get(name)
    if reg is None:
        reg = by_name[name] = TermRegistry(table, extract)
    return reg


def recount_terms(table: NodeTable, extract: Extract) -> dict[str, dict[Hashable, dict[int, int]]]:
    """What a registry holds, computed from scratch, for tests and checks."""
    out: dict[str, dict[Hashable, dict[int, int]]] = {}
    for row in table.alive_rows():
        for pod in table.pods[row].values():
            for kind, key, _ in extract(pod):
                rows = out.setdefault(kind, {}).setdefault(key, {})
                rows[int(row)] = rows.get(int(row), 0) + 1
    return out
