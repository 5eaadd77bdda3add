"""NodeAffinity: mirrors nodeaffinity/node_affinity_test.go (TestNodeAffinity, TestNodeAffinityPriority)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pydantic
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PreFilterResult
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.node_affinity import NodeAffinity, NodeAffinityArgs
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod, table_of

POD = "node(s) didn't match Pod's node affinity/selector"
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
CONFLICT = "pod affinity terms conflict"
SKIP = "skip"


def plugin(args: dict[str, Any] | None = None) -> NodeAffinity:
    a = NodeAffinityArgs.model_validate(args) if args is not None else None
    return NodeAffinity(a, Handle(NodeTable(), FakeClock(), WaitingPods()))


def e(key: str, op: str, *values: str) -> dict[str, Any]:
    d: dict[str, Any] = {"key": key, "operator": op}
    if values:
        d["values"] = list(values)
    return d


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def mk(node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None) -> PodInfo:
    spec: dict[str, Any] = {}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity is not None:
        spec["affinity"] = affinity
    return PodInfo.from_raw(pod("p", **spec))


NAME_IN = {"matchFields": [e("metadata.name", "In", "node1")]}
ADDED_NAME_NODE2 = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchFields": [e("metadata.name", "In", "node2")]}]}}}

# name, pod, node labels, node name, want filter reason, want prefilter status, want prefilter names, args, run PF
CASES: list[tuple[Any, ...]] = [
    ("missing labels", mk({"foo": "bar"}), {}, "n", POD, None, None, None, True),
    ("same labels", mk({"foo": "bar"}), {"foo": "bar"}, "n", None, None, None, None, True),
    ("node labels are superset", mk({"foo": "bar"}), {"foo": "bar", "baz": "blah"}, "n", None, None, None, None, True),
    ("node labels are subset", mk({"foo": "bar", "baz": "blah"}), {"foo": "bar"}, "n", POD, None, None, None, True),
    ("In matches", mk(affinity=required({"matchExpressions": [e("foo", "In", "bar", "value2")]})),
     {"foo": "bar"}, "n", None, None, None, None, True),
    ("Gt matches", mk(affinity=required({"matchExpressions": [e("kernel-version", "Gt", "0204")]})),
     {"kernel-version": "0206"}, "n", None, None, None, None, True),
    ("NotIn matches", mk(affinity=required({"matchExpressions": [e("mem-type", "NotIn", "DDR", "DDR2")]})),
     {"mem-type": "DDR3"}, "n", None, None, None, None, True),
    ("Exists matches", mk(affinity=required({"matchExpressions": [e("GPU", "Exists")]})),
     {"GPU": "NVIDIA-GRID-K1"}, "n", None, None, None, None, True),
    ("affinity that doesn't match", mk(affinity=required({"matchExpressions": [e("foo", "In", "value1", "value2")]})),
     {"foo": "bar"}, "n", POD, None, None, None, True),
    ("empty MatchExpressions matches no objects", mk(affinity=required({"matchExpressions": []})),
     {"foo": "bar"}, "n", POD, None, None, None, True),
    ("no Affinity", mk(), {"foo": "bar"}, "n", None, SKIP, None, None, True),
    ("Affinity but nil NodeSelector", mk(affinity={"nodeAffinity": {}}), {"foo": "bar"}, "n", None, SKIP, None,
     None, True),
    ("multiple matchExpressions ANDed that match",
     mk(affinity=required({"matchExpressions": [e("GPU", "Exists"), e("GPU", "NotIn", "AMD", "INTER")]})),
     {"GPU": "NVIDIA-GRID-K1"}, "n", None, None, None, None, True),
    ("multiple matchExpressions ANDed that don't match",
     mk(affinity=required({"matchExpressions": [e("GPU", "Exists"), e("GPU", "In", "AMD", "INTER")]})),
     {"GPU": "NVIDIA-GRID-K1"}, "n", POD, None, None, None, True),
    ("multiple NodeSelectorTerms ORed",
     mk(affinity=required({"matchExpressions": [e("foo", "In", "bar", "value2")]},
                          {"matchExpressions": [e("diffkey", "In", "wrong", "value2")]})),
     {"foo": "bar"}, "n", None, None, None, None, True),
    ("Affinity and nodeSelector both satisfied",
     mk({"foo": "bar"}, required({"matchExpressions": [e("foo", "Exists")]})),
     {"foo": "bar"}, "n", None, None, None, None, True),
    ("Affinity matches but nodeSelector not",
     mk({"foo": "bar"}, required({"matchExpressions": [e("foo", "Exists")]})),
     {"foo": "barrrrrr"}, "n", POD, None, None, None, True),
    ("invalid value in Affinity term",
     mk(affinity=required({"matchExpressions": [e("foo", "NotIn", "invalid value: ___@#$%^")]})),
     {"foo": "bar"}, "n", POD, None, None, None, True),
    ("matchFields In matches", mk(affinity=required(NAME_IN)), {}, "node1", None, None, {"node1"}, None, True),
    ("matchFields In does not match", mk(affinity=required(NAME_IN)), {}, "node2", POD, None, {"node1"}, None, True),
    ("two terms: matchFields does not match, but matchExpressions matches",
     mk(affinity=required({"matchFields": [e("metadata.name", "In", "node1"), e("metadata.name", "In", "node2")]},
                          {"matchExpressions": [e("foo", "In", "bar")]})),
     {"foo": "bar"}, "node2", None, None, None, None, True),
    ("one term: matchFields does not match, but matchExpressions matches",
     mk(affinity=required({**NAME_IN, "matchExpressions": [e("foo", "In", "bar")]})),
     {"foo": "bar"}, "node2", POD, None, {"node1"}, None, True),
    ("one term: both matchFields and matchExpressions match",
     mk(affinity=required({**NAME_IN, "matchExpressions": [e("foo", "In", "bar")]})),
     {"foo": "bar"}, "node1", None, None, {"node1"}, None, True),
    ("two terms: both matchFields and matchExpressions do not match",
     mk(affinity=required(NAME_IN, {"matchExpressions": [e("foo", "In", "not-match-to-bar")]})),
     {"foo": "bar"}, "node2", POD, None, None, None, True),
    ("two terms of node.Name affinity",
     mk(affinity=required(NAME_IN, {"matchFields": [e("metadata.name", "In", "node2")]})),
     {}, "node2", None, None, {"node1", "node2"}, None, True),
    ("two conflicting match field requirements",
     mk(affinity=required({"matchFields": [e("metadata.name", "In", "node1"), e("metadata.name", "In", "node2")]})),
     {"foo": "bar"}, "node2", POD, CONFLICT, None, None, True),
    ("Matches added affinity and Pod's node affinity",
     mk(affinity=required({"matchExpressions": [e("zone", "In", "foo")]})),
     {"zone": "foo"}, "node2", None, None, None, ADDED_NAME_NODE2, True),
    ("Matches added affinity but not Pod's node affinity",
     mk(affinity=required({"matchExpressions": [e("zone", "In", "bar")]})),
     {"zone": "foo"}, "node2", POD, None, None, ADDED_NAME_NODE2, True),
    ("Doesn't match added affinity", mk(), {"zone": "foo"}, "node2", ENFORCED, None, None,
     {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
         "nodeSelectorTerms": [{"matchExpressions": [e("zone", "In", "bar")]}]}}}, True),
    ("Matches node selector correctly even if PreFilter is not called", mk({"foo": "bar"}),
     {"foo": "bar", "baz": "blah"}, "n", None, None, None, None, False),
    ("Matches node affinity correctly even if PreFilter is not called",
     mk(affinity=required({"matchExpressions": [e("GPU", "Exists"), e("GPU", "NotIn", "AMD", "INTER")]})),
     {"GPU": "NVIDIA-GRID-K1"}, "n", None, None, None, None, False),
]


@pytest.mark.parametrize(
    ("name", "p", "labels", "node_name", "want", "want_pf", "want_names", "args", "run_pf"),
    CASES, ids=[c[0] for c in CASES],
)
def test_node_affinity(name: str, p: PodInfo, labels: dict[str, str], node_name: str, want: str | None,
                       want_pf: str | None, want_names: set[str] | None, args: dict[str, Any] | None,
                       run_pf: bool) -> None:
    t = table_of(node(node_name, labels=labels))
    pl = plugin(args)
    state = CycleState()
    if run_pf:
        res, st = pl.pre_filter(state, p, t)
        if want_pf == SKIP:
            assert st.is_skip
        elif want_pf is not None:
            assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (want_pf,)
        else:
            assert st.is_success
        assert res == (PreFilterResult(frozenset(want_names)) if want_names is not None else None)
    got = pl.filter(state, p, NodeInfo(t, 0))
    if want is None:
        assert got.is_success
    else:
        assert got.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and got.reasons == (want,)


def test_filter_batch_multi_node_with_added_affinity() -> None:
    t = table_of(
        node("a", labels={"zone": "z1", "disk": "ssd"}),
        node("b", labels={"zone": "z2", "disk": "ssd"}),
        node("c", labels={"zone": "z1"}),
        node("d", labels={"zone": "z3", "disk": "ssd"}),
    )
    pl = plugin({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [e("zone", "In", "z1", "z2")]}]}}})
    p = mk({"disk": "ssd"}, required({"matchExpressions": [e("zone", "NotIn", "z2")]}))
    v = pl.filter_batch(CycleState(), p, t, t.alive_rows())
    reasons = [v.statuses[c - 1].reasons[0] if c else None for c in v.codes]
    assert reasons == [None, POD, POD, ENFORCED]


AFF1 = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 2, "preference": {"matchExpressions": [e("foo", "In", "bar")]}}]}}
AFF2 = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 2, "preference": {"matchExpressions": [e("foo", "In", "bar")]}},
    {"weight": 4, "preference": {"matchExpressions": [e("key", "In", "value")]}},
    {"weight": 5, "preference": {"matchExpressions": [e("foo", "In", "bar"), e("key", "In", "value"),
                                                      e("az", "In", "az1")]}},
]}}
L1, L2, L3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
L4, L5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}

# TestNodeAffinityPriority
SCORE_CASES: list[tuple[Any, ...]] = [
    ("no preferred affinity: all zero", None, [L1, L2, L3], [0, 0, 0], None),
    ("no node matches", AFF1, [L4, L2, L3], [0, 0, 0], None),
    ("only node1 matches", AFF1, [L1, L2, L3], [100, 0, 0], None),
    ("all match with different priorities", AFF2, [L1, L5, L2], [18, 100, 36], None),
    ("added affinity", None, [L1, L2], [0, 100],
     {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 5, "preference": {"matchExpressions": [e("key", "In", "value")]}}]}}),
    ("added affinity and pod has default affinity", AFF1, [L1, L2, L5], [40, 60, 100],
     {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 3, "preference": {"matchExpressions": [e("key", "In", "value")]}}]}}),
]


@pytest.mark.parametrize(("name", "affinity", "labels", "expected", "args"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(name: str, affinity: dict[str, Any] | None, labels: list[dict[str, str]], expected: list[int],
               args: dict[str, Any] | None) -> None:
    t = table_of(*[node(f"node{i}", labels=lab) for i, lab in enumerate(labels)])
    rows = t.alive_rows()
    p = mk(affinity=affinity)
    pl, state = plugin(args), CycleState()
    st = pl.pre_score(state, p, t, rows)
    assert st.is_success or (st.is_skip and affinity is None and args is None)
    per_node = []
    for r in rows:
        s, sst = pl.score(state, p, NodeInfo(t, int(r)))
        assert sst.is_success
        per_node.append(s)
    batch = pl.score_batch(state, p, t, rows)
    assert isinstance(batch, np.ndarray) and batch.tolist() == per_node
    assert pl.normalize_score(state, p, t, rows, batch).is_success
    assert batch.tolist() == expected


def test_pre_score_skip_and_error() -> None:
    t = table_of(node("node1", labels=L1))
    rows = t.alive_rows()
    assert plugin().pre_score(CycleState(), mk(), t, rows).is_skip
    broken = mk(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": {"matchExpressions": [e("invalid key", "In", "bar")]}}]}})
    st = plugin().pre_score(CycleState(), broken, t, rows)
    assert isinstance(st, Status) and st.is_error and "invalid key" in st.message


def test_args_validation() -> None:
    assert NodeAffinityArgs().added_affinity is None
    ok = NodeAffinityArgs.model_validate(ADDED_NAME_NODE2)
    assert ok.added_affinity is not None
    with pytest.raises(pydantic.ValidationError):
        NodeAffinityArgs.model_validate({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [e("k", "Gt", "x")]}]}}})
    with pytest.raises(pydantic.ValidationError):
        NodeAffinityArgs.model_validate({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [e("k", "In")]}}]}})
    with pytest.raises(pydantic.ValidationError):
        NodeAffinityArgs.model_validate({"addedAfinity": {}})
    assert NodeAffinity.args_model is NodeAffinityArgs


def test_compiled_terms_are_cached_on_the_pod() -> None:
    t = table_of(node("n", labels=L1))
    p = mk(affinity=required({"matchExpressions": [e("foo", "In", "bar")]}))
    pl = plugin()
    pl.pre_filter(CycleState(), p, t)
    assert "NodeAffinity" in p.memo


def test_pods_with_equal_affinity_share_one_compilation() -> None:
    # The compiled affinity is shared by pods whose nodeSelector and nodeAffinity serialise to
    # the same bytes; any difference (even only the key order, or a selector value) compiles anew.
    t = table_of(node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"}))
    pl = plugin()

    def verdict(p: PodInfo) -> list[int]:
        state = CycleState()
        pl.pre_filter(state, p, t)
        return pl.filter_batch(state, p, t, t.alive_rows()).codes.tolist()

    aff = required({"matchExpressions": [e("zone", "In", "a")]})
    p1, p2 = mk({"tier": "x"}, aff), mk({"tier": "x"}, aff)
    assert verdict(p1) == verdict(p2)
    assert p1.memo["NodeAffinity"] is p2.memo["NodeAffinity"]
    other_zone = mk(affinity=required({"matchExpressions": [e("zone", "In", "b")]}))
    assert verdict(mk(affinity=aff)) == [0, 2]
    assert verdict(other_zone) == [2, 0]
    reordered = mk({"b": "1", "a": "1"}, aff)
    assert reordered.memo.get("NodeAffinity") is None
    verdict(mk({"a": "1", "b": "1"}, aff))
    verdict(reordered)
    assert reordered.memo["NodeAffinity"] is not mk({"a": "1", "b": "1"}, aff).memo.get("NodeAffinity")


def test_pinned_node_names_are_shared_with_the_compilation() -> None:
    t = table_of(node("node1"), node("node2"))
    pl = plugin()
    for _ in range(2):  # the second pod takes the family's compilation
        res, st = pl.pre_filter(CycleState(), mk(affinity=required(NAME_IN)), t)
        assert st.is_success and res == PreFilterResult(frozenset({"node1"}))
    conflict = required({"matchFields": [e("metadata.name", "In", "node1"), e("metadata.name", "In", "node2")]})
    for _ in range(2):
        _, st = pl.pre_filter(CycleState(), mk(affinity=conflict), t)
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (CONFLICT,)
