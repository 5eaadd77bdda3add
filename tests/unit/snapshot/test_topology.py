"""kubesched.snapshot.topology: incremental per-selector pod counts equal a from-scratch recount."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.backend.cache import SchedulerCache
from kubesched.plugins.helpers.label_selector import label_selector_as_selector
from kubesched.snapshot import topology
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.snapshot.topology import recount, recount_domains, topology_index
from kubesched.testing import node, pod

SELECTORS = [
    label_selector_as_selector({"matchLabels": {"app": "a"}}),
    label_selector_as_selector({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}),
    label_selector_as_selector({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
    label_selector_as_selector({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]},
                                                     {"key": "tier", "operator": "Exists"}]}),
]
NAMESPACES = ["default", "other"]
NODES = [f"n{i}" for i in range(5)]

label_sets = st.fixed_dictionaries({}, optional={"app": st.sampled_from(["a", "b", "c"]),
                                                 "tier": st.sampled_from(["fe", "db"])})
ops = st.one_of(
    st.tuples(st.just("add_pod"), st.integers(0, 5), st.sampled_from(NODES), st.sampled_from(NAMESPACES), label_sets),
    st.tuples(st.just("assume"), st.integers(0, 5), st.sampled_from(NODES), st.sampled_from(NAMESPACES), label_sets),
    st.tuples(st.just("forget"), st.integers(0, 5)),
    st.tuples(st.just("remove_pod"), st.integers(0, 5)),
    st.tuples(st.just("relabel_pod"), st.integers(0, 5), label_sets),
    st.tuples(st.just("terminate_pod"), st.integers(0, 5)),
    st.tuples(st.just("add_node"), st.sampled_from(NODES), st.sampled_from(["z1", "z2", None])),
    st.tuples(st.just("remove_node"), st.sampled_from(NODES)),
    st.tuples(st.just("register"), st.integers(0, len(SELECTORS) - 1), st.sampled_from(NAMESPACES)),
)


def _check(table: NodeTable, registered: set[tuple[int, str]]) -> None:
    index = topology_index(table)
    for si, ns in registered:
        got = index.counts(ns, SELECTORS[si])
        want = recount(table, ns, SELECTORS[si])
        rows = table.alive_rows()
        assert np.array_equal(got[rows], want[rows]), (si, ns)
        dead = np.setdiff1d(np.arange(len(table.alive)), rows)
        assert not got[dead].any()
        # Per-domain sums of two row → domain mappings (every node by zone; all but n0), asked
        # after every step so that later steps move the kept sums instead of rebuilding them.
        col = table.label_column("zone")
        size = len(col.values) + 1
        by_zone = np.where(table.alive[: len(col.codes)], col.codes, -1).astype(np.int32)
        but_n0 = by_zone.copy()
        if "n0" in table.index:
            but_n0[table.index["n0"]] = -1
        for key, row_domains in (("zone", by_zone), ("zone-but-n0", but_n0)):
            sums = index.domain_sums(ns, SELECTORS[si], key, row_domains, size)
            assert np.array_equal(sums, recount_domains(table, ns, SELECTORS[si], row_domains, size)), (key, si, ns)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=40), st.booleans())
def test_incremental_counts_equal_recount(steps: list[tuple[Any, ...]], index_first: bool) -> None:
    cache = SchedulerCache(NodeTable(capacity=2))
    table = cache.table
    registered: set[tuple[int, str]] = set()
    if index_first:
        topology_index(table)
    raws: dict[int, dict[str, Any]] = {}
    for step in steps:
        kind = step[0]
        if kind in ("add_pod", "assume"):
            _, i, node_name, ns, labels = step
            if kind == "add_pod":
                raw = pod(f"p{i}", node_name=node_name, namespace=ns, labels=dict(labels))
                raw["metadata"]["uid"] = f"u{i}"
                raws[i] = raw
                cache.add_or_update_pod(PodInfo.from_raw(raw))
            elif i not in raws:
                raw = pod(f"p{i}", namespace=ns, labels=dict(labels))
                raw["metadata"]["uid"] = f"u{i}"
                raws[i] = raw
                cache.assume(PodInfo.from_raw(raw), node_name)
        elif kind == "forget":
            cache.forget(f"u{step[1]}")
        elif kind == "remove_pod":
            cache.remove_pod(f"u{step[1]}")
            raws.pop(step[1], None)
        elif kind in ("relabel_pod", "terminate_pod"):
            current = table.pod(f"u{step[1]}")
            if current is not None:
                raw = copy.deepcopy(current.raw)
                if kind == "relabel_pod":
                    raw["metadata"]["labels"] = dict(step[2])
                else:
                    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                cache.add_or_update_pod(PodInfo.from_raw(raw, previous=current))
        elif kind == "add_node":
            _, name, zone = step
            cache.add_or_update_node(node(name, labels={"zone": zone} if zone else {}))
        elif kind == "remove_node":
            cache.remove_node(step[1])
        else:
            registered.add((step[1], step[2]))
        _check(table, registered)


def test_lru_eviction_keeps_counts_exact(monkeypatch: Any) -> None:
    monkeypatch.setattr(topology, "MAX_SELECTORS", 2)
    table = NodeTable()
    table.upsert_node(node("n0"))
    table.add_pod(PodInfo.from_raw(pod("p", node_name="n0", labels={"app": "a", "tier": "fe"})))
    index = topology_index(table)
    for s in SELECTORS:
        index.counts("default", s)
    assert index.registered() == 2
    for s in SELECTORS:
        assert np.array_equal(index.counts("default", s), recount(table, "default", s))


def test_one_index_per_table_and_growth() -> None:
    table = NodeTable(capacity=1)
    table.upsert_node(node("n0"))
    index = topology_index(table)
    assert topology_index(table) is index
    for i in range(10):
        table.upsert_node(node(f"m{i}"))
        table.add_pod(PodInfo.from_raw(pod(f"p{i}", node_name=f"m{i}", labels={"app": "a"})))
    got = index.counts("default", SELECTORS[0])
    assert len(got) >= len(table.alive)
    assert np.array_equal(got, recount(table, "default", SELECTORS[0]))
