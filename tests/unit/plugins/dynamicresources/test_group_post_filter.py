"""DynamicResources at PodGroupPostFilter (group_post_filter.py): port of dynamicresources_test.go
``TestPodGroupPostFilter`` (Kubernetes v1.37.1), on the members' cycle states as the PodGroup
cycle keeps them.

Ported: empty (upstream's assertion only checks the error text contains "", the code answers
``deallocation and deletion of ResourceClaims completed``: that is what is asserted here),
deallocate-pod-level-claim, delete-pod-level-extended-claim (test_extended's fixture),
skip-deallocate-topology-aware-podgroup's guard (a PodGroup with schedulingConstraints under
TopologyAwareWorkloadScheduling) and the CompositePodGroup guard; plus the Error a cycle gets when
no member's PreFilter ran (upstream's PodGroup state read fails: ``not found``).

Not ported: disabled (DynamicResourceAllocation is GA; kubesched has no switch),
deallocate-podgroup-level-claim, unreserve-podgroup-claim, unreserve-podgroup-multiple-unscheduled-pods,
mixed-pod-level-and-podgroup-claims, skip-deallocate-feature-disabled (PodGroup claims,
DRAWorkloadResourceClaims, alpha, not ported).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.podgroup import (
    PodGroupAssignments,
    PodGroupInfo,
    member_cycle_states,
    record_member_cycle_state,
)
from kubesched.framework.status import Code, Status
from kubesched.plugins.dynamicresources import DynamicResources
from kubesched.snapshot.pod import PodInfo
from unit.plugins.dynamicresources import test_extended as ext
from unit.plugins.dynamicresources.test_plugin import (
    NODE,
    NODE2,
    Cycle,
    World,
    allocated,
    allocation,
    claim,
    claim_pod,
)

RELEASED = (Code.UNSCHEDULABLE, ("deallocation and deletion of ResourceClaims completed",))


def pod_group(constraints: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 1}}}
    if constraints:
        spec["schedulingConstraints"] = {"topology": [{"key": "rack"}]}
    return {"metadata": {"name": "pg", "namespace": "default", "uid": "pg-uid"}, "spec": spec}


def never_again() -> tuple[PodGroupAssignments, Status]:
    return PodGroupAssignments(), Status.unschedulable()


def group_post_filter(plugin: DynamicResources, group_state: CycleState, group: PodGroupInfo
                      ) -> tuple[Code, tuple[str, ...]]:
    async def run() -> tuple[Code, tuple[str, ...]]:
        _, st = plugin.pod_group_post_filter(group_state, group, never_again)
        await asyncio.sleep(0)
        await asyncio.gather(*plugin._deallocations)
        return st.code, st.reasons
    return asyncio.run(run())


def tried(*cycles: Cycle) -> CycleState:
    """The PodGroup cycle state after the members' attempts."""
    group_state = CycleState()
    for c in cycles:
        record_member_cycle_state(group_state, c.pod, c.state)
    return group_state


def group_of(*pods: PodInfo, raw: dict[str, Any] | None = None) -> PodGroupInfo:
    return PodGroupInfo("default", "pg", list(pods), raw if raw is not None else pod_group())


def test_a_member_whose_claim_kept_nodes_out_gets_it_deallocated() -> None:
    """deallocate-pod-level-claim: the claim is allocated on a node the member cannot use and no
    pod uses it: its allocation is written away, and the group is retried."""
    w = World([allocated(claim(), allocation(NODE2))], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter(NODE).reasons == ("resourceclaim not available on the node",)
    assert group_post_filter(w.plugin, tried(c), group_of(c.pod)) == RELEASED
    what, written = w.api.writes[-1]
    assert what == "status"
    assert "allocation" not in written["status"] and "reservedFor" not in written["status"]


def test_a_member_with_nothing_to_free_still_answers_that_the_release_is_done() -> None:
    """empty: a pending claim, no claim kept a node out: nothing written, upstream's text all the
    same (DefaultPreemption's answer follows it in the group's message)."""
    w = World([claim()])
    c = Cycle(w, claim_pod())
    c.pre_filter()
    assert group_post_filter(w.plugin, tried(c), group_of(c.pod)) == RELEASED
    assert w.api.writes == []


def test_members_not_tried_are_left_alone() -> None:
    """Only members whose PreFilter ran in this cycle are looked at (podsStateData)."""
    w = World([allocated(claim(), allocation(NODE2))], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    c.filter(NODE)
    other = Cycle(w, claim_pod("other", "other-uid"))
    group_state = tried(other)
    other.pre_filter()
    assert group_post_filter(w.plugin, group_state, group_of(c.pod, other.pod)) == RELEASED
    assert w.api.writes == []


def test_the_extended_resources_claim_of_an_earlier_attempt_is_deleted() -> None:
    """delete-pod-level-extended-claim."""
    earlier = {"metadata": {"name": f"{ext.POD}-extended-resources-xyz", "namespace": "default", "uid": "old",
                            "resourceVersion": "3", "annotations": {ext.ANNOTATION: "true"},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": ext.POD,
                                                 "uid": ext.POD_UID, "controller": True}]},
               "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                   "deviceClassName": ext.CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}
    w = ext.World([ext.mapped_class()], [ext.resource_slice(ext.NODE)], claims=(earlier,))
    p = ext.gpu_pod()

    async def attempt() -> tuple[Code, tuple[str, ...]]:
        state, st = w.cycle(p)
        assert st.is_success
        assert not w.filter(state, p).is_success
        group_state = CycleState()
        record_member_cycle_state(group_state, p, state)
        _, st = w.plugin.pod_group_post_filter(group_state, group_of(p), never_again)
        await asyncio.sleep(0)
        await asyncio.gather(*w.plugin._deallocations)
        return st.code, st.reasons

    assert ext.run(attempt()) == RELEASED
    assert w.api.log[-1] == "delete" and not w.api.claims


def test_topology_aware_groups_and_composites_are_not_handled() -> None:
    """skip-deallocate-topology-aware-podgroup, and upstream's CompositePodGroup guard: a bare
    Unschedulable (no text of its own in the group's message), nothing written."""
    w = World([allocated(claim(), allocation(NODE2))], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    c.pre_filter()
    c.filter(NODE)
    w.plugin.handle.feature_gates = {"TopologyAwareWorkloadScheduling": True}
    assert group_post_filter(w.plugin, tried(c), group_of(c.pod, raw=pod_group(constraints=True))) == (
        Code.UNSCHEDULABLE, ())
    composite = PodGroupInfo("default", "job", [c.pod], composite_pod_group={"metadata": {"name": "job"}})
    assert group_post_filter(w.plugin, tried(c), composite) == (Code.UNSCHEDULABLE, ())
    assert w.api.writes == []
    # Without the gate the constraints do not matter.
    w.plugin.handle.feature_gates = {}
    assert group_post_filter(w.plugin, tried(c), group_of(c.pod, raw=pod_group(constraints=True))) == RELEASED


def test_a_cycle_where_no_member_reached_prefilter_is_an_error() -> None:
    w = World([claim()])
    group_state = CycleState()
    assert member_cycle_states(group_state) == {}
    p = claim_pod()
    record_member_cycle_state(group_state, p, CycleState())  # refused by an earlier PreFilter
    assert group_post_filter(w.plugin, group_state, group_of(p)) == (Code.ERROR, ("not found",))
