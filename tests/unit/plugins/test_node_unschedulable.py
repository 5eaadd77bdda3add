"""NodeUnschedulable: mirrors nodeunschedulable/node_unschedulable_test.go."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.node_unschedulable import NodeUnschedulable
from kubesched.snapshot.table import NodeInfo, NodeTable
from kubesched.testing import node, pod_info, table_of

TOL = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def plugin() -> NodeUnschedulable:
    return NodeUnschedulable(None, Handle(NodeTable(), FakeClock(), WaitingPods()))


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "want_reject"),
    [
        (True, [], True),
        (False, [], False),
        (True, [TOL], False),
        (True, [{"operator": "Exists"}], False),  # empty key + Exists tolerates everything
        (True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}], True),
    ],
)
def test_filter(unschedulable: bool, tolerations: list[dict[str, Any]], want_reject: bool) -> None:
    t = table_of(node("n", unschedulable=unschedulable))
    p = pod_info("p", tolerations=tolerations)
    st = plugin().filter(CycleState(), p, NodeInfo(t, 0))
    if want_reject:
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == ("node(s) were unschedulable",)
    else:
        assert st.is_success


def test_filter_batch() -> None:
    t = table_of(node("a"), node("b", unschedulable=True), node("c"), node("d", unschedulable=True))
    rows = t.alive_rows()
    v = plugin().filter_batch(CycleState(), pod_info("p"), t, rows)
    assert v.passed().tolist() == [True, False, True, False]
    assert v.statuses[0].reasons == ("node(s) were unschedulable",)
    v = plugin().filter_batch(CycleState(), pod_info("p", tolerations=[TOL]), t, rows)
    assert v.passed().tolist() == [True] * 4
    assert plugin().filter_batch(CycleState(), pod_info("p"), t, np.array([], dtype=np.intp)).codes.size == 0
