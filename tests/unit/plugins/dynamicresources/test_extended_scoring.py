"""NodeResourcesFit and NodeResourcesBalancedAllocation scoring extended resources backed by DRA:
ports of upstream v1.37.1 resource_allocation_test.go ``TestCalculateResourceAllocatableRequest``
(every case but ``device-plugin-resource-feature-disabled``: DRAExtendedResource is GA, the gate
cannot be off), fit_test.go's "test case for ScoringStrategy LeastAllocated with Extended
resources" (with and without PreScore) and balanced_allocation_test.go's "include DRA resource on a
node for balanced resource allocation" (with and without PreScore), expected values as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.status import Status
from kubesched.plugins.dynamicresources import DynamicResources
from kubesched.plugins.dynamicresources.manager import DRAManager
from kubesched.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import node, pod, table_of
from kubesched.testing.harness import handle

DRIVER = "test-driver"
NODE = "node-1"
CLASS = "device-class-name"
EXPLICIT = "extended.resource.dra.io/something"
IMPLICIT = "deviceclass.resource.kubernetes.io/" + CLASS


def device_class(resource: str | None = EXPLICIT, selector: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"extendedResourceName": resource} if resource else {}
    if selector:
        spec["selectors"] = [{"cel": {"expression": selector}}]
    return {"kind": "DeviceClass", "metadata": {"name": CLASS, "resourceVersion": "1"}, "spec": spec}


def slice_of(node_name: str, *devices: str) -> dict[str, Any]:
    """st.MakeResourceSlice(node, driver): pool named after the node."""
    return {"kind": "ResourceSlice", "metadata": {"name": f"{node_name}-{DRIVER}", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devices]}}


def allocated_claim(name: str, device: str, pool: str = NODE, share_id: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "req-1", "driver": DRIVER, "pool": pool, "device": device}
    if share_id:
        result["shareID"] = share_id
    return {"kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "req-1", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}


def dra_handle(table: NodeTable, objects: Sequence[dict[str, Any]]) -> Handle:
    """A handle whose profile has DynamicResources (the DRA manager) over ``objects``."""
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for obj in objects:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
        by_kind.setdefault(obj["kind"], {})[key] = obj
    h = handle(table, objects=lambda kind: by_kind.get(kind, {}))
    DynamicResources(None, h)
    return h


def gpu_pod(resource: str, count: str = "1") -> PodInfo:
    return PodInfo.from_raw(pod("p", containers=[{"name": "c", "resources": {"requests": {resource: count}}}]))


# -- calculateResourceAllocatableRequest --------------------------------------------------------------
PER_DEVICE_SELECTOR = ('device.driver == "test-driver" && device.capacity["test-driver"].memory.compareTo('
                       'quantity("8Gi")) >= 0 && device.attributes["test-driver"].model.startsWith("SOME-")')


def per_device_slice() -> dict[str, Any]:
    def gpu(name: str, model: str, memory: str, **where: Any) -> dict[str, Any]:
        return {"name": name, "attributes": {"model": {"string": model}}, "capacity": {"memory": {"value": memory}},
                **where}

    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
                                                          "values": ["us-east-1a"]}]}]}
    return {"kind": "ResourceSlice", "metadata": {"name": "per-device-slice", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "pool": {"name": "per-device-pool", "resourceSliceCount": 1},
                     "perDeviceNodeSelection": True,
                     "devices": [gpu("device-1", "SOME-XYZ", "16Gi", nodeName=NODE),
                                 gpu("device-2", "SOME-ZYX", "12Gi", nodeName="other-node"),
                                 gpu("device-3", "SOME-XZY", "24Gi", nodeSelector=zone)]}}


ALLOCATABLE_CASES = [
    # (name, node allocatable of the resource, resource, objects, allocatable, allocated)
    ("device-plugin-resource-feature-enabled", "4", EXPLICIT, [], 4, 0),
    ("DRA-backed-resource-explicit", None, EXPLICIT, [device_class(), slice_of(NODE, "device-1")], 1, 0),
    ("DRA-backed-resource-implicit", None, IMPLICIT, [device_class(None), slice_of(NODE, "device-1")], 1, 0),
    ("DRA-backed-resource-no-slices", None, EXPLICIT, [device_class()], 0, 0),
    ("DRA-backed-resource-with-allocated-device", None, EXPLICIT,
     [device_class(), slice_of(NODE, "device-1", "device-2"), allocated_claim("test-claim", "device-1")], 2, 1),
    ("DRA-backed-resource-with-shared-device-allocation", None, EXPLICIT,
     [device_class(), slice_of(NODE, "device-1", "device-2"),
      allocated_claim("test-claim", "device-1", share_id="share-123")], 2, 1),
    ("DRA-backed-resource-multiple-devices-mixed-allocation", None, EXPLICIT,
     [device_class(), slice_of(NODE, "device-1", "device-2", "device-3"), allocated_claim("test-claim-1", "device-1"),
      allocated_claim("test-claim-2", "device-2", share_id="share-456")], 3, 2),
    ("DRA-backed-resource-with-per-device-node-selection", None, EXPLICIT,
     [device_class(selector=PER_DEVICE_SELECTOR), per_device_slice(),
      allocated_claim("test-claim", "device-1", pool="per-device-pool")], 2, 1),
]


@pytest.mark.parametrize(("name", "node_amount", "resource", "objects", "allocatable", "allocated"),
                         ALLOCATABLE_CASES, ids=[c[0] for c in ALLOCATABLE_CASES])
def test_allocatable_and_allocated_of_an_extended_resource(
        name: str, node_amount: str | None, resource: str, objects: list[dict[str, Any]], allocatable: int,
        allocated: int) -> None:
    table = table_of(node(NODE, labels={"zone": "us-east-1a"},
                          extra={resource: node_amount} if node_amount else None))
    h = dra_handle(table, objects)
    fit = NodeResourcesFit(NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": resource, "weight": 1}]}}), h)
    p = gpu_pod(resource)
    rows = table.alive_rows()
    requests = fit.allocation.pod_request_list(p)
    alloc, requested, known_nonzero = fit.allocation.allocatable_requested(table, rows, requests)
    counter = fit.allocation.dra_counter(h)
    if counter is not None and not known_nonzero:
        fit.allocation.add_dra_backed(table, rows, requests, counter, alloc, requested)
    # requested is what the node holds plus the pod's 1 wherever the resource is scored.
    assert (int(alloc[0, 0]), int(requested[0, 0]) - 1 if alloc[0, 0] else 0) == (allocatable, allocated)


# -- NodeResourcesFit's Score -------------------------------------------------------------------------
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_least_allocated_scores_dra_backed_resource_by_devices(run_pre_score: bool) -> None:
    table = table_of(node("node1"), node("node2"))
    h = dra_handle(table, [device_class(), slice_of("node1", "device-1", "device-2", "device-3"),
                           slice_of("node2", "device-1", "device-2")])
    fit = NodeResourcesFit(NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": EXPLICIT, "weight": 1}]}}), h)
    p, state, rows = gpu_pod(EXPLICIT), CycleState(), table.alive_rows()
    if run_pre_score:
        assert fit.pre_score(state, p, table, rows).is_success
    scores = fit.score_batch(state, p, table, rows)
    assert not isinstance(scores, Status)
    assert list(scores) == [66, 50]


def test_without_dynamic_resources_in_the_profile_the_resource_is_not_scored() -> None:
    """Difference: no DRA manager without DynamicResources, so the resource counts nowhere."""
    table = table_of(node("node1"), node("node2"))
    fit = NodeResourcesFit(NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": EXPLICIT, "weight": 1}]}}),
        handle(table))
    p, state, rows = gpu_pod(EXPLICIT), CycleState(), table.alive_rows()
    assert fit.pre_score(state, p, table, rows).is_success
    assert list(np.asarray(fit.score_batch(state, p, table, rows))) == [0, 0]


def test_devices_in_flight_count_as_allocated() -> None:
    """GatherAllocatedState includes the claims Reserve allocated that PreBind has not written."""
    table = table_of(node("node1"))
    h = dra_handle(table, [device_class(), slice_of("node1", "device-1", "device-2")])
    manager = h.dra_manager
    assert isinstance(manager, DRAManager)
    counter = manager.extended_resource_counter([EXPLICIT])
    assert counter is not None and counter.totals(EXPLICIT, "node1", {}) == (2, 0)
    manager.signal_pending("uid-x", allocated_claim("x", "device-2", pool="node1"), "pod-uid")
    counter = manager.extended_resource_counter([EXPLICIT])
    assert counter is not None and counter.totals(EXPLICIT, "node1", {}) == (2, 1)
    manager.release("uid-x", "pod-uid")  # Unreserve, or PreBind wrote it (then it is a claim's)
    counter = manager.extended_resource_counter([EXPLICIT])
    assert counter is not None and counter.totals(EXPLICIT, "node1", {}) == (2, 0)


# -- NodeResourcesBalancedAllocation's Score ---------------------------------------------------------
def _container(cpu: str, memory: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}


@pytest.mark.parametrize("run_pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_balanced_allocation_includes_dra_resource(run_pre_score: bool) -> None:
    nodes = [node(n, cpu="3500m", memory="40000") for n in ("node1", "node2")]
    existing = [pod("a", node_name="node1", containers=[_container("1000m", "0"), _container("2000m", "0")]),
                pod("b", node_name="node2", containers=[_container("1000m", "2000"), _container("2000m", "3000")])]
    table = table_of(*nodes, pods=existing)
    h = dra_handle(table, [device_class(), slice_of("node1", *(f"device-{i}" for i in range(1, 9)))])
    plugin = NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs.model_validate(
        {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                       {"name": EXPLICIT, "weight": 1}]}), h)
    p, state, rows = gpu_pod(EXPLICIT), CycleState(), table.alive_rows()
    if run_pre_score:
        assert plugin.pre_score(state, p, table, rows).is_success
    scores = plugin.score_batch(state, p, table, rows)
    assert not isinstance(scores, Status)
    assert list(scores) == [76, 75]
