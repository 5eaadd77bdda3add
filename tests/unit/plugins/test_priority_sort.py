"""PrioritySort: mirrors queuesort/priority_sort_test.go."""

from __future__ import annotations

from kubesched.framework.clock import FakeClock
from kubesched.framework.handle import Handle
from kubesched.framework.types import QueuedPodInfo
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.snapshot.table import NodeTable
from kubesched.testing import pod_info


def q(priority: int | None, ts: float) -> QueuedPodInfo:
    return QueuedPodInfo(pod=pod_info("p", priority=priority), timestamp=ts)


def test_less() -> None:
    pl = PrioritySort(None, Handle(NodeTable(), FakeClock(), WaitingPods()))
    cases = [
        # name, a, b, want
        ("p1.priority less than p2.priority", q(10, 1), q(100, 2), False),
        ("p1.priority greater than p2.priority", q(100, 1), q(10, 2), True),
        ("equal priority. p1 is added to schedulingQ earlier than p2", q(100, 1), q(100, 2), True),
        ("equal priority. p2 is added to schedulingQ earlier than p1", q(100, 2), q(100, 1), False),
        ("no priority counts as 0", q(None, 1), q(1, 0), False),
        ("equal timestamps are not less", q(5, 1), q(5, 1), False),
    ]
    for name, a, b, want in cases:
        assert pl.less(a, b) is want, name
    assert pl.name == "PrioritySort"
    assert tuple(pl.events_to_register()) == ()
