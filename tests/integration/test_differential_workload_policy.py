"""A gang's preemption policy against the real kube-scheduler v1.37, word for word: the group
PostFilter's answers (DynamicResources, then DefaultPreemption) and the PodGroupPreemptionPolicy
gate (alpha). kube-apiserver runs with GenericWorkload and PodGroupPreemptionPolicy on, so
admission fills a PodGroup's ``spec.preemptionPolicy`` from its ``priorityClassName``; each
scenario runs under kube-scheduler, then under kubesched (helpers of
test_differential_workload_gangs.py), with the same gates on in both.

1. A gang of 3 × 3 CPU (minCount 3) whose PriorityClass says ``preemptionPolicy: Never``, on two
   4-CPU nodes: two members placed, the third refused, and the group's PodGroupPostFilter answers
   are joined in the placed members' message — DynamicResources' ``deallocation and deletion of
   ResourceClaims completed`` (its group PostFilter, which answers for every group with or without
   claims), then DefaultPreemption's ``not eligible due to preemptionPolicy=Never.`` — with
   GenericWorkload alone (the members' policy) and with PodGroupPreemptionPolicy (the PodGroup's).
2. With PodGroupPreemptionPolicy on, a PodGroup whose policy is Never and members whose policy is
   PreemptLowerPriority: validatePodGroup's error on every member and the PodGroup's SchedulerError
   condition.
3. A gang held back by a stale claim (allocated on a full node's device by an earlier attempt,
   reserved for nobody): DynamicResources' PodGroupPostFilter deallocates it, and the gang binds
   on the other node with the device there — the same nodes, device and reservation, and the same
   first FailedScheduling messages, as kube-scheduler.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ApiError, ControlPlane

from .dra_harness import release_claims
from .test_differential_workload_gangs import (
    PC_PATH,
    PG_PATH,
    _both,
    _condition,
    _delete_nodes,
    _member,
    _reason,
)
from .test_live_scheduler import pods_in

pytestmark = pytest.mark.integration

APISERVER_GATES = ("GenericWorkload", "PodGroupPreemptionPolicy")
NEVER_CLASS = "workload-gang-never"
LABEL = "gang-policy"
GANG = ("nevers", 3, "3")


@pytest.fixture(scope="module")
def policy_cluster(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    c = ControlPlane(
        tmp_path_factory.mktemp("policy-cluster"),
        bin_dir=control_plane.bin_dir,
        apiserver_args=[f"--feature-gates={','.join(f'{g}=true' for g in APISERVER_GATES)}",
                        "--runtime-config=scheduling.k8s.io/v1beta1=true"],
    )
    c.start(with_kwok=True)
    try:
        c.api("POST", PC_PATH, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": NEVER_CLASS}, "value": 0, "preemptionPolicy": "Never"})
        nodes = c.create_nodes(2, prefix="policy-n", cpu="4", labels={LABEL: "yes"})
        yield c
        _delete_nodes(c, nodes)
    finally:
        with contextlib.suppress(ApiError):
            c.api("DELETE", f"{PC_PATH}/{NEVER_CLASS}")
        c.stop()


def _never_pod_group(cp: ControlPlane, ns: str, name: str, min_count: int) -> None:
    """A gang of the Never class. The apiserver defaults ``preemptionPolicy`` to
    PreemptLowerPriority before admission compares it with the class's, so it is set here."""
    cp.api("POST", PG_PATH.format(ns=ns), {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "priorityClassName": NEVER_CLASS,
                 "preemptionPolicy": "Never"},
    })


def _pending_outcome(cp: ControlPlane, ns: str, group: str) -> dict[str, Any]:
    cp.wait_for(lambda: pods_in(cp, ns) and all(_reason(p) for p in pods_in(cp, ns)), 60, 0.3,
                "a reason on every pod")
    cp.wait_for(lambda: bool(_condition(cp, ns, group)), 60, 0.3, "the group's condition")
    time.sleep(3)  # time to (wrongly) bind anything
    pods = pods_in(cp, ns)
    return {
        "bound": sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")),
        "reasons": {p["metadata"]["name"]: _reason(p) for p in pods},
        "condition": _condition(cp, ns, group),
    }


