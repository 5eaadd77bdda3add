"""The RBAC a ``kubesched run`` deployment needs, derived from its configuration: what every live
scheduler does (watch nodes and pods, bind, report PodScheduled and Events, hold a Lease) plus the
objects its plugins declare (framework/objects.py). ``kubesched run --print-rbac`` prints it;
a test holds ``deploy/scheduler/rbac.yaml`` to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.kube import rbac
from kubesched.kube.objects import rbac_rules

#: What the live shell itself does, whatever the plugins (kube-scheduler's system:kube-scheduler,
#: cut to what kubesched uses).
SCHEDULER_RULES: list[dict[str, Any]] = [
    rbac.WATCH_NODES_AND_PODS,
    rbac.BIND_PODS,
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


def cluster_role(name: str, kinds: Sequence[ObjectKind]) -> dict[str, Any]:
    return rbac.cluster_role(name, [*SCHEDULER_RULES, *rbac_rules(kinds)])


def leader_election_role(name: str, namespace: str, lease_name: str) -> dict[str, Any]:
    """``create`` cannot be limited to a name (the Lease does not exist yet); get/update can."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [lease_name],
                "verbs": ["get", "update"],
            },
        ],
    }
