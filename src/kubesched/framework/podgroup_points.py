"""The group-level extension points' loops: PlacementFeasible and PodGroupPostFilter.

Port of pkg/scheduler/framework/runtime/framework.go (v1.37.1) ``RunPlacementFeasiblePlugins``
and ``RunPodGroupPostFilterPlugins``; the group cycle that calls them is ``scheduler_podgroup.py``.
"""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.podgroup import (
    PlacementProgress,
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
