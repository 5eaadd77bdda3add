"""NodeName: mirrors nodename/node_name_test.go."""

from __future__ import annotations

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.types import PreFilterResult
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.node_name import NodeName
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod_info, table_of


def plugin() -> NodeName:
    return NodeName(None, Handle(NodeTable(), FakeClock(), WaitingPods()))


@pytest.mark.parametrize(
    ("pod_node", "node_name", "want_reject"),
    [("", "foo", False), ("foo", "foo", False), ("bar", "foo", True)],
)
def test_filter(pod_node: str, node_name: str, want_reject: bool) -> None:
    t = table_of(node(node_name))
    st = plugin().filter(CycleState(), pod_info("p", node_name=pod_node), NodeInfo(t, 0))
    if want_reject:
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == ("node(s) didn't match the requested node name",)
    else:
        assert st.is_success


def test_pre_filter() -> None:
    t = table_of(node("foo"))
    res, st = plugin().pre_filter(CycleState(), pod_info("p", node_name="foo"), t)
    assert st.is_success and res == PreFilterResult(frozenset({"foo"}))
    res, st = plugin().pre_filter(CycleState(), pod_info("p"), t)
    assert st.is_success and not st.is_skip and res is None


def test_filter_batch() -> None:
    t = table_of(node("a"), node("b"), node("c"))
    rows = t.alive_rows()
    assert plugin().filter_batch(CycleState(), pod_info("p", node_name="b"), t, rows).passed().tolist() == [
        False, True, False]
    assert plugin().filter_batch(CycleState(), pod_info("p", node_name="zz"), t, rows).passed().tolist() == [
        False] * 3
    assert plugin().filter_batch(CycleState(), pod_info("p"), t, rows).passed().tolist() == [True] * 3
