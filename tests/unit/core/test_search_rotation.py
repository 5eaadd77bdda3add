"""findNodesThatPassFilters (pkg/scheduler/schedule_one.go, v1.37.1) for profiles that choose
nothing: without Score plugins (and kubesched runs no extenders) numNodesToFind is 1, so each pod
takes the first feasible node from nextStartNodeIndex and the rotation moves past it; without Filter
plugins the nodes from the start index are taken as they are and the index moves past them."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import BindPlugin, FilterPlugin, ScorePlugin
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import Verdicts
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows
from kubesched.testing import StaticProfile, node, pod_info


class AllButOdd(FilterPlugin):
    """Rejects nodes n1, n3, n5, ... so "the first feasible node" is not merely the next row."""

    name: ClassVar[str] = "AllButOdd"

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        ok = np.array([int(table.names[r][1:]) % 2 == 0 for r in rows], dtype=bool)
        return Verdicts.from_mask(ok, Status.unschedulable("odd node"))


class Flat(ScorePlugin):
    name: ClassVar[str] = "Flat"

    def score(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[int, Status]:
        return 0, SUCCESS


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


def _placements(points: dict[str, Any], pods: int = 3) -> tuple[list[tuple[str, str]], int]:
    reg = Registry()
    for cls in (AllButOdd, Flat, Binder, PrioritySort):
        reg.register(cls)
    sched = Scheduler.build([StaticProfile({"queueSort": ["PrioritySort"], "bind": ["Binder"], **points})], reg,
                            FakeClock(), seed=1, eager_binding=True)
    for i in range(10):
        sched.on_node_add_or_update(node(f"n{i}"))
    for i in range(pods):
        sched.on_pod_add(pod_info(f"p{i}", cpu="100m"))
    while sched.schedule_one():
        pass
    placed = sorted((p.name, p.node_name) for p in sched.cache.table.all_pods())
    return placed, sched._feasible_nodes.next_start_node_index


def test_without_score_plugins_each_pod_takes_the_first_feasible_node() -> None:
    placed, start = _placements({"filter": ["AllButOdd"]})
    assert placed == [("p0", "n0"), ("p1", "n2"), ("p2", "n4")]
    assert start == 5  # moved past the nodes evaluated: n0 | n1 n2 | n3 n4


def test_with_a_score_plugin_every_feasible_node_is_a_candidate() -> None:
    placed, start = _placements({"filter": ["AllButOdd"], "score": ["Flat"]})
    assert len({n for _, n in placed}) >= 1 and all(int(n[1:]) % 2 == 0 for _, n in placed)
    assert start == 0  # every one of the 10 nodes evaluated each time: back where it began


def test_without_filter_plugins_the_nodes_from_the_start_are_taken_and_the_index_moves_past_them() -> None:
    # schedule_one_test.go: nextStartNodeIndex (i+1)*nodesToFind % numAllNodes.
    placed, start = _placements({}, pods=2)
    assert placed == [("p0", "n0"), ("p1", "n1")]
    assert start == 2


def test_a_rejected_nomination_counts_among_the_nodes_processed() -> None:
    """evaluateNominatedNode records the nominated node's rejection in the Diagnosis the search
    then fills: a search that stops before reaching that node still counts it (processedNodes =
    feasible + NodeToStatus.Len()), so nextStartNodeIndex moves one further, and the node is in
    the pod's diagnosis."""
    from kubesched.plugins.builtin import builtin_registry
    from kubesched.testing import pod

    reg = builtin_registry()
    reg.register(Binder)
    profile = StaticProfile({"queueSort": ["PrioritySort"], "preFilter": ["NodeResourcesFit"],
                             "filter": ["NodeResourcesFit"], "score": ["NodeResourcesBalancedAllocation"],
                             "bind": ["Binder"]})
    sched = Scheduler.build([profile], reg, FakeClock(), seed=1, eager_binding=True)
    for i in range(200):  # numFeasibleNodesToFind: 100
        sched.on_node_add_or_update(node(f"n{i:03}", cpu="1"))
    sched.on_pod_add(PodInfo.from_raw(pod("filler", cpu="1", node_name="n150")))
    raw = pod("preemptor", cpu="500m")
    raw["status"] = {"nominatedNodeName": "n150"}  # still full: its victims have not gone yet
    sched.on_pod_add(PodInfo.from_raw(raw))
    assert sched.schedule_one()
    placed = {p.name: p.node_name for p in sched.cache.table.all_pods()}
    assert placed["preemptor"] != "n150"
    assert sched._feasible_nodes.next_start_node_index == 101  # 100 feasible found + n150
