"""kubesched.snapshot.affinity_index: the incremental match counts and term registry equal a
from-scratch recount after random pod add/assume/forget/remove/replace and node add/remove/relabel
sequences; and InterPodAffinity's PreFilter/PreScore on the incrementally kept table equal those
on a table built from scratch (upstream's per-cycle walk)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.backend.cache import SchedulerCache
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.helpers.label_selector import label_selector_as_selector
from kubesched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.plugin import PRE_FILTER_STATE_KEY, PRE_SCORE_STATE_KEY
from kubesched.plugins.interpodaffinity.terms import NAME, existing_pod_terms
from kubesched.snapshot import affinity_index
from kubesched.snapshot.affinity_index import (
    Clause,
    TermGroup,
    match_index,
    recount_matches,
    recount_terms,
    term_registry,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod

A = label_selector_as_selector({"matchLabels": {"app": "a"}})
AB = label_selector_as_selector({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]})
NO_TIER = label_selector_as_selector({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})
CLAUSES: list[tuple[Clause, ...]] = [
    ((frozenset({"default"}), A),),
    ((None, AB),),
    ((frozenset({"default", "other"}), NO_TIER),),
    ((frozenset({"default"}), A), (None, NO_TIER)),
    ((None, AB), (frozenset({"other"}), NO_TIER)),
]
NAMESPACES = ["default", "other"]
NODES = [f"n{i}" for i in range(5)]


def _t(key: str, value: str, topo: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topo}


AFFINITIES: list[dict[str, Any] | None] = [
    None,
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_t("app", "a", "zone")]}},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_t("app", "b", "kubernetes.io/hostname")]}},
    {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_t("app", "a", "zone")],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "podAffinityTerm": _t("tier", "fe", "zone")}
            ],
        }
    },
    {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 7, "podAffinityTerm": {**_t("app", "b", "zone"), "namespaceSelector": {}}}
            ]
        }
    },
]

label_sets = st.fixed_dictionaries(
    {}, optional={"app": st.sampled_from(["a", "b", "c"]), "tier": st.sampled_from(["fe", "db"])}
)
ops = st.one_of(
    st.tuples(
        st.just("add_pod"),
        st.integers(0, 6),
        st.sampled_from(NODES),
        st.sampled_from(NAMESPACES),
        label_sets,
        st.integers(0, len(AFFINITIES) - 1),
    ),
    st.tuples(
        st.just("assume"),
        st.integers(0, 6),
        st.sampled_from(NODES),
        st.sampled_from(NAMESPACES),
        label_sets,
        st.integers(0, len(AFFINITIES) - 1),
    ),
    st.tuples(st.just("forget"), st.integers(0, 6)),
    st.tuples(st.just("remove_pod"), st.integers(0, 6)),
    st.tuples(st.just("relabel_pod"), st.integers(0, 6), label_sets),
    st.tuples(st.just("replace_pod"), st.integers(0, 6)),
    st.tuples(st.just("add_node"), st.sampled_from(NODES), st.sampled_from(["z1", "z2", None])),
    st.tuples(st.just("remove_node"), st.sampled_from(NODES)),
    st.tuples(st.just("register"), st.integers(0, len(CLAUSES) - 1)),
)


def _pod(i: int, ns: str, labels: dict[str, str], aff: int, node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if AFFINITIES[aff] is not None:
        spec["affinity"] = copy.deepcopy(AFFINITIES[aff])
    raw = pod(f"p{i}", node_name=node_name, namespace=ns, labels=dict(labels), **spec)
    raw["metadata"]["uid"] = f"u{i}"
    return raw


def _check(table: NodeTable, registered: set[int]) -> None:
    index = match_index(table)
    rows = table.alive_rows()
    dead = np.setdiff1d(np.arange(len(table.alive)), rows)
    for ci in registered:
        got = index.counts(CLAUSES[ci])
        want = recount_matches(table, CLAUSES[ci])
        assert np.array_equal(got[rows], want[rows]), ci
        assert not got[dead].any()
        for key in ("zone", "kubernetes.io/hostname"):
            per_row = {int(r): int(want[r]) for r in rows if want[r]}
            _check_sums(table, key, per_row, index.domain_counts(CLAUSES[ci], key))
    registry = term_registry(table, NAME, existing_pod_terms)
    assert registry.snapshot() == recount_terms(table, existing_pod_terms)
    # Each group's pods per domain, kept in step by the observer once built (built here on the
    # first check, so later steps exercise the incremental path), equal a recount from its rows
    # with the current node labels (nodes are added, removed and relabelled between checks).
    for kind in registry.snapshot():
        for group in registry.groups(kind):
            for key in ("zone", "kubernetes.io/hostname"):
                _check_domains(table, group, key)


def _check_domains(table: NodeTable, group: TermGroup, key: str) -> None:
    """``group.domain_counts`` equals a recount from its rows with the nodes' labels now."""
    _check_sums(table, key, group.rows, group.domain_counts(table, key))


