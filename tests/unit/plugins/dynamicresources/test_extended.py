"""Extended resources backed by DRA (DeviceClass ``extendedResourceName``): ports of
extendeddynamicresources_test.go ``Test_createRequestsAndMappings_requests`` (v1.37.1, every case) and
of dynamicresources_test.go's extended-resource-* cases: with-node-resource,
one-device-plugin-one-dra, with-zero-allocatable, non-DRA-extended-resource-name-with-zero-allocatable,
no-resource, with-resources, implicit-extended-resource-name-with-resources, fail-patch,
has-claim, delete-claim, bind-failure, skip-bind, claim-creation-failure; and NodeResourcesFit
leaving such a resource to DynamicResources on nodes without it (``shouldDelegateResourceToDRA``).

Not ported: ``Test_createRequestsAndMappings_mappings`` beyond the mappings checked below (the
requests table covers the same container walks), the metrics assertions (kubesched has no
``resourceclaim_creates_total``).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.objects import ObjectKind
from kubesched.framework.status import Code
from kubesched.framework.types import ActionType, ClusterEvent
from kubesched.plugins.dynamicresources import DynamicResources
from kubesched.plugins.dynamicresources.claims import FINALIZER
from kubesched.plugins.dynamicresources.extended import requests_and_mappings
from kubesched.plugins.noderesources.fit import NodeResourcesFit
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import new_plugin, node, pod, table_of
from unit.plugins.dynamicresources.test_plugin import CLASS, DRIVER, NODE, POD, POD_UID, resource_slice, verdict

GPU = "example.com/gpu"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def mapped_class(name: str = CLASS, resource: str | None = GPU) -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def container(name: str, requests: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "x", "resources": {"requests": requests, "limits": requests}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def gpu_pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> PodInfo:
    raw = pod(POD, containers=list(containers) or [container("app", {GPU: "1"})],
              **({"initContainers": list(init)} if init else {}))
    raw["metadata"]["uid"] = POD_UID
    return PodInfo.from_raw(raw)


# -- createRequestsAndMappings ------------------------------------------------------------------------
R, R1, RI = GPU, GPU + "1", GPU + "init"
CLASSES = {R: mapped_class("class"), R1: mapped_class("class1", R1), RI: mapped_class("classInit", RI)}


def req(name: str, cls: str, count: int) -> tuple[str, str, int]:
    return name, cls, count


@pytest.mark.parametrize(("p", "extended", "classes", "want"), [
    # nil
    (gpu_pod(container("c", {R: "1", R1: "2"})), {}, {R: CLASSES[R]}, []),
    # one resource match
    (gpu_pod(container("c", {R: "1", R1: "2"})), {R: 1}, {R: CLASSES[R]}, [req("container-0-request-0", "class", 1)]),
    # one resource match, one resource not match
    (gpu_pod(container("c", {R: "1", R1: "2"})), {R: 1, R1: 2}, {R: CLASSES[R]},
     [req("container-0-request-0", "class", 1)]),
    # two resources match
    (gpu_pod(container("c", {R: "1", R1: "2"})), {R: 1, R1: 2}, {R: CLASSES[R], R1: CLASSES[R1]},
     [req("container-0-request-0", "class", 1), req("container-0-request-1", "class1", 2)]),
    # two containers match
    (gpu_pod(container("c0", {R: "1"}), container("c1", {R1: "2"})), {R: 1, R1: 2},
     {R: CLASSES[R], R1: CLASSES[R1]},
     [req("container-0-request-0", "class", 1), req("container-1-request-0", "class1", 2)]),
    # one init container, one regular container
    (gpu_pod(container("c", {R: "1"}), init=(container("i0", {RI: "2"}),)), {R: 1, RI: 2},
     {R: CLASSES[R], RI: CLASSES[RI]},
     [req("container-0-request-0", "classInit", 2), req("container-1-request-0", "class", 1)]),
    # two init containers, one regular container
    (gpu_pod(container("c", {R: "1"}), init=(container("i0", {RI: "1"}), container("i1", {RI: "2"}))),
     {R: 1, RI: 2}, {R: CLASSES[R], RI: CLASSES[RI]},
     [req("container-1-request-0", "classInit", 2), req("container-2-request-0", "class", 1)]),
    # three init containers, one sidecar, one regular container
    (gpu_pod(container("c", {R: "1"}), init=(container("i0", {RI: "1"}), container("s1", {RI: "1"}, sidecar=True),
                                             container("i2", {RI: "2"}))),
     {R: 1, RI: 2}, {R: CLASSES[R], RI: CLASSES[RI]},
     [req("container-1-request-0", "classInit", 1), req("container-2-request-0", "classInit", 2),
      req("container-3-request-0", "class", 1)]),
])
def test_requests_per_container_as_upstream(p: PodInfo, extended: dict[str, int], classes: dict[str, Any],
                                            want: list[tuple[str, str, int]]) -> None:
    requests, _ = requests_and_mappings(p, extended, classes)
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests] == want
    assert all(r["exactly"]["allocationMode"] == "ExactCount" for r in requests)


def test_init_container_reuses_the_devices_of_a_later_sidecar() -> None:
    p = gpu_pod(container("c", {R: "1"}), init=(container("i0", {RI: "1"}), container("s1", {RI: "1"}, sidecar=True),
                                                container("i2", {RI: "2"})))
    _, mappings = requests_and_mappings(p, {R: 1, RI: 2}, {R: CLASSES[R], RI: CLASSES[RI]})
    assert {(m["containerName"], m["resourceName"], m["requestName"]) for m in mappings} == {
        ("c", R, "container-3-request-0"),
        ("s1", RI, "container-1-request-0"),
        ("i0", RI, "container-1-request-0"),  # covered by the sidecar's device
        ("i2", RI, "container-2-request-0"),
    }


# -- the plugin -----------------------------------------------------------------------------------------
class FakeAPI:
    """ResourceClaims (create with generateName, update, status update, delete) and pod status patches."""

    def __init__(self) -> None:
        self.claims: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.pod_status: dict[str, Any] = {}
        self.fail_create: str | None = None
        self.fail_patch: str | None = None
        self._version = 10

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._version)
        self.claims[f"{stored['metadata']['namespace']}/{stored['metadata']['name']}"] = stored
        return copy.deepcopy(stored)

    async def create_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        if self.fail_create:
            raise RuntimeError(self.fail_create)
        assert "name" not in obj["metadata"] and "uid" not in obj["metadata"]
        self.log.append("create")
        return self._store({**obj, "metadata": {**obj["metadata"], "name": obj["metadata"]["generateName"] + "abcde",
                                                "uid": "created-uid"}})

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        self.log.append("update")
        return self._store(obj)

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        self.log.append("status")
        return self._store(obj)

    async def delete_object(self, kind: ObjectKind, key: str) -> None:
        self.log.append("delete")
        self.claims.pop(key, None)

    async def patch_pod_status(self, p: PodInfo, status: dict[str, Any]) -> None:
        if self.fail_patch:
            raise RuntimeError(self.fail_patch)
        self.pod_status.update(status)

    async def bind(self, p: PodInfo, node_name: str) -> None:
        raise AssertionError("not used")


class World:
    def __init__(self, classes: list[dict[str, Any]], slices: list[dict[str, Any]],
                 claims: tuple[dict[str, Any], ...] = (), node_extra: dict[str, str] | None = None) -> None:
        self.api = FakeAPI()
        for c in claims:
            self.api.claims[f"default/{c['metadata']['name']}"] = c
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.slices = {s["metadata"]["name"]: s for s in slices}
        self.table = table_of(node(NODE, labels={"kubernetes.io/hostname": NODE}, extra=node_extra))
        self.plugin = new_plugin(DynamicResources, table=self.table, client=self.api,  # type: ignore[arg-type]
                                 objects=self.objects)

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        kinds = {"ResourceClaim": self.api.claims, "DeviceClass": self.classes, "ResourceSlice": self.slices}
        return kinds.get(kind, {})

    def cycle(self, p: PodInfo) -> tuple[CycleState, Any]:
        state = CycleState()
        _, st = self.plugin.pre_filter(state, p, self.table)
        return state, st

    def filter(self, state: CycleState, p: PodInfo) -> Any:
        return self.plugin.filter(state, p, self.table.node_info(0))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_node_offering_the_resource_through_a_device_plugin_allocates_nothing() -> None:
    """extended-resource-name-with-node-resource: the node's allocatable has it; nothing is created."""
    w = World([mapped_class()], [resource_slice(NODE)], node_extra={GPU: "2"})
    p = gpu_pod()
    state, st = w.cycle(p)
    assert st.is_success
    assert w.filter(state, p).is_success
    assert w.plugin.reserve(state, p, NODE).is_success
    assert run(w.plugin.pre_bind(state, p, NODE)).is_success
    assert w.api.log == [] and w.api.pod_status == {}


