"""The ``PodGroupInitiallyScheduled`` condition the PodGroup cycle writes on a Workload API PodGroup.

Port of kube-scheduler v1.37.1 pkg/scheduler/schedule_one_podgroup.go: the condition
``submitPodGroupAlgorithmResult`` builds from a group's result (``updatePodGroupConditionWithError``
for a group that fails before scheduling), and ``updatePodGroupCondition``, which

- never regresses a True condition (a group once scheduled stays so: a later cycle for extra
  members that fails leaves it alone; staging/src/k8s.io/api/scheduling/v1beta1/types.go calls
  True "a terminal state"),
- stamps ``observedGeneration`` with the PodGroup's ``metadata.generation``,
- changes the condition as apimachinery's ``meta.SetStatusCondition`` does (``lastTransitionTime``
  moves only when ``status`` does) and sends nothing when nothing changed.

Upstream patches ``podgroups/status`` with a strategic merge patch (pkg/scheduler/util/utils.go
``PatchPodGroupStatus``; conditions merge by ``type``). kubesched's core only decides: the shell
writes what :meth:`PodGroupConditions.update` returns (``SchedulerObserver.object_status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.timestamps import rfc3339
from kubesched.framework.status import Status

#: schedulingapi.PodGroupInitiallyScheduled and its reasons (scheduling/v1beta1/types.go).
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"

Condition = dict[str, Any]


def _condition(status: str, reason: str, message: str) -> Condition:
    return {"type": INITIALLY_SCHEDULED, "status": status, "reason": reason, "message": message}


def result_condition(group_status: Status) -> Condition:
    """submitPodGroupAlgorithmResult: True/Scheduled on success, False/Unschedulable when the
    group was rejected or waits for its preemption (message: the group's status message),
    False/SchedulerError on an error (message: the error)."""
    if group_status.is_success:
        return _condition("True", REASON_SCHEDULED, group_status.message)
    if group_status.is_rejected:
        return _condition("False", REASON_UNSCHEDULABLE, group_status.message)
    return error_condition(group_status.message)


def error_condition(message: str) -> Condition:
    """updatePodGroupConditionWithError: a group that failed before it was scheduled."""
    return _condition("False", REASON_SCHEDULER_ERROR, message)


def find_condition(conditions: object, kind: str) -> Mapping[str, Any] | None:
    """meta.FindStatusCondition over a raw ``status.conditions`` (anything else: none)."""
    if not isinstance(conditions, list):
        return None
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == kind), None)


def set_status_condition(existing: Mapping[str, Any] | None, new: Condition, wall: float) -> Condition | None:
    """meta.SetStatusCondition for one condition: the condition as it becomes, or None when
    nothing changed. ``lastTransitionTime`` is now for a new condition or a status change, else
    the existing one's."""
    if existing is None:
        return {**new, "lastTransitionTime": rfc3339(wall)}
    fields = ("status", "reason", "message", "observedGeneration")
    if all(existing.get(f, 0 if f == "observedGeneration" else "") == new.get(f) for f in fields):
        return None
    moved = existing.get("status") != new["status"]
    since = rfc3339(wall) if moved or not existing.get("lastTransitionTime") else existing["lastTransitionTime"]
    return {**new, "lastTransitionTime": since}


def updated_condition(pod_group: Mapping[str, Any], condition: Condition, wall: float,
                      current: Mapping[str, Any] | None = None) -> Condition | None:
    """updatePodGroupCondition: the condition to write on ``pod_group`` (raw), or None when it
    would regress a True condition or change nothing. ``current``: the condition as last written,
    when newer than the object's copy."""
    meta = pod_group.get("metadata") or {}
    if current is None:
        current = find_condition((pod_group.get("status") or {}).get("conditions"), condition["type"])
    if current is not None and current.get("status") == "True" and condition["status"] != "True":
        return None
    generation = meta.get("generation")
    new = {**condition, "observedGeneration": generation if isinstance(generation, int) else 0}
    return set_status_condition(current, new, wall)


_SHOWN = ("status", "reason", "message", "lastTransitionTime")


class PodGroupConditions:
    """The conditions the cycle wrote and the object does not show yet, per PodGroup uid: the
    informer's copy of a PodGroup trails the writes (the shell sends them off the scheduling
    path), so until it shows a write the next cycle compares with the write, not with a copy that
    predates it (upstream's patch is synchronous, and its next cycle usually sees it). Once the
    object shows it, it is forgotten: what is kept is bounded by the writes in flight."""

    def __init__(self) -> None:
        self._written: dict[str, Condition] = {}

    def update(self, pod_group: Mapping[str, Any], condition: Condition, wall: float) -> Condition | None:
        """The condition to write (and remembered as written), or None: nothing to send."""
        uid = str((pod_group.get("metadata") or {}).get("uid") or "")
        written = self._written.get(uid)
        if written is not None:
            shown = find_condition((pod_group.get("status") or {}).get("conditions"), condition["type"])
            # observedGeneration 0 is omitted from the stored object: compare the other fields.
            if shown is not None and all(shown.get(k) == written.get(k) for k in _SHOWN):
                del self._written[uid]  # the object caught up: it is the truth again
                written = None
        new = updated_condition(pod_group, condition, wall, written)
        if new is not None and uid:
            self._written[uid] = new
        return new

    def __len__(self) -> int:
        return len(self._written)
