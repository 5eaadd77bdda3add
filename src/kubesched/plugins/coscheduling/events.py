"""Events on PodGroups: why a gang is not placed, and when it is.

kube-scheduler explains a pod it cannot place with a ``FailedScheduling`` Event on the pod; a gang
fails as a whole, so the gang-level reason goes on the PodGroup (``kubectl describe podgroup``):

* Warning ``FailedScheduling``, e.g. ``2/5 members could not be placed: Insufficient cpu``, when
  the gang is refused (gang-fit check, PostFilter, a Permit timeout or rejection);
* Normal ``Scheduled``, ``minMember 5 reached: 5 member(s) placed``, when the gang is admitted.

scheduler-plugins writes no such Event (its PodGroup controller only reports ``Timeout``,
``schedule time longer than 48 hours``); the reasons are kube-scheduler's, the notes the plugin's
gang-level reasons. A repeat of the same note for the same group within ``REPEAT_SECONDS`` of
clock time is dropped (a gang retried every second would otherwise flood the events API), and
at most ``MAX_BUFFERED`` events wait for a shell to collect them (the simulator never does).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from kubesched.framework.clock import Clock
from kubesched.framework.objects import ObjectEvent
from kubesched.plugins.coscheduling.podgroup import KIND, PodGroup

REPEAT_SECONDS = 30.0
MAX_BUFFERED = 1000

FAILED = "FailedScheduling"
SCHEDULED = "Scheduled"


class GroupEvents:
    def __init__(self, clock: Clock, controller: str) -> None:
        self.clock = clock
        self.controller = controller
        self._buffer: deque[ObjectEvent] = deque(maxlen=MAX_BUFFERED)
        #: Group key → (last note, clock time it was recorded).
        self._last: dict[str, tuple[str, float]] = {}

    def failed(self, pg: PodGroup, reason: str) -> None:
        self._record(pg, FAILED, reason, "Warning")

    def scheduled(self, pg: PodGroup, placed: int) -> None:
        self._record(pg, SCHEDULED, f"minMember {pg.min_member} reached: {placed} member(s) placed", "Normal")

    def _record(self, pg: PodGroup, reason: str, note: str, event_type: str) -> None:
        now = self.clock.now()
        last = self._last.get(pg.key)
        if last is not None and last[0] == note and now - last[1] < REPEAT_SECONDS:
            return
        self._last[pg.key] = (note, now)
        uid = str((pg.raw.get("metadata") or {}).get("uid") or "")
        self._buffer.append(ObjectEvent(KIND, pg.key, uid, reason, note, event_type, "Scheduling", self.controller))

    def drain(self) -> list[ObjectEvent]:
        out = list(self._buffer)
        self._buffer.clear()
        return out

    def retain(self, keys: Iterable[str]) -> None:
        """Forget the groups not in ``keys`` (deleted PodGroups)."""
        keep = set(keys)
        for key in [k for k in self._last if k not in keep]:
            del self._last[key]
