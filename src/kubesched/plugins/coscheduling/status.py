"""PodGroup ``status`` as scheduler-plugins keeps it, from Coscheduling's member index.

scheduler-plugins splits it: its PodGroup controller (pkg/controllers/podgroup_controller.go)
writes phase, running, succeeded, failed and occupiedBy from the group's pods; the scheduler used
to report ``scheduled`` and ``scheduleStartTime``. kubesched's plugin has every input (members
assigned, waiting at Permit, pending, finished), so it reports all of them; the live leader
merge-patches the changes into the status subresource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from kubesched.api.timestamps import rfc3339
from kubesched.framework.waiting import WaitingPod
from kubesched.plugins.coscheduling.podgroup import PodGroup, group_key
from kubesched.plugins.helpers.gang_members import MemberIndex
from kubesched.snapshot.pod import PodInfo

#: The phases in which scheduler-plugins' PodGroup controller stops updating a group's status
#: (pkg/controllers/podgroup_controller.go Reconcile returns before listing its pods).
FINAL_PHASES = ("Finished", "Failed")


class GroupStatus:
    def __init__(self, members: MemberIndex, waiting_pods: Iterable[WaitingPod]) -> None:
        self.members = members
        self.waiting_pods = waiting_pods
        #: Group key → wall-clock time its first member reached Permit (status.scheduleStartTime).
        self._schedule_start: dict[str, str] = {}
        self._occupied_by: dict[str, str] = {}
        #: Group key → the status last reported (status_updates sends what changed).
        self._reported: dict[str, dict[str, Any]] = {}

    def started(self, key: str) -> None:
        """A member of the group reached Permit: the group's scheduling started (first time only)."""
        self._schedule_start.setdefault(key, rfc3339())

    def quorum(self, key: str) -> None:
        """The group reached its quorum: note occupiedBy while its pods are in view (members that
        finish before the next status round are gone from every view)."""
        if key not in self._occupied_by:
            self._note_occupied_by(key, list(self.members.assigned_of(key).values()))

    def of(self, pg: PodGroup) -> dict[str, Any]:
        """phase, scheduled, running, succeeded, failed, occupiedBy, scheduleStartTime."""
        key = pg.key
        assigned = self.members.assigned_of(key)
        pending = self.members.pending_of(key)
        finished = self.members.finished.get(key, {})
        waiting = {wp.pod.uid for wp in self.waiting_pods if group_key(wp.pod) == key}
        scheduled = sum(1 for uid in assigned if uid not in waiting)
        running = sum(1 for p in assigned.values() if p.phase == "Running")
        phases = Counter(finished.values())
        succeeded, failed = phases["Succeeded"], phases["Failed"]
        total = len(assigned) + len(pending) + len(finished)
        need = max(pg.min_member, 1)
        if succeeded >= need:
            phase = "Finished"
        elif failed and failed + running + succeeded >= need:
            phase = "Failed"
        elif running + succeeded >= need:
            phase = "Running"
        elif scheduled + succeeded + failed >= need:
            phase = "Scheduled"
        elif assigned:
            phase = "Scheduling"
        elif total >= need:
            phase = "PreScheduling"
        else:
            phase = "Pending"
        status: dict[str, Any] = {
            "phase": phase,
            "scheduled": scheduled + succeeded + failed,
            "running": running,
            "succeeded": succeeded,
            "failed": failed,
        }
        occupied = self._occupied_by.get(key)
        if occupied is None and total >= need:
            occupied = self._note_occupied_by(key, (*assigned.values(), *pending.values()))
        if occupied:
            status["occupiedBy"] = occupied
        start = self._schedule_start.get(key)
        if start is not None:
            status["scheduleStartTime"] = start
        return status

    def changes(self, groups: dict[str, PodGroup]) -> dict[str, dict[str, Any]]:
        """Group key → the status fields that changed since the previous call, for ``groups``
        (every PodGroup that exists); the state of groups no longer there is dropped."""
        out: dict[str, dict[str, Any]] = {}
        for key in sorted(groups):
            before = self._reported.get(key, {})
            if before.get("phase") in FINAL_PHASES or _phase(groups[key]) in FINAL_PHASES:
                # scheduler-plugins' controller leaves a Finished or Failed group's status as it is
                # (its members may be deleted since, and are no longer counted).
                continue
            status = self.of(groups[key])
            changed = {k: v for k, v in status.items() if before.get(k) != v}
            if changed:
                out[key] = changed
                self._reported[key] = status
        for gone in set(self._reported) - set(groups):
            self.forget(gone)
        return out

    def forget(self, key: str) -> None:
        self._reported.pop(key, None)
        self._schedule_start.pop(key, None)
        self._occupied_by.pop(key, None)

    def _note_occupied_by(self, key: str, pods: Sequence[PodInfo]) -> str | None:
        occupied = occupied_by(min(pods, key=lambda p: p.key, default=None))
        if occupied:
            self._occupied_by[key] = occupied
        return occupied or None


def _phase(pg: PodGroup) -> str:
    """The phase the PodGroup object's status holds ("" when none)."""
    status = pg.raw.get("status")
    return str(status.get("phase") or "") if isinstance(status, dict) else ""


def occupied_by(pod: PodInfo | None) -> str:
    """scheduler-plugins fillOccupiedObj: the owners of the group's first pod, ``ns/name`` sorted."""
    if pod is None:
        return ""
    refs = (pod.raw.get("metadata") or {}).get("ownerReferences") or []
    names = sorted(f"{pod.namespace}/{r.get('name', '')}" for r in refs if isinstance(r, dict))
    return ",".join(names)
