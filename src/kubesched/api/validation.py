"""Kubernetes name rules and ``field.Error`` rendering, in one place.

Every rule here is a port of upstream (Kubernetes v1.37.1, apimachinery v0.37.1), with its regexes
and error strings copied verbatim so that a message can be matched against upstream's:

* ``staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go``: ``IsDNS1123Label``,
  ``IsDNS1123Subdomain``, ``MaxLenError`` ("must be no more than N characters"), ``RegexError``,
  ``EmptyError``; and its aliases ``IsQualifiedName`` / ``IsValidLabelValue``, which since 1.35 are
  ``staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go`` ``IsLabelKey`` /
  ``IsLabelValue`` (whose ``content.MaxLenError`` says "bytes", and whose prefix check is
  ``content/dns.go`` ``IsDNS1123Subdomain``, also in bytes). Lengths are Go ``len()``: UTF-8 bytes.
  Like upstream, every failed check adds its message (a too-long name with a bad character gets two).
* ``staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`` ``ValidateLabelName``.
* ``staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go``: the ``field.Invalid`` and
  ``field.NotSupported`` renderings (``<path>: Invalid value: <value>: <detail>``; strings as Go's
  ``%q``, numbers and booleans bare, anything else as JSON).
* ``pkg/apis/core/validation/validation.go`` (below, "Pod and Node objects"): ``ValidateNonnegativeQuantity``
  (of ``ValidateResourceQuantityValue``), ``validateTaintEffect``, ``ValidateTolerations``,
  ``ValidateNodeSelectorRequirement`` and metav1 ``ValidateLabelSelectorRequirement`` (operators),
  ``validateTopologySpreadConstraints`` (``ValidateMaxSkew``, ``ValidateTopologyKey``,
  ``ValidateWhenUnsatisfiable``, the inclusion policies), ``validatePreemptionPolicy``,
  ``validateRestartPolicy``, ``validateNodeTaints``; ``field.Required``.
* ``pkg/apis/core/v1/helper/helpers.go``: ``IsNativeResource``, ``IsPrefixedNativeResource``,
  ``IsExtendedResourceName``, ``IsHugePageResourceName``, ``IsAttachableVolumeResourceName``;
  ``pkg/scheduler/util/utils.go`` ``IsScalarResourceName``; and
  ``pkg/scheduler/apis/config/validation/validation.go`` ``validateExtendedResourceName``.

This is the bottom layer of kubesched: it imports nothing from kubesched but :mod:`kubesched.api.quantity`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Final

from kubesched.api.quantity import QuantityError, parse_quantity

__all__ = [
    "DEFAULT_RESOURCE_REQUESTS_PREFIX",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "IS_NEGATIVE_ERROR_MSG",
    "IS_NOT_POSITIVE_ERROR_MSG",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "RESOURCE_ATTACHABLE_VOLUMES_PREFIX",
    "RESOURCE_DEFAULT_NAMESPACE_PREFIX",
    "RESOURCE_HUGEPAGES_PREFIX",
    "empty_error",
    "field_invalid",
    "field_not_supported",
    "field_required",
    "go_quote",
    "go_value",
    "is_attachable_volume_resource_name",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_extended_resource_name",
    "is_hugepage_resource_name",
    "is_native_resource",
    "is_prefixed_native_resource",
    "is_qualified_name",
    "is_scalar_resource_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_affinity",
    "validate_extended_resource_name",
    "validate_label_name",
    "validate_node",
    "validate_pod",
    "validate_resource_quantities",
    "validate_taint_effect",
    "validate_tolerations",
    "validate_topology_spread_constraints",
]

# -- apimachinery pkg/util/validation and pkg/api/validate/content ---------------------------------

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
QUALIFIED_NAME_MAX_LENGTH: Final = 63  # content.labelKeyMaxLength
LABEL_VALUE_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # content.labelKeyFmt
_QUALIFIED_NAME_ERR_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT: Final = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_ERR_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)

_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE: Final = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)


def _go_len(value: str) -> int:
    """Go's ``len(string)``: UTF-8 bytes."""
    return len(value.encode("utf-8", "surrogatepass"))


def max_len_error(length: int, unit: str = "characters") -> str:
    """``MaxLenError`` (``validation`` says characters; ``content`` says bytes)."""
    return f"must be no more than {length} {unit}"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: ``msg (e.g. 'a' or 'b', regex used for validation is 'fmt')``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return f"{msg} (e.g. " + " or ".join(f"'{e}'" for e in examples) + f", regex used for validation is '{fmt}')"


def empty_error() -> str:
    """``EmptyError``."""
    return "must be non-empty"