def _never_preempting_gang(cp: ControlPlane, ns: str, scheduler: str) -> dict[str, Any]:
    group, count, cpu = GANG
    _never_pod_group(cp, ns, group, count)
    for i in range(count):
        _member(cp, ns, scheduler, group, i, cpu, LABEL, priority_class_name=NEVER_CLASS)
    return _pending_outcome(cp, ns, group)


def _members_against_their_group(cp: ControlPlane, ns: str, scheduler: str) -> dict[str, Any]:
    _never_pod_group(cp, ns, "mixed", 2)  # Never, priority 0; the members: PreemptLowerPriority, 0
    for i in range(2):
        _member(cp, ns, scheduler, "mixed", i, "1", LABEL)
    return _pending_outcome(cp, ns, "mixed")


PLACED_THEN_FAILED = ("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
                      "deallocation and deletion of ResourceClaims completed, "
                      "pod group preemption: not eligible due to preemptionPolicy=Never.")


@pytest.mark.parametrize("gates", [("GenericWorkload",), APISERVER_GATES], ids=["members-policy", "group-policy"])
def test_a_never_preempting_gang_is_told_both_group_post_filters_answers_like_kube_scheduler(
    policy_cluster: ControlPlane, tmp_path: Path, gates: tuple[str, ...],
) -> None:
    prefix = "never-g" if len(gates) > 1 else "never-m"
    oracle, ours = _both(policy_cluster, tmp_path, prefix, _never_preempting_gang, gates=gates)
    print(f"\nkube-scheduler: {oracle}\nkubesched:      {ours}")
    assert oracle["bound"] == ours["bound"] == []
    assert sorted(oracle["reasons"].values()).count(PLACED_THEN_FAILED) == 2, oracle
    assert ours["reasons"] == oracle["reasons"]
    assert ours["condition"] == oracle["condition"]


def test_members_whose_policy_is_not_their_pod_groups_fail_like_kube_scheduler(
    policy_cluster: ControlPlane, tmp_path: Path,
) -> None:
    oracle, ours = _both(policy_cluster, tmp_path, "mixed", _members_against_their_group, gates=APISERVER_GATES)
    print(f"\nkube-scheduler: {oracle}\nkubesched:      {ours}")
    error = ("all pods in a single pod group should have the same preemption policy as the pod group's "
             "preemption policy, got PreemptLowerPriority and Never")
    assert oracle["bound"] == ours["bound"] == []
    assert set(oracle["reasons"].values()) == {error}, oracle
    assert ours["reasons"] == oracle["reasons"]
    assert oracle["condition"]["reason"] == "SchedulerError"
    assert ours["condition"] == oracle["condition"]


DRIVER = "gang.kubesched.test"
DRA_CLASS = "gang-policy-gpu"
RESOURCE = "/apis/resource.k8s.io/v1"


def _policy_nodes(cp: ControlPlane) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cp.get("/api/v1/nodes", labelSelector=f"{LABEL}=yes")["items"])


