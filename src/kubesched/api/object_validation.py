"""Pod and Node objects as the apiserver validates them: the checks of ``ValidatePodCreate`` /
``ValidateNode`` whose failure would change what a scheduler decides, so that a dump the apiserver
would never have stored is refused instead of simulated.

Ported from Kubernetes v1.37.1 ``pkg/apis/core/validation/validation.go``, messages verbatim:
``ValidateNonnegativeQuantity``
  (of ``ValidateResourceQuantityValue``), ``validateTaintEffect``, ``ValidateTolerations``,
  ``ValidateNodeSelectorRequirement`` and metav1 ``ValidateLabelSelectorRequirement`` (operators),
  ``validateTopologySpreadConstraints`` (``ValidateMaxSkew``, ``ValidateTopologyKey``,
  ``ValidateWhenUnsatisfiable``, the inclusion policies), ``validatePreemptionPolicy``,
  ``validateRestartPolicy``, ``validateNodeTaints``; ``field.Required``.

``ValidateContainerResourceRequirements``' request/limit rules are here too: a request above its
limit (``must be less than or equal to cpu limit of 1``), an extended resource whose request is
not its limit (``must be equal to example.com/gpu limit of 2``) and a fractional extended
resource (``ValidateResourceQuantityValue``: ``must be an integer``). One rule is left out on
purpose: an extended resource requested without a limit (upstream: ``Limit must be set for non
overcommitable resources``) is accepted, because hand-written and generated pods often omit the
limit and a dump of a real cluster never lacks it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from kubesched.api.quantity import QuantityError, parse_quantity
from kubesched.api.validation import (
    field_invalid,
    field_not_supported,
    is_extended_resource_name,
    is_hugepage_resource_name,
    is_native_resource,
    is_valid_label_value,
    validate_label_name,
)

__all__ = [
    "IS_NEGATIVE_ERROR_MSG",
    "IS_NOT_POSITIVE_ERROR_MSG",
    "field_required",
    "validate_affinity",
    "validate_container_resources",
    "validate_node",
    "validate_pod",
    "validate_resource_quantities",
    "validate_taint_effect",
    "validate_tolerations",
    "validate_topology_spread_constraints",
]

IS_NOT_INTEGER_ERROR_MSG: Final = "must be an integer"

# What is checked: negative quantities (which would lower a node's usage), enum fields (an unknown value would be
# read as one of the known ones), and a Node with no size. Cheap on purpose (dumps hold 50,000
# nodes): a quantity is parsed again only when its text starts with "-" (the parse is cached),
# and every other check is a dict lookup. Each function returns upstream's ``field.Error``
# renderings, relative to the object (``spec.containers[0].resources.requests[cpu]: ...``).

IS_NEGATIVE_ERROR_MSG: Final = "must be greater than or equal to 0"  # apimachinery validation
IS_NOT_POSITIVE_ERROR_MSG: Final = "must be greater than zero"
_TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS: Final = ("Equal", "Exists")
_NODE_SELECTOR_OPERATORS: Final = frozenset(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
_LABEL_SELECTOR_OPERATORS: Final = frozenset(("In", "NotIn", "Exists", "DoesNotExist"))
_SCHEDULE_ACTIONS: Final = ("DoNotSchedule", "ScheduleAnyway")  # sets.List: sorted
_INCLUSION_POLICIES: Final = ("Honor", "Ignore")
_PREEMPTION_POLICIES: Final = ("PreemptLowerPriority", "Never")
_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
_POD_AFFINITY_MODES: Final = ("requiredDuringSchedulingIgnoredDuringExecution",
                              "preferredDuringSchedulingIgnoredDuringExecution")


def field_required(path: str, detail: str = "") -> str:
    """``field.Required(path, detail).Error()``."""
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def _negative(raw: Any) -> bool:
    """Whether a quantity (as written) is below zero; an unparsable one is left to the parser
    that reads it (whose error names the field as the scheduler reads it)."""
    if isinstance(raw, str):
        if not raw.lstrip().startswith("-"):
            return False
    elif not isinstance(raw, int | float) or isinstance(raw, bool) or raw >= 0:
        return False
    try:
        return parse_quantity(raw, from_json=True) < 0
    except QuantityError:
        return False


def validate_resource_quantities(resources: Any, path: str) -> list[str]:
    """``ValidateResourceQuantityValue`` (its ``ValidateNonnegativeQuantity`` half) over a
    ``{name: quantity}`` map: ``<path>[<name>]: Invalid value: "-1": must be greater than or equal to 0``."""
    if not isinstance(resources, dict):
        return []
    return [
        field_invalid(f"{path}[{name}]", str(q), IS_NEGATIVE_ERROR_MSG)
        for name, q in resources.items()
        if _negative(q)
    ]


def _quantity(raw: Any) -> Any:
    """A quantity's value, or None when it does not parse (the parser that reads it later names
    the field)."""
    try:
        return parse_quantity(raw, from_json=True)
    except (QuantityError, TypeError):
        return None


def validate_container_resources(resources: dict[str, Any], path: str) -> list[str]:
    """``ValidateContainerResourceRequirements`` for one container's ``resources``: quantities not
    negative, extended resources whole numbers (``ValidateResourceQuantityValue``), a request not
    above its limit, and an extended resource's request equal to its limit (not overcommitable:
    ``helper.IsOvercommitAllowed`` is native and not hugepages). Quantities are shown as written
    (upstream shows ``Quantity.String()``, the canonical form: ``1000m`` there is ``1``)."""
    errs: list[str] = []
    limits = resources.get("limits")
    requests = resources.get("requests")
    for part, values in (("limits", limits), ("requests", requests)):
        if not isinstance(values, dict):
            continue
        errs += validate_resource_quantities(values, f"{path}.{part}")
        for name, q in values.items():
            if is_extended_resource_name(name) and not _negative(q):
                v = _quantity(q)
                if v is not None and v.denominator != 1:
                    errs.append(field_invalid(f"{path}.{part}[{name}]", str(q), IS_NOT_INTEGER_ERROR_MSG))
    if isinstance(requests, dict) and isinstance(limits, dict):
        for name, q in requests.items():
            if name not in limits:
                continue
            req, lim = _quantity(q), _quantity(limits[name])
            if req is None or lim is None:
                continue
            overcommit = is_native_resource(name) and not is_hugepage_resource_name(name)
            if req != lim and not overcommit:
                errs.append(field_invalid(f"{path}.requests", str(q),
                                          f"must be equal to {name} limit of {limits[name]}"))
            elif req > lim:
                errs.append(field_invalid(f"{path}.requests", str(q),
                                          f"must be less than or equal to {name} limit of {limits[name]}"))
    return errs


def validate_taint_effect(effect: Any, allow_empty: bool, path: str) -> list[str]:
    """``validateTaintEffect``."""
    if not effect:
        return [] if allow_empty else [field_required(path)]
    return [] if effect in _TAINT_EFFECTS else [field_not_supported(path, effect, _TAINT_EFFECTS)]


def validate_tolerations(tolerations: Any, path: str) -> list[str]:
    """``ValidateTolerations``: key, operator (Equal, the default, or Exists) and its value, effect.
    Pods repeat the same few tolerations (every pod has the two not-ready/unreachable ones), so
    each distinct one is checked once (:func:`_toleration_errors`)."""
    errs: list[str] = []
    for i, t in enumerate(tolerations if isinstance(tolerations, list) else ()):
        if isinstance(t, dict):
            fields = (t.get("key") or "", t.get("operator") or "", t.get("value") or "", t.get("effect") or "")
            has_seconds = t.get("tolerationSeconds") is not None
            try:
                found = _toleration_errors(*fields, has_seconds)
            except TypeError:  # a field that is not a string (unhashable, or not text): checked as text
                found = _toleration_errors(*map(str, fields), has_seconds)
            errs += (f"{path}[{i}]{e}" for e in found)
    return errs


@lru_cache(maxsize=4096)
def _toleration_errors(key: str, operator: str, value: str, effect: str, has_seconds: bool) -> tuple[str, ...]:
    """The errors of one toleration, their paths relative to it (``.operator: ...``)."""
    errs: list[str] = []
    if key:
        errs += validate_label_name(key, ".key")
    if not key and operator != "Exists":
        errs.append(field_invalid(".operator", operator, 'operator must be Exists when `key` is empty, which means '
                                                         '"match all values and all keys"'))
    if has_seconds and effect != "NoExecute":
        errs.append(field_invalid(".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    if operator in ("Equal", ""):
        msgs = is_valid_label_value(value)
        if msgs:
            errs.append(field_invalid(".operator", value, ";".join(msgs)))
    elif operator == "Exists":
        if value:
            toleration = {"key": key, "operator": operator, "value": value, "effect": effect}
            errs.append(field_invalid(".operator", toleration, "value must be empty when `operator` is 'Exists'"))
    else:
        errs.append(field_not_supported(".operator", operator, _TOLERATION_OPERATORS))
    errs += validate_taint_effect(effect, True, ".effect")
    return tuple(errs)


def _selector_operators(requirements: Any, allowed: frozenset[str], path: str) -> list[str]:
    """``ValidateNodeSelectorRequirement`` / metav1 ``ValidateLabelSelectorRequirement``: the
    operator (``Invalid value: "Maybe": not a valid selector operator``)."""
    return [
        field_invalid(f"{path}[{i}].operator", r.get("operator"), "not a valid selector operator")
        for i, r in enumerate(requirements if isinstance(requirements, list) else ())
        if isinstance(r, dict) and r.get("operator") not in allowed
    ]


def _node_selector_terms(terms: Any, path: str) -> list[str]:
    errs: list[str] = []
    for i, term in enumerate(terms if isinstance(terms, list) else ()):
        if isinstance(term, dict):
            errs += _selector_operators(term.get("matchExpressions"), _NODE_SELECTOR_OPERATORS,
                                        f"{path}[{i}].matchExpressions")
    return errs


def validate_affinity(affinity: Any, path: str) -> list[str]:
    """``validateAffinity``, its selector operators: node affinity terms and the pod (anti-)affinity
    terms' label selectors."""
    if not isinstance(affinity, dict):
        return []
    errs: list[str] = []
    node = affinity.get("nodeAffinity")
    if isinstance(node, dict):
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(required, dict):
            errs += _node_selector_terms(required.get("nodeSelectorTerms"),
                                         f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                                         ".nodeSelectorTerms")
        for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            if isinstance(pref, dict):
                errs += _node_selector_terms(
                    [pref.get("preference")],
                    f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                )
    for kind in ("podAffinity", "podAntiAffinity"):
        pod_aff = affinity.get(kind)
        if not isinstance(pod_aff, dict):
            continue
        for mode in _POD_AFFINITY_MODES:
            for i, term in enumerate(pod_aff.get(mode) or ()):
                if not isinstance(term, dict):
                    continue
                at = f"{path}.{kind}.{mode}[{i}]"
                if "podAffinityTerm" in term:
                    term, at = term.get("podAffinityTerm") or {}, f"{at}.podAffinityTerm"
                selector = term.get("labelSelector") if isinstance(term, dict) else None
                if isinstance(selector, dict):
                    errs += _selector_operators(selector.get("matchExpressions"), _LABEL_SELECTOR_OPERATORS,
                                                f"{at}.labelSelector.matchExpressions")
    return errs


