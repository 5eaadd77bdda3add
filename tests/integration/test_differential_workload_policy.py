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
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ApiError, ControlPlane

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
