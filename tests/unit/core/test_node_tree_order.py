"""The order a scheduling cycle walks the nodes in: upstream's nodeTree.list()
(pkg/scheduler/backend/cache/node_tree.go, v1.37.1; zone key from component-helpers
node/topology GetZoneKey). Above 100 nodes the search stops after numFeasibleNodesToFind, so this
order decides which nodes are scored at all."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import BindPlugin, ScorePlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.snapshot.node_tree import NodeTree, zone_key
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows
from kubesched.testing import StaticProfile, node, pod_info

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def _names(table: NodeTable, rows: Rows) -> list[str]:
    return [table.names[int(r)] for r in rows]


def test_zone_key_is_upstreams() -> None:
    assert zone_key({}) == ""
    assert zone_key({ZONE: "a"}) == ":\x00:a"
    assert zone_key({REGION: "r", ZONE: "a"}) == "r:\x00:a"
    assert zone_key({ZONE: "a", BETA_ZONE: "old"}) == ":\x00:old"  # the deprecated label first
    assert zone_key({ZONE: ""}) == ""


def test_zones_are_interleaved_and_a_new_node_goes_to_the_end_of_its_zone() -> None:
    table = NodeTable()
    table.upsert_node(node("plain"))  # no zone label: zone key ""
    for z in "ab":
        for i in range(3):
            table.upsert_node(node(f"{z}{i}", labels={ZONE: z}))
    assert _names(table, table.search_rows()) == ["plain", "a0", "b0", "a1", "b1", "a2", "b2"]
    # a1's row is reused by the next node, which still goes last in its zone (upstream appends).
    table.remove_node("a1")
    table.upsert_node(node("a3", labels={ZONE: "a"}))
    assert _names(table, table.search_rows()) == ["plain", "a0", "b0", "a2", "b1", "a3", "b2"]
    # A zone emptied and seen again comes after the others.
    table.remove_node("plain")
    table.upsert_node(node("plain2"))
    assert _names(table, table.search_rows()) == ["a0", "b0", "plain2", "a2", "b1", "a3", "b2"]


def test_one_zone_in_row_order_is_the_alive_rows_array_itself() -> None:
    table = NodeTable()
    for i in range(5):
        table.upsert_node(node(f"n{i}", labels={ZONE: "a"}))
    assert table.search_rows() is table.alive_rows()


def test_a_zone_change_shows_from_the_next_node_added_or_removed() -> None:
    tree = NodeTree()
    for row, z in enumerate("aab"):
        tree.add_or_update(row, {ZONE: z})
    tree.add_or_update(0, {ZONE: "b"})  # to the end of zone b
    assert tree.rows().tolist() == [1, 2, 0]
    table = NodeTable()
    for i, z in enumerate("aab"):
        table.upsert_node(node(f"n{i}", labels={ZONE: z}))
    before = _names(table, table.search_rows())
    table.upsert_node(node("n0", labels={ZONE: "b"}))
    assert _names(table, table.search_rows()) == before  # cache.go rebuilds the list on add/remove only
    table.upsert_node(node("n3", labels={ZONE: "c"}))
    assert _names(table, table.search_rows()) == ["n1", "n2", "n3", "n0"]


class Scored(ScorePlugin):
    name: ClassVar[str] = "Scored"
    rows: ClassVar[list[int]] = []

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> np.ndarray:
        Scored.rows = rows.tolist()
        return np.zeros(len(rows), dtype=np.int64)


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


def test_a_sampled_search_scores_every_zone_as_upstream_does() -> None:
    """300 nodes added zone by zone (a dump sorted by name): numFeasibleNodesToFind is 144 (48 %), and
    upstream's first 144 nodes are 48 of each zone; walking the rows in table order scored zones
    a and b only, so a zone-spreading score could never pick zone c."""
    reg = builtin_registry()
    for cls in (Scored, Binder):
        reg.register(cls)
    profile = StaticProfile({"queueSort": ["PrioritySort"], "preFilter": ["NodeResourcesFit"],
                             "filter": ["NodeResourcesFit"], "score": ["Scored"], "bind": ["Binder"]})
    sched = Scheduler.build([profile], reg, FakeClock(), seed=1, eager_binding=True)
    for z in "abc":
        for i in range(100):
            sched.on_node_add_or_update(node(f"zone-{z}-{i:03}", labels={ZONE: z}))
    sched.on_pod_add(pod_info("p", cpu="100m"))
    assert sched.schedule_one()
    table = sched.cache.table
    assert Counter(table.labels[r][ZONE] for r in Scored.rows) == {"a": 48, "b": 48, "c": 48}

