"""Consumable capacity: one device shared by several claims, each consuming part of its capacity.
Cases ported from k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/
allocator_testing.go (v0.37.1) with its fixtures (test_allocator.py's helpers; upstream's
``fixedShareID`` stands for a share ID, here derived from claim, request, device and index).

Ported cases: consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request,
-with-policy-without-capacity-request, -with-range-policy-step, -with-valid-values-policy,
-with-valid-values-policy-round-up, -with-exceeded-consumable-capacity-request,
-with-request-over-max-sharing-policy, -with-allocated-capacity-use-remaining,
-with-allocated-capacity-next-device, -with-missing-capacity-request,
consumable-capacity-with-multi-allocatable-device-backtrack, consumable-capacity-negative-request-aborts.

Not ported, and why: the int64/milli overflow cases (-range-policy-*-overflow-*, -request-above-int64-*:
kubesched's quantities are exact fractions, nothing overflows), -disabled-feature* (on in v1.37),
partitionable-consumable-capacity-backtrack-releases-counter and
partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership (covered by
test_shared_partition_consumes_its_counters_once below), compatibility-groups-with-consumable-capacity
(alpha).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.dynamicresources.allocator import AllocationError, Allocator
from kubesched.plugins.dynamicresources.claims import allocated_devices
from unit.plugins.dynamicresources.test_allocator import DRIVER_A, NODE1, allocate, claim, device, request, slice_

CAP = "capacity-0"
MULTI_CLASS = {"class-a": {"metadata": {"name": "class-a"}, "spec": {"selectors": [{"cel": {
    "expression": f'device.driver == "{DRIVER_A}" && device.allowMultipleAllocations == true'}}]}}}


def shared(name: str, value: str, policy: dict[str, Any] | None = None, **attributes: Any) -> dict[str, Any]:
    d = device(name, **attributes)
    d["allowMultipleAllocations"] = True
    d["capacity"] = {CAP: {"value": value, **({"requestPolicy": policy} if policy else {})}}
    return d


RANGE = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}  # withCapacityRequestPolicyRange


def wanting(name: str, amount: str | None = None, capacity: str = CAP) -> dict[str, Any]:
    req = request(name)
    if amount is not None:
        req["exactly"]["capacity"] = {"requests": {capacity: amount}}
    return req


def shares(got: list[dict[str, Any]] | None) -> list[list[tuple[str, str, dict[str, str] | None]]]:
    """Per claim: (request, device, consumedCapacity) of each result, every one with a share ID."""
    assert got is not None
    out = []
    for alloc in got:
        results = alloc["devices"]["results"]
        assert all(len(r["shareID"]) == 36 for r in results)
        out.append([(r["request"], r["device"], r.get("consumedCapacity")) for r in results])
    return out


def run(claims: list[dict[str, Any]], *devices: dict[str, Any], allocated: Any = None) -> list[dict[str, Any]] | None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, *devices)]
    return Allocator(allocated or set(), MULTI_CLASS, s).allocate(NODE1, claims)


def test_two_claims_share_one_device() -> None:
    two_claims = [claim("claim-0", wanting("req-0", "1")), claim("claim-1", wanting("req-0", "1"))]
    got = run(two_claims, shared("device-1", "2"))
    assert shares(got) == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-1", {CAP: "1"})]]
    ids = [g["devices"]["results"][0]["shareID"] for g in got or []]
    assert ids[0] != ids[1]
    # Without a request, the policy's default is consumed.
    got = run([claim("claim-0", wanting("req-0")), claim("claim-1", wanting("req-0"))], shared("device-1", "4", RANGE))
    assert shares(got) == [[("req-0", "device-1", {CAP: "2"})], [("req-0", "device-1", {CAP: "2"})]]


def test_request_policies_round_up_or_refuse() -> None:
    assert shares(run([claim("claim-0", wanting("req-0", "3"))], shared("device-1", "4", RANGE))) == [
        [("req-0", "device-1", {CAP: "4"})]]  # with-range-policy-step
    valid = {"default": "1", "validValues": ["1", "2"]}
    assert shares(run([claim("claim-0", wanting("req-0", "2"))], shared("device-1", "4", valid))) == [
        [("req-0", "device-1", {CAP: "2"})]]  # with-valid-values-policy
    valid3 = {"default": "1", "validValues": ["1", "3"]}
    assert shares(run([claim("claim-0", wanting("req-0", "2"))], shared("device-1", "3", valid3))) == [
        [("req-0", "device-1", {CAP: "3"})]]  # with-valid-values-policy-round-up
    # with-request-over-max-sharing-policy: 6 < 10, but the policy's max is 4.
    assert run([claim("claim-0", wanting("req-0", "6"))], shared("device-1", "10", RANGE)) is None
    # with-missing-capacity-request: a capacity the device does not have.
    assert run([claim("claim-0", wanting("req-0", "1", capacity="other"))], shared("device-1", "4")) is None


def test_capacity_is_never_over_committed() -> None:
    """with-exceeded-consumable-capacity-request: 1, then 2 (rounded from the range) of 2."""
    claims = [claim("claim-0", wanting("req-0", "1")), claim("claim-1", wanting("req-0", "2"))]
    assert run(claims, shared("device-1", "2", RANGE)) is None


def test_allocated_shares_consume_capacity() -> None:
    """-with-allocated-capacity-use-remaining and -next-device; the allocated state is read from
    claims' results as the plugin does (ListAllAllocatedDevices / GatherAllocatedState)."""
    holder = {"metadata": {"name": "old", "namespace": "default"}, "status": {"allocation": {"devices": {"results": [
        {"request": "req-0", "driver": DRIVER_A, "pool": "pool-1", "device": "device-1",
         "shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "consumedCapacity": {CAP: "2"}}]}}}}
    state = allocated_devices({"default/old": holder})
    assert state.devices == set() and (DRIVER_A, "pool-1", "device-1") in state
    got = run([claim("claim-0", wanting("req-0", "2"))], shared("device-1", "4", RANGE), allocated=state)
    assert shares(got) == [[("req-0", "device-1", {CAP: "2"})]]
    got = run([claim("claim-0", wanting("req-0", "2"))], shared("device-1", "2", RANGE), shared("device-2", "2", RANGE),
              allocated=allocated_devices({"default/old": holder}))
    assert shares(got) == [[("req-0", "device-2", {CAP: "2"})]]


def test_backtracking_over_shared_devices() -> None:
    """consumable-capacity-with-multi-allocatable-device-backtrack: claim-0's two requests must match
    an attribute, so both go to device-1 (capacity 4); claim-1 then gets device-2."""
    c0 = claim("claim-0", wanting("req-0", "2"), wanting("req-1", "2"),
               constraints=[{"matchAttribute": "stringAttribute"}])
    c1 = claim("claim-1", wanting("req-0", "2"))
    got = run([c0, c1], shared("device-2", "2", RANGE, stringAttribute={"string": "stringAttributeValue1"}),
              shared("device-1", "4", RANGE, stringAttribute={"string": "stringAttributeValue2"}))
    assert shares(got) == [[("req-0", "device-1", {CAP: "2"}), ("req-1", "device-1", {CAP: "2"})],
                           [("req-0", "device-2", {CAP: "2"})]]


def test_a_dedicated_device_needs_the_capacity_too() -> None:
    """A capacity request on a device without allowMultipleAllocations: it fits or not, no share."""
    plain = device("device-1")
    plain["capacity"] = {CAP: {"value": "2"}}
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, plain)]
    got = allocate([claim("claim-0", wanting("req-0", "2"))], s)
    assert got is not None and "shareID" not in got[0]["devices"]["results"][0]
    assert allocate([claim("claim-0", wanting("req-0", "3"))], s) is None


def test_negative_request_is_an_error() -> None:
    with pytest.raises(AllocationError, match=r'checking capacity for device .*: capacity "capacity-0": '
                                              r"capacity value is negative"):
        run([claim("claim-0", wanting("req-0", "-1"))], shared("device-1", "4"))


def test_shared_partition_consumes_its_counters_once() -> None:
    """A shared device consuming counters: its first share takes them, further shares do not."""
    d = shared("device-1", "4")
    d["consumesCounters"] = [{"counterSet": "counter-set-1", "counters": {"memory": {"value": "4Gi"}}}]
    counters = slice_("slice-2", "node-1", "pool-1", DRIVER_A, count=2)
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [{"name": "counter-set-1", "counters": {"memory": {"value": "4Gi"}}}]
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, d, count=2), counters]
    got = Allocator(set(), MULTI_CLASS, s).allocate(
        NODE1, [claim("claim-0", wanting("req-0", "1")), claim("claim-1", wanting("req-0", "1"))])
    assert shares(got) == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-1", {CAP: "1"})]]


def test_one_request_never_gets_a_shared_device_twice() -> None:
    """allocateOne's start location: a request's next device is searched after its previous one."""
    assert run([claim("claim-0", wanting("req-0", "1"))], shared("device-1", "4")) is not None
    two = request("req-0", count=2)
    two["exactly"]["capacity"] = {"requests": {CAP: "1"}}
    assert run([claim("claim-0", two)], shared("device-1", "4")) is None
    assert shares(run([claim("claim-0", two)], shared("device-1", "4"), shared("device-2", "4"))) == [
        [("req-0", "device-1", {CAP: "1"}), ("req-0", "device-2", {CAP: "1"})]]
