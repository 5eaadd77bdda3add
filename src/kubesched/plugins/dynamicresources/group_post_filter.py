"""DynamicResources at PodGroupPostFilter: free the claims that kept a failed PodGroup's members out.

Port of dynamicresources.go ``PodGroupPostFilter`` (Kubernetes v1.37.1, GenericWorkload on). When a
PodGroup's cycle finds no placement, upstream runs, for every unscheduled member whose PreFilter ran
in the cycle, what PostFilter does for a single pod (``deallocateOrDeletePodClaims``: deallocate an
allocated claim no other pod uses that kept some node out, or delete the extended resources' claim
an earlier attempt created), then answers ``Unschedulable`` with ``deallocation and deletion of
ResourceClaims completed`` whatever was found, so the group is retried. DefaultPreemption runs after
it (multiPoint order); its answer wins when it succeeds or is unresolvable, otherwise both messages
are the group's (``RunPodGroupPostFilterPlugins``).

As upstream, the plugin does nothing (a bare ``Unschedulable``) for a CompositePodGroup, or for a
PodGroup with ``spec.schedulingConstraints`` under TopologyAwareWorkloadScheduling; and a cycle in
which no member reached its PreFilter (the group refused before any member was tried) is an Error
(upstream fails to read its PodGroup state: ``not found``).

Not ported: PodGroup-level claims (DRAWorkloadResourceClaims, alpha: ``deallocatePodGroupClaims``,
taking the PodGroup out of its claims' ``reservedFor``), as the rest of the plugin does not read them.
"""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.interfaces import PodGroupPostFilterPlugin, PostFilterPlugin
from kubesched.framework.podgroup import (
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    member_cycle_states,
)
from kubesched.framework.status import Code, Status

#: The group's answer once it got past the guards (upstream's text, word for word).
GROUP_RELEASED = "deallocation and deletion of ResourceClaims completed"


class GroupClaimRelease(PostFilterPlugin, PodGroupPostFilterPlugin):
    """DynamicResources' PodGroupPostFilter, over its own PostFilter (plugin.py): each member's
    PostFilter on the member's CycleState of this group cycle is upstream's per-member
    ``deallocateOrDeletePodClaims`` (the same claim chosen, the same write)."""

    def pod_group_post_filter(
        self, state: CycleState, group: PodGroupInfo, reschedule: PodGroupSchedulingFunc
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        if group.is_composite:
            return None, Status.unschedulable()  # "not supporting CompositePodGroups"
        spec = (group.pod_group or {}).get("spec") or {}
        if self.handle.feature_gates.get(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING) and spec.get("schedulingConstraints"):
            return None, Status.unschedulable()  # "not supporting topology-aware workloads"
        members = member_cycle_states(state)
        # PreFilter writes its state under the plugin's name (plugin.py STATE_KEY); upstream's
        # PodGroup state exists once any member's PreFilter ran.
        if not any(self.name in s for s in members.values()):
            return None, Status.error("not found")
        for pod in group.unscheduled_pods:
            member_state = members.get(pod.key)
            if member_state is None or self.name not in member_state:
                continue
            _, st = self.post_filter(member_state, pod, Diagnosis())
            if st.code not in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                return None, st
        return None, Status.unschedulable(GROUP_RELEASED)
