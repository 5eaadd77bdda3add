"""Binding conditions (DRADeviceBindingConditions, beta and on in v1.37).

Allocator: ports of allocatortesting/allocator_testing.go (v0.37.1) device-binding-conditions,
binding-conditions-multiple-devices, binding-conditions-with-and-without, node-restriction
(``bindsToNode``), partitionable-devices-with-binding-conditions,
partitionable-devices-with-binding-conditions-some-devices-no-conditions, plus pools with such devices
tried last (pools_incubating.go). Not ported: binding-conditions-without-feature-gate (the gate is on
in v1.37; kubesched has no switch).

Plugin: ports of dynamicresources_test.go (v1.37.1) bind-claim-with-binding-conditions (no driver sets
the conditions: PreBind times out), bound-claim-with-failed-binding, bound-claim-with-timed-out-binding,
bound-claim-with-mixed-binding-conditions, prebind-fail-with-binding-timeout,
multi-claims-binding-conditions-one-fail (its Filter), plus PreBind waiting until a driver sets the
conditions, a failure condition ending the wait, and Unreserve taking the pod out of ``reservedFor``.
With upstream's metrics assertions on those cases (``scheduler_dra_bindingconditions_*``: one
allocation counted and one wait observed per device result, labelled success, failure or timeout).
Not ported: bind-failure-concurrent-deallocation (the same PreBind path as bind-claim-with-binding-conditions).

Filter timeout: dynamicresources_test.go "timeout" (1ns) and "timeout_disabled" (here: 0, which
upstream also treats as no limit), the clock injected (a clock that moves on every read).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kubesched.framework.clock import FakeClock
from kubesched.framework.plugin_metrics import CounterFamily, HistogramFamily
from kubesched.framework.status import Code
from kubesched.plugins.dynamicresources import DynamicResources
from kubesched.plugins.dynamicresources.binding_conditions import BindingError, is_pod_ready, wait_until_ready
from kubesched.testing import new_plugin
from unit.plugins.dynamicresources.test_allocator import (
    DRIVER_A,
    NODE1,
    allocate,
    claim,
    device,
    local,
    request,
    result,
    slice_,
)
from unit.plugins.dynamicresources.test_allocator_features import consuming, counters_slice
from unit.plugins.dynamicresources.test_plugin import (
    CLAIM,
    DRIVER,
    NODE,
    POD,
    POD_UID,
    Cycle,
    World,
    allocated,
    allocation,
    claim_pod,
    device_class,
    reserved_for,
    verdict,
)
from unit.plugins.dynamicresources.test_plugin import claim as plugin_claim
from unit.plugins.dynamicresources.test_postfilter_score import post_filter

BC = {"bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]}


def with_bc(d: dict[str, Any], conditions: list[str] | None = None, failures: list[str] | None = None
            ) -> dict[str, Any]:
    d["bindingConditions"] = conditions or ["IsPrepare"]
    d["bindingFailureConditions"] = failures or ["BindingFailed"]
    return d


def bc_result(req: str, dev: str, conditions: list[str] | None = None, failures: list[str] | None = None,
              pool: str = "pool-1") -> dict[str, Any]:
    return {**result(req, pool, dev), "bindingConditions": conditions or ["IsPrepare"],
            "bindingFailureConditions": failures or ["BindingFailed"]}


# -- the allocator ------------------------------------------------------------------------------------
def test_device_binding_conditions_are_copied_into_the_result() -> None:
    got = allocate([claim("claim-0", request("req-0"))],
                   [slice_("slice-1", "node-1", "pool-1", DRIVER_A, with_bc(device("device-1")))])
    assert got == [{"devices": {"results": [bc_result("req-0", "device-1")]}, "nodeSelector": local("node-1")}]


def test_binding_conditions_multiple_devices() -> None:
    got = allocate([claim("claim-0", request("req-0", 2), request("req-1"))],
                   [slice_("slice-1", "node-1", "pool-1", DRIVER_A,
                           with_bc(device("device-1")), with_bc(device("device-2"), ["IsPrepare2"], ["BindingFailed2"]),
                           with_bc(device("device-3"), ["IsPrepare3"], ["BindingFailed3"]))])
    assert got is not None
    assert got[0]["devices"]["results"] == [
        bc_result("req-0", "device-1"), bc_result("req-0", "device-2", ["IsPrepare2"], ["BindingFailed2"]),
        bc_result("req-1", "device-3", ["IsPrepare3"], ["BindingFailed3"])]


def test_binding_conditions_with_and_without() -> None:
    got = allocate([claim("claim-0", request("req-0"), request("req-1"))],
                   [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), with_bc(device("device-2")))])
    assert got is not None
    assert got[0]["devices"]["results"] == [result("req-0", "pool-1", "device-1"), bc_result("req-1", "device-2")]


def test_binds_to_node_restricts_the_allocation_to_the_node() -> None:
    """node-restriction: a slice for nodes by label, its device binding to the node it is allocated for."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["region-1"]}]}]}
    d = device("device-1")
    d["bindsToNode"] = True
    got = allocate([claim("claim-0", request("req-0"))],
                   [slice_("slice-1", None, "pool-1", DRIVER_A, d, selector=selector)], NODE1)
    assert got == [{"devices": {"results": [result("req-0", "pool-1", "device-1")]}, "nodeSelector": local("node-1")}]