def _check_sums(table: NodeTable, key: str, per_row: dict[int, int], got: Any) -> None:
    """``got`` (pods per domain of ``key``) equals the sum of ``per_row`` under the labels now."""
    codes = table.label_column(key).codes
    want = np.zeros(len(table.label_column(key).values) + 1, dtype=np.int64)
    for row, n in per_row.items():
        if codes[row] >= 0:
            want[codes[row]] += n
    if not want.any():
        assert got is None
    else:
        assert got is not None
        assert np.array_equal(np.trim_zeros(got, "b"), np.trim_zeros(want, "b")), key


def test_term_group_domain_counts_follow_pods_and_node_labels() -> None:
    """Once built, a group's pods per zone move with every pod placed or removed (no rebuild), and
    a node relabelled, removed or returning counts under its new domain."""
    cache = SchedulerCache(NodeTable())
    table = cache.table
    for name, zone in (("n0", "z1"), ("n1", "z2"), ("n2", None)):
        cache.add_or_update_node(node(name, labels={"zone": zone} if zone else {}))
    reg = term_registry(table, NAME, existing_pod_terms)
    preferred = next(i for i, a in enumerate(AFFINITIES) if a and "podAffinity" in a
                     and "preferredDuringSchedulingIgnoredDuringExecution" in a["podAffinity"])

    def place(i: int, node_name: str) -> None:
        cache.add_or_update_pod(PodInfo.from_raw(_pod(i, "default", {"app": "a"}, preferred, node_name)))

    def group() -> TermGroup:
        (g,) = reg.groups("preferredAffinity")
        return g

    place(0, "n2")  # on the node without a zone: no domain has a pod yet
    assert group().domain_counts(table, "zone") is None
    steps: list[Any] = [
        lambda: place(1, "n0"), lambda: place(2, "n1"), lambda: place(3, "n1"),
        lambda: cache.remove_pod("u2"),
        lambda: cache.add_or_update_node(node("n1", labels={"zone": "z1"})),  # relabelled
        lambda: place(4, "n1"), lambda: cache.remove_pod("u1"),
        lambda: cache.remove_node("n0"), lambda: place(5, "n1"),
        lambda: cache.add_or_update_node(node("n0", labels={"zone": "z3"})),  # returns, relabelled
    ]
    for step in steps:
        step()
        _check_domains(table, group(), "zone")
    z1 = table.label_column("zone").values["z1"]
    counts = group().domain_counts(table, "zone")
    assert counts is not None and counts[z1] == 3  # u3, u4, u5 on n1 (now z1)


