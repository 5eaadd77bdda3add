"""The structured allocator, mirroring k8s.io/dynamic-resource-allocation/structured/internal/
allocatortesting/allocator_testing.go (v0.37.1, the table ``TestAllocator`` runs for every allocator)
with its fixtures: classA selects driverA's devices by CEL, slices are node-local.

Ported cases: simple, other-node, small-and-large, small-and-large-backtrack-requests,
small-and-large-backtrack-claims, devices-split-across-different-slices, obsolete-slice,
duplicate-slice, no-slices, not-enough-suitable-devices, unknown-class, no-claims-to-allocate,
all-devices-single, all-devices-many, all-devices-of-the-incomplete-pool, all-devices-plus-another,
all-devices-no-solution, all-devices-some-allocated, network-attached-device,
unsuccessful-allocation-network-attached-device, already-allocated-devices, with-constraint,
with-constraint-non-existent-attribute, with-constraint-not-matching-int-attribute,
with-constraint-for-request, with-class-device-config, claim-with-device-config, unknown-allocation-mode,
unknown-constraint, too-many-devices-total, prioritized-list (subrequest fallback).

Ported in test_allocator_features.py: device taints, distinctAttribute, admin access, partitionable
devices (its docstring lists those cases).

Not ported, and why: compatibility-groups-* (alpha), optional-node-operations* (alpha),
consumable-capacity, binding conditions (features kubesched refuses: test_allocator_features.py
tests the refusal), derived attributes, list-type attributes (alpha), and the timeout/cancellation
cases (no context here).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.dynamicresources.allocator import AllocationError, Allocator, FailedOnNodeError
from kubesched.plugins.dynamicresources.pools import NodeRef

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
NODE1, NODE2 = NodeRef("node-1", {"region": "region-1"}), NodeRef("node-2", {"region": "region-2"})


def cls(name: str, driver: str, config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


CLASSES = {"class-a": cls("class-a", DRIVER_A), "class-b": cls("class-b", DRIVER_B)}


def request(name: str, count: int = 1, mode: str = "ExactCount", cls_name: str = "class-a",
            selectors: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    exactly: dict[str, Any] = {"deviceClassName": cls_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"devices": devices}}


def device(name: str, memory: str | None = None, **attributes: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if memory:
        d["capacity"] = {"memory": {"value": memory}}
    if attributes:
        d["attributes"] = attributes
    return d


def slice_(name: str, node: str | None, pool: str, driver: str, *devices: dict[str, Any],
           generation: int = 1, count: int = 1, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                       "resourceSliceCount": count},
                            "devices": list(devices) or [device("device-1")]}
    if node:
        spec["nodeName"] = node
    elif selector:
        spec["nodeSelector"] = selector
    else:
        spec["allNodes"] = True
    return {"metadata": {"name": name}, "spec": spec}


def local(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def result(req: str, pool: str, dev: str, driver: str = DRIVER_A) -> dict[str, Any]:
    return {"request": req, "driver": driver, "pool": pool, "device": dev}


def allocate(claims: list[dict[str, Any]], slices: list[dict[str, Any]], node: NodeRef = NODE1,
             allocated: set[tuple[str, str, str]] | None = None,
             classes: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    return Allocator(allocated or set(), CLASSES if classes is None else classes, slices).allocate(node, claims)


def test_simple() -> None:
    got = allocate([claim("claim-0", request("req-0"))], [slice_("slice-1", "node-1", "pool-1", DRIVER_A)])
    assert got == [{"devices": {"results": [result("req-0", "pool-1", "device-1")]}, "nodeSelector": local("node-1")}]


def test_other_node() -> None:
    slices = [slice_("slice-1", "node-1", "pool-1", DRIVER_B), slice_("slice-2", "node-2", "pool-2", DRIVER_A)]
    got = allocate([claim("claim-0", request("req-0"))], slices, node=NODE2)
    assert got is not None and got[0]["devices"]["results"] == [result("req-0", "pool-2", "device-1")]
    assert got[0]["nodeSelector"] == local("node-2")
    assert allocate([claim("claim-0", request("req-0"))], slices, node=NODE1) is None


SMALL = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("1Gi")) >= 0'
LARGE = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("2Gi")) >= 0'


@pytest.mark.parametrize("order", [("device-1", "device-2"), ("device-2", "device-1")],
                         ids=["small-and-large", "small-and-large-backtrack-requests"])
def test_small_and_large(order: tuple[str, str]) -> None:
    mem = {"device-1": "1Gi", "device-2": "2Gi"}
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, *(device(n, mem[n]) for n in order))
    got = allocate([claim("claim-0", request("req-0", selectors=[SMALL]), request("req-1", selectors=[LARGE]))], [s])
    assert got is not None
    assert got[0]["devices"]["results"] == [result("req-0", "pool-1", "device-1"),
                                            result("req-1", "pool-1", "device-2")]


def test_small_and_large_backtrack_claims() -> None:
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-2", "2Gi"), device("device-1", "1Gi"))
    got = allocate([claim("claim-0", request("req-0", selectors=[SMALL])),
                    claim("claim-1", request("req-1", selectors=[LARGE]))], [s])
    assert got is not None
    assert [g["devices"]["results"] for g in got] == [[result("req-0", "pool-1", "device-1")],
                                                      [result("req-1", "pool-1", "device-2")]]


def test_devices_split_across_different_slices() -> None:
    slices = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-2", "node-1", "pool-1", DRIVER_A, device("device-2"), count=2)]
    got = allocate([claim("claim-0", request("req-0", count=2))], slices)
    assert got is not None and [r["device"] for r in got[0]["devices"]["results"]] == ["device-1", "device-2"]


def test_obsolete_slice() -> None:
    slices = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), generation=1),
              slice_("slice-2", "node-1", "pool-1", DRIVER_A, device("device-2"), generation=2)]
    got = allocate([claim("claim-0", request("req-0"))], slices)
    assert got is not None and got[0]["devices"]["results"] == [result("req-0", "pool-1", "device-2")]


def test_duplicate_slice_is_an_invalid_pool() -> None:
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), count=2)
    with pytest.raises(FailedOnNodeError, match="invalid resource pools were encountered"):
        allocate([claim("claim-0", request("req-0"))], [s, {**s, "metadata": {"name": "slice-2"}}])


def test_no_slices_and_not_enough_devices() -> None:
    assert allocate([claim("claim-0", request("req-0"))], []) is None
    assert allocate([claim("claim-0", request("req-0", count=2))],
                    [slice_("slice-1", "node-1", "pool-1", DRIVER_A)]) is None


def test_unknown_class() -> None:
    with pytest.raises(AllocationError, match="claim default/claim-0, request req-0: could not retrieve device "
                                              "class class-c"):
        allocate([claim("claim-0", request("req-0", cls_name="class-c"))], [slice_("s", "node-1", "p", DRIVER_A)])


def test_no_claims_to_allocate() -> None:
    assert allocate([], [slice_("slice-1", "node-1", "pool-1", DRIVER_A)]) == []


def test_all_devices() -> None:
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"))
    got = allocate([claim("claim-0", request("req-0", mode="All"))], [s])
    assert got is not None and [r["device"] for r in got[0]["devices"]["results"]] == ["device-1", "device-2"]
    # all-devices-some-allocated: All means every matching device, so one taken leaves no solution.
    assert allocate([claim("claim-0", request("req-0", mode="All"))], [s],
                    allocated={(DRIVER_A, "pool-1", "device-1")}) is None
    # all-devices-no-solution: All then one more from a node with only those.
    assert allocate([claim("claim-0", request("req-0", mode="All"), request("req-1"))], [s]) is None
    # all-devices-no-slices
    assert allocate([claim("claim-0", request("req-0", mode="All"))], []) is None


def test_all_devices_plus_another() -> None:
    slices = [slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1")),
              slice_("slice-2", "node-1", "pool-2", DRIVER_B, device("device-1"))]
    got = allocate([claim("claim-0", request("req-0", mode="All"), request("req-1", cls_name="class-b"))], slices)
    assert got is not None and got[0]["devices"]["results"] == [
        result("req-0", "pool-1", "device-1"), result("req-1", "pool-2", "device-1", DRIVER_B)]


def test_all_devices_of_the_incomplete_pool() -> None:
    with pytest.raises(AllocationError, match="asks for all devices, but resource pool driver-a/pool-1 is currently "
                                              "being updated"):
        allocate([claim("claim-0", request("req-0", mode="All"))],
                 [slice_("slice-1", "node-1", "pool-1", DRIVER_A, count=2)])


def test_network_attached_device() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In",
                                                             "values": ["region-1"]}]}]}
    s = slice_("slice-1", None, "pool-1", DRIVER_A, selector=selector)
    got = allocate([claim("claim-0", request("req-0"))], [s])
    assert got is not None and got[0]["nodeSelector"] == selector
    assert allocate([claim("claim-0", request("req-0"))], [s], node=NODE2) is None  # unsuccessful-allocation-...
    everywhere = allocate([claim("claim-0", request("req-0"))], [slice_("slice-1", None, "pool-1", DRIVER_A)])
    assert everywhere is not None and "nodeSelector" not in everywhere[0]


def test_already_allocated_devices() -> None:
    assert allocate([claim("claim-0", request("req-0"))], [slice_("slice-1", "node-1", "pool-1", DRIVER_A)],
                    allocated={(DRIVER_A, "pool-1", "device-1")}) is None


def _attrs(numa: int, version: str = "1.0.0") -> dict[str, Any]:
    return {"driverVersion": {"version": version}, "numa": {"int": numa},
            "stringAttribute": {"string": "stringAttributeValue"}, "boolAttribute": {"bool": True}}


def test_with_constraint() -> None:
    constraints = [{"matchAttribute": f"{DRIVER_A}/{a}"} for a in ("numa", "driverVersion", "stringAttribute",
                                                                    "boolAttribute")]
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1", **_attrs(1)),
               device("device-2", **_attrs(1)))
    got = allocate([claim("claim-0", request("req-0"), request("req-1"), constraints=constraints)], [s])
    assert got is not None and [r["device"] for r in got[0]["devices"]["results"]] == ["device-1", "device-2"]


def test_with_constraint_not_matching() -> None:
    numa = [{"matchAttribute": f"{DRIVER_A}/numa"}]
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1", **_attrs(1)),
               device("device-2", **_attrs(2)))
    assert allocate([claim("claim-0", request("req-0", count=2), constraints=numa)], [s]) is None
    missing = [{"matchAttribute": f"{DRIVER_A}/nonExistentAttribute"}]
    assert allocate([claim("claim-0", request("req-0"), constraints=missing)], [s]) is None


def test_with_constraint_for_request() -> None:
    """The constraint names req-0 only: req-1 may take a device of another NUMA node."""
    constraint = [{"requests": ["req-0"], "matchAttribute": f"{DRIVER_A}/numa"}]
    s = slice_("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1", **_attrs(1)),
               device("device-2", **_attrs(2)))
    got = allocate([claim("claim-0", request("req-0"), request("req-1"), constraints=constraint)], [s])
    assert got is not None and len(got[0]["devices"]["results"]) == 2


def test_class_and_claim_config() -> None:
    opaque = {"opaque": {"driver": DRIVER_A, "parameters": {"a": 1}}}
    classes = {"class-a": cls("class-a", DRIVER_A, config=[opaque])}
    got = allocate([claim("claim-0", request("req-0"), config=[{"requests": ["req-0"], **opaque}])],
                   [slice_("slice-1", "node-1", "pool-1", DRIVER_A)], classes=classes)
    assert got is not None
    # One request only: both configs apply to all requests, so their request lists are dropped.
    assert got[0]["devices"]["config"] == [{"source": "FromClass", **opaque}, {"source": "FromClaim", **opaque}]


def test_unknown_allocation_mode_and_constraint() -> None:
    s = [slice_("slice-1", "node-1", "pool-1", DRIVER_A)]
    with pytest.raises(AllocationError, match="unsupported count mode Sometimes"):
        allocate([claim("claim-0", request("req-0", mode="Sometimes"))], s)
    with pytest.raises(AllocationError, match=r"constraint #0: empty constraint \(unsupported constraint type\?\)"):
        allocate([claim("claim-0", request("req-0"), constraints=[{}])], s)


def test_too_many_devices_total() -> None:
    with pytest.raises(AllocationError, match="exceeds the claim limit of 32"):
        allocate([claim("claim-0", request("req-0", count=32), request("req-1"))], [])


def test_prioritized_list_falls_back_to_the_next_subrequest() -> None:
    subs = {"name": "req-0", "firstAvailable": [
        {"name": "large", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 2},
        {"name": "small", "deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 1}]}
    got = allocate([claim("claim-0", subs)], [slice_("slice-1", "node-1", "pool-1", DRIVER_A)])
    assert got is not None and got[0]["devices"]["results"] == [result("req-0/small", "pool-1", "device-1")]


def test_cel_runtime_error_names_the_class_and_device() -> None:
    classes = {"class-a": {"metadata": {"name": "class-a"},
                           "spec": {"selectors": [{"cel": {"expression": 'device.attributes["x"].model == "a"'}}]}}}
    with pytest.raises(AllocationError, match="class class-a: selector #0 on device driver-a/pool-1/device-1: CEL "
                                              "runtime error: no such key: model"):
        allocate([claim("claim-0", request("req-0"))], [slice_("slice-1", "node-1", "pool-1", DRIVER_A)],
                 classes=classes)
