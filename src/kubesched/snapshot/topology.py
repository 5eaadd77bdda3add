"""Per-node counts of the pods matching a label selector, kept up to date incrementally.

Topology spreading (and, later, inter-pod affinity) asks "how many pods of namespace N matching
selector S run in each topology domain?" for every pod it schedules. Upstream walks every pod on
every node each cycle (podtopologyspread ``countPodsMatchSelector`` under ``calPreFilterState``
and ``PreScore``). Here the answer is kept as one int64 column per (namespace, selector):

* ``counts(table, namespace, selector)[row]`` is the number of pods accounted on the row whose
  namespace is N, which are not terminating (no ``deletionTimestamp``, upstream's #87621 rule)
  and whose labels match S;
* a column is registered the first time a (namespace, selector signature) is asked for, by one
  pass over the pods of that namespace (an index namespace → pods is kept for this), then kept
  exact by the table's pod observer (``NodeTable.add_pod_observer``): every assume, forget, bind,
  update, delete and node removal/return costs one dict update plus one selector match per
  column registered for the pod's namespace;
* columns unused for a while are dropped (least recently used first) beyond ``MAX_SELECTORS``,
  so selectors that come and go (``matchLabelKeys`` on ``pod-template-hash`` changes with every
  rollout) do not accumulate.

Per-domain counts (``domain_sums``) are kept the same way: a caller names a mapping row →
domain (a node label's value code, -1 for rows that count nowhere, e.g. nodes a pod's node
inclusion policies leave out), built from Node objects alone; the sums per domain are one
``np.bincount`` when first asked for, then moved by the pod observer (one add per matching pod
event), and rebuilt once the table's ``node_generation`` moves (the only way a row's domain can
change). A cycle then reads a few domain sums instead of summing over every node. One index per
table, shared by every plugin and profile using that table.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping
from typing import Protocol

import numpy as np

from kubesched.snapshot.domain_sums import DomainSums, RowDomains, follow
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable

#: Columns kept per table before the least recently used is dropped.
MAX_SELECTORS = 256
#: Domain mappings summed per column before its sums are dropped (all rebuilt on demand).
MAX_DOMAIN_MAPPINGS = 64



class PodSelector(Protocol):
    """What the index needs of a selector (``plugins/helpers/label_selector.Selector`` fits)."""

    @property
    def signature(self) -> Hashable: ...

    def matches(self, labels: Mapping[str, str]) -> bool: ...


class _Column:
    __slots__ = ("counts", "domains", "last_used", "selector")

    def __init__(self, selector: PodSelector, counts: IntArray, last_used: int) -> None:
        self.selector = selector
        self.counts = counts
        self.last_used = last_used
        #: mapping key → sums per domain (see ``TopologyIndex.domain_sums``)
        self.domains: dict[Hashable, DomainSums] = {}


class TopologyIndex:
    """Selector count columns of one node table. Get it with ``topology_index(table)``."""

    def __init__(self, table: NodeTable) -> None:
        # A weak reference: the table holds this index (through its observer), not the reverse,
        # so a table dropped by its owner (the extender keeps an LRU of tables) is collected.
        self._table = weakref.ref(table)
        #: namespace → selector signature → column
        self._columns: dict[str, dict[Hashable, _Column]] = {}
        self._n_columns = 0
        self._tick = 0
        #: namespace → pod uid → row, for every pod accounted on a row.
        self._ns_pods: dict[str, dict[str, int]] = {}
        table.observe_pods(self._on_pod)

    # -- maintenance (the table's pod observer) ---------------------------------------------------
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
        columns = self._columns.get(ns)
        if not columns or pod.deleting:
            return
        labels = pod.labels
        for col in columns.values():
            if col.selector.matches(labels):
                counts = col.counts
                if row >= len(counts):
                    counts = self._grow(col, row + 1)
                counts[row] += sign
                if col.domains:
                    follow(col.domains, self._live_table().node_generation, row, sign)

    @staticmethod
    def _grow(col: _Column, size: int) -> IntArray:
        grown = np.zeros(max(size, 2 * len(col.counts)), dtype=np.int64)
        grown[: len(col.counts)] = col.counts
        col.counts = grown
        return grown

    # -- queries ----------------------------------------------------------------------------------
    def counts(self, namespace: str, selector: PodSelector) -> IntArray:
        """Per row (indexable by any row of the table), the matching pods of ``namespace``.
        Read-only; fetch it again after the table changes (it may be replaced when it grows)."""
        return self._column(namespace, selector).counts

    def _live_table(self) -> NodeTable:
        table = self._table()
        if table is None:  # pragma: no cover - the table owns the index
            raise RuntimeError("the node table of this topology index is gone")
        return table

    def _column(self, namespace: str, selector: PodSelector) -> _Column:
        table = self._live_table()
        self._tick += 1
        sig = selector.signature
        by_sig = self._columns.get(namespace)
        col = by_sig.get(sig) if by_sig is not None else None
        if col is None:
            col = self._register(table, namespace, selector)
        col.last_used = self._tick
        cap = len(table.alive)
        if len(col.counts) < cap:
            self._grow(col, cap)
        return col

    def domain_sums(
        self, namespace: str, selector: PodSelector, mapping_key: Hashable, row_domains: RowDomains, size: int
    ) -> IntArray:
        """Per domain code (``size`` of them), the matching pods of ``namespace`` summed over the
        rows ``row_domains`` maps to that domain (``row_domains[row]``: the row's domain, -1 for a
        row that counts nowhere). Read-only, kept in step by the pod observer: copy it to keep it.

        ``row_domains`` must derive from Node objects alone, so that it is the same for one
        ``mapping_key`` as long as the table's ``node_generation`` stays: the sums are kept per
        key and rebuilt when the generation moves (a node added, removed, relabelled, ...)."""
        col = self._column(namespace, selector)
        counts = col.counts
        generation = self._live_table().node_generation
        d = col.domains.get(mapping_key)
        if d is None or d.node_generation != generation or len(d.sums) != size:
            rows = np.flatnonzero(counts[: min(len(row_domains), len(counts))])
            if len(col.domains) >= MAX_DOMAIN_MAPPINGS:
                col.domains.clear()
            d = col.domains[mapping_key] = DomainSums(generation, row_domains, rows, counts[rows], size)
        return d.sums

    def registered(self) -> int:
        """How many columns are kept (for tests and metrics)."""
        return self._n_columns

    def _register(self, table: NodeTable, namespace: str, selector: PodSelector) -> _Column:
        if self._n_columns >= MAX_SELECTORS:
            self._evict_lru()
        counts = np.zeros(len(table.alive), dtype=np.int64)
        pods_by_row = table.pods
        for uid, row in self._ns_pods.get(namespace, {}).items():
            pod = pods_by_row[row].get(uid)
            if pod is not None and not pod.deleting and selector.matches(pod.labels):
                counts[row] += 1
        col = _Column(selector, counts, self._tick)
        self._columns.setdefault(namespace, {})[selector.signature] = col
        self._n_columns += 1
        return col

    def _evict_lru(self) -> None:
        oldest: tuple[int, str, Hashable] | None = None
        for ns, by_sig in self._columns.items():
            for sig, col in by_sig.items():
                if oldest is None or col.last_used < oldest[0]:
                    oldest = (col.last_used, ns, sig)
        if oldest is None:
            return
        _, ns, sig = oldest
        del self._columns[ns][sig]
        if not self._columns[ns]:
            del self._columns[ns]
        self._n_columns -= 1


def topology_index(table: NodeTable) -> TopologyIndex:
    """The table's index, created (and hooked to the table) on first use."""
    index = table.indexes.get("topology")
    if index is None:
        index = table.indexes["topology"] = TopologyIndex(table)
    result: TopologyIndex = index
    return result


def recount_domains(
    table: NodeTable, namespace: str, selector: PodSelector, row_domains: RowDomains, size: int
) -> IntArray:
    """``domain_sums`` computed from scratch, for tests and checks."""
    sums = np.zeros(size, dtype=np.int64)
    counts = recount(table, namespace, selector)
    for row in table.alive_rows():
        if row < len(row_domains) and row_domains[row] >= 0:
            sums[row_domains[row]] += counts[row]
    return sums


def recount(table: NodeTable, namespace: str, selector: PodSelector) -> IntArray:
    """The same column computed from scratch (upstream's per-cycle walk), for tests and checks."""
    counts = np.zeros(len(table.alive), dtype=np.int64)
    for row in table.alive_rows():
        for pod in table.pods[row].values():
            if pod.namespace == namespace and not pod.deleting and selector.matches(pod.labels):
                counts[row] += 1
    return counts
