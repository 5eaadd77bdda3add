"""The group-level extension points' loops: PlacementGenerate, PlacementFeasible, PlacementScore
and PodGroupPostFilter.

Port of pkg/scheduler/framework/runtime/framework.go (v1.37.1) ``RunPlacementGeneratePlugins``,
``RunPlacementFeasiblePlugins``, ``RunPlacementScorePlugins`` and ``RunPodGroupPostFilterPlugins``;
the group cycle that calls them is ``scheduler_podgroup.py``.
"""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.framework.podgroup import (
    Placement,
    PlacementProgress,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from kubesched.framework.runtime import Framework
from kubesched.framework.status import SUCCESS, Code, Status


def run_placement_feasible(
    fwk: Framework, state: CycleState, group: PodGroupInfo, progress: PlacementProgress
) -> Status:
    """Every PlacementFeasible plugin in order: the first Unschedulable or Error ends the loop;
    a Wait is remembered (the last one) and returned when nobody refuses."""
    status = SUCCESS
    for p in fwk.placement_feasible:
        try:
            st = p.placement_feasible(state, group, progress)
        except Exception as e:
            st = Status.from_exception(e)
        if st.is_success:
            continue
        if st.is_wait:
            status = st.with_plugin(p.name)
            continue
        if st.code == Code.UNSCHEDULABLE:
            return st.with_plugin(p.name)
        if st.is_error:
            return Status.error(f"running PlacementFeasible plugin: {st.message}", p.name)
        return Status.error(f"unexpected status from PlacementFeasible plugin: {st.code.name.title()}", p.name)
    return status


def run_pod_group_post_filter(
    fwk: Framework, state: CycleState, group: PodGroupInfo, reschedule: PodGroupSchedulingFunc
) -> tuple[PodGroupPostFilterResult | None, Status]:
    """Until one succeeds (its result wins) or refuses as unresolvable; Unschedulable reasons of
    the others are gathered; an Error ends the loop."""
    reasons: list[str] = []
    rejector = ""
    for p in fwk.pod_group_post_filter:
        try:
            result, st = p.pod_group_post_filter(state, group, reschedule)
        except Exception as e:
            result, st = None, Status.from_exception(e)
        if st.is_success:
            return result, st
        if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return result, st.with_plugin(p.name)
        if st.code == Code.UNSCHEDULABLE:
            reasons.extend(st.reasons)
            rejector = rejector or p.name
            continue
        return None, Status.error(f'error in "{p.name}" PodGroupPostFilter plugins: {st.message}', p.name)
    return None, Status.unschedulable(*reasons, plugin=rejector)


def run_placement_generate(
    fwk: Framework, state: CycleState, group: PodGroupInfo, parent: Placement
) -> tuple[list[Placement], Status]:
    """The first PlacementGenerate plugin only (upstream runs no other); none configured: the
    parent placement (every node) alone."""
    if not fwk.placement_generate:
        return [parent], SUCCESS
    p = fwk.placement_generate[0]
    try:
        placements, st = p.generate_placements(state, group, parent)
    except Exception as e:
        placements, st = [], Status.from_exception(e)
    if not st.is_success:
        return [], st.with_plugin(p.name)
    if not placements:
        return [], Status.unschedulable("no feasible placements found", plugin=p.name)
    return placements, SUCCESS


def run_placement_score(
    fwk: Framework, state: CycleState, group: PodGroupInfo, candidates: list[PodGroupAssignments]
) -> tuple[list[int], Status]:
    """Each plugin scores each candidate, normalises its list, then the weighted totals (range
    checked as upstream: 0–100 after normalisation)."""
    per_plugin: list[tuple[str, list[int]]] = []
    for p in fwk.placement_score:
        scores = []
        for c in candidates:
            try:
                score, st = p.score_placement(state, group, c)
            except Exception as e:
                score, st = 0, Status.from_exception(e)
            if not st.is_success:
                return [], Status.error(f'running PlacementScore plugins: plugin "{p.name}" failed with: {st.message}')
            scores.append(score)
        try:
            nst = p.normalize_placement_scores(state, group, scores)
        except Exception as e:
            nst = Status.from_exception(e)
        if nst is not None and not nst.is_success:
            return [], Status.error(
                "running NormalizePlacementScore on PlacementScore plugins: "
                f'plugin "{p.name}" failed with: {nst.message}')
        per_plugin.append((p.name, scores))
    totals = [0] * len(candidates)
    for name, scores in per_plugin:
        weight = fwk.placement_score_weights.get(name, 1)
        for i, score in enumerate(scores):
            if not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                return [], Status.error(
                    f'applying score defaultWeights on PlacementScore plugins: plugin "{name}" returns an invalid '
                    f"score {score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
            totals[i] += score * weight
    return totals, SUCCESS