def test_partitionable_devices_with_binding_conditions() -> None:
    got = allocate([claim("claim-0", request("req-0", 3))], [
        slice_("slice-1", "node-1", "pool-1", DRIVER_A,
               with_bc(consuming("device-1", memory="2Gi")), consuming("device-2", memory="2Gi"),
               with_bc(consuming("device-3", memory="4Gi"), ["IsReady"], ["BindingTimeout"]), count=2),
        counters_slice("slice-2", "node-1", "pool-1", 2, memory="8Gi")])
    assert got is not None
    assert got[0]["devices"]["results"] == [
        bc_result("req-0", "device-1"), result("req-0", "pool-1", "device-2"),
        bc_result("req-0", "device-3", ["IsReady"], ["BindingTimeout"])]


def test_pools_with_binding_conditions_are_tried_last() -> None:
    """A device that needs no preparation is preferred, whatever the pools' names."""
    got = allocate([claim("claim-0", request("req-0"))], [
        slice_("slice-a", "node-1", "pool-a", DRIVER_A, with_bc(device("device-1"))),
        slice_("slice-b", "node-1", "pool-b", DRIVER_A, device("device-1"))])
    assert got is not None and got[0]["devices"]["results"] == [result("req-0", "pool-b", "device-1")]


# -- the plugin ---------------------------------------------------------------------------------------
def fabric_slice() -> dict[str, Any]:
    return {"metadata": {"name": f"{NODE}-fabric", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": "instance-1", **BC}]}}


def bc_allocation(timestamp: str | None = None) -> dict[str, Any]:
    alloc = allocation()
    alloc["devices"]["results"][0].update(BC)
    if timestamp:
        alloc["allocationTimestamp"] = timestamp
    return alloc


def device_status(*conditions: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"driver": DRIVER, "pool": NODE, "device": "instance-1",
             "conditions": [{"type": t, "status": s, "reason": "Test", "message": f"{t} is {s}"}
                            for t, s in conditions]}]


def world(claims: list[dict[str, Any]], clock: FakeClock | None = None, timeout: str = "10m") -> World:
    w = World(claims, [device_class()], [fabric_slice()])
    w.plugin = new_plugin(DynamicResources, {"bindingTimeout": timeout}, table=w.table, client=w.api,  # type: ignore[arg-type]
                          objects=lambda kind: w.objects.get(kind, {}), clock=clock or FakeClock(1000.0))
    return w


def test_allocated_with_binding_conditions_and_no_driver_times_out_at_pre_bind() -> None:
    """bind-claim-with-binding-conditions: nothing sets the conditions; a clock that stands still
    (the simulator's while a binding cycle waits) times out at once."""
    w = world([plugin_claim()])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    st = c.pre_bind()
    assert verdict(st) == (Code.ERROR, ("device binding timeout: context deadline exceeded",))
    assert binding_metrics(w) == ({(w.plugin.handle.profile_name, DRIVER, "timeout"): 1.0},
                                  {(w.plugin.handle.profile_name, DRIVER, "timeout"): (1, 0.0)})
    _, written = w.api.writes[-1]
    assert written["status"]["allocation"]["devices"]["results"][0]["bindingConditions"] == ["IsPrepare"]
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": POD, "uid": POD_UID}]


def binding_metrics(w: World) -> tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], tuple[int, float]]]:
    """scheduler_dra_bindingconditions_allocations_total by labels, and the wait histogram's
    (count, sum) by labels."""
    allocations, wait = w.plugin.metric_families()
    assert isinstance(allocations, CounterFamily) and isinstance(wait, HistogramFamily)
    return dict(allocations.values), {k: (sum(s.buckets), s.sum) for k, s in wait.series.items()}


