"""The ResourceSlice index (slice_index.py): kept in step with the shell's slices (added, replaced
by an update, deleted), by node, for several nodes, by pool; DeviceTaintRules' taints applied and
re-applied when the rules change; and the allocator's answers the same through it."""

from __future__ import annotations

import copy
from typing import Any

from kubesched.plugins.dynamicresources.pools import NodeRef, gather_pools
from kubesched.plugins.dynamicresources.slice_index import SliceIndex
from unit.plugins.dynamicresources.test_allocator import DRIVER_A, device, slice_


def names(slices: list[dict[str, Any]]) -> list[str]:
    return sorted(s["metadata"]["name"] for s in slices)


def test_sync_follows_adds_updates_and_deletes() -> None:
    shell = {"a": slice_("a", "node-1", "pool-1", DRIVER_A), "b": slice_("b", "node-2", "pool-2", DRIVER_A),
             "net": slice_("net", None, "pool-net", DRIVER_A)}
    index = SliceIndex()
    index.sync(shell)
    assert names(index.for_node("node-1")) == ["a", "net"]
    assert names(index.for_node("node-3")) == ["net"]
    # an update replaces the object: the slice moves to another node
    moved = copy.deepcopy(shell["b"])
    moved["spec"]["nodeName"] = "node-1"
    moved["metadata"]["resourceVersion"] = "2"
    shell["b"] = moved
    del shell["net"]
    index.sync(shell)
    assert names(index.for_node("node-1")) == ["a", "b"]
    assert index.for_node("node-2") == [] and "node-2" not in index.by_node
    assert names(index.of_pool((DRIVER_A, "pool-2"))) == ["b"] and (DRIVER_A, "pool-net") not in index.by_pool


def test_taint_rules_are_applied_and_reapplied_when_they_change() -> None:
    shell = {"a": slice_("a", "node-1", "pool-1", DRIVER_A, device("device-1"))}
    rule = {"metadata": {"name": "r", "resourceVersion": "1"},
            "spec": {"deviceSelector": {"driver": DRIVER_A}, "taint": {"key": "k", "effect": "NoSchedule"}}}
    index = SliceIndex()
    index.sync(shell, [rule])
    (s,) = index.for_node("node-1")
    assert s["spec"]["devices"][0]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert "taints" not in shell["a"]["spec"]["devices"][0]  # the shell's object is not changed
    index.sync(shell, [])
    (s,) = index.for_node("node-1")
    assert "taints" not in s["spec"]["devices"][0]


def test_gather_pools_finds_the_same_pools_through_the_index() -> None:
    slices = [slice_("a-1", "node-1", "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("a-2", None, "pool-1", DRIVER_A, device("device-2"), count=2),
              slice_("b", "node-2", "pool-2", DRIVER_A),
              slice_("old", "node-1", "pool-3", DRIVER_A, generation=1, count=2),
              slice_("new", "node-2", "pool-3", DRIVER_A, generation=2)]
    pools = gather_pools(SliceIndex.of(slices), NodeRef("node-1"))
    # pool-1: both slices target node-1 (one by name, one for all nodes); pool-3: generation 1 (half
    # published) is obsolete, generation 2 is for node-2
    assert [(p.pool, names(p.slices), p.incomplete) for p in pools] == [("pool-1", ["a-1", "a-2"], False)]


def test_a_nodes_pools_follow_its_slices_changes() -> None:
    """The pools of a node are kept between pods, and dropped as soon as any slice changes."""
    shell = {"a": slice_("a", "node-1", "pool-1", DRIVER_A, device("device-1"))}
    index = SliceIndex()
    index.sync(shell)
    first = gather_pools(index, NodeRef("node-1"))
    assert gather_pools(index, NodeRef("node-1")) is first  # same slices: the same pools, not rebuilt
    assert [c.id for c in first[0].candidates()] == [(DRIVER_A, "pool-1", "device-1")]
    grown = copy.deepcopy(shell["a"])
    grown["spec"]["devices"].append(device("device-2"))
    grown["metadata"]["resourceVersion"] = "2"
    index.sync({"a": grown})
    (pool,) = gather_pools(index, NodeRef("node-1"))
    assert [c.id[2] for c in pool.candidates()] == ["device-1", "device-2"]
    index.sync({"a": grown, "b": slice_("b", "node-1", "pool-2", DRIVER_A)})
    assert [p.pool for p in gather_pools(index, NodeRef("node-1"))] == ["pool-1", "pool-2"]
    index.sync({})
    assert gather_pools(index, NodeRef("node-1")) == []
