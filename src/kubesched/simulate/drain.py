"""Drain what-if (``kubesched simulate --drain NODE --drain-selector SELECTOR``): cordon the nodes,
evict their pods as ``kubectl drain --ignore-daemonsets --delete-emptydir-data --force`` would, let
the controllers recreate them, and schedule them on the rest of the cluster. The answer is which
would not fit anywhere, and why — the question before every maintenance window.

Which pods go, pod by pod, as kubectl's drain filters decide (k8s.io/kubectl/pkg/drain/filters.go,
in that order):

* terminal pods (Succeeded, Failed): deleted; nothing to reschedule;
* DaemonSet pods (controller ``apps/v1 DaemonSet``): stay (``ignoring DaemonSet-managed Pods``);
  the DaemonSet controller does not move them;
* mirror pods (annotation ``kubernetes.io/config.mirror``): stay (static pods belong to the kubelet);
* pods with an ``emptyDir`` volume: evicted, their local data lost (kubectl needs
  ``--delete-emptydir-data``), and rescheduled like the others;
* pods that declare no controller: deleted and **not recreated** (kubectl needs ``--force``):
  reported as lost, never rescheduled;
* every other pod: evicted; its controller creates it again, pending, after every pod already in
  the input (its creation timestamp is later), with the same name so the report can follow it.

Cordoning sets ``spec.unschedulable`` (``kubectl cordon``), so NodeUnschedulable-style filters keep
the drained nodes out unless a pod tolerates it, as in a real drain. PodDisruptionBudgets are not
consulted: a real drain waits on them, the what-if assumes it eventually proceeds.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.simulate.inputs import ClusterInput
from kubesched.simulate.records import PodRecord
from kubesched.simulate.selector import LabelSelector, SelectorSyntaxError, parse_selector
from kubesched.simulate.workload import latest_timestamp, rfc3339

__all__ = ["DrainError", "DrainPlan", "drain_to_json", "plan_drain", "plan_drain_options"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET = ("apps/v1", "DaemonSet")
#: Why a pod on a drained node stays or goes (kubectl's words where it has them).
STAYS_DAEMONSET = "ignoring DaemonSet-managed Pods"
STAYS_MIRROR = "mirror (static) Pods stay with the kubelet"
LOST_UNMANAGED = "deleting Pods that declare no controller (kubectl drain needs --force): not recreated"
LOCAL_STORAGE = "deleting Pods with local storage (kubectl drain needs --delete-emptydir-data): emptyDir data lost"


class DrainError(ValueError):
    """A drain request that names no node, or a node the cluster does not have."""


@dataclass
class DrainPlan:
    #: Drained (cordoned) nodes, in input order.
    nodes: list[str]
    #: Evicted pods that their controllers recreate: pod key → the node it was on.
    evicted: dict[str, str] = field(default_factory=dict)
    #: Pods deleted for good (no controller): pod key → node.
    lost: dict[str, str] = field(default_factory=dict)
    #: Pods left on the drained nodes: pod key → why (DaemonSet, mirror).
    stay: dict[str, str] = field(default_factory=dict)
    #: Evicted pods that lose emptyDir data.
    local_storage: list[str] = field(default_factory=list)


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _has_local_storage(pod: dict[str, Any]) -> bool:
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return any(isinstance(v, dict) and v.get("emptyDir") is not None for v in volumes)


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def select_nodes(cluster: ClusterInput, names: Sequence[str], selector: LabelSelector | None) -> list[str]:
    """The nodes to drain: those named plus those the selector matches, in input order."""
    by_name = {str((n.get("metadata") or {}).get("name")): n for n in cluster.nodes}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise DrainError(f"--drain: no node {', '.join(map(repr, unknown))} in the cluster")
    chosen = set(names)
    if selector is not None:
        matched = {name for name, n in by_name.items() if selector.matches(_labels(n))}
        if not matched:
            raise DrainError(f"--drain-selector {selector.text!r} matches no node")
        chosen |= matched
    return [name for name in by_name if name in chosen]


def plan_drain(
    cluster: ClusterInput, names: Sequence[str], selector: LabelSelector | None = None
) -> tuple[ClusterInput, DrainPlan]:
    """The cluster after cordoning the nodes and evicting their pods (the input is not changed),
    and what happened to each pod that was on them."""
    drained = select_nodes(cluster, names, selector)
    if not drained:
        raise DrainError("--drain/--drain-selector: no node to drain")
    plan = DrainPlan(drained)
    targets = set(drained)
    nodes = []
    for n in cluster.nodes:
        if (n.get("metadata") or {}).get("name") in targets:
            n = {**n, "spec": {**(n.get("spec") or {}), "unschedulable": True}}
        nodes.append(n)
    # Recreated pods are newer than every pod in the input, in their original order.
    next_ts = latest_timestamp(cluster.pods) + 1.0
    pods: list[dict[str, Any]] = []
    recreated: list[dict[str, Any]] = []
    for pod in cluster.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in targets or _terminal(pod):
            pods.append(pod)
            continue
        key, controller = _key(pod), _controller(pod)
        if controller is not None and (controller.get("apiVersion"), controller.get("kind")) == DAEMONSET:
            plan.stay[key] = STAYS_DAEMONSET
            pods.append(pod)
        elif MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
            plan.stay[key] = STAYS_MIRROR
            pods.append(pod)
        elif controller is None:
            plan.lost[key] = str(node)
        else:
            if _has_local_storage(pod):
                plan.local_storage.append(key)
            plan.evicted[key] = str(node)
            recreated.append(_recreate(pod, next_ts))
            next_ts += 1.0
    return replace(cluster, nodes=nodes, pods=pods + recreated, warnings=list(cluster.warnings)), plan


def plan_drain_options(
    cluster: ClusterInput, drain: Sequence[str], selector: str | None
) -> tuple[ClusterInput, DrainPlan]:
    """``plan_drain`` from the command's options: ``--drain`` values may list nodes comma-separated."""
    names = [n.strip() for value in drain for n in value.split(",") if n.strip()]
    try:
        parsed = parse_selector(selector) if selector is not None else None
    except SelectorSyntaxError as e:
        raise DrainError(f"--drain-selector: {e}") from None
    return plan_drain(cluster, names, parsed)


