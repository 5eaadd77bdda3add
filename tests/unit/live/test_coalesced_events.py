"""Object-kind events reach the queue once per event-loop turn (live/coalesced_events.py)."""

from __future__ import annotations

import asyncio

from kubesched.framework.objects import ObjectKind
from kubesched.framework.types import ActionType
from kubesched.live.coalesced_events import CoalescedEvents

CLAIM = ObjectKind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims")
SLICE = ObjectKind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", namespaced=False)


async def test_a_lists_events_fire_once_per_kind_and_action_at_the_next_turn() -> None:
    fired: list[tuple[str, ActionType]] = []
    events = CoalescedEvents(lambda kind, action: fired.append((kind.name, action)))
    for _ in range(5000):  # 5,000 claims listed in one go
        events.add(CLAIM, ActionType.ADD)
    events.add(SLICE, ActionType.ADD)
    events.add(CLAIM, ActionType.DELETE)
    assert fired == []  # nothing before the informer's turn ends
    await asyncio.sleep(0)
    assert fired == [("ResourceClaim", ActionType.ADD), ("ResourceSlice", ActionType.ADD),
                     ("ResourceClaim", ActionType.DELETE)]
    events.add(CLAIM, ActionType.ADD)  # a later event fires again
    await asyncio.sleep(0)
    assert fired[-1] == ("ResourceClaim", ActionType.ADD) and len(fired) == 4


async def test_nothing_fires_once_closed() -> None:
    fired: list[str] = []
    events = CoalescedEvents(lambda kind, action: fired.append(kind.name))
    events.add(CLAIM, ActionType.ADD)
    events.closed = True
    await asyncio.sleep(0)
    events.add(CLAIM, ActionType.ADD)
    await asyncio.sleep(0)
    assert fired == []


def test_without_a_running_loop_an_event_fires_at_once() -> None:
    fired: list[str] = []
    CoalescedEvents(lambda kind, action: fired.append(kind.name)).add(SLICE, ActionType.UPDATE)
    assert fired == ["ResourceSlice"]
