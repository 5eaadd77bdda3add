"""The scheduler cache: assumed pods and the cluster events it reports (backend/cache.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.backend.cache import SchedulerCache, node_update_action
from kubesched.framework.types import NODE, POD, ActionType
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod


def cpu(cache: SchedulerCache, name: str) -> int:
    row = cache.table.row_of(name)
    assert row is not None
    return int(cache.table.requested[row, 0])


def bound(raw: dict[str, Any], node_name: str, **meta: Any) -> PodInfo:
    out = copy.deepcopy(raw)
    out["spec"]["nodeName"] = node_name
    out["metadata"].update(meta)
    return PodInfo.from_raw(out)


def test_assume_then_forget_frees_the_node() -> None:
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    p = PodInfo.from_raw(pod("p", cpu="1"))
    assumed = c.assume(p, "a")
    assert assumed.node_name == "a" and p.node_name == ""
    assert c.is_assumed(p.uid) and cpu(c, "a") == 1000
    c.forget(p.uid)
    assert not c.is_assumed(p.uid) and cpu(c, "a") == 0
    c.forget(p.uid)  # idempotent
    assert cpu(c, "a") == 0


def test_informer_confirmation_replaces_the_assumption_without_double_counting() -> None:
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    raw = pod("p", cpu="1")
    c.assume(PodInfo.from_raw(raw), "a")
    event = c.add_or_update_pod(bound(raw, "a"))
    assert event is None  # nothing changed from what was assumed
    assert not c.is_assumed(PodInfo.from_raw(raw).uid)
    assert cpu(c, "a") == 1000
    c.forget(PodInfo.from_raw(raw).uid)  # a late forget must not drop a confirmed pod
    assert cpu(c, "a") == 1000


def test_confirming_a_bind_with_the_assumed_object_itself_changes_nothing() -> None:
    """The simulator's bind hands the assumed copy back as the bound pod."""
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    seen: list[tuple[str, int]] = []
    c.table.add_pod_observer(lambda row, p, sign: seen.append((p.uid, sign)))
    assumed = c.assume(PodInfo.from_raw(pod("p", cpu="1")), "a")
    assert c.add_or_update_pod(assumed) is None
    assert not c.is_assumed(assumed.uid) and c.table.pod(assumed.uid) is assumed
    assert cpu(c, "a") == 1000 and seen == [(assumed.uid, 1)]


def test_pod_events() -> None:
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    raw = pod("p", cpu="1", labels={"app": "x"})
    assert c.add_or_update_pod(PodInfo.from_raw(raw)) is None  # unassigned: not the cache's business
    ev = c.add_or_update_pod(bound(raw, "a"))
    assert ev is not None and (ev.resource, ev.action, ev.label) == (POD, ActionType.ADD, "AssignedPodAdd")
    assert c.add_or_update_pod(bound(raw, "a")) is None
    ev = c.add_or_update_pod(bound(raw, "a", labels={"app": "y"}))
    assert ev is not None and ev.action == ActionType.UPDATE_POD_LABEL
    smaller = copy.deepcopy(raw)
    smaller["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    ev = c.add_or_update_pod(bound(smaller, "a", labels={"app": "y"}))
    assert ev is not None and ev.action == ActionType.UPDATE_POD_SCALE_DOWN
    assert cpu(c, "a") == 500
    ev = c.remove_pod(PodInfo.from_raw(raw).uid)
    assert ev is not None and (ev.resource, ev.action) == (POD, ActionType.DELETE)
    assert cpu(c, "a") == 0
    assert c.remove_pod(PodInfo.from_raw(raw).uid) is None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pod_releases_its_resources(phase: str) -> None:
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    raw = pod("p", cpu="1")
    c.add_or_update_pod(bound(raw, "a"))
    done = copy.deepcopy(raw)
    done["spec"]["nodeName"] = "a"
    done["status"] = {"phase": phase}
    ev = c.add_or_update_pod(PodInfo.from_raw(done))
    assert ev is not None and ev.action == ActionType.DELETE
    assert cpu(c, "a") == 0


def test_node_events() -> None:
    c = SchedulerCache()
    ev = c.add_or_update_node(node("a", cpu="4"))
    assert ev is not None and (ev.resource, ev.action, ev.label) == (NODE, ActionType.ADD, "NodeAdd")
    assert c.add_or_update_node(node("a", cpu="4")) is None
    ev = c.add_or_update_node(node("a", cpu="8"))
    assert ev is not None and ev.action == ActionType.UPDATE_NODE_ALLOCATABLE
    assert c.table.allocatable[c.table.row_of("a"), 0] == 8000
    ev = c.remove_node("a")
    assert ev is not None and ev.action == ActionType.DELETE
    assert c.remove_node("a") is None


def test_node_update_action_flags() -> None:
    base = node("a")
    assert node_update_action(base, copy.deepcopy(base)) == ActionType(0)
    assert node_update_action(base, node("a", labels={"x": "y"})) == ActionType.UPDATE_NODE_LABEL
    assert node_update_action(base, node("a", unschedulable=True)) == ActionType.UPDATE_NODE_TAINT
    assert node_update_action(base, node("a", taints=[{"key": "k", "effect": "NoSchedule"}])) == (
        ActionType.UPDATE_NODE_TAINT
    )
    both = node_update_action(base, node("a", cpu="8", labels={"x": "y"}))
    assert both == ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_LABEL

    ready = copy.deepcopy(base)
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}]
    heartbeat = copy.deepcopy(ready)
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "t2"
    assert node_update_action(ready, heartbeat) == ActionType(0)
    not_ready = copy.deepcopy(ready)
    not_ready["status"]["conditions"][0]["status"] = "False"
    assert node_update_action(ready, not_ready) == ActionType.UPDATE_NODE_CONDITION

    annotated = copy.deepcopy(base)
    annotated["metadata"]["annotations"] = {"a": "b"}
    assert node_update_action(base, annotated) == ActionType.UPDATE_NODE_ANNOTATION


def test_assumed_pod_on_removed_node_comes_back_with_the_node() -> None:
    c = SchedulerCache()
    c.add_or_update_node(node("a"))
    p = PodInfo.from_raw(pod("p", cpu="1"))
    c.assume(p, "a")
    c.remove_node("a")
    c.add_or_update_node(node("a"))
    assert cpu(c, "a") == 1000
    c.forget(p.uid)
    assert cpu(c, "a") == 0