def test_class_without_the_name_leaves_the_pod_to_node_resources_fit() -> None:
    """non-DRA-extended-resource-name-with-zero-allocatable: PreFilter skips."""
    w = World([mapped_class(resource=None)], [resource_slice(NODE)])
    assert w.cycle(gpu_pod())[1].code == Code.SKIP


def test_no_devices_cannot_allocate_all_claims() -> None:
    """extended-resource-name-no-resource."""
    w = World([mapped_class()], [])
    p = gpu_pod()
    state, st = w.cycle(p)
    assert st.is_success
    assert verdict(w.filter(state, p)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("cannot allocate all claims",))
    assert w.plugin.post_filter(state, p, None)[1].code == Code.UNSCHEDULABLE  # type: ignore[arg-type]


@pytest.mark.parametrize("implicit", [False, True])
def test_claim_is_created_allocated_reserved_and_named_in_the_pod_status(implicit: bool) -> None:
    """extended-resource-name-with-resources, implicit-extended-resource-name-with-resources,
    extended-resource-name-with-zero-allocatable (a 0 in allocatable is no device plugin)."""
    resource = f"deviceclass.resource.kubernetes.io/{CLASS}" if implicit else GPU
    w = World([mapped_class()], [resource_slice(NODE)], node_extra=None if implicit else {GPU: "0"})
    p = gpu_pod(container("app", {resource: "1"}))
    state, st = w.cycle(p)
    assert st.is_success
    assert w.filter(state, p).is_success
    assert w.plugin.reserve(state, p, NODE).is_success
    # In flight: a second pod does not get the same device.
    other = PodInfo.from_raw({**gpu_pod(container("app", {resource: "1"})).raw,
                              "metadata": {"name": "other", "namespace": "default", "uid": "other-uid"}})
    state2, _ = w.cycle(other)
    assert verdict(w.filter(state2, other)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("cannot allocate all claims",))
    assert run(w.plugin.pre_bind(state, p, NODE)).is_success
    assert w.api.log == ["create", "update", "status"]
    (claim,) = w.api.claims.values()
    meta = claim["metadata"]
    assert meta["name"] == f"{POD}-extended-resources-abcde"
    assert meta["generateName"] == f"{POD}-extended-resources-"
    assert meta["annotations"] == {ANNOTATION: "true"}
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID,
                                        "controller": True}]
    assert meta["finalizers"] == [FINALIZER]
    assert claim["spec"] == {"devices": {"requests": [
        {"name": "container-0-request-0",
         "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}
    results = claim["status"]["allocation"]["devices"]["results"]
    assert results == [{"request": "container-0-request-0", "driver": DRIVER, "pool": NODE, "device": "instance-1"}]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": POD, "uid": POD_UID}]
    assert w.api.pod_status == {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "app", "resourceName": resource,
                             "requestName": "container-0-request-0"}],
        "resourceClaimName": f"{POD}-extended-resources-abcde"}}
    # The next pod sees the device allocated.
    state3, _ = w.cycle(other)
    assert verdict(w.filter(state3, other)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("cannot allocate all claims",))


def test_one_resource_from_a_device_plugin_one_from_dra() -> None:
    """extended-resource-one-device-plugin-one-dra: only the resource the node lacks is requested."""
    other = "example.com/gpu2"
    w = World([mapped_class(), mapped_class("class2", other)], [resource_slice(NODE)], node_extra={GPU: "1"})
    p = gpu_pod(container("app", {GPU: "1", other: "1"}))
    state, _ = w.cycle(p)
    assert w.filter(state, p).is_success and w.plugin.reserve(state, p, NODE).is_success
    assert run(w.plugin.pre_bind(state, p, NODE)).is_success
    (claim,) = w.api.claims.values()
    assert [(r["name"], r["exactly"]["deviceClassName"]) for r in claim["spec"]["devices"]["requests"]] == [
        ("container-0-request-1", "class2")]


def test_claim_of_an_earlier_attempt_is_deleted_by_post_filter() -> None:
    """extended-resource-name-with-resources-has-claim / -delete-claim."""
    earlier = {"metadata": {"name": f"{POD}-extended-resources-xyz", "namespace": "default", "uid": "old",
                            "resourceVersion": "3", "annotations": {ANNOTATION: "true"}, "finalizers": [FINALIZER],
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID,
                                                 "controller": True}]},
               "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                   "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}
    w = World([mapped_class()], [resource_slice(NODE)], claims=(earlier,))
    p = gpu_pod()

    async def attempt() -> Any:
        state, st = w.cycle(p)
        assert st.is_success
        assert verdict(w.filter(state, p)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                               ("cannot schedule extended resource claim",))
        _, st = w.plugin.post_filter(state, p, None)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        await asyncio.gather(*w.plugin._deallocations)
        return st

    st = run(attempt())
    assert verdict(st) == (Code.UNSCHEDULABLE, ("deletion of ResourceClaim completed",))
    assert w.api.log == ["update", "delete"] and not w.api.claims


