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
the drained nodes out unless a pod tolerates it, as in a real drain.

The order kubectl tries (k8s.io/kubectl/pkg/cmd/drain/drain.go ``RunDrain``): every node is
cordoned first, then the nodes are drained one after another; on a node, the pods are listed in the
API's order (namespace, then name) and all evicted at once, each eviction retried every 5 s while
the eviction API answers 429. Recreated pods are created in that order too.

PodDisruptionBudgets (policy/v1, read from the dump whatever the configuration; drain_budget.py) are
applied as the eviction API applies them, in that order. An eviction refused for good (two budgets
select the pod, a negative budget, a budget at 0 before the drain starts) leaves the pod where it
is: **blocked**. An eviction refused because earlier evictions of this drain used the budget up
waits: each evicted pod gives its unit back once its replacement is scheduled (and Ready), so the
waiting pod is evicted later — unless the replacements that fit nowhere (or pods deleted for good)
hold the whole budget: then it is blocked too. Those are settled after the simulation
(``drain_to_json``); their replacements took part in it, which can only make other pods fit less
well (documented in docs/simulator.md). A blocked pod means the drain does not complete: kubectl
retries a 429 forever (no ``--timeout``) and never reaches the nodes after that one; a refusal
that is not a 429 (two budgets, a negative one) fails that node and kubectl goes on with the next.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.api.timestamps import rfc3339
from kubesched.simulate.engine.records import PodRecord
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.selector import LabelSelector, SelectorSyntaxError, parse_selector
from kubesched.simulate.inputs.workload import latest_timestamp
from kubesched.simulate.whatif.drain_budget import VIOLATES, Budget, evict, load_budgets
from kubesched.snapshot.pod import raw_pod_terminal

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
    #: Per drained node, the pods kubectl evicts (or deletes), in the order it tries them.
    order: dict[str, list[str]] = field(default_factory=dict)
    #: The PodDisruptionBudgets of the cluster (their ``allowed`` used up by the evictions).
    budgets: list[Budget] = field(default_factory=list)
    #: Pods whose eviction is refused for good: they stay on their node.
    blocked: dict[str, BlockedPod] = field(default_factory=dict)
    #: Evicted (or lost) pods a budget covers: pod key → how the budget answered.
    covered: dict[str, Covered] = field(default_factory=dict)
    #: Pods refused because this drain used their budget up (evicted later, or blocked: see drain_to_json).
    waiting: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class BlockedPod:
    node: str
    budget: str
    disruptions_allowed: int | None
    message: str
    #: The API answers 429 (kubectl retries forever) rather than an error (kubectl fails the node).
    retried: bool


@dataclass(frozen=True)
class Covered:
    budget: str
    #: ``disruptionsAllowed`` when kubectl first tried the pod.
    disruptions_allowed: int
    #: An unready pod evicted without using the budget.
    unhealthy: bool


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


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
    # Recreated pods are newer than every pod in the input, in the order kubectl evicts them.
    next_ts = latest_timestamp(cluster.pods) + 1.0
    plan.budgets = load_budgets(cluster.objects, cluster.pods)
    pods: list[dict[str, Any]] = []
    on_drained: dict[str, list[dict[str, Any]]] = {name: [] for name in drained}
    for pod in cluster.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in targets or raw_pod_terminal(pod):
            pods.append(pod)
        else:
            on_drained[str(node)].append(pod)
    recreated: list[dict[str, Any]] = []
    for node in drained:
        plan.order[node] = []
        for pod in sorted(on_drained[node], key=_key):
            key, controller = _key(pod), _controller(pod)
            if controller is not None and (controller.get("apiVersion"), controller.get("kind")) == DAEMONSET:
                plan.stay[key] = STAYS_DAEMONSET
                pods.append(pod)
                continue
            if MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
                plan.stay[key] = STAYS_MIRROR
                pods.append(pod)
                continue
            plan.order[node].append(key)
            answer = evict(pod, plan.budgets)
            if not answer.allowed and answer.permanent:
                plan.blocked[key] = BlockedPod(node, answer.budget.key if answer.budget else "",
                                               answer.disruptions_allowed, answer.message,
                                               retried=answer.message.startswith(VIOLATES))
                pods.append(pod)
                continue
            if answer.budget is not None:
                plan.covered[key] = Covered(answer.budget.key, answer.disruptions_allowed or 0, answer.unhealthy)
            if not answer.allowed:
                plan.waiting.add(key)
            if controller is None:
                plan.lost[key] = node
                continue
            if _has_local_storage(pod):
                plan.local_storage.append(key)
            plan.evicted[key] = node
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


def _settle(plan: DrainPlan, by_key: dict[str, PodRecord]) -> dict[str, BlockedPod]:
    """The waiting pods a budget never lets go: walking kubectl's order, a budget's unit comes back
    when the pod that used it is rescheduled; pods deleted for good and replacements that fit
    nowhere keep theirs. Once they hold every unit the budget had, the next waiting pod is blocked."""
    budgets = {b.key: b for b in plan.budgets}
    held: Counter[str] = Counter()
    blocked: dict[str, BlockedPod] = {}
    for node in plan.nodes:
        for key in plan.order.get(node, []):
            cov = plan.covered.get(key)
            if key in plan.blocked or cov is None or cov.unhealthy:
                continue
            b = budgets[cov.budget]
            if key in plan.waiting and held[b.key] >= b.allowed_at_start:
                cause = (f"The disruption budget {b.name} needs {b.desired} healthy pods and has "
                         f"{b.healthy - held[b.key]} currently")
                blocked[key] = BlockedPod(node, b.key, 0, f"{VIOLATES} {cause}", retried=True)
                continue
            rec = by_key.get(key)
            if key in plan.lost or rec is None or rec.status != "Scheduled":
                held[b.key] += 1
    return blocked