def is_dns1123_label(value: str) -> list[str]:
    """``validation.IsDNS1123Label``: a lowercase RFC 1123 label of at most 63 characters."""
    errs: list[str] = []
    if _go_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None:
            # A valid subdomain but not a valid label: the length was checked, so it must be dots.
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_ERR_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def _dns1123_subdomain_errors(value: str, unit: str) -> list[str]:
    errs: list[str] = []
    if _go_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH, unit))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``: a lowercase RFC 1123 subdomain of at most 253 characters."""
    return _dns1123_subdomain_errors(value, "characters")


def is_qualified_name(value: str) -> list[str]:
    """``validation.IsQualifiedName`` (= ``content.IsLabelKey``): ``[prefix/]name`` with a DNS-1123
    subdomain prefix and a name of at most 63 alphanumerics, ``-``, ``_``, ``.``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain_errors(prefix, "bytes"))
    else:
        return [
            "a valid label key "
            + regex_error(_QUALIFIED_NAME_ERR_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif _go_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH, "bytes"))
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(
            "name part " + regex_error(_QUALIFIED_NAME_ERR_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """``validation.IsValidLabelValue`` (= ``content.IsLabelValue``): empty, or at most 63
    alphanumerics, ``-``, ``_``, ``.`` starting and ending with an alphanumeric."""
    errs: list[str] = []
    if _go_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH, "bytes"))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(regex_error(_LABEL_VALUE_ERR_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# -- field.Error rendering ---------------------------------------------------------------------------

_GO_ESCAPES: Final = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q`` of a string): printable runes kept, others escaped."""
    out = ['"']
    for ch in s:
        cp = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():  # unicode.IsPrint: L, M, N, P, S and ASCII space
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\ufffd")  # not a rune in Go; its JSON decoder yields U+FFFD
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def go_value(v: Any) -> str:
    """A ``field.Error`` bad value: strings as ``%q``, numbers and booleans bare, others as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, str):
        return go_quote(v)
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(v)


def field_invalid(path: str, value: Any, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``: ``<path>: Invalid value: <value>: <detail>``."""
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def field_not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    """``field.NotSupported(path, value, supported).Error()``."""
    return f"{path}: Unsupported value: {go_value(value)}: supported values: " + ", ".join(map(go_quote, supported))


def validate_label_name(name: str, path: str) -> list[str]:
    """metav1validation ``ValidateLabelName``: one ``field.Invalid`` per ``IsQualifiedName`` message."""
    return [field_invalid(path, name, msg) for msg in is_qualified_name(name)]


# -- resource names (pkg/apis/core/v1/helper, pkg/scheduler/util) -----------------------------------

#: v1.ResourceDefaultNamespacePrefix, v1.DefaultResourceRequestsPrefix, v1.ResourceHugePagesPrefix,
#: v1.ResourceAttachableVolumesPrefix.
RESOURCE_DEFAULT_NAMESPACE_PREFIX: Final = "kubernetes.io/"
DEFAULT_RESOURCE_REQUESTS_PREFIX: Final = "requests."
RESOURCE_HUGEPAGES_PREFIX: Final = "hugepages-"
RESOURCE_ATTACHABLE_VOLUMES_PREFIX: Final = "attachable-volumes-"


def is_prefixed_native_resource(name: str) -> bool:
    """``IsPrefixedNativeResource``: the name contains ``kubernetes.io/``."""
    return RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    """``IsNativeResource``: unprefixed, or in the ``*kubernetes.io/`` namespace."""
    return "/" not in name or is_prefixed_native_resource(name)


def is_hugepage_resource_name(name: str) -> bool:
    """``IsHugePageResourceName``."""
    return name.startswith(RESOURCE_HUGEPAGES_PREFIX)


def is_attachable_volume_resource_name(name: str) -> bool:
    """``IsAttachableVolumeResourceName``."""
    return name.startswith(RESOURCE_ATTACHABLE_VOLUMES_PREFIX)


def is_extended_resource_name(name: str) -> bool:
    """``IsExtendedResourceName``: not native, not ``requests.``-prefixed, and ``requests.<name>`` is a
    qualified name (so that it can be used in a quota)."""
    if is_native_resource(name) or name.startswith(DEFAULT_RESOURCE_REQUESTS_PREFIX):
        return False
    return not is_qualified_name(DEFAULT_RESOURCE_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """schedutil ``IsScalarResourceName``: extended, hugepages, prefixed-native, attachable volumes."""
    return (
        is_extended_resource_name(name)
        or is_hugepage_resource_name(name)
        or is_prefixed_native_resource(name)
        or is_attachable_volume_resource_name(name)
    )


def validate_extended_resource_name(name: str, path: str) -> list[str]:
    """scheduler config validation ``validateExtendedResourceName``: a qualified name that is an
    extended resource name."""
    errs = validate_label_name(name, path)
    if not errs and not is_extended_resource_name(name):
        errs.append(field_invalid(path, name, "is an invalid extended resource name"))
    return errs


# -- Pod and Node objects (pkg/apis/core/validation/validation.go) -----------------------------------
#
# The checks of ``ValidatePodCreate`` / ``ValidateNode`` whose failure would change what a scheduler
# decides, so that a dump the apiserver would never have stored is refused instead of simulated:
# negative quantities (which would lower a node's usage), enum fields (an unknown value would be
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
                for part in ("limits", "requests"):
                    errs += validate_resource_quantities(res.get(part), f"spec.{group}[{i}].resources.{part}")
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
