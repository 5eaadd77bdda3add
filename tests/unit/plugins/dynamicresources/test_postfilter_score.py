"""PostFilter and Score of DynamicResources: ports of dynamicresources_test.go (v1.37.1) —
TestPlugin's wrong-topology PostFilter (deallocation), exhausted-resources-in-informer-cache's
PostFilter (nothing to deallocate), TestPostFilterNoOpStatusHasNoUserVisibleReason, TestComputeScore
and TestNormalizeScore — plus the plugin scoring a prioritized list per node.

Not ported: postfilter-*-podgroup (DRAWorkloadResourceClaims, alpha); the extended-resource claim
deletion is in test_extended.py."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.status import Code
from kubesched.plugins.dynamicresources.score import ScoreError, compute_score
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import pod
from unit.plugins.dynamicresources.test_plugin import (
    CLASS,
    DRIVER,
    NODE,
    NODE2,
    Cycle,
    World,
    allocated,
    allocation,
    claim,
    claim_pod,
    device_class,
    reserved_for,
    resource_slice,
)


def post_filter(c: Cycle) -> tuple[Code, tuple[str, ...]]:
    async def run() -> tuple[Code, tuple[str, ...]]:
        _, st = c.world.plugin.post_filter(c.state, c.pod, Diagnosis())
        await asyncio.gather(*c.world.plugin._deallocations)
        return st.code, st.reasons
    return asyncio.run(run())


# -- PostFilter ----------------------------------------------------------------------------------------
def test_wrong_topology_claim_is_deallocated_instead_of_evicting() -> None:
    """wrong-topology: the claim is allocated on a node the pod cannot use and nobody uses it:
    PostFilter writes its status without the allocation."""
    w = World([allocated(claim(), allocation(NODE2))], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter(NODE).reasons == ("resourceclaim not available on the node",)
    assert post_filter(c) == (Code.UNSCHEDULABLE, ("deallocation of ResourceClaim completed",))
    what, written = w.api.writes[-1]
    assert what == "status"
    assert "allocation" not in written["status"] and "reservedFor" not in written["status"]


def test_claim_reserved_only_for_this_pod_is_deallocated() -> None:
    w = World([reserved_for(allocated(claim(), allocation(NODE2)), "my-pod", "1234")], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert not c.filter(NODE).is_success
    assert post_filter(c) == (Code.UNSCHEDULABLE, ("deallocation of ResourceClaim completed",))


def test_claim_in_use_by_another_pod_is_kept() -> None:
    w = World([reserved_for(allocated(claim(), allocation(NODE2)), "other-pod", "other-uid")], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert not c.filter(NODE).is_success
    assert post_filter(c) == (Code.UNSCHEDULABLE, ())
    assert w.api.writes == []


def test_exhausted_resources_have_nothing_to_deallocate() -> None:
    """exhausted-resources-in-informer-cache: no allocated claim kept a node out."""
    other = allocated(claim("other-claim", owner="other-uid"))
    w = World([claim(), other], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter(NODE).reasons == ("cannot allocate all claims",)
    assert post_filter(c) == (Code.UNSCHEDULABLE, ())
    assert w.api.writes == []


def test_post_filter_without_claims_has_no_user_visible_reason() -> None:
    """TestPostFilterNoOpStatusHasNoUserVisibleReason, no claims."""
    c = Cycle(World([]), PodInfo.from_raw(pod("plain", cpu="100m")))
    assert c.pre_filter().code == Code.SKIP
    assert post_filter(c) == (Code.UNSCHEDULABLE, ())


# -- Score ---------------------------------------------------------------------------------------------
def prioritized(name: str, subrequests: int, allocated_results: list[str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"},
                         "spec": {"devices": {"requests": [{"name": name, "firstAvailable": [
                             {"name": f"subreq-{i}", "deviceClassName": CLASS} for i in range(1, subrequests + 1)]}]}}}
    if allocated_results is not None:
        c["status"] = {"allocation": result(*allocated_results)}
    return c


def result(*requests: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": r} for r in requests]}}


def exactly(name: str, alloc: bool) -> dict[str, Any]:
    c = claim(name)
    return allocated(c) if alloc else c


P1, P8 = prioritized("req-1", 1), prioritized("req-1", 8)
Q1, Q8 = prioritized("req-2", 1), prioritized("req-2", 8)
TWO_REQUESTS = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
    *prioritized("req-1", 4)["spec"]["devices"]["requests"], *prioritized("req-2", 5)["spec"]["devices"]["requests"]]}}}


@pytest.mark.parametrize(("claims", "allocations", "expected"), [
    pytest.param([exactly("a", True), exactly("b", False)], [result("req-1")], 0,
                 id="mix-of-allocated-and-unallocated-claims"),
    pytest.param([P1], [result("req-1/subreq-1")], 8, id="single-request-only-subrequest-allocated"),
    pytest.param([P8], [result("req-1/subreq-8")], 1, id="single-request-last-subrequest-allocated"),
    pytest.param([TWO_REQUESTS], [result("req-1/subreq-4", "req-2/subreq-5")], 9,
                 id="multiple-requests-with-middle-subrequests-allocated"),
    pytest.param([P8, Q8], [result("req-1/subreq-8"), result("req-2/subreq-8")], 2,
                 id="multiple-claims-with-last-subrequests-allocated"),
    pytest.param([P1, Q1], [result("req-1/subreq-1"), result("req-2/subreq-1")], 16,
                 id="multiple-claims-with-top-subrequests-allocated"),
    pytest.param([prioritized("req-1", 2, ["req-1/subreq-2"]), Q1], [result("req-2/subreq-1")], 15,
                 id="allocated-claim-counts-with-its-stored-allocation"),
])
def test_compute_score(claims: list[dict[str, Any]], allocations: list[dict[str, Any]], expected: int) -> None:
    assert compute_score(claims, allocations) == expected


def test_compute_score_more_claims_than_allocations_is_an_error() -> None:
    with pytest.raises(ScoreError, match="number of allocations 0 is smaller than number of claims needing allocation"):
        compute_score([prioritized("req-1", 1), prioritized("req-2", 1)], [])


@pytest.mark.parametrize(("scores", "expected"), [([], []), ([42], [100]), ([10, 20, 5], [50, 100, 25]),
                                                  ([0, 0], [0, 0])])
def test_normalize_score(scores: list[int], expected: list[int]) -> None:
    w = World([])
    values = np.array(scores, dtype=np.int64)
    assert w.plugin.normalize_score(CycleState(), claim_pod(), w.table, np.arange(len(scores)), values).is_success
    assert values.tolist() == expected


def test_node_with_the_preferred_subrequest_scores_higher() -> None:
    """A prioritized list (first an A100, else any GPU): the node with an A100 gets subreq-1 (8
    points), the other only subreq-2 (7)."""
    c = claim(first_available=True)
    request = c["spec"]["devices"]["requests"][0]
    request["firstAvailable"] = [
        {"name": "a100", "deviceClassName": CLASS,
         "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "A100"'}}]},
        {"name": "any", "deviceClassName": CLASS}]
    slices = [resource_slice(NODE), resource_slice(NODE2)]
    slices[0]["spec"]["devices"][0]["attributes"] = {"model": {"string": "T4"}}
    slices[1]["spec"]["devices"][0]["attributes"] = {"model": {"string": "A100"}}
    w = World([c], [device_class()], slices, nodes=(NODE, NODE2))
    cyc = Cycle(w, claim_pod())
    assert cyc.pre_filter().is_success
    assert cyc.filter(NODE).is_success and cyc.filter(NODE2).is_success
    scores = {n: w.plugin.score(cyc.state, cyc.pod, w.table.node_info(w.table.index[n])) for n in (NODE, NODE2)}
    assert {n: s for n, (s, st) in scores.items()} == {NODE: 7, NODE2: 8}


# -- --explain ----------------------------------------------------------------------------------------
def test_explain_says_per_node_which_devices_are_taken_or_excluded_and_what_the_pod_gets() -> None:
    """worker: instance-1 allocated to another claim, instance-2 not an A100; worker-2: an A100."""
    a100 = f'device.attributes["{DRIVER}"].model == "A100"'
    slices = [resource_slice(NODE, "instance-1", "instance-2"), resource_slice(NODE2)]
    slices[0]["spec"]["devices"][1]["attributes"] = {"model": {"string": "T4"}}
    slices[1]["spec"]["devices"][0]["attributes"] = {"model": {"string": "A100"}}
    other = allocated(claim("other-claim", owner="other-uid"))
    w = World([claim(selector=a100), other], [device_class(selector=f'device.driver == "{DRIVER}"')], slices,
              nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert c.filter(NODE).reasons == ("cannot allocate all claims",)
    assert c.filter(NODE2).is_success
    notes = w.plugin.explain_nodes(c.state, c.pod, w.table, np.array([w.table.index[NODE], w.table.index[NODE2]]))
    assert notes == [
        "instance-1: in use; instance-2: request req-1 excluded by claim selector #0",
        f"allocates {DRIVER}/{NODE2}/instance-1 for default/my-pod-my-resource request req-1",
    ]