def test_bind_failure_after_pre_bind_deletes_the_created_claim() -> None:
    """extended-resource-name-bind-failure: Unreserve after PreBind deletes the claim it created."""
    w = World([mapped_class()], [resource_slice(NODE)])
    p = gpu_pod()

    async def attempt() -> None:
        state, _ = w.cycle(p)
        assert w.filter(state, p).is_success and w.plugin.reserve(state, p, NODE).is_success
        assert (await w.plugin.pre_bind(state, p, NODE)).is_success
        w.plugin.unreserve(state, p, NODE)
        await asyncio.gather(*w.plugin._deallocations)

    run(attempt())
    assert w.api.log == ["create", "update", "status", "update", "delete"] and not w.api.claims


def test_unreserve_before_pre_bind_creates_nothing() -> None:
    """extended-resource-name-skip-bind."""
    w = World([mapped_class()], [resource_slice(NODE)])
    p = gpu_pod()
    state, _ = w.cycle(p)
    assert w.filter(state, p).is_success and w.plugin.reserve(state, p, NODE).is_success
    w.plugin.unreserve(state, p, NODE)
    assert w.api.log == []
    # the device is free again
    state2, _ = w.cycle(p)
    assert w.filter(state2, p).is_success


@pytest.mark.parametrize(("fail", "message"), [
    ("create", f"create claim for extended resources default/{POD}-extended-resources-: claim creation errors"),
    ("patch", f"update pod default/{POD} ExtendedResourceClaimStatus: patch error"),
])
def test_api_failures_at_pre_bind_are_errors(fail: str, message: str) -> None:
    """extended-resource-name-claim-creation-failure, extended-resource-name-with-resources-fail-patch."""
    w = World([mapped_class()], [resource_slice(NODE)])
    if fail == "create":
        w.api.fail_create = "claim creation errors"
    else:
        w.api.fail_patch = "patch error"
    p = gpu_pod()
    state, _ = w.cycle(p)
    assert w.filter(state, p).is_success and w.plugin.reserve(state, p, NODE).is_success
    st = run(w.plugin.pre_bind(state, p, NODE))
    assert verdict(st) == (Code.ERROR, (message,))