def drain_to_json(plan: DrainPlan, records: dict[str, PodRecord]) -> dict[str, Any]:
    """The ``drain`` section of the JSON document: whether ``kubectl drain`` would complete and
    why not; per drained node the order kubectl tries; per evicted pod where it went or why it
    could not go anywhere, and the budget that covered it; the blocked, lost and staying pods; the
    budgets as the drain found them."""
    by_key = {rec.key: rec for rec in records.values()}
    blocked = {**plan.blocked, **_settle(plan, by_key)}
    pods = []
    for key, was_on in plan.evicted.items():
        if key in blocked:
            continue
        rec = by_key.get(key)
        cov = plan.covered.get(key)
        pods.append({
            "pod": key,
            "from": was_on,
            "status": rec.status if rec is not None else "Pending",
            "node": rec.node if rec is not None else None,
            "message": rec.message if rec is not None else "",
            "reasons": dict(rec.reasons) if rec is not None else {},
            "localStorage": key in plan.local_storage,
            "pdb": cov.budget if cov is not None else None,
            "disruptionsAllowed": cov.disruptions_allowed if cov is not None else None,
            "eviction": ("unhealthy" if cov is not None and cov.unhealthy
                         else "afterWait" if key in plan.waiting else "immediate"),
        })
    placed = sum(1 for p in pods if p["status"] == "Scheduled")
    blocked_rows = [
        {"pod": key, "from": b.node, "pdb": b.budget, "disruptionsAllowed": b.disruptions_allowed,
         "message": b.message, "retriedForever": b.retried}
        for node in plan.nodes for key in plan.order.get(node, []) if (b := blocked.get(key)) is not None
    ]
    per_node, reached = [], True
    for node in plan.nodes:
        order = plan.order.get(node, [])
        stuck = [k for k in order if k in blocked]
        per_node.append({
            "node": node,
            "order": order,
            "evicted": sum(1 for k in order if k in plan.evicted and k not in blocked),
            "lost": sum(1 for k in order if k in plan.lost and k not in blocked),
            "blocked": len(stuck),
            "notRescheduled": sum(1 for p in pods if p["from"] == node and p["status"] != "Scheduled"),
            "drained": reached and not stuck,
            "reached": reached,
            "waitsForever": reached and any(blocked[k].retried for k in stuck),
        })
        if any(blocked[k].retried for k in stuck):
            reached = False  # kubectl retries this node's 429s forever: it never gets to the next node
    lost = [{"pod": k, "from": n, "reason": LOST_UNMANAGED} for k, n in plan.lost.items() if k not in blocked]
    flags = [flag for flag, needed in (("--ignore-daemonsets", any(r == STAYS_DAEMONSET for r in plan.stay.values())),
                                       ("--delete-emptydir-data", any(k not in blocked for k in plan.local_storage)),
                                       ("--force", bool(lost))) if needed]
    return {
        "nodes": list(plan.nodes),
        "complete": not blocked_rows,
        "verdict": _verdict(blocked_rows, per_node, len(pods) - placed),
        "kubectlFlags": flags,
        "evicted": len(pods),
        "rescheduled": placed,
        "notRescheduled": len(pods) - placed,
        "pods": pods,
        "blocked": blocked_rows,
        "perNode": per_node,
        "budgets": [_budget_json(b, plan, blocked) for b in plan.budgets],
        "lost": lost,
        "stay": [{"pod": k, "reason": why} for k, why in plan.stay.items()],
    }


def _verdict(blocked: list[dict[str, Any]], per_node: list[dict[str, Any]], unplaced: int) -> str:
    """One sentence: would ``kubectl drain`` complete, and if not, why."""
    if not blocked:
        if unplaced:
            return (f"kubectl drain would complete, but {unplaced:,} evicted pod(s) fit nowhere and stay Pending")
        return "kubectl drain would complete: every evicted pod fits elsewhere"
    first = blocked[0]
    budgets = sorted({b["pdb"] for b in blocked if b["pdb"]})
    text = (f"kubectl drain would not complete: {len(blocked):,} pod(s) cannot be evicted "
            f"({', '.join(budgets) or 'PodDisruptionBudget'}); first {first['pod']} on {first['from']}: "
            f"{first['message']}")
    if first["retriedForever"]:
        text += " — kubectl retries it forever"
        skipped = [n["node"] for n in per_node if not n["reached"]]
        if skipped:
            text += f" and never drains {', '.join(skipped[:5])}{' …' if len(skipped) > 5 else ''}"
    return text


def _budget_json(b: Budget, plan: DrainPlan, blocked: dict[str, BlockedPod]) -> dict[str, Any]:
    on_drained = [k for k, c in plan.covered.items() if c.budget == b.key]
    stuck = [k for k, p in blocked.items() if p.budget == b.key]
    return {
        "pdb": b.key,
        "rule": b.rule,
        "source": b.source,
        "expectedPods": b.expected,
        "desiredHealthy": b.desired,
        "currentHealthy": b.healthy,
        "disruptionsAllowed": b.allowed_at_start,
        "evicted": len([k for k in on_drained if k not in blocked]),
        "blocked": len(stuck),
    }
