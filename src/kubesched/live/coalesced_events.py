"""Cluster events of declared object kinds, handed to the queue once per event-loop turn.

An informer applies a list (or a burst of watch events read together) one object at a time, and
each object's handler is a cluster event for the queue: every unschedulable pod a plugin rejected
is looked at, and every pod a PreEnqueue plugin holds runs its PreEnqueue again. A backlog of
2,500 pods waiting for their ResourceClaims while the 5,000 claims are listed was 12.5 million
PreEnqueue runs: the event loop stalled for six minutes before the first bind (scheduler_perf's
SchedulingWithResourceClaimTemplate at full size, issue 27). The same events once per turn move the
same pods: no scheduling cycle runs between two objects of one list, so the queue sees the same
store after the last object as it would have seen after each (kube-scheduler's queue looks at each
event's object through queueing hints instead; kubesched's has none).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubesched.framework.objects import ObjectKind
from kubesched.framework.types import ActionType


class CoalescedEvents:
    """``add(kind, action)`` now; ``fire(kind, action)`` once per distinct pair at the next turn of
    the running loop (at once when no loop runs), in the order the pairs first came."""

    def __init__(self, fire: Callable[[ObjectKind, ActionType], None]) -> None:
        self._fire = fire
        self._pending: dict[tuple[str, ActionType], ObjectKind] = {}
        self.closed = False

    def add(self, kind: ObjectKind, action: ActionType) -> None:
        if self.closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._fire(kind, action)
            return
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.setdefault((kind.name, action), kind)

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        if self.closed:
            return
        for (_, action), kind in pending.items():
            self._fire(kind, action)
