"""TaintToleration: mirrors tainttoleration/taint_toleration_test.go (same expected results, except
the Filter reason, which follows the newest upstream: "node(s) had untolerated taint(s)")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.taint_toleration import TaintToleration
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod_info, table_of

PNS, NS = "PreferNoSchedule", "NoSchedule"
REASON = "node(s) had untolerated taint(s)"


def plugin() -> TaintToleration:
    return TaintToleration(None, Handle(NodeTable(), FakeClock(), WaitingPods()))


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str, value: str, effect: str = "", op: str = "Equal") -> dict[str, str]:
    d = {"key": key, "operator": op, "value": value}
    if effect:
        d["effect"] = effect
    return d


# TestTaintTolerationScore
SCORE_CASES: list[tuple[str, list[dict[str, Any]], list[list[dict[str, str]]], list[int]]] = [
    ("node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
     [tol("foo", "bar", PNS)], [[taint("foo", "bar", PNS)], [taint("foo", "blah", PNS)]], [100, 0]),
    ("the nodes that all of their taints are tolerated by the pod, get the same score",
     [tol("cpu-type", "arm64", PNS), tol("disk-type", "ssd", PNS)],
     [[], [taint("cpu-type", "arm64", PNS)], [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]],
     [100, 100, 100]),
    ("the more intolerable taints a node has, the lower score it gets.",
     [tol("foo", "bar", PNS)],
     [[], [taint("cpu-type", "arm64", PNS)], [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]],
     [100, 50, 0]),
    ("only taints and tolerations that have effect PreferNoSchedule are checked",
     [tol("cpu-type", "arm64", NS), tol("disk-type", "ssd", NS)],
     [[], [taint("cpu-type", "arm64", NS)], [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]],
     [100, 100, 0]),
    ("Default behaviour No taints and tolerations, lands on node with no taints",
     [], [[], [taint("cpu-type", "arm64", PNS)]], [100, 0]),
]


@pytest.mark.parametrize(
    ("name", "tolerations", "node_taints", "expected"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES]
)
def test_score(name: str, tolerations: list[dict[str, Any]], node_taints: list[list[dict[str, str]]],
               expected: list[int]) -> None:
    t = table_of(*[node(f"node{i}", taints=tt) for i, tt in enumerate(node_taints)])
    rows = t.alive_rows()
    p = pod_info("pod1", tolerations=tolerations)
    pl = plugin()
    state = CycleState()
    assert pl.pre_score(state, p, t, rows).is_success
    # per-node path
    per_node = []
    for r in rows:
        s, st = pl.score(state, p, NodeInfo(t, int(r)))
        assert st.is_success
        per_node.append(s)
    scores = np.array(per_node, dtype=np.int64)
    # batch path gives the same raw scores
    batch = pl.score_batch(state, p, t, rows)
    assert isinstance(batch, np.ndarray) and batch.tolist() == per_node
    assert pl.normalize_score(state, p, t, rows, scores).is_success
    assert scores.tolist() == expected


def test_score_without_pre_score_is_error() -> None:
    t = table_of(node("n"))
    res = plugin().score_batch(CycleState(), pod_info("p"), t, t.alive_rows())
    assert not isinstance(res, np.ndarray) and res.is_error


# TestTaintTolerationFilter
FILTER_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, str]], bool]] = [
    ("A pod having no tolerations can't be scheduled onto a node with nonempty taints",
     [], [taint("dedicated", "user1", NS)], True),
    ("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
     [tol("dedicated", "user1", NS, op="")], [taint("dedicated", "user1", NS)], False),
    ("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
     [tol("dedicated", "user2", NS)], [taint("dedicated", "user1", NS)], True),
    ("A pod can be scheduled onto the node, with a toleration uses operator Exists",
     [{"key": "foo", "operator": "Exists", "effect": NS}], [taint("foo", "bar", NS)], False),
    ("A pod has multiple tolerations, node has multiple taints, all the taints are tolerated",
     [tol("dedicated", "user2", NS), {"key": "foo", "operator": "Exists", "effect": NS}],
     [taint("dedicated", "user2", NS), taint("foo", "bar", NS)], False),
    ("toleration keys and values match the taint, but (non-empty) effect doesn't match",
     [tol("foo", "bar", PNS)], [taint("foo", "bar", NS)], True),
    ("toleration keys and values match, effect of toleration is empty, taint NoSchedule",
     [tol("foo", "bar")], [taint("foo", "bar", NS)], False),
    ("toleration doesn't match, but the taint is PreferNoSchedule",
     [tol("dedicated", "user2", NS)], [taint("dedicated", "user1", PNS)], False),
    ("The pod has no toleration, but the effect of taint on node is PreferNoSchedule",
     [], [taint("dedicated", "user1", PNS)], False),
    ("NoExecute taints are also enforced", [], [taint("x", "y", "NoExecute")], True),
]


@pytest.mark.parametrize(("name", "tolerations", "taints", "want_reject"), FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(name: str, tolerations: list[dict[str, Any]], taints: list[dict[str, str]],
                want_reject: bool) -> None:
    t = table_of(node("nodeA", taints=taints))
    st = plugin().filter(CycleState(), pod_info("pod1", tolerations=tolerations), NodeInfo(t, 0))
    if want_reject:
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (REASON,)
    else:
        assert st.is_success


def test_filter_batch_multi_node() -> None:
    """Each row of FILTER_CASES as one node, evaluated in one batch for one pod."""
    t = table_of(
        node("a"),
        node("b", taints=[taint("dedicated", "user1", NS)]),
        node("c", taints=[taint("dedicated", "user2", NS)]),
        node("d", taints=[taint("dedicated", "user1", PNS)]),
        node("e", taints=[taint("dedicated", "user1", NS)]),
        node("f", taints=[taint("dedicated", "user2", NS), taint("other", "x", "NoExecute")]),
    )
    p = pod_info("p", tolerations=[tol("dedicated", "user2", NS)])
    v = plugin().filter_batch(CycleState(), p, t, t.alive_rows())
    assert v.passed().tolist() == [True, False, True, True, False, False]
    assert [s.reasons for s in v.statuses] == [(REASON,)]


def test_comparison_operators_follow_the_gate() -> None:
    t = table_of(node("n", taints=[taint("sla", "950", NS)]))
    p = pod_info("p", tolerations=[{"key": "sla", "operator": "Gt", "value": "750", "effect": NS}])
    assert not plugin().filter(CycleState(), p, NodeInfo(t, 0)).is_success

    class Gated(TaintToleration):
        enable_taint_toleration_comparison_operators = True

    gated = Gated(None, Handle(NodeTable(), FakeClock(), WaitingPods()))
    assert gated.filter(CycleState(), p, NodeInfo(t, 0)).is_success


def _scores(pl: TaintToleration, t: NodeTable, tolerations: list[dict[str, Any]], name: str) -> list[int]:
    rows = t.alive_rows()
    p, state = pod_info(name, tolerations=tolerations), CycleState()
    assert pl.pre_score(state, p, t, rows).is_success
    scores = pl.score_batch(state, p, t, rows)
    assert isinstance(scores, np.ndarray)
    return list(scores.tolist())


def test_score_state_shared_by_a_family_follows_taint_changes_tolerations_and_the_gate() -> None:
    # PreScore states are shared by pods with equal tolerations, and the counts per taint set are
    # kept on the table: neither may outlive what they were computed from.
    t = table_of(node("n0"), node("n1", taints=[taint("a", "1", PNS)]), node("n2"))
    pl, tolerates_a = plugin(), [tol("a", "1", PNS)]
    assert _scores(pl, t, [], "p0") == [0, 1, 0]
    assert _scores(pl, t, tolerates_a, "p1") == [0, 0, 0]  # another family: its own counts
    t.upsert_node(node("n2", taints=[taint("a", "1", PNS), taint("b", "2", PNS)]))  # a new taint set
    assert _scores(pl, t, [], "p2") == [0, 1, 2]
    assert _scores(pl, t, tolerates_a, "p3") == [0, 0, 1]
    t.upsert_node(node("n0", taints=[taint("a", "1", PNS)]))  # an existing taint set
    assert _scores(pl, t, [], "p4") == [1, 1, 2]

    class Gated(TaintToleration):
        enable_taint_toleration_comparison_operators = True

    sla = table_of(node("n", taints=[taint("sla", "950", PNS)]))
    gt = [{"key": "sla", "operator": "Gt", "value": "750", "effect": PNS}]
    assert _scores(pl, sla, gt, "q0") == [1]  # Gt tolerates nothing while the gate is off
    gated = Gated(None, Handle(NodeTable(), FakeClock(), WaitingPods()))
    assert _scores(gated, sla, gt, "q1") == [0]
    assert _scores(pl, sla, gt, "q2") == [1]
