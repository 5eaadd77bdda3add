"""PodDisruptionBudgets in the drain what-if: which evictions the eviction API refuses, as
``kubectl drain`` meets them (it evicts through ``pods/eviction`` and retries a refusal every 5 s,
forever unless ``--timeout`` is given).

A budget's state is read from the dump as the eviction API reads it — ``status.disruptionsAllowed``,
``currentHealthy``, ``desiredHealthy`` — when the status carries ``disruptionsAllowed``; otherwise
(hand-written inputs) it is computed from the spec as the disruption controller does
(pkg/controller/disruption/disruption.go ``getExpectedPodCount``, ``countHealthyPods``,
``updatePdbStatus``): ``minAvailable`` as an integer is the desired healthy count over the matching
pods; ``minAvailable`` as a percentage and ``maxUnavailable`` (integer or percentage) scale the
expected count, rounding up — here the expected count is the number of matching pods (the
controllers' ``spec.replicas`` are not in a dump of nodes and pods; they agree once a workload is
settled); ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, 0 when no pod matches.
A pod is healthy when its Ready condition is True; a bound pod whose input carries no Ready
condition at all (hand-written, or bound by the simulator and written by ``--out-cluster``) counts
as Running and Ready.

The eviction of one pod (pkg/registry/core/pod/storage/eviction.go, ``Create`` and
``checkAndDecrement``), in that order:

* a Pending pod is deleted without a budget check (``canIgnorePDB``);
* more than one budget selects the pod: refused (``This pod has more than one
  PodDisruptionBudget, ...``; kubectl gives up on the node);
* no budget: evicted;
* an unready pod is evicted without using the budget when the budget's
  ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when
  ``currentHealthy >= desiredHealthy > 0``;
* ``disruptionsAllowed < 0``: refused (403; kubectl gives up on the node);
* ``disruptionsAllowed == 0``: refused (429: ``Cannot evict pod as it would violate the pod's
  disruption budget.``; kubectl retries); otherwise evicted and ``disruptionsAllowed`` decremented.

A budget whose ``status.observedGeneration`` is behind ``metadata.generation`` (the server would
answer "still being processed" until the controller catches up) is computed from its spec, as the
controller is about to.

Refusals that last: two budgets, a negative budget, and a budget already at 0 when the drain starts
(nothing the drain does gives it back). A refusal from a budget the drain itself used up is a wait:
each evicted pod gives its unit back once its replacement is Ready elsewhere (drain.py decides that
from the simulation).

Selectors as the eviction API reads them (metav1 ``LabelSelectorAsSelector``): a missing selector
or an invalid one selects nothing, an empty one every pod of the namespace.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubesched.framework.labels import LabelSelector
from kubesched.framework.objects import ObjectKind

__all__ = ["PDB_KIND", "Budget", "Eviction", "evict", "is_ready", "load_budgets", "phase"]

MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."
_PERCENT = re.compile(r"^(\d+)%$")


def _check_int_or_percent(spec: Mapping[str, Any], field: str) -> None:
    v = spec.get(field)
    if v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        return
    if isinstance(v, str) and _PERCENT.match(v):
        return
    raise ValueError(f"spec.{field} must be a non-negative integer or a percentage like '50%', got {v!r}")


def _check_pdb(raw: dict[str, Any]) -> None:
    spec = raw.get("spec") or {}
    for field in ("minAvailable", "maxUnavailable"):
        _check_int_or_percent(spec, field)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy not in (None, "IfHealthyBudget", "AlwaysAllow"):
        raise ValueError(f"spec.unhealthyPodEvictionPolicy must be IfHealthyBudget or AlwaysAllow, got {policy!r}")
    status = raw.get("status") or {}
    for field in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods", "observedGeneration"):
        v = status.get(field)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"status.{field} must be an integer, got {v!r}")


#: The kind the drain what-if reads from ``--cluster`` dumps, whatever the configured plugins declare.
PDB_KIND = ObjectKind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", validate=_check_pdb,
                      needed_by=lambda pod: bool((pod.get("spec") or {}).get("nodeName")),
                      when_missing="the drain evicts pods no budget protects")


def _ready_condition(pod: Mapping[str, Any]) -> bool | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return None


def phase(pod: Mapping[str, Any]) -> str:
    """The pod's phase; a bound pod whose input carries no Ready condition (written by hand, or
    bound by the simulator: ``--out-cluster``) is taken as Running."""
    value = str((pod.get("status") or {}).get("phase") or "")
    if value in ("", "Pending") and (pod.get("spec") or {}).get("nodeName") and _ready_condition(pod) is None:
        return "Running"
    return value


def is_ready(pod: Mapping[str, Any]) -> bool:
    """``IsPodReady``; a pod taken as Running (see ``phase``) without a Ready condition is Ready."""
    if phase(pod) in ("Succeeded", "Failed", "Pending") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    ready = _ready_condition(pod)
    return ready if ready is not None else bool((pod.get("spec") or {}).get("nodeName"))


def _scaled(v: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)``."""
    if isinstance(v, str):
        m = _PERCENT.match(v)
        return math.ceil(int(m.group(1)) * total / 100) if m else 0
    return int(v)