def test_match_index_domain_counts_follow_pods_and_node_labels() -> None:
    """The same for the pods matching a clause (the incoming pod's preferred terms)."""
    cache = SchedulerCache(NodeTable())
    table = cache.table
    for name, zone in (("n0", "z1"), ("n1", "z2"), ("n2", None)):
        cache.add_or_update_node(node(name, labels={"zone": zone} if zone else {}))
    index = match_index(table)
    clauses = CLAUSES[0]  # app=a in default

    def place(i: int, node_name: str, app: str = "a") -> None:
        cache.add_or_update_pod(PodInfo.from_raw(_pod(i, "default", {"app": app}, 0, node_name)))

    def check() -> None:
        want = recount_matches(table, clauses)
        per_row = {int(r): int(want[r]) for r in table.alive_rows() if want[r]}
        _check_sums(table, "zone", per_row, index.domain_counts(clauses, "zone"))

    place(0, "n2")
    assert index.domain_counts(clauses, "zone") is None  # only on the node without a zone
    for step in (
        lambda: place(1, "n0"), lambda: place(2, "n1"), lambda: place(3, "n1", app="b"),
        lambda: place(4, "n1"), lambda: cache.remove_pod("u2"),
        lambda: cache.add_or_update_node(node("n1", labels={"zone": "z1"})),
        lambda: place(5, "n1"), lambda: cache.remove_pod("u1"), lambda: cache.remove_node("n0"),
        lambda: cache.add_or_update_node(node("n0", labels={"zone": "z3"})),
    ):
        step()
        check()


@settings(max_examples=250, deadline=None)
@given(st.lists(ops, max_size=40), st.booleans())
def test_incremental_index_equals_recount(steps: list[tuple[Any, ...]], index_first: bool) -> None:
    cache = SchedulerCache(NodeTable(capacity=2))
    table = cache.table
    registered: set[int] = set()
    if index_first:
        match_index(table)
        term_registry(table, NAME, existing_pod_terms)
    for step in steps:
        _apply(cache, step, registered)
        _check(table, registered)


def _apply(cache: SchedulerCache, step: tuple[Any, ...], registered: set[int]) -> None:
    table = cache.table
    kind = step[0]
    if kind == "add_pod":
        _, i, node_name, ns, labels, aff = step
        cache.add_or_update_pod(PodInfo.from_raw(_pod(i, ns, labels, aff, node_name)))
    elif kind == "assume":
        _, i, node_name, ns, labels, aff = step
        if table.pod(f"u{i}") is None:
            cache.assume(PodInfo.from_raw(_pod(i, ns, labels, aff)), node_name)
    elif kind == "forget":
        cache.forget(f"u{step[1]}")
    elif kind == "remove_pod":
        cache.remove_pod(f"u{step[1]}")
    elif kind in ("relabel_pod", "replace_pod"):
        current = table.pod(f"u{step[1]}")
        if current is not None:
            raw = copy.deepcopy(current.raw)
            if kind == "relabel_pod":
                raw["metadata"]["labels"] = dict(step[2])
            else:
                raw.setdefault("status", {})["phase"] = "Running"
            cache.add_or_update_pod(PodInfo.from_raw(raw, previous=current))
    elif kind == "add_node":
        _, name, zone = step
        cache.add_or_update_node(node(name, labels={"zone": zone} if zone else {}))
    elif kind == "remove_node":
        cache.remove_node(step[1])
    else:
        registered.add(step[1])


def _plugin(table: NodeTable) -> InterPodAffinity:
    ns = {"default": {"metadata": {"name": "default", "labels": {"t": "1"}}}}
    h = Handle(table, FakeClock(), WaitingPods(), objects=lambda kind: ns if kind == "Namespace" else {})
    return InterPodAffinity(InterPodAffinityArgs(), h)


def _fresh(table: NodeTable) -> NodeTable:
    """The same nodes and accounted pods in a new table (indexes built by one walk)."""
    t = NodeTable()
    for row in table.alive_rows():
        t.upsert_node(table.nodes[row])
    for row in table.alive_rows():
        for p in table.pods[row].values():
            t.add_pod(PodInfo.from_raw(p.raw))
    return t


