"""The structured allocator's v1.37 features: device taints and tolerations (with DeviceTaintRules),
``distinctAttribute``, admin access and partitionable devices. Cases ported from
k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go
(v0.37.1) with its fixtures (test_allocator.py's helpers), feature gates as v1.37's defaults.

Ported cases: tainted-two-devices, tainted-one-device-two-taints, tainted-two-devices-tolerated,
tainted-two-devices-prioritized-list-tolerated, tainted-no-effect,
tainted-one-device-two-taints-both-tolerated, tainted-prioritized-list, tainted-admin-access,
tainted-all-devices-single, with-distinct-constraints (on plain devices: allowMultipleAllocations is
consumable capacity), distinct-constraint-single-request-count-3-not-distinct,
distinct-constraint-single-request-count-3-all-distinct,
distinct-constraint-two-requests-with-count-not-distinct, admin-access-enabled,
all-devices-some-allocated-admin-access, all-devices-some-allocating-admin-access,
count-devices-some-allocated-admin-access, separate-claims-share-device-admin-access,
admin-access-claims-device-allocating-for-non-admin-access, partitionable-devices-single-device,
partitionable-devices-taint-releases-counter, partitionable-devices-constraint-releases-counter,
partitionable-devices-no-capacity-available and partitionable-devices-overallocated-capacity-pool
(with a resourceSliceCount of 2: upstream's fixture declares 1 for two slices, so the pool is
incomplete and the case passes without reaching the counters), partitionable-devices-multiple-devices,
partitionable-devices-per-device-node-selection-nodename.

Consumable capacity: test_allocator_capacity.py.

Not ported, and why: the ``*-disabled`` variants (the gates are on in v1.37 and kubesched has no
switch for them), partitionable-*-binding-conditions* (test_binding_conditions.py has two),
compatibility-groups-* (alpha),
partitionable-devices-counter-cache-not-crossed-between-driver-schemas and
-counter-quantities-are-not-modified (Go aliasing of resource.Quantity; Python's Fractions are
immutable), the remaining partitionable-* cases (multiple pools, counter sets and per-device node
selectors exercise the same code as the ported ones).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.dynamicresources.allocator import AllocationError, Allocator
from unit.plugins.dynamicresources.test_allocator import (
    CLASSES,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    allocate,
    claim,
    device,
    local,
    request,
    result,
    slice_,
)

TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TOLERATE_NO_SCHEDULE = {"operator": "Equal", "key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}


def tainted(name: str, *taints: dict[str, Any], **attributes: dict[str, Any]) -> dict[str, Any]:
    d = device(name, **attributes)
    d["taints"] = list(taints)
    return d


def tolerating(req: dict[str, Any], *tolerations: dict[str, Any]) -> dict[str, Any]:
    req["exactly"]["tolerations"] = list(tolerations)
    return req


def admin(req: dict[str, Any]) -> dict[str, Any]:
    req["exactly"]["adminAccess"] = True
    return req


def only(got: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    assert got is not None and len(got) == 1
    results: list[dict[str, Any]] = got[0]["devices"]["results"]
    return results


# -- device taints ---------------------------------------------------------------------------------

TWO_TAINTED = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE),
                      tainted("device-2", TAINT_NO_EXECUTE))]


def test_tainted_devices_are_not_allocated() -> None:
    assert allocate([claim("claim-0", request("req-0"))], TWO_TAINTED) is None  # tainted-two-devices
    both = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE))]
    assert allocate([claim("claim-0", request("req-0"))], both) is None  # tainted-one-device-two-taints
    all_mode = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE))]
    assert allocate([claim("claim-0", request("req-0", mode="All"))], all_mode) is None  # tainted-all-devices-single


def test_tolerated_taint_allocates_with_the_tolerations_in_the_result() -> None:
    got = allocate([claim("claim-0", tolerating(request("req-0"), TOLERATE_NO_EXECUTE))], TWO_TAINTED)
    assert only(got) == [{**result("req-0", "pool-1", "device-2"), "tolerations": [TOLERATE_NO_EXECUTE]}]
    both = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE))]
    got = allocate([claim("claim-0", tolerating(request("req-0"), TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE))], both)
    assert only(got) == [{**result("req-0", "pool-1", "device-1"),
                           "tolerations": [TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]}]


def test_taint_without_a_known_effect_does_not_prevent_allocation() -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NONE))]
    assert only(allocate([claim("claim-0", request("req-0"))], s)) == [result("req-0", "pool-1", "device-1")]


def test_prioritized_list_with_taints() -> None:
    tolerant = {"name": "req-0", "firstAvailable": [
        {"name": "subreq-0", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1},
        {"name": "subreq-1", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1,
         "tolerations": [TOLERATE_NO_EXECUTE]}]}
    got = allocate([claim("claim-0", tolerant)], TWO_TAINTED)  # tainted-two-devices-prioritized-list-tolerated
    assert only(got) == [{**result("req-0/subreq-1", "pool-1", "device-2"), "tolerations": [TOLERATE_NO_EXECUTE]}]
    intolerant = {"name": "req-0", "firstAvailable": [
        {"name": "subreq-0", "deviceClassName": "class-b", "allocationMode": "ExactCount", "count": 1},
        {"name": "subreq-1", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1}]}
    one = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE))]
    assert allocate([claim("claim-0", intolerant)], one) is None  # tainted-prioritized-list


def test_taints_apply_to_admin_access() -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, tainted("device-1", TAINT_NO_SCHEDULE))]
    allocated = {(DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2")}
    assert allocate([claim("claim-0", admin(request("req-0")))], s, allocated=allocated) is None


def rule(name: str, taint: dict[str, Any], **selector: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"deviceSelector": selector, "taint": taint}}


def test_device_taint_rules_taint_the_devices_they_select() -> None:
    """The slice tracker's applyPatches: driver, pool and device narrow the rule; none set: all
    devices; no selector: none."""
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"))]
    c = [claim("claim-0", request("req-0"))]

    def run(*rules: dict[str, Any]) -> list[dict[str, Any]] | None:
        return Allocator(set(), CLASSES, s, list(rules)).allocate(NODE1, c)

    assert only(run(rule("r", TAINT_NO_SCHEDULE, device="device-1"))) == [result("req-0", "pool-1", "device-2")]
    assert run(rule("r", TAINT_NO_SCHEDULE, driver=DRIVER_A)) is None
    assert run(rule("r", TAINT_NO_EXECUTE, pool="pool-1", device="device-2"),
               rule("r2", TAINT_NO_SCHEDULE, device="device-1")) is None
    assert only(run(rule("r", TAINT_NO_SCHEDULE, driver=DRIVER_B))) == [result("req-0", "pool-1", "device-1")]
    assert only(run(rule("r", TAINT_NO_SCHEDULE, pool="pool-2"))) == [result("req-0", "pool-1", "device-1")]
    no_selector = {"metadata": {"name": "r"}, "spec": {"taint": TAINT_NO_SCHEDULE}}
    assert only(run(no_selector)) == [result("req-0", "pool-1", "device-1")]
    tolerant = [claim("claim-0", tolerating(request("req-0"), {"operator": "Exists", "key": "taint-key"}))]
    got = Allocator(set(), CLASSES, s, [rule("r", TAINT_NO_SCHEDULE)]).allocate(NODE1, tolerant)
    assert only(got)[0]["device"] == "device-1"
    assert s[0]["spec"]["devices"][0].get("taints") is None  # the informer's copy is not modified


# -- distinctAttribute -----------------------------------------------------------------------------

def attrs(name: str, **values: Any) -> dict[str, Any]:
    kinds = {bool: "bool", int: "int", str: "string"}
    return device(name, **{k: ({"version": v.removeprefix("semver:")} if isinstance(v, str) and v.startswith("semver:")
                               else {kinds[type(v)]: v}) for k, v in values.items()})


def test_with_distinct_constraints() -> None:
    c = claim("claim-0", request("req-0"), request("req-1"), request("req-2"), request("req-3"), constraints=[
        {"distinctAttribute": "boolAttribute", "requests": ["req-0", "req-1"]},
        {"distinctAttribute": "driverVersion", "requests": ["req-0", "req-1", "req-2"]},
        {"distinctAttribute": "numa", "requests": ["req-0", "req-1", "req-2", "req-3"]}])
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A,
                attrs("device-1", driverVersion="semver:1.0.0", numa=0, boolAttribute=True),
                attrs("device-2", driverVersion="semver:1.0.1", numa=1, boolAttribute=False),
                attrs("device-3", driverVersion="semver:1.0.2", numa=2, boolAttribute=True),
                attrs("device-4", driverVersion="semver:1.0.0", numa=3, boolAttribute=True))]
    assert only(allocate([c], s)) == [result(f"req-{i}", "pool-1", f"device-{i + 1}") for i in range(4)]


def test_distinct_constraint_needs_pairwise_distinct_values() -> None:
    values = ("value1", "value2", "value1")
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A,
                *(attrs(f"device-{i + 1}", stringAttribute=v) for i, v in enumerate(values)))]
    one_request = claim("claim-0", request("req-0", count=3), constraints=[{"distinctAttribute": "stringAttribute"}])
    assert allocate([one_request], s) is None
    two_requests = claim("claim-0", request("req-0", count=2), request("req-1"), constraints=[
        {"distinctAttribute": "stringAttribute", "requests": ["req-0", "req-1"]}])
    assert allocate([two_requests], s) is None
    distinct = [slice_("slice-1", "node-1", "pool-1", DRIVER_A,
                       *(attrs(f"device-{i}", stringAttribute=f"value{i}") for i in (1, 2, 3)))]
    assert only(allocate([one_request], distinct)) == [result("req-0", "pool-1", f"device-{i}") for i in (1, 2, 3)]
    # Backtracking: the second pick moves on from device-3 (value1 again) once device-2 is taken.
    s2 = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, attrs("device-1", stringAttribute="a"),
                 attrs("device-2", stringAttribute="a"), attrs("device-3", stringAttribute="b"))]
    pair = claim("claim-0", request("req-0", count=2), constraints=[{"distinctAttribute": "stringAttribute"}])
    assert only(allocate([pair], s2)) == [result("req-0", "pool-1", "device-1"), result("req-0", "pool-1", "device-3")]


def test_distinct_constraint_skips_devices_without_the_attribute() -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"))]
    c = claim("claim-0", request("req-0"), constraints=[{"distinctAttribute": "boolAttribute", "requests": ["req-0"]}])
    assert allocate([c], s) is None


# -- admin access ----------------------------------------------------------------------------------

TWO_DEVICES = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"))]


def admin_result(req: str, dev: str) -> dict[str, Any]:
    return {**result(req, "pool-1", dev), "adminAccess": True}


def test_admin_access_gets_allocated_devices() -> None:
    allocated = {(DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2")}
    got = allocate([claim("claim-0", admin(request("req-0")))],
                   [slice_("slice-1", "node-1", "pool-1", DRIVER_A)], allocated=allocated)  # admin-access-enabled
    assert got == [{"devices": {"results": [admin_result("req-0", "device-1")]}, "nodeSelector": local("node-1")}]
    some = {(DRIVER_A, "pool-1", "device-1")}
    got = allocate([claim("claim-0", admin(request("req-0", mode="All")))], TWO_DEVICES, allocated=some)
    assert only(got) == [admin_result("req-0", "device-1"), admin_result("req-0", "device-2")]
    got = allocate([claim("claim-0", admin(request("req-0", count=2)))], TWO_DEVICES, allocated=some)
    assert only(got) == [admin_result("req-0", "device-1"), admin_result("req-0", "device-2")]


def test_admin_access_never_gives_one_device_twice_in_a_claim() -> None:
    c = claim("claim-0", admin(request("req-0")), admin(request("req-1", mode="All")))
    assert allocate([c], TWO_DEVICES) is None  # all-devices-some-allocating-admin-access


def test_admin_access_shares_a_device_with_other_claims() -> None:
    got = allocate([claim("claim-0", admin(request("req-0"))), claim("claim-1", admin(request("req-0")))], TWO_DEVICES)
    assert got is not None and [g["devices"]["results"] for g in got] == [[admin_result("req-0", "device-1")]] * 2
    got = allocate([claim("claim-0", request("req-0")), claim("claim-1", admin(request("req-0")))], TWO_DEVICES)
    assert got is not None and [g["devices"]["results"] for g in got] == [
        [result("req-0", "pool-1", "device-1")], [admin_result("req-0", "device-1")]]


# -- partitionable devices -------------------------------------------------------------------------

def consuming(name: str, counter_set: str = "counter-set-1", **counters: str) -> dict[str, Any]:
    d = device(name)
    d["consumesCounters"] = [{"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}]
    return d


def counters_slice(name: str, node: str | None, pool: str, count: int, **counters: str) -> dict[str, Any]:
    s = slice_(name, node, pool, DRIVER_A, count=count)
    del s["spec"]["devices"]
    s["spec"]["sharedCounters"] = [{"name": "counter-set-1",
                                    "counters": {k: {"value": v} for k, v in counters.items()}}]
    return s


def test_partitionable_single_device() -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, consuming("device-1", memory="4Gi"), count=2),
         counters_slice("slice-2", "node-1", "pool-1", 2, memory="8Gi")]
    assert only(allocate([claim("claim-0", request("req-0"))], s)) == [result("req-0", "pool-1", "device-1")]


def test_partitions_never_over_commit_the_counters() -> None:
    """MIG-like: three partitions of 4Gi, 4Gi and 8Gi on a 12Gi GPU; two of them fit, not three."""
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, consuming("device-1", memory="4Gi"),
                consuming("device-2", memory="8Gi"), consuming("device-3", memory="4Gi"), count=2),
         counters_slice("slice-2", "node-1", "pool-1", 2, memory="12Gi")]
    assert only(allocate([claim("claim-0", request("req-0", count=2))], s)) == [
        result("req-0", "pool-1", "device-1"), result("req-0", "pool-1", "device-2")]
    assert allocate([claim("claim-0", request("req-0", count=3))], s) is None
    # What allocated partitions consume is gone: with device-2 allocated, only 4Gi are left.
    allocated = {(DRIVER_A, "pool-1", "device-2")}
    assert only(allocate([claim("claim-0", request("req-0"))], s, allocated=allocated)) == [
        result("req-0", "pool-1", "device-1")]
    assert allocate([claim("claim-0", request("req-0", count=2))], s, allocated=allocated) is None
    # Across claims of one pod too.
    assert allocate([claim("claim-0", request("req-0", count=2)), claim("claim-1", request("req-0"))], s) is None


@pytest.mark.parametrize("allocated_memory", ["16Gi", "20Gi"],
                         ids=["partitionable-devices-no-capacity-available",
                              "partitionable-devices-overallocated-capacity-pool"])
def test_no_counters_left(allocated_memory: str) -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, consuming("device-1", memory="4Gi"),
                consuming("device-2", memory=allocated_memory), count=2),
         counters_slice("slice-2", "node-1", "pool-1", 2, memory="18Gi")]
    assert allocate([claim("claim-0", request("req-0"))], s, allocated={(DRIVER_A, "pool-1", "device-2")}) is None


def test_rejected_device_releases_its_counters() -> None:
    taint = consuming("device-1", c="1")
    taint["taints"] = [TAINT_NO_SCHEDULE]
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, taint, consuming("device-2", c="1"), count=2),
         counters_slice("slice-2", "node-1", "pool-1", 2, c="1")]
    assert only(allocate([claim("claim-0", request("req-0"))], s)) == [result("req-0", "pool-1", "device-2")]
    colours = []
    for i, colour in enumerate(("red", "blue", "blue")):
        d = consuming(f"device-{i + 1}", c="1")
        d["attributes"] = {"stringAttribute": {"string": colour}}
        colours.append(d)
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, *colours, count=2),
         counters_slice("slice-2", "node-1", "pool-1", 2, c="2")]
    c = claim("claim-0", request("req-0", count=2), constraints=[{"matchAttribute": "stringAttribute"}])
    assert only(allocate([c], s)) == [result("req-0", "pool-1", "device-2"), result("req-0", "pool-1", "device-3")]


def test_per_device_node_selection() -> None:
    """partitionable-devices-per-device-node-selection-nodename: the slice's devices each name
    their node; the allocation is pinned to the device's node."""
    d1, d2 = consuming("device-1", memory="4Gi"), consuming("device-2", memory="6Gi")
    d1["capacity"], d2["capacity"] = {"memory": {"value": "4Gi"}}, {"memory": {"value": "6Gi"}}
    d1["nodeName"], d2["nodeName"] = "node-1", "node-2"
    devices_slice = slice_("slice-1", None, "pool-1", DRIVER_A, d1, d2, count=2)
    del devices_slice["spec"]["allNodes"]
    devices_slice["spec"]["perDeviceNodeSelection"] = True
    counters = counters_slice("slice-2", None, "pool-1", 2, memory="18Gi")
    mem = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
    req = {"name": "req-0", "firstAvailable": [
        {"name": "subreq-0", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1,
         "selectors": [{"cel": {"expression": mem.format("6Gi")}}]},
        {"name": "subreq-1", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1,
         "selectors": [{"cel": {"expression": mem.format("4Gi")}}]}]}
    got = allocate([claim("claim-0", req)], [devices_slice, counters])
    assert got == [{"devices": {"results": [result("req-0/subreq-1", "pool-1", "device-1")]},
                    "nodeSelector": local("node-1")}]
    got = allocate([claim("claim-0", req)], [devices_slice, counters], node=NODE2)
    assert got is not None and got[0]["devices"]["results"] == [result("req-0/subreq-0", "pool-1", "device-2")]


def test_bad_counters_make_the_pool_invalid() -> None:
    """buildPool's validation: a device consuming a counter set or counter the pool lacks."""
    for bad in (consuming("device-1", counter_set="other", memory="1Gi"), consuming("device-1", gpus="1")):
        s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, bad, count=2),
             counters_slice("slice-2", "node-1", "pool-1", 2, memory="8Gi")]
        with pytest.raises(AllocationError, match="invalid resource pools were encountered"):
            allocate([claim("claim-0", request("req-0"))], s)
