"""The scheduling queue (backend/queue.py): active/backoff/unschedulable/gated in virtual time."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.framework.clock import FakeClock
from kubesched.framework.status import Status
from kubesched.framework.types import (
    EVENT_NODE_ADD,
    EVENT_POD_DELETE,
    NODE,
    ActionType,
    ClusterEvent,
    QueuedPodInfo,
)
from kubesched.plugins.schedulinggates import SchedulingGates
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, pod_info


def by_priority(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """QueueSort: higher priority first, then earlier timestamp."""
    if a.pod.priority != b.pod.priority:
        return a.pod.priority > b.pod.priority
    return a.timestamp < b.timestamp


PLUGIN_EVENTS = {
    "NodeFit": [ClusterEvent(NODE, ActionType.ADD)],
    "PodAware": [EVENT_POD_DELETE],
    "Deaf": [],
    "SchedulingGates": [],
}
GATES = new_plugin(SchedulingGates)


def scheduling_gates(pod: PodInfo, first: str) -> Status:
    """The PreEnqueue check of a profile whose only PreEnqueue plugin is SchedulingGates."""
    return GATES.pre_enqueue(pod).with_plugin("SchedulingGates")


def make(clock: FakeClock | None = None, **kw: Any) -> tuple[SchedulingQueue, FakeClock]:
    clock = clock or FakeClock(1000.0)
    kw.setdefault("plugin_events", PLUGIN_EVENTS)
    kw.setdefault("pre_enqueue", scheduling_gates)
    kw.setdefault("gating_plugins", ("SchedulingGates",))
    return SchedulingQueue(by_priority, clock, **kw), clock


def pop_names(q: SchedulingQueue) -> list[str]:
    out = []
    while (qpi := q.pop()) is not None:
        out.append(qpi.pod.name)
    return out


def fail(q: SchedulingQueue, qpi: QueuedPodInfo, *plugins: str, error: bool = False) -> None:
    """What the scheduler does with a failed attempt popped in the current cycle."""
    qpi.unschedulable_plugins = set(plugins)
    qpi.failed_with_error = error
    q.add_unschedulable(qpi, q.scheduling_cycle)


def attempt_and_fail(q: SchedulingQueue, *plugins: str) -> QueuedPodInfo:
    qpi = q.pop()
    assert qpi is not None
    fail(q, qpi, *plugins)
    return qpi


# ---------------------------------------------------------------------------------------------
# Ordering
# ---------------------------------------------------------------------------------------------


def test_pop_order_is_priority_then_timestamp() -> None:
    q, clock = make()
    q.add(pod_info("old-low", priority=1))
    clock.advance(1)
    q.add(pod_info("high", priority=100))
    clock.advance(1)
    q.add(pod_info("new-low", priority=1))
    clock.advance(1)
    q.add(pod_info("mid", priority=50))
    assert pop_names(q) == ["high", "mid", "old-low", "new-low"]
    assert q.pop() is None


def test_pop_counts_attempts_and_scheduling_cycles() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    clock.advance(5)
    qpi = q.pop()
    assert qpi is not None and qpi.attempts == 1 and q.scheduling_cycle == 1
    assert qpi.initial_attempt_timestamp == clock.now()
    fail(q, qpi, error=True)
    clock.advance(1)
    q.flush(clock.now())
    qpi2 = q.pop()
    assert qpi2 is qpi and qpi.attempts == 2 and q.scheduling_cycle == 2
    assert qpi.initial_attempt_timestamp == 1005.0  # the first attempt, not this one


def test_many_pods_pop_in_sort_order() -> None:
    q, clock = make()
    prios = [7, 3, 9, 3, 1, 9, 5, 0, 8, 2]
    for i, pr in enumerate(prios):
        q.add(pod_info(f"p{i}", priority=pr))
        clock.advance(1)
    popped = []
    while (qpi := q.pop()) is not None:
        popped.append((qpi.pod.priority, qpi.timestamp))
    assert popped == sorted(popped, key=lambda t: (-t[0], t[1]))
    assert len(popped) == len(prios)


# ---------------------------------------------------------------------------------------------
# Backoff
# ---------------------------------------------------------------------------------------------


def test_backoff_durations_double_and_cap() -> None:
    q, _ = make()
    assert [q.backoff_duration(a) for a in range(0, 8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    q2, _ = make(initial_backoff_seconds=0.5, max_backoff_seconds=3.0)
    assert [q2.backoff_duration(a) for a in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize(("attempts", "wait"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (6, 10.0)])
def test_errored_pod_waits_its_backoff_in_virtual_time(attempts: int, wait: float) -> None:
    q, clock = make()
    q.add(pod_info("p"))
    for _ in range(attempts):
        qpi = q.pop()
        assert qpi is not None
        fail(q, qpi, error=True)
        assert q.counts()["backoff"] == 1
        if qpi.attempts < attempts:
            clock.advance(q.backoff_duration(qpi.attempts))
            q.flush(clock.now())
    assert q.next_wakeup() == pytest.approx(clock.now() + wait)
    clock.advance(wait - 0.01)
    q.flush(clock.now())
    assert q.pop() is None
    clock.advance(0.01)
    q.flush(clock.now())
    qpi = q.pop()
    assert qpi is not None and qpi.attempts == attempts + 1


def test_pod_without_rejecting_plugins_backs_off() -> None:
    q, _ = make()
    q.add(pod_info("p"))
    attempt_and_fail(q)  # e.g. "no nodes available": nothing to wait for
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


def test_error_backs_off_even_with_rejecting_plugins() -> None:
    q, _ = make()
    q.add(pod_info("p"))
    qpi = q.pop()
    assert qpi is not None
    fail(q, qpi, "NodeFit", error=True)
    assert q.counts()["backoff"] == 1


def test_requeue_after_error_backs_off() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    qpi = q.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeFit"}
    q.requeue_after_error(qpi)
    assert q.counts()["backoff"] == 1
    assert q.next_wakeup() == clock.now() + 1.0


# ---------------------------------------------------------------------------------------------
# Unschedulable pods and cluster events
# ---------------------------------------------------------------------------------------------


def test_rejected_pod_waits_for_an_event_its_plugin_registered() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    attempt_and_fail(q, "NodeFit")
    assert q.counts()["unschedulable"] == 1
    clock.advance(30)
    q.flush(clock.now())
    assert q.pop() is None, "backoff expiry alone does not retry an unschedulable pod"

    assert q.move_all_to_active_or_backoff(EVENT_POD_DELETE) == 0
    assert q.counts()["unschedulable"] == 1

    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD) == 1
    # The 1 s backoff has long expired: straight to active.
    qpi = q.pop()
    assert qpi is not None and qpi.pod.name == "p"


def test_event_moves_to_backoff_when_the_backoff_has_not_expired() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    attempt_and_fail(q, "NodeFit")
    clock.advance(0.5)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD)
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}
    assert q.pop() is None
    assert q.next_wakeup() == pytest.approx(clock.now() + 0.5)
    clock.advance(0.5)
    q.flush(clock.now())
    assert q.pop() is not None


def test_only_pods_whose_plugins_care_are_moved() -> None:
    q, clock = make()
    for name in ("node-fit", "pod-aware", "deaf", "unknown"):
        q.add(pod_info(name))
        clock.advance(1)
    for plugin in ("NodeFit", "PodAware", "Deaf", "NotRegistered"):
        attempt_and_fail(q, plugin)
    assert q.counts()["unschedulable"] == 4
    clock.advance(20)
    # The plugin that registered nothing (Deaf) never gets an event; an unknown plugin gets all.
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD) == 2
    assert sorted(pop_names(q)) == ["node-fit", "unknown"]
    assert q.move_all_to_active_or_backoff(EVENT_POD_DELETE) == 1
    assert pop_names(q) == ["pod-aware"]
    assert [p.pod.name for p in q.unschedulable_pods()] == ["deaf"]


def test_pod_rejected_by_two_plugins_moves_on_either_plugins_event() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    attempt_and_fail(q, "Deaf", "PodAware")
    clock.advance(20)
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD) == 0
    assert q.move_all_to_active_or_backoff(EVENT_POD_DELETE) == 1


def test_event_action_must_match_not_just_resource() -> None:
    q, clock = make()
    q.add(pod_info("p"))
    attempt_and_fail(q, "NodeFit")
    clock.advance(20)
    assert q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL, "NodeUpdate")) == 0
    assert q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.DELETE, "NodeDelete")) == 0
    assert q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.ADD | ActionType.DELETE)) == 1


def test_max_unschedulable_stay_flushes_the_pod() -> None:
    q, clock = make(max_unschedulable_seconds=300.0)
    q.add(pod_info("p"))
    attempt_and_fail(q, "Deaf")
    failed_at = clock.now()
    assert q.next_wakeup() == failed_at + 300.0
    assert q.next_wakeup(include_unschedulable=False) is None
    clock.advance(299)
    q.flush(clock.now())
    assert q.counts()["unschedulable"] == 1
    clock.advance(1)
    q.flush(clock.now())
    assert q.counts()["unschedulable"] == 0
    qpi = q.pop()
    assert qpi is not None and qpi.pod.name == "p"


class RewindableClock(FakeClock):
    """A clock that can go back (FakeClock refuses to): a custom clock might."""

    def rewind(self, seconds: float) -> None:
        self._now -= seconds


@pytest.mark.parametrize("clock_goes_back", [False, True])
def test_flush_moves_exactly_the_pods_unschedulable_long_enough(clock_goes_back: bool) -> None:
    """Pods failing one a minute: a flush moves those that failed 5 minutes ago or more, and
    next_wakeup names the oldest left's time; the same when the clock went back in between (the
    unschedulable pods are then no longer in the order of their times)."""
    clock = RewindableClock(1000.0)
    q, _ = make(clock, max_unschedulable_seconds=300.0)
    failed_at = {}
    for i in range(6):
        q.add(pod_info(f"p{i}"))
        qpi = attempt_and_fail(q, "Deaf")
        failed_at[qpi.pod.name] = clock.now()
        if clock_goes_back and i == 2:
            clock.rewind(200)  # p3 fails at 920, before p0
        else:
            clock.advance(60)
    assert q.next_wakeup() == min(failed_at.values()) + 300.0
    clock.set(max(clock.now(), 1350.0))
    now = clock.now()
    q.flush(now)
    due = {n for n, t in failed_at.items() if now - t >= 300}
    assert due == ({"p0", "p3", "p4", "p5"} if clock_goes_back else {"p0", "p1"})
    assert q.counts()["unschedulable"] == 6 - len(due)
    assert set(pop_names(q)) == due
    assert q.next_wakeup() == min(t for n, t in failed_at.items() if n not in due) + 300.0


# ---------------------------------------------------------------------------------------------
# Events received while a pod is in flight (inFlightEvents)
# ---------------------------------------------------------------------------------------------


def test_event_during_the_attempt_sends_the_failed_pod_to_backoff() -> None:
    q, _ = make()
    q.add(pod_info("p"))
    qpi = q.pop()
    assert qpi is not None
    cycle = q.scheduling_cycle
    # An event NodeFit registered arrives while the pod is being scheduled (in flight).
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD)
    qpi.unschedulable_plugins = {"NodeFit"}
    q.add_unschedulable(qpi, cycle)
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


def test_an_event_the_rejecting_plugin_did_not_register_does_not_count_during_the_attempt() -> None:
    """v1.37 (determineSchedulingHintForInFlightPod): only the in-flight events a rejecting plugin
    registered send the pod to backoff; the old moveRequestCycle counted any event."""
    q, _ = make()
    q.add(pod_info("p"))
    qpi = q.pop()
    assert qpi is not None
    cycle = q.scheduling_cycle
    q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.UPDATE_NODE_ANNOTATION, "NodeUpdate"))
    qpi.unschedulable_plugins = {"NodeFit"}
    q.add_unschedulable(qpi, cycle)
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
    # The events kept for pods in flight go once none is.
    assert q._in_flight_events == [] and q._in_flight == {}


def test_event_before_the_attempt_does_not_count() -> None:
    q, _ = make()
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD)
    q.add(pod_info("p"))
    attempt_and_fail(q, "NodeFit")
    assert q.counts()["unschedulable"] == 1


def test_event_during_a_later_pods_attempt_does_not_affect_an_earlier_failure() -> None:
    q, _ = make()
    q.add(pod_info("a"))
    q.add(pod_info("b"))
    a = q.pop()
    assert a is not None
    a_cycle = q.scheduling_cycle
    b = q.pop()
    assert b is not None
    # a failed in cycle 1 but is reported after b was popped; an event in cycle 2 still counts
    # for a (it was still in flight).
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD)
    a.unschedulable_plugins = {"NodeFit"}
    q.add_unschedulable(a, a_cycle)
    assert q.counts()["backoff"] == 1


# ---------------------------------------------------------------------------------------------
# Updates and deletes
# ---------------------------------------------------------------------------------------------


def test_delete_removes_a_pod_from_every_queue() -> None:
    q, clock = make()
    active, backoff, unsched, gated = (pod_info(n) for n in ("active", "backoff", "unsched", "gated"))
    gated.raw["spec"]["schedulingGates"] = [{"name": "g"}]
    q.add(backoff)
    q.add(unsched)
    clock.advance(1)
    q.add(active)
    q.add(gated)
    popped = {qpi.pod.name: qpi for qpi in (q.pop(), q.pop()) if qpi is not None}
    assert set(popped) == {"backoff", "unsched"}
    fail(q, popped["backoff"], error=True)
    fail(q, popped["unsched"], "NodeFit")
    assert q.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "gated": 1}
    for p in (active, backoff, unsched, gated):
        assert p.uid in q
        q.delete(p.uid)
        assert p.uid not in q
    assert len(q) == 0
    clock.advance(100)
    q.flush(clock.now())
    assert q.pop() is None
    assert q.next_wakeup() is None


def test_update_of_an_active_pod_replaces_it_without_duplicating() -> None:
    q, _ = make()
    p = pod_info("p", labels={"v": "1"})
    q.add(p)
    newer = PodInfo.from_raw({**p.raw, "metadata": {**p.raw["metadata"], "labels": {"v": "2"}}})
    q.update(newer)
    assert len(q) == 1
    qpi = q.pop()
    assert qpi is not None and qpi.pod.labels == {"v": "2"}
    assert q.pop() is None


def test_add_of_a_queued_pod_is_an_update() -> None:
    q, _ = make()
    p = pod_info("p")
    q.add(p)
    q.add(p)
    assert len(q) == 1
    assert pop_names(q) == ["p"]


def test_update_of_an_unschedulable_pod_gives_it_another_chance() -> None:
    q, clock = make()
    p = pod_info("p")
    q.add(p)
    attempt_and_fail(q, "Deaf")
    clock.advance(5)
    q.update(p)
    qpi = q.pop()
    assert qpi is not None and qpi.pod is p


def test_update_of_a_backoff_pod_keeps_its_backoff() -> None:
    q, clock = make()
    p = pod_info("p")
    q.add(p)
    attempt_and_fail(q)
    newer = PodInfo.from_raw(p.raw)
    q.update(newer)
    assert q.counts()["backoff"] == 1
    clock.advance(1)
    q.flush(clock.now())
    qpi = q.pop()
    assert qpi is not None and qpi.pod is newer


def test_update_of_an_unqueued_pod_adds_it() -> None:
    q, _ = make()
    q.update(pod_info("p"))
    assert pop_names(q) == ["p"]


def by_rank_label(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """A QueueSort keyed on a mutable field (a label), as custom sorts may be."""
    return int(a.pod.labels["rank"]) < int(b.pod.labels["rank"])


def _ranked(name: str, rank: int, uid: str | None = None) -> PodInfo:
    p = pod_info(name, labels={"rank": str(rank)})
    if uid is not None:
        p.uid = uid
    return p


def test_updating_the_sort_key_of_an_active_pod_keeps_pop_order() -> None:
    q = SchedulingQueue(by_rank_label, FakeClock())
    a = _ranked("a", 10)
    for p in (_ranked("x", 0), a, _ranked("y", 30), _ranked("b", 20)):
        q.add(p)
    q.update(_ranked("a", 99, uid=a.uid))  # a sinks to the back of the queue
    assert pop_names(q) == ["x", "b", "y", "a"]


# ---------------------------------------------------------------------------------------------
# Scheduling gates
# ---------------------------------------------------------------------------------------------


def test_gated_pod_waits_until_its_gates_are_removed() -> None:
    q, _ = make()
    raw = pod_info("g").raw
    raw["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    gated = PodInfo.from_raw(raw)
    q.add(gated)
    assert q.counts()["gated"] == 1
    assert q.pop() is None
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD)
    assert q.pop() is None, "cluster events do not release gated pods"
    # Still gated after an update that keeps a gate.
    raw2 = {**raw, "spec": {**raw["spec"], "schedulingGates": [{"name": "other"}]}}
    q.update(PodInfo.from_raw(raw2))
    assert q.pop() is None
    raw3 = {**raw, "spec": {k: v for k, v in raw["spec"].items() if k != "schedulingGates"}}
    q.update(PodInfo.from_raw(raw3))
    assert q.counts()["gated"] == 0
    qpi = q.pop()
    assert qpi is not None and qpi.pod.name == "g" and not qpi.gated and qpi.attempts == 1


# ---------------------------------------------------------------------------------------------
# activate / next_wakeup
# ---------------------------------------------------------------------------------------------


def test_activate_moves_backoff_and_unschedulable_pods_now() -> None:
    q, clock = make()
    b, u = pod_info("b"), pod_info("u")
    q.add(b)
    clock.advance(1)
    q.add(u)
    attempt_and_fail(q)
    attempt_and_fail(q, "Deaf")
    q.activate([b.uid, u.uid, "missing"])
    assert q.counts() == {"active": 2, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert pop_names(q) == ["b", "u"]
    assert q.next_wakeup() is None


def test_next_wakeup_is_the_earliest_backoff_expiry() -> None:
    q, clock = make()
    assert q.next_wakeup() is None
    a, b = pod_info("a"), pod_info("b")
    q.add(a)
    q.add(b)
    qa = q.pop()
    assert qa is not None
    fail(q, qa, error=True)  # expires at +1
    clock.advance(0.25)
    qb = q.pop()
    assert qb is not None
    qb.attempts = 3
    fail(q, qb, error=True)  # expires at +0.25 + 4
    assert q.next_wakeup() == 1001.0
    q.delete(qa.pod.uid)
    assert q.next_wakeup() == 1004.25
