"""Preemption's ordering rules: which victims matter most, which break a PodDisruptionBudget, and
which candidate node to pick.

Port of pkg/scheduler/framework/preemption/util.go (``FilterVictimsWithPDBViolation``,
``PodTerminatingByPreemption``, ``MoreImportantVictim`` for single pods),
pkg/scheduler/util/utils.go (``GetPodStartTime``, ``GetEarliestPodStartTime``) and
preemption.go's ``pickOneNodeForPreemption``, Kubernetes v1.37.1. Pure functions of the pods: the
dry run (:mod:`kubesched.framework.preemption`) and the extender's victim search share them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.snapshot.pod import PodInfo, parse_timestamp

PriorityFn = Callable[[PodInfo], int]
#: Upstream v1.DisruptionTarget / v1.PodReasonPreemptionByScheduler.
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """The parts of a policy/v1 PodDisruptionBudget preemption reads (the plugin parses them)."""

    namespace: str
    name: str
    #: A compiled label selector (``empty()``, ``matches(labels)``), or None when the selector is
    #: invalid (it then matches nothing).
    selector: Any
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()


def pod_start_time(pod: PodInfo) -> float:
    """GetPodStartTime: ``status.startTime``; a pod that has not started yet (assumed, just bound)
    counts as starting now, i.e. later than any started pod (+inf here, so equal among themselves
    instead of upstream's successive ``time.Now()`` calls)."""
    status = pod.raw.get("status") or {}
    start = status.get("startTime")
    if start:
        try:
            return parse_timestamp(str(start))
        except ValueError:
            pass
    return math.inf


def more_important_pod(a: PodInfo, b: PodInfo, priority: PriorityFn) -> bool:
    """MoreImportantVictim for single pods: higher priority, then the earlier start."""
    pa, pb = priority(a), priority(b)
    if pa != pb:
        return pa > pb
    return pod_start_time(a) < pod_start_time(b)


def sort_by_importance(pods: list[PodInfo], priority: PriorityFn) -> list[PodInfo]:
    """Most important first (stable for equal pods)."""
    return sorted(pods, key=lambda p: (-priority(p), pod_start_time(p)))


def pod_terminating_by_preemption(pod: PodInfo) -> bool:
    """PodTerminatingByPreemption: being deleted, with a DisruptionTarget condition that is True
    with reason PreemptionByScheduler (the first DisruptionTarget condition decides)."""
    if not pod.deleting:
        return False
    for cond in (pod.raw.get("status") or {}).get("conditions") or []:
        if cond.get("type") == DISRUPTION_TARGET:
            return bool(cond.get("status") == "True" and cond.get("reason") == REASON_PREEMPTION_BY_SCHEDULER)
    return False


def filter_victims_with_pdb_violation(
    victims: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[tuple[PodInfo, int]], list[PodInfo]]:
    """FilterVictimsWithPDBViolation: (violating victims with their violation count, the others),
    each in the order given. A PDB's budget is ``status.disruptionsAllowed``, decremented by every
    matching victim not already in ``status.disruptedPods``; going below zero violates it."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]

    def violating(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if pdb.namespace != pod.namespace:
                continue
            # An invalid selector matches nothing; so does a nil or empty one.
            if pdb.selector is None or pdb.selector.empty() or not pdb.selector.matches(pod.labels):
                continue
            if pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating_victims: list[tuple[PodInfo, int]] = []
    non_violating: list[PodInfo] = []
    for v in victims:
        if violating(v):
            violating_victims.append((v, 1))
        else:
            non_violating.append(v)
    return violating_victims, non_violating


@dataclass(slots=True)
class Candidate:
    """A node where preemption makes room: its victims (most important first) and how many
    PodDisruptionBudget violations evicting them costs (upstream extenderv1.Victims)."""

    node_name: str
    victims: list[PodInfo]
    num_pdb_violations: int = 0


def earliest_start_of_highest_priority(victims: Sequence[PodInfo], priority: PriorityFn) -> float:
    """GetEarliestPodStartTime."""
    earliest = pod_start_time(victims[0])
    top = priority(victims[0])
    for p in victims:
        pp = priority(p)
        if pp == top:
            earliest = min(earliest, pod_start_time(p))
        elif pp > top:
            top = pp
            earliest = pod_start_time(p)
    return earliest


def pick_one_node_for_preemption(candidates: Sequence[Candidate], priority: PriorityFn) -> str:
    """pickOneNodeForPreemption with the default score functions, in order: fewest PDB
    violations; lowest highest-victim priority; smallest sum of victim priorities (each shifted by
    MaxInt32+1); fewest victims; latest start of the highest-priority victims; then the first."""
    if not candidates:
        return ""
    int32_shift = 2**31

    def sum_priorities(c: Candidate) -> int:
        return -sum(priority(p) + int32_shift for p in c.victims)

    score_funcs: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -priority(c.victims[0]),
        sum_priorities,
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_highest_priority(c.victims, priority),
    ]
    remaining = list(candidates)
    for f in score_funcs:
        best = -math.inf
        selected: list[Candidate] = []
        for c in remaining:
            s = f(c)
            if s > best:
                best, selected = s, [c]
            elif s == best:
                selected.append(c)
        if len(selected) == 1:
            return selected[0].node_name
        remaining = selected
    return remaining[0].node_name
