"""DynamicResources, the plugin: ports of pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources_test.go (v1.37.1, ``testPlugin``) within the implemented features, with its
fixtures (node ``worker``, driver ``some-driver``, class ``my-resource-class``, claim
``my-pod-my-resource`` with request ``req-1``, pod ``my-pod`` uid ``1234``).

Ported: empty, missing-claim, deleted-claim, wrong-claim, claim-reference, claim-template,
no-resources, with-resources, skip-bind, exhausted-resources-in-informer-cache,
exhausted-resources-in-flight-claim, other-resources-in-flight-claim, claim-parameters-CEL-runtime-error,
class-parameters-CEL-runtime-error, missing-class, claim-with-request-with-unknown-device-class,
claim-with-prioritized-list-unknown-device-class, wrong-topology (its PostFilter:
test_postfilter_score.py), good-topology, reserved-okay, claim-with-prioritized-list, bind-failure,
tainted-device-enabled (with the taint from a DeviceTaintRule too),
request-admin-access-with-DRAAdminAccess-featuregate, structured-ignore-allocated-admin-access; plus
two pods in flight (Reserve keeps the device from the second) and a claim shared by two pods (the
second waits for the first's allocation, then follows it). Scoring and PostFilter:
test_postfilter_score.py.

Not ported: podgroup-* (DRAWorkloadResourceClaims, alpha), tainted-device-disabled and
request-admin-access-without-DRAAdminAccess-featuregate (the gates are on in v1.37, kubesched has no
switch), node-allocatable-* (DRANodeAllocatableResources), postfilter-*-podgroup, timeouts (the
filter timeout is not ported). Elsewhere: extended-resource-* in test_extended.py, the binding
conditions cases in test_binding_conditions.py.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.objects import ObjectKind
from kubesched.framework.status import Code, Status
from kubesched.plugins.dynamicresources import DynamicResources
from kubesched.plugins.dynamicresources.claims import FINALIZER
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable
from kubesched.testing import new_plugin, node, pod, table_of

NODE, NODE2 = "worker", "worker-2"
DRIVER = "some-driver"
CLASS = "my-resource-class"
POD, POD_UID = "my-pod", "1234"
RESOURCE = "my-resource"
CLAIM = f"{POD}-{RESOURCE}"
NOT_CREATED = f'pod "default/{POD}": ResourceClaim not created yet'


def device_class(name: str = CLASS, selector: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector:
        spec["selectors"] = [{"cel": {"expression": selector}}]
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def resource_slice(node_name: str, *devices: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{node_name}-{DRIVER}", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devices or ("instance-1",)]}}


def claim(name: str = CLAIM, *, owner: str | None = POD_UID, cls: str = CLASS,
          selector: str | None = None, first_available: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": owner,
                                    "controller": True}]
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    request: dict[str, Any] = {"name": "req-1"}
    if first_available:
        request["firstAvailable"] = [{"name": "subreq-1", **exactly}]
    else:
        request["exactly"] = exactly
    return {"metadata": meta, "spec": {"devices": {"requests": [request]}}, "status": {}}


def allocation(node_name: str = NODE, device: str = "instance-1", request: str = "req-1") -> dict[str, Any]:
    return {"devices": {"results": [{"request": request, "driver": DRIVER, "pool": node_name, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}


def allocated(c: dict[str, Any], alloc: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(c)
    out["status"] = {"allocation": alloc or allocation()}
    return out


def reserved_for(c: dict[str, Any], name: str, uid: str) -> dict[str, Any]:
    out = copy.deepcopy(c)
    out["status"]["reservedFor"] = [*out["status"].get("reservedFor", []), {"resource": "pods", "name": name,
                                                                           "uid": uid}]
    return out


def claim_pod(name: str = POD, uid: str = POD_UID, *, claim_name: str = CLAIM, template: bool = False,
              in_status: bool = False) -> PodInfo:
    source = {"resourceClaimTemplateName": "tmpl"} if template else {"resourceClaimName": claim_name}
    raw = pod(name, cpu="100m", resourceClaims=[{"name": RESOURCE, **source}])
    raw["metadata"]["uid"] = uid
    if in_status:
        raw["status"] = {"resourceClaimStatuses": [{"name": RESOURCE, "resourceClaimName": claim_name}]}
    return PodInfo.from_raw(raw)


class FakeClaimsAPI:
    """The apiserver's ResourceClaims: PUT of the object and of its status, resourceVersion as the
    precondition (a stale write is a 409), every write recorded. Its store is ahead of the
    informer's (``World.objects``) until ``World.catch_up``."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.stored = copy.deepcopy(world.objects["ResourceClaim"])
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.fail: str | BaseException | None = None

    def _put(self, kind: ObjectKind, obj: dict[str, Any], what: str) -> dict[str, Any]:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        current = self.stored[key]
        if isinstance(self.fail, BaseException):
            raise self.fail
        if self.fail:
            raise RuntimeError(self.fail)
        if obj["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise RuntimeError(f'Operation cannot be fulfilled on resourceclaims "{obj["metadata"]["name"]}": '
                               "the object has been modified; please apply your changes to the latest version "
                               "and try again")
        stored = copy.deepcopy(current if what == "status" else obj)
        if what == "status":
            stored["status"] = copy.deepcopy(obj.get("status") or {})
        stored["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.stored[key] = stored
        self.writes.append((what, copy.deepcopy(stored)))
        return copy.deepcopy(stored)

    async def update_object(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        return self._put(kind, obj, "object")

    async def update_object_status(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        return self._put(kind, obj, "status")

    async def bind(self, p: PodInfo, node_name: str) -> None:  # ClusterClient
        raise AssertionError("not used")


class World:
    """The informers' view: claims, classes, slices; one plugin instance on nodes worker(, worker-2)."""

    def __init__(self, claims: list[dict[str, Any]], classes: list[dict[str, Any]] | None = None,
                 slices: list[dict[str, Any]] | None = None, nodes: tuple[str, ...] = (NODE,)) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {
            "ResourceClaim": {f"default/{c['metadata']['name']}": c for c in claims},
            "DeviceClass": {c["metadata"]["name"]: c for c in classes or []},
            "ResourceSlice": {s["metadata"]["name"]: s for s in slices or []},
        }
        self.table: NodeTable = table_of(*[node(n, labels={"kubernetes.io/hostname": n}) for n in nodes])
        self.api = FakeClaimsAPI(self)
        self.plugin = new_plugin(DynamicResources, table=self.table, client=self.api,  # type: ignore[arg-type]
                                 objects=lambda kind: self.objects.get(kind, {}))

    def catch_up(self) -> None:
        """The claim informer delivers what PreBind wrote."""
        self.objects["ResourceClaim"] = copy.deepcopy(self.api.stored)

    def claim(self, name: str = CLAIM) -> dict[str, Any]:
        return self.objects["ResourceClaim"][f"default/{name}"]


class Cycle:
    """One scheduling attempt of a pod: PreFilter, Filter on each node, Reserve, PreBind."""

    def __init__(self, world: World, p: PodInfo) -> None:
        self.world, self.pod, self.state = world, p, CycleState()

    def pre_filter(self) -> Status:
        _, st = self.world.plugin.pre_filter(self.state, self.pod, self.world.table)
        return st

    def filter(self, node_name: str = NODE) -> Status:
        return self.world.plugin.filter(self.state, self.pod,
                                        self.world.table.node_info(self.world.table.index[node_name]))

    def reserve(self, node_name: str = NODE) -> Status:
        return self.world.plugin.reserve(self.state, self.pod, node_name)

    def unreserve(self, node_name: str = NODE) -> None:
        self.world.plugin.unreserve(self.state, self.pod, node_name)

    def pre_bind(self, node_name: str = NODE) -> Status:
        return asyncio.run(self.world.plugin.pre_bind(self.state, self.pod, node_name))

    def through_reserve(self, node_name: str = NODE) -> None:
        for st in (self.pre_filter(), self.filter(node_name), self.reserve(node_name)):
            assert st.is_success, st


def unresolvable(message: str) -> tuple[Code, tuple[str, ...]]:
    return Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)


def verdict(st: Status) -> tuple[Code, tuple[str, ...]]:
    return st.code, st.reasons


CEL_BROKEN = 'device.attributes["some-driver"].healthy'
CEL_RUNTIME_ERROR = (f"selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: no such key: healthy. "
                     "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
                     "for optional fields")


# -- PreEnqueue ---------------------------------------------------------------------------------------
def test_empty_pod_is_let_through_and_skipped() -> None:
    w = World([])
    p = PodInfo.from_raw(pod(POD))
    assert w.plugin.pre_enqueue(p).is_success
    assert Cycle(w, p).pre_filter().code == Code.SKIP


@pytest.mark.parametrize(("p", "claims", "message"), [
    # missing-claim: the template's claim is not in the pod's status yet
    (claim_pod(template=True), [claim()], NOT_CREATED),
    # the claim named by the pod does not exist
    (claim_pod(), [], f'could not find ResourceClaim "default/{CLAIM}"'),
    # the status names the template's claim, which is not in the informer yet
    (claim_pod(template=True, in_status=True), [], f'could not find ResourceClaim "default/{CLAIM}"'),
    # deleted-claim
    (claim_pod(template=True, in_status=True),
     [{**claim(), "metadata": {**claim()["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"}}],
     f'resourceclaim "{CLAIM}" is being deleted'),
    # wrong-claim: the template's claim belongs to another pod
    (claim_pod(template=True, in_status=True), [claim(owner=POD_UID + "123")],
     f"ResourceClaim default/{CLAIM} was not created for Pod default/{POD} (Pod is not owner)"),
])
def test_pre_enqueue_keeps_pods_whose_claims_are_not_usable_out_of_the_queue(
        p: PodInfo, claims: list[dict[str, Any]], message: str) -> None:
    w = World(claims, [device_class()], [resource_slice(NODE)])
    assert verdict(w.plugin.pre_enqueue(p)) == unresolvable(message)
    assert verdict(Cycle(w, p).pre_filter()) == unresolvable(message)


def test_template_claim_owned_by_the_pod_is_used() -> None:
    """claim-template: the claim kube-controller-manager created (named in the pod's status, owned by the
    pod) is allocated already; PreBind only reserves it."""
    w = World([allocated(claim())])
    p = claim_pod(template=True, in_status=True)
    assert w.plugin.pre_enqueue(p).is_success
    c = Cycle(w, p)
    assert c.pre_filter().is_success and c.filter().is_success and c.reserve().is_success
    assert c.pre_bind().is_success
    assert [what for what, _ in w.api.writes] == ["status"]  # no finalizer, no allocation: only reservedFor
    written = w.api.writes[0][1]
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": POD, "uid": POD_UID}]
    # claim-reference/claim-template: addAllocationTimestamp, also for a claim allocated earlier
    assert written["status"]["allocation"] == {**allocation(), "allocationTimestamp": "1970-01-01T00:00:00Z"}


# -- PreFilter / Filter ------------------------------------------------------------------------------
def test_no_resources_cannot_allocate() -> None:
    w = World([claim()], [device_class()])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter()) == unresolvable("cannot allocate all claims")


def test_exhausted_resources_in_informer_cache() -> None:
    """Another claim holds the node's only device."""
    other = allocated(claim("not-my-claim", owner=None))
    w = World([claim(), other], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter()) == unresolvable("cannot allocate all claims")


@pytest.mark.parametrize(("cls", "first_available", "message"), [
    (CLASS, False, f"request req-1: device class {CLASS} does not exist"),  # missing-class
    ("does-not-exist", False, "request req-1: device class does-not-exist does not exist"),
    ("does-not-exist", True, "request req-1/subreq-1: device class does-not-exist does not exist"),
])
def test_missing_device_class_is_unschedulable_everywhere(cls: str, first_available: bool, message: str) -> None:
    classes = [] if cls == CLASS else [device_class()]
    w = World([claim(cls=cls, first_available=first_available)], classes, [resource_slice(NODE)])
    assert verdict(Cycle(w, claim_pod()).pre_filter()) == unresolvable(message)


def test_allocated_claim_restricts_nodes_to_its_allocation() -> None:
    """wrong-topology / good-topology: an allocated claim's node selector decides; no allocation."""
    w = World([allocated(claim(), allocation(NODE2))], nodes=(NODE, NODE2))
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter(NODE)) == unresolvable("resourceclaim not available on the node")
    assert c.filter(NODE2).is_success


def test_claim_reserved_for_another_pod_can_be_shared() -> None:
    """reserved-okay: an allocated claim in use by another pod is usable (CanBeReserved: no limit);
    PreBind adds this pod to reservedFor next to the other."""
    in_use = reserved_for(allocated(claim()), "other-pod", "other-uid")
    w = World([in_use])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success and c.filter().is_success and c.reserve().is_success
    assert c.pre_bind().is_success
    assert w.api.writes[-1][1]["status"]["reservedFor"] == [
        {"resource": "pods", "name": "other-pod", "uid": "other-uid"},
        {"resource": "pods", "name": POD, "uid": POD_UID}]


@pytest.mark.parametrize("in_class", [False, True])
def test_cel_runtime_error_is_an_error_naming_claim_or_class(in_class: bool) -> None:
    """claim-parameters-CEL-runtime-error, class-parameters-CEL-runtime-error: the attempt ends with
    an Error (a broken claim or class is not "no room"), upstream's message word for word."""
    cls = device_class(selector=CEL_BROKEN if in_class else None)
    w = World([claim(selector=None if in_class else CEL_BROKEN)], [cls], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    st = c.filter()
    owner = f"class {CLASS}" if in_class else f"claim default/{CLAIM}"
    assert st.code == Code.ERROR
    assert st.reasons == (f"{owner}: {CEL_RUNTIME_ERROR}",)


# -- Reserve / Unreserve / PreBind ---------------------------------------------------------------------
def test_with_resources_allocates_and_prebind_writes_finalizer_allocation_and_reservation() -> None:
    w = World([claim()], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    assert c.pre_bind().is_success
    assert [what for what, _ in w.api.writes] == ["object", "status"]
    assert FINALIZER in w.api.writes[0][1]["metadata"]["finalizers"]
    status = w.api.writes[1][1]["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": POD, "uid": POD_UID}]
    assert status["allocation"]["devices"] == allocation()["devices"]
    assert status["allocation"]["nodeSelector"] == allocation()["nodeSelector"]
    assert status["allocation"]["allocationTimestamp"] == "1970-01-01T00:00:00Z"  # the FakeClock's now
    assert w.api.writes[1][1]["metadata"]["finalizers"] == [FINALIZER]


def test_claim_with_prioritized_list_records_the_subrequest() -> None:
    w = World([claim(first_available=True)], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    assert c.pre_bind().is_success
    results = w.api.writes[-1][1]["status"]["allocation"]["devices"]["results"]
    assert results == [{"request": "req-1/subreq-1", "driver": DRIVER, "pool": NODE, "device": "instance-1"}]


def test_two_pods_in_flight_never_get_one_device() -> None:
    """exhausted-resources-in-flight-claim: the first pod's Reserve keeps the node's one device until
    PreBind; the second pod's trial allocation does not see it free. other-resources-in-flight-claim:
    with two devices the second gets the other one."""
    w = World([claim(), claim("second", owner="uid-2")], [device_class()], [resource_slice(NODE)])
    Cycle(w, claim_pod()).through_reserve()
    second = Cycle(w, claim_pod("second-pod", "uid-2", claim_name="second"))
    assert second.pre_filter().is_success
    assert verdict(second.filter()) == unresolvable("cannot allocate all claims")

    w = World([claim(), claim("second", owner="uid-2")], [device_class()],
              [resource_slice(NODE, "instance-1", "instance-2")])
    first = Cycle(w, claim_pod())
    first.through_reserve()
    second = Cycle(w, claim_pod("second-pod", "uid-2", claim_name="second"))
    second.through_reserve()
    assert first.pre_bind().is_success and second.pre_bind().is_success
    devices = [s["status"]["allocation"]["devices"]["results"][0]["device"] for what, s in w.api.writes
               if what == "status"]
    assert devices == ["instance-1", "instance-2"]


def test_unreserve_frees_the_device_for_the_next_pod() -> None:
    """skip-bind: Reserve then Unreserve (e.g. a later Reserve plugin refused) leaves nothing in flight."""
    w = World([claim(), claim("second", owner="uid-2")], [device_class()], [resource_slice(NODE)])
    first = Cycle(w, claim_pod())
    first.through_reserve()
    first.unreserve()
    second = Cycle(w, claim_pod("second-pod", "uid-2", claim_name="second"))
    second.through_reserve()
    assert second.pre_bind().is_success
    assert w.api.writes[-1][1]["metadata"]["name"] == "second"


def test_shared_claim_second_pod_waits_then_follows_the_first_allocation() -> None:
    """A claim two pods use: while the first pod's allocation is in flight the second is told so; once
    PreBind wrote it, the second pod is restricted to that node and only reserves the claim."""
    w = World([claim("shared", owner=None)], [device_class()],
              [resource_slice(NODE), {**resource_slice(NODE2), "metadata": {"name": "s2", "resourceVersion": "1"}}],
              nodes=(NODE, NODE2))
    a = Cycle(w, claim_pod("pod-a", "uid-a", claim_name="shared"))
    a.through_reserve(NODE2)
    b = Cycle(w, claim_pod("pod-b", "uid-b", claim_name="shared"))
    assert verdict(b.pre_filter()) == unresolvable("resource claim default/shared is in the process of being allocated")

    assert a.pre_bind(NODE2).is_success
    # PreBind's write is assumed before the informer delivers it (AssumeClaimAfterAPICall) ...
    b = Cycle(w, claim_pod("pod-b", "uid-b", claim_name="shared"))
    assert b.pre_filter().is_success
    assert verdict(b.filter(NODE)) == unresolvable("resourceclaim not available on the node")
    assert b.filter(NODE2).is_success
    # ... and after it.
    w.catch_up()
    b = Cycle(w, claim_pod("pod-b", "uid-b", claim_name="shared"))
    assert b.pre_filter().is_success and b.filter(NODE2).is_success and b.reserve(NODE2).is_success
    assert b.pre_bind(NODE2).is_success
    final = w.api.writes[-1][1]["status"]
    assert [r["name"] for r in final["reservedFor"]] == ["pod-a", "pod-b"]
    assert final["allocation"]["nodeSelector"] == allocation(NODE2)["nodeSelector"]


def test_prebind_retries_a_conflict_with_the_latest_claim() -> None:
    """bindClaim's retry.RetryOnConflict: another writer changed the claim (e.g. a label) after
    PreFilter read it; PreBind re-reads it and writes on top."""
    w = World([claim()], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    newer = copy.deepcopy(w.claim())
    newer["metadata"]["resourceVersion"] = "7"
    newer["metadata"]["labels"] = {"team": "a"}
    w.api.stored[f"default/{CLAIM}"] = newer
    w.catch_up()
    assert c.pre_bind().is_success
    assert w.api.writes[-1][1]["metadata"]["labels"] == {"team": "a"}
    assert w.api.writes[-1][1]["status"]["reservedFor"][0]["uid"] == POD_UID


def test_a_write_that_times_out_is_named_in_the_message() -> None:
    """A request timing out raises an exception with no text (asyncio.TimeoutError): the pod's
    message names it instead of ending in a colon (seen live: bench dra live, event loop busy)."""
    w = World([claim()], [device_class()], [resource_slice(NODE)])
    w.api.fail = TimeoutError()
    c = Cycle(w, claim_pod())
    c.through_reserve()
    st = c.pre_bind()
    assert st.code == Code.ERROR
    assert st.reasons == (f"add finalizer to claim default/{CLAIM}: TimeoutError",)


def test_bind_failure_is_an_error_and_unreserve_frees_the_device() -> None:
    """bind-failure, bind-failure-preserves-inflight-until-unreserve: the API refuses the write; the
    device stays in flight until Unreserve."""
    w = World([claim(), claim("second", owner="uid-2")], [device_class()], [resource_slice(NODE)])
    w.api.fail = "injected error"
    c = Cycle(w, claim_pod())
    c.through_reserve()
    st = c.pre_bind()
    assert st.code == Code.ERROR
    assert st.reasons == (f"add finalizer to claim default/{CLAIM}: injected error",)
    second = Cycle(w, claim_pod("second-pod", "uid-2", claim_name="second"))
    assert second.pre_filter().is_success and verdict(second.filter()) == unresolvable("cannot allocate all claims")
    c.unreserve()
    second = Cycle(w, claim_pod("second-pod", "uid-2", claim_name="second"))
    assert second.pre_filter().is_success and second.filter().is_success


# -- device taints and admin access -------------------------------------------------------------------
def test_tainted_device_cannot_be_allocated() -> None:
    """tainted-device-enabled: the slice's device tainted NoExecute; the same taint from a
    DeviceTaintRule (the plugin hands the rules to the allocator); a rule selecting another device."""
    tainted = resource_slice(NODE)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "taint-key", "value": "taint-value", "effect": "NoExecute"}]
    w = World([claim()], [device_class()], [tainted])
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter()) == unresolvable("cannot allocate all claims")

    def rule(device: str) -> dict[str, Any]:
        return {"metadata": {"name": "rule"}, "spec": {"deviceSelector": {"driver": DRIVER, "device": device},
                                                       "taint": {"key": "taint-key", "effect": "NoSchedule"}}}

    w = World([claim()], [device_class()], [resource_slice(NODE)])
    w.objects["DeviceTaintRule"] = {"rule": rule("instance-1")}
    c = Cycle(w, claim_pod())
    assert c.pre_filter().is_success
    assert verdict(c.filter()) == unresolvable("cannot allocate all claims")
    w.objects["DeviceTaintRule"] = {"rule": rule("instance-2")}
    Cycle(w, claim_pod()).through_reserve()


def admin_access(c: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(c)
    out["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return out


def test_admin_access_gets_a_device_another_claim_holds() -> None:
    """request-admin-access-with-DRAAdminAccess-featuregate: the result says adminAccess."""
    other = allocated(claim("not-my-claim", owner=None))
    w = World([admin_access(claim()), other], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    assert c.pre_bind().is_success
    results = w.api.writes[-1][1]["status"]["allocation"]["devices"]["results"]
    assert results == [{**allocation()["devices"]["results"][0], "adminAccess": True}]


def test_device_allocated_with_admin_access_is_not_taken() -> None:
    """structured-ignore-allocated-admin-access: the other claim's admin access does not hold the device."""
    other = allocated(claim("not-my-claim", owner=None))
    other["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    w = World([claim(), other], [device_class()], [resource_slice(NODE)])
    c = Cycle(w, claim_pod())
    c.through_reserve()
    assert c.pre_bind().is_success
    assert w.api.writes[-1][1]["status"]["allocation"]["devices"] == allocation()["devices"]
