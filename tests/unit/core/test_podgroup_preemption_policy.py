"""The preemption policy of a group preemptor: port of preemption/types_test.go
``TestNewPodGroupPreemptorResolvesPreemptionPolicy`` (Kubernetes v1.37.1), every case. The cycle
tests (validatePodGroup, a gang whose PodGroup says Never) are in test_podgroup_cycle.py."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.preemption_podgroup import resolve_preemption_policy
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import pod

NEVER, LOWER = "Never", "PreemptLowerPriority"


def policy_pod(name: str, policy: str | None) -> PodInfo:
    raw = pod(name)
    if policy is not None:
        raw["spec"]["preemptionPolicy"] = policy
    return PodInfo.from_raw(raw)


def group(policy: str | None) -> dict[str, Any]:
    return {"spec": {"preemptionPolicy": policy} if policy is not None else {}}


P_NEVER, P_LOWER, P_NIL = policy_pod("p-never", NEVER), policy_pod("p-lower", LOWER), policy_pod("p-nil", None)


@pytest.mark.parametrize(("obj", "pods", "gate", "want"), [
    pytest.param(group(NEVER), [P_LOWER], True, NEVER,
                 id="PreemptNever is resolved from PodGroup, ignoring policy in pod, with the gate"),
    pytest.param(group(LOWER), [P_LOWER, P_NIL], True, LOWER,
                 id="PreemptLowerPriority is resolved from PodGroup, ignoring the pods, with the gate"),
    pytest.param(group(NEVER), [P_LOWER], False, LOWER, id="resolved from pods with the gate disabled"),
    pytest.param(group(LOWER), [P_NEVER, P_LOWER, P_NIL], False, NEVER,
                 id="resolved from pods when multiple pods have different policies, with the gate disabled"),
    pytest.param(group(None), [P_LOWER, P_NIL], False, LOWER,
                 id="CompositePodGroup: PreemptLowerPriority when no pod is PreemptNever"),
    pytest.param(group(None), [P_NEVER, P_LOWER], False, NEVER,
                 id="CompositePodGroup: PreemptNever when any pod is PreemptNever"),
    pytest.param(group(NEVER), [P_LOWER], True, NEVER,
                 id="PreemptNever is resolved from CompositePodGroup, ignoring policy in pod, with the gate"),
    pytest.param(group(LOWER), [P_LOWER, P_NEVER], True, LOWER,
                 id="PreemptLowerPriority is resolved from CompositePodGroup, ignoring pods, with the gate"),
    pytest.param(group(NEVER), [P_LOWER, P_NIL], False, LOWER,
                 id="resolved from pods when CompositePodGroup has policy but the gate is disabled"),
    pytest.param(group(None), [P_NEVER], True, LOWER,
                 id="PreemptLowerPriority when the group has no policy, with the gate, even if pods are Never"),
])
def test_new_pod_group_preemptor_resolves_preemption_policy(
    obj: dict[str, Any], pods: list[PodInfo], gate: bool, want: str,
) -> None:
    assert resolve_preemption_policy(obj, pods, gate) == want