def _recreate(pod: dict[str, Any], created: float) -> dict[str, Any]:
    """The pod as its controller creates it again: same spec without the node, pending, new time."""
    new = copy.deepcopy(pod)
    new["spec"].pop("nodeName", None)
    meta = new.setdefault("metadata", {})
    meta["creationTimestamp"] = rfc3339(created)
    meta.pop("deletionTimestamp", None)
    new["status"] = {"phase": "Pending"}
    return new


def drain_to_json(plan: DrainPlan, records: dict[str, PodRecord]) -> dict[str, Any]:
    """The ``drain`` section of the JSON document: per evicted pod, where it went or why it could
    not go anywhere; the lost and the staying pods."""
    by_key = {rec.key: rec for rec in records.values()}
    pods = []
    for key, was_on in plan.evicted.items():
        rec = by_key.get(key)
        pods.append({
            "pod": key,
            "from": was_on,
            "status": rec.status if rec is not None else "Pending",
            "node": rec.node if rec is not None else None,
            "message": rec.message if rec is not None else "",
            "reasons": dict(rec.reasons) if rec is not None else {},
            "localStorage": key in plan.local_storage,
        })
    placed = sum(1 for p in pods if p["status"] == "Scheduled")
    return {
        "nodes": list(plan.nodes),
        "evicted": len(pods),
        "rescheduled": placed,
        "notRescheduled": len(pods) - placed,
        "pods": pods,
        "lost": [{"pod": k, "from": n, "reason": LOST_UNMANAGED} for k, n in plan.lost.items()],
        "stay": [{"pod": k, "reason": why} for k, why in plan.stay.items()],
    }