def validate_topology_spread_constraints(constraints: Any, path: str) -> list[str]:
    """``validateTopologySpreadConstraints``: maxSkew, topologyKey, whenUnsatisfiable and the
    inclusion policies."""
    errs: list[str] = []
    for i, c in enumerate(constraints if isinstance(constraints, list) else ()):
        if not isinstance(c, dict):
            continue
        at = f"{path}[{i}]"
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            errs.append(field_invalid(f"{at}.maxSkew", skew, IS_NOT_POSITIVE_ERROR_MSG))
        if not c.get("topologyKey"):
            errs.append(field_required(f"{at}.topologyKey", "can not be empty"))
        action = c.get("whenUnsatisfiable")
        if action not in _SCHEDULE_ACTIONS:
            errs.append(field_not_supported(f"{at}.whenUnsatisfiable", action or "", _SCHEDULE_ACTIONS))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = c.get(policy)
            if v is not None and v not in _INCLUSION_POLICIES:
                errs.append(field_not_supported(f"{at}.{policy}", v, _INCLUSION_POLICIES))
    return errs


def validate_pod(raw: dict[str, Any]) -> list[str]:
    """The checks of ``ValidatePodSpec`` a scheduler's answer depends on: container and overhead
    quantities (``validateContainerResourceRequirements``, ``validateOverhead``), tolerations,
    affinity selector operators, topology spread constraints, ``validatePreemptionPolicy``,
    ``validateRestartPolicy`` (when set: the apiserver defaults it to Always)."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return []
    errs: list[str] = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or ()):
            res = c.get("resources") if isinstance(c, dict) else None
            if isinstance(res, dict):
                errs += validate_container_resources(res, f"spec.{group}[{i}].resources")
    if "overhead" in spec:
        errs += validate_resource_quantities(spec["overhead"], "spec.overhead")
    if "tolerations" in spec:
        errs += validate_tolerations(spec["tolerations"], "spec.tolerations")
    if "affinity" in spec:
        errs += validate_affinity(spec["affinity"], "spec.affinity")
    if "topologySpreadConstraints" in spec:
        errs += validate_topology_spread_constraints(spec["topologySpreadConstraints"],
                                                     "spec.topologySpreadConstraints")
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in _PREEMPTION_POLICIES:
        errs.append(field_not_supported("spec.preemptionPolicy", policy, _PREEMPTION_POLICIES))
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in _RESTART_POLICIES:
        errs.append(field_not_supported("spec.restartPolicy", restart, _RESTART_POLICIES))
    return errs


def validate_node(raw: dict[str, Any]) -> list[str]:
    """``ValidateNode``'s quantity checks of ``status.capacity`` and ``status.allocatable`` and
    ``validateNodeTaints``; and one rule of the simulator's own: a Node must say how big it is.
    The apiserver stores a Node without status (its kubelet fills it in a moment later), but a
    dump of one has no size, so every pod would be measured against zero (``allocatable``
    defaults to ``capacity``, as ``SetDefaults_NodeStatus`` does)."""
    status = raw.get("status")
    errs: list[str] = []
    if not isinstance(status, dict) or not (status.get("allocatable") or status.get("capacity")):
        errs.append(field_required("status.allocatable",
                                   "the Node has neither status.allocatable nor status.capacity, so nothing "
                                   "would fit on it (dump Nodes as the apiserver returns them)"))
    else:
        for part in ("capacity", "allocatable"):
            errs += validate_resource_quantities(status.get(part), f"status.{part}")
    spec = raw.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    for i, t in enumerate(taints if isinstance(taints, list) else ()):
        if isinstance(t, dict):
            errs += validate_label_name(str(t.get("key") or ""), f"spec.taints[{i}].key")
            errs += validate_taint_effect(t.get("effect"), False, f"spec.taints[{i}].effect")
    return errs