def _outcome(plugin: InterPodAffinity, table: NodeTable, incoming: PodInfo) -> Any:
    names = [table.names[r] for r in table.alive_rows()]
    order = np.argsort(names)
    rows = table.alive_rows()[order]
    cs = CycleState()
    _, st = plugin.pre_filter(cs, incoming, table)
    out: list[Any] = [st.code]
    if st.is_success:
        out.append(cs.read(PRE_FILTER_STATE_KEY).pairs(table))
        out.append(plugin.filter_batch(cs, incoming, table, rows).codes.tolist())
    sst = plugin.pre_score(cs, incoming, table, rows)
    out.append(sst.code)
    if sst.is_success:
        scores = plugin.score_batch(cs, incoming, table, rows)
        assert isinstance(scores, np.ndarray)
        out.append(scores.tolist())
        del cs._data[PRE_SCORE_STATE_KEY]
    return out


@settings(max_examples=120, deadline=None)
@given(st.lists(ops, max_size=30), label_sets, st.integers(0, len(AFFINITIES) - 1), st.sampled_from(NAMESPACES))
def test_plugin_on_incremental_table_equals_from_scratch(
    steps: list[tuple[Any, ...]], labels: dict[str, str], aff: int, ns: str
) -> None:
    cache = SchedulerCache(NodeTable(capacity=2))
    plugin = _plugin(cache.table)  # hooks the indexes before any event
    registered: set[int] = set()
    incoming = PodInfo.from_raw(_pod(99, ns, labels, aff))
    for step in steps:
        _apply(cache, step, registered)
        _outcome(plugin, cache.table, incoming)  # columns registered mid-sequence stay exact too
    fresh = _fresh(cache.table)
    assert _outcome(plugin, cache.table, incoming) == _outcome(_plugin(fresh), fresh, incoming)


def test_lru_eviction_keeps_counts_exact(monkeypatch: Any) -> None:
    monkeypatch.setattr(affinity_index, "MAX_COLUMNS", 2)
    table = NodeTable()
    table.upsert_node(node("n0"))
    table.add_pod(PodInfo.from_raw(pod("p", node_name="n0", labels={"app": "a"})))
    index = match_index(table)
    for c in CLAUSES:
        index.counts(c)
    assert index.registered() == 2
    table.add_pod(PodInfo.from_raw(pod("q", node_name="n0", labels={"app": "b"}, namespace="other")))
    for c in CLAUSES:
        assert np.array_equal(index.counts(c)[:1], recount_matches(table, c)[:1])


def test_term_registry_groups_replicas() -> None:
    """Replicas with identical terms share one group; a cycle sees one term with its rows."""
    table = NodeTable()
    for n in ("n0", "n1"):
        table.upsert_node(node(n, labels={"zone": "z"}))
    for i, n in enumerate(("n0", "n0", "n1")):
        table.add_pod(PodInfo.from_raw(_pod(i, "default", {"app": "a"}, 1, n)))
    reg = term_registry(table, NAME, existing_pod_terms)
    groups = list(reg.groups("requiredAnti"))
    assert len(groups) == 1
    assert groups[0].rows == {0: 2, 1: 1}
    table.remove_pod("u0")
    table.remove_pod("u1")
    table.remove_pod("u2")
    assert not reg.has("requiredAnti")


def test_a_table_and_its_indexes_are_freed_with_it() -> None:
    """A finished simulation's table must not outlive it: the term registry refers to its table,
    and as a value of a module-level WeakKeyDictionary keyed by that table it kept the table, and
    every pod and plugin reachable from it, alive for the process's life (a sweep worker grew by
    ~160 MiB per openb replay, 4 GiB after 30)."""
    import gc
    import weakref

    from kubesched.snapshot.topology import topology_index

    def build() -> weakref.ref[NodeTable]:
        cache = SchedulerCache(NodeTable())
        cache.add_or_update_node(node("n0", labels={"zone": "z1"}))
        cache.add_or_update_pod(PodInfo.from_raw(_pod(0, "default", {"app": "a"}, 0, "n0")))
        term_registry(cache.table, NAME, existing_pod_terms)
        match_index(cache.table)
        topology_index(cache.table)
        return weakref.ref(cache.table)

    gone = build()
    gc.collect()
    assert gone() is None