@dataclass
class Budget:
    namespace: str
    name: str
    selector: LabelSelector | None
    #: What the budget asks, as written (``minAvailable: 2``, ``maxUnavailable: 25%``, ``none``).
    rule: str
    expected: int
    desired: int
    healthy: int
    #: ``disruptionsAllowed`` when the drain starts, and as evictions use it up.
    allowed_at_start: int
    allowed: int
    always_allow_unhealthy: bool
    #: "status" (read from the dump) or "spec" (computed as the disruption controller would).
    source: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        if self.selector is None or (meta.get("namespace") or "default") != self.namespace:
            return False
        labels = meta.get("labels")
        return self.selector.matches(labels if isinstance(labels, dict) else {})

    def cause(self) -> str:
        """The refusal's cause, as the eviction API words it."""
        if self.allowed < 0:
            return (f"The disruption budget {self.name} does not allow evicting pods currently: "
                    "pdb disruptions allowed is negative")
        if self.healthy <= self.desired:
            return (f"The disruption budget {self.name} needs {self.desired} healthy pods and has {self.healthy} "
                    "currently")
        return f"The disruption budget {self.name} does not allow evicting pods currently"


def _budget(raw: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Budget:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    selector: LabelSelector | None = None
    if spec.get("selector") is not None:
        try:
            selector = LabelSelector.model_validate(spec["selector"])
        except ValidationError:
            selector = None  # an invalid selector selects nothing
    if spec.get("maxUnavailable") is not None:
        rule = f"maxUnavailable: {spec['maxUnavailable']}"
    elif spec.get("minAvailable") is not None:
        rule = f"minAvailable: {spec['minAvailable']}"
    else:
        rule = "neither minAvailable nor maxUnavailable"
    budget = Budget(namespace, name, selector, rule, 0, 0, 0, 0, 0,
                    spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow", "status")
    processed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    if isinstance(status.get("disruptionsAllowed"), int) and processed:
        budget.allowed = int(status["disruptionsAllowed"])
        budget.healthy = int(status.get("currentHealthy") or 0)
        budget.desired = int(status.get("desiredHealthy") or 0)
        budget.expected = int(status.get("expectedPods") or 0)
    else:
        budget.source = "spec"
        matching = [p for p in pods if budget.selects(p)
                    and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        budget.expected = len(matching)
        budget.healthy = sum(1 for p in matching if is_ready(p))
        if spec.get("maxUnavailable") is not None:
            budget.desired = max(0, budget.expected - _scaled(spec["maxUnavailable"], budget.expected))
        elif spec.get("minAvailable") is not None:
            budget.desired = _scaled(spec["minAvailable"], budget.expected)
        budget.allowed = max(0, budget.healthy - budget.desired) if budget.expected > 0 else 0
    budget.allowed_at_start = budget.allowed
    return budget


def load_budgets(objects: Mapping[str, Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> list[Budget]:
    """The PodDisruptionBudgets of a loaded cluster (``ClusterInput.objects``), in input order."""
    return [_budget(raw, pods) for raw in (objects.get(PDB_KIND.kind) or {}).values()]


@dataclass(frozen=True)
class Eviction:
    """What the eviction API answers for one pod at that moment."""

    allowed: bool
    #: The budget that decided (None: no budget selects the pod, or the pod was Pending).
    budget: Budget | None = None
    #: ``disruptionsAllowed`` of that budget when the eviction was tried.
    disruptions_allowed: int | None = None
    #: An unready pod evicted without using the budget.
    unhealthy: bool = False
    #: Why it was refused (the API's message and cause); "" when allowed.
    message: str = ""
    #: Refused for good whatever happens to the other pods (see the module doc); else a wait.
    permanent: bool = False


def evict(pod: Mapping[str, Any], budgets: Sequence[Budget]) -> Eviction:
    """Try to evict ``pod`` (see the module doc); an allowed eviction uses up the budget."""
    if phase(pod) == "Pending":
        return Eviction(True)
    matching = [b for b in budgets if b.selects(pod)]
    if len(matching) > 1:
        names = ", ".join(b.key for b in matching)
        return Eviction(False, matching[0], None, message=f"{MORE_THAN_ONE} ({names})", permanent=True)
    if not matching:
        return Eviction(True)
    b = matching[0]
    if not is_ready(pod) and (b.always_allow_unhealthy or (b.healthy >= b.desired > 0)):
        return Eviction(True, b, b.allowed, unhealthy=True)
    if b.allowed < 0:
        return Eviction(False, b, b.allowed, message=b.cause(), permanent=True)
    if b.allowed == 0:
        return Eviction(False, b, 0, message=f"{VIOLATES} {b.cause()}", permanent=b.allowed_at_start == 0)
    b.allowed -= 1
    return Eviction(True, b, b.allowed + 1)