def _pre_bind_with_driver(w: World, c: Cycle, clock: FakeClock, conditions: tuple[tuple[str, str], ...]) -> Any:
    """PreBind while a driver sets the device's conditions after two polls (the clock moves a
    second per poll)."""
    w.plugin.binding_poll_seconds = 0.001

    async def run() -> Any:
        task = asyncio.create_task(w.plugin.pre_bind(c.state, c.pod, NODE))
        polls = 0
        while not task.done():
            clock.advance(1)
            polls += 1
            if polls == 3:
                w.catch_up()
                key = f"default/{CLAIM}"
                stored = copy.deepcopy(w.objects["ResourceClaim"][key])
                stored["status"]["devices"] = device_status(*conditions)
                stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
                w.objects["ResourceClaim"][key] = stored
            await asyncio.sleep(0.001)
        return task.result()

    return asyncio.run(run())


def test_pre_bind_waits_until_the_driver_sets_the_conditions() -> None:
    clock = FakeClock(1000.0)
    w = world([plugin_claim()], clock)
    c = Cycle(w, claim_pod())
    c.through_reserve()
    assert _pre_bind_with_driver(w, c, clock, (("IsPrepare", "True"),)).is_success
    counted, waited = binding_metrics(w)
    key = (w.plugin.handle.profile_name, DRIVER, "success")
    assert counted == {key: 1.0} and list(waited) == [key]
    assert waited[key][0] == 1 and waited[key][1] >= 1.0  # the clock moved while PreBind polled
    # Upstream's Event while PreBind waits, regarding the pod (posted by the live shell).
    assert [(e.kind, e.key, e.uid, e.reason, e.note, e.event_type, e.action) for e in w.plugin.object_events()] == [
        ("Pod", f"default/{POD}", POD_UID, "BindingConditionsPending",
         f"waiting for binding conditions for device on node {NODE}", "Normal", "Scheduling")]
    assert w.plugin.object_events() == []  # handed over once


def test_pre_bind_fails_on_a_failure_condition() -> None:
    clock = FakeClock(1000.0)
    w = world([plugin_claim()], clock)
    c = Cycle(w, claim_pod())
    c.through_reserve()
    st = _pre_bind_with_driver(w, c, clock, (("IsPrepare", "False"), ("BindingFailed", "True")))
    assert verdict(st) == (Code.ERROR, (f'device binding failed: claim={CLAIM}, reason=Test, '
                                        f'message="BindingFailed is True"',))
    assert list(binding_metrics(w)[0]) == [(w.plugin.handle.profile_name, DRIVER, "failure")]


def test_pre_bind_times_out_on_a_claim_allocated_too_long_ago() -> None:
    """prebind-fail-with-binding-timeout: the claim's allocation is older than bindingTimeout when a
    poll looks (the wall clock is 1000 s, the allocation at 0 s, the timeout 600 s... after a poll)."""
    clock = FakeClock(500.0)
    w = world([allocated(plugin_claim(), bc_allocation("1970-01-01T00:00:00Z"))], clock)
    w.objects["ResourceClaim"][f"default/{CLAIM}"]["status"]["devices"] = device_status()
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success and c.filter().is_success and c.reserve().is_success
    w.plugin.binding_poll_seconds = 0.001

    async def run() -> Any:
        task = asyncio.create_task(w.plugin.pre_bind(c.state, c.pod, NODE))
        while not task.done():
            clock.advance(50)
            await asyncio.sleep(0.001)
        return task.result()

    assert verdict(asyncio.run(run())) == (Code.ERROR, (f"device binding timeout: claim={CLAIM}",))