def _stale_claim_gang(cp: ControlPlane, ns: str, scheduler: str) -> dict[str, Any]:
    """Gang g (2 × 1 CPU, minCount 2); g-0 uses claim ``stale``, allocated on the first node's device
    by an earlier attempt and reserved for nobody, and that node is full (a pre-bound 3.5-CPU pod):
    g-0 fits nowhere, so the group fails; DynamicResources' PodGroupPostFilter deallocates the claim,
    the claim's update brings the gang back, and it binds on the second node with the device there."""
    first = _policy_nodes(cp)[0]
    cp.create_pod("blocker", ns, requests={"cpu": "3500m"}, node_name=first)
    cp.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "stale", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_CLASS}}]}},
    })
    claim = cp.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/stale")
    cp.api("PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/stale/status", {**claim, "status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": first, "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [first]}]}]},
    }}})
    cp.api("POST", PG_PATH.format(ns=ns), {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    })
    for i in range(2):
        extra: dict[str, Any] = {"schedulingGroup": {"podGroupName": "g"}}
        if i == 0:
            extra["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "stale"}]
        body = cp.pod_manifest(f"g-{i}", ns, scheduler_name=scheduler, requests={"cpu": "1"},
                               node_selector={LABEL: "yes"}, extra_spec=extra)
        if i == 0:
            body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
        cp.api("POST", f"/api/v1/namespaces/{ns}/pods", body)

    def gang_bound() -> bool:
        return sum(1 for p in pods_in(cp, ns) if p["metadata"]["name"].startswith("g-")
                   and p["spec"].get("nodeName")) == 2

    try:
        cp.wait_for(gang_bound, 90, 0.3, "the gang bound")
    except TimeoutError as e:  # say where each pod and the claim are
        state = {p["metadata"]["name"]: (p["spec"].get("nodeName"), _reason(p)) for p in pods_in(cp, ns)}
        claim_status = cp.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/stale").get("status")
        raise AssertionError(f"{scheduler}: {e}\npods: {state}\nclaim's status: {claim_status}") from e
    pods = pods_in(cp, ns)
    events = cp.get(f"/api/v1/namespaces/{ns}/events")["items"]
    failed = sorted((e for e in events if e.get("reason") == "FailedScheduling"),
                    key=lambda e: str(e.get("eventTime") or e.get("firstTimestamp") or ""))
    status = cp.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/stale").get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    g0 = next(p for p in pods if p["metadata"]["name"] == "g-0")
    # Free the second node's device for the next scheduler's run (no kube-controller-manager here).
    for p in pods:
        cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
    cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")
    release_claims(cp, ns)
    return {
        "nodes": {p["metadata"]["name"]: ("first" if p["spec"]["nodeName"] == first else "second")
                  for p in pods if p["metadata"]["name"].startswith("g-")},
        "devices": [(("first" if r["pool"] == first else "second"), r["device"]) for r in results],
        "reserved_for_g0": [r.get("uid") for r in status.get("reservedFor") or []] == [g0["metadata"]["uid"]],
        "first_failures": {name: next((e.get("message", "") for e in failed if e["involvedObject"]["name"] == name),
                                      "") for name in ("g-0", "g-1")},
    }


def test_a_gang_held_back_by_a_stale_claim_gets_it_deallocated_like_kube_scheduler(
    policy_cluster: ControlPlane, tmp_path: Path,
) -> None:
    cp = policy_cluster
    objects = [("deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                  "metadata": {"name": DRA_CLASS},
                                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})]
    objects += [("resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                    "metadata": {"name": f"{node}-{DRIVER}"},
                                    "spec": {"driver": DRIVER, "nodeName": node,
                                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                             "devices": [{"name": "gpu-0"}]}})
                for node in _policy_nodes(cp)]
    for plural, obj in objects:
        cp.api("POST", f"{RESOURCE}/{plural}", obj)
    try:
        oracle, ours = _both(cp, tmp_path, "stale", _stale_claim_gang, gates=("GenericWorkload",))
    finally:
        for plural, obj in objects:
            with contextlib.suppress(ApiError):
                cp.api("DELETE", f"{RESOURCE}/{plural}/{obj['metadata']['name']}")
    print(f"\nkube-scheduler: {oracle}\nkubesched:      {ours}")
    assert oracle["nodes"] == {"g-0": "second", "g-1": "second"}, oracle
    assert oracle["devices"] == [("second", "gpu-0")] and oracle["reserved_for_g0"]
    assert ours["nodes"] == oracle["nodes"]
    assert ours["devices"] == oracle["devices"] and ours["reserved_for_g0"]
    assert ours["first_failures"] == oracle["first_failures"]