# -- NodeResourcesFit ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("allocatable", "classes", "passes"), [
    (None, [mapped_class()], True),          # no device plugin, a class backs it: DynamicResources' job
    ("0", [mapped_class()], True),           # 0 allocatable is no device plugin either
    ("1", [mapped_class()], False),          # a device plugin's resource, short: checked as usual
    (None, [mapped_class(resource=None)], False),  # no class backs it
])
def test_fit_leaves_a_dra_backed_resource_to_dynamic_resources(allocatable: str | None,
                                                              classes: list[dict[str, Any]], passes: bool) -> None:
    table = table_of(node(NODE, extra={GPU: allocatable} if allocatable is not None else None))
    by_name = {c["metadata"]["name"]: c for c in classes}
    plugin = new_plugin(NodeResourcesFit, table=table, objects=lambda kind: by_name if kind == "DeviceClass" else {})
    p = gpu_pod(container("app", {GPU: "2"}))
    state = CycleState()
    plugin.pre_filter(state, p, table)
    # the batch (two rows: the packed-key path) and the one-row path agree
    verdicts = plugin.filter_batch(state, p, table, np.array([0, 0]))
    assert [int(c) == 0 for c in verdicts.codes] == [passes, passes]
    single = plugin.filter_batch(state, p, table, np.array([0]))
    assert (int(single.codes[0]) == 0) is passes
    if not passes:
        assert verdicts.statuses[int(verdicts.codes[0]) - 1].reasons == (f"Insufficient {GPU}",)


def test_fit_retries_pods_when_a_device_class_appears() -> None:
    """fit.go EventsToRegister with DRAExtendedResource: a pod refused for an extended resource
    may fit once a DeviceClass backs it, so DeviceClass adds and updates requeue it."""
    plugin = new_plugin(NodeResourcesFit, table=table_of(node(NODE)))
    added = ClusterEvent("DeviceClass", ActionType.ADD, "DeviceClassAdd")
    assert any(e.matches(added) for e in plugin.events_to_register())