def test_wait_until_ready_reports_the_deadline() -> None:
    """The poll's own deadline (a claim without an allocation timestamp never times out by itself)."""
    clock = FakeClock(0.0)
    claim_now = allocated(plugin_claim(), bc_allocation())

    async def run() -> str:
        async def tick() -> None:
            while True:
                clock.advance(1)
                await asyncio.sleep(0.001)
        ticker = asyncio.create_task(tick())
        try:
            await wait_until_ready(lambda: [claim_now], clock, 3.0, 0.001)
        except BindingError as e:
            return str(e)
        finally:
            ticker.cancel()
        return "ready"

    assert asyncio.run(run()) == "device binding timeout: context deadline exceeded"
    assert is_pod_ready([allocated(plugin_claim())], 600, 0)  # no binding conditions: ready


def test_claims_whose_binding_failed_or_timed_out_are_deallocated() -> None:
    """bound-claim-with-failed-binding, bound-claim-with-timed-out-binding,
    bound-claim-with-mixed-binding-conditions: Filter refuses the node, PostFilter deallocates."""
    failed = allocated(plugin_claim(), bc_allocation("1970-01-01T00:16:40Z"))
    failed["status"]["devices"] = device_status(("BindingFailed", "True"))
    timed_out = allocated(plugin_claim(), bc_allocation("1970-01-01T00:00:00Z"))  # 1000 s ago, timeout 600 s
    timed_out["status"]["devices"] = device_status()
    mixed = allocated(plugin_claim(), bc_allocation("1970-01-01T00:00:00Z"))
    mixed["status"]["devices"] = device_status(("condition1", "True"), ("condition2", "False"))
    for c in (failed, timed_out, mixed):
        w = world([c])
        cycle = Cycle(w, claim_pod())
        assert cycle.pre_filter().is_success
        assert verdict(cycle.filter()) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                           ("resourceclaim not available on the node",))
        assert post_filter(cycle) == (Code.UNSCHEDULABLE, ("deallocation of ResourceClaim completed",))
        assert "allocation" not in w.api.writes[-1][1]["status"]


def test_claim_with_met_conditions_or_within_its_timeout_is_usable() -> None:
    """bound-claim-with-succeeded-binding-conditions (Filter), and a claim still within its timeout."""
    ready = allocated(plugin_claim(), bc_allocation("1970-01-01T00:00:00Z"))
    ready["status"]["devices"] = device_status(("IsPrepare", "True"))
    pending = allocated(plugin_claim(), bc_allocation("1970-01-01T00:16:00Z"))  # 40 s ago
    for c in (ready, pending):
        cycle = Cycle(world([c]), claim_pod())
        assert cycle.pre_filter().is_success and cycle.filter().is_success


def test_unreserve_takes_the_pod_out_of_reserved_for() -> None:
    """Unreserve after PreBind reserved an allocated claim: the pod leaves ``reservedFor``."""
    w = World([reserved_for(allocated(plugin_claim()), POD, POD_UID)], [device_class()], [])

    async def run() -> None:
        c = Cycle(w, claim_pod())
        assert c.pre_filter().is_success and c.filter().is_success
        c.unreserve()
        await asyncio.gather(*w.plugin._deallocations)

    asyncio.run(run())
    assert w.api.writes[-1][1]["status"]["reservedFor"] == []


# -- the filter timeout (DynamicResourcesArgs.filterTimeout) ------------------------------------------
class TickingClock(FakeClock):
    """A clock that moves a second every time it is read (a search that takes long)."""

    def now(self) -> float:
        self.advance(1.0)
        return super().now()


def timeout_world(timeout: str) -> World:
    w = World([plugin_claim()], [device_class()], [fabric_slice()])
    w.plugin = new_plugin(DynamicResources, {"filterTimeout": timeout}, table=w.table, client=w.api,  # type: ignore[arg-type]
                          objects=lambda kind: w.objects.get(kind, {}), clock=TickingClock())
    return w


def test_a_search_longer_than_the_filter_timeout_is_an_error() -> None:
    """dynamicresources_test.go "timeout": filterTimeout 1ns; Error, so the pod retries via backoff."""
    c = Cycle(timeout_world("1ns"), claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter()) == (Code.ERROR, (f"node {NODE}: timed out trying to allocate devices",))


def test_filter_timeout_zero_disables_it() -> None:
    """timeout_disabled: 0 means no limit, however slow the search."""
    c = Cycle(timeout_world("0s"), claim_pod())
    assert c.pre_filter().is_success and c.filter().is_success


def test_a_search_within_the_filter_timeout_succeeds() -> None:
    c = Cycle(timeout_world("10s"), claim_pod())
    assert c.pre_filter().is_success and c.filter().is_success
