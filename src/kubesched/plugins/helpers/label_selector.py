"""Pod label selectors: metav1.LabelSelector compiled into a matcher, as apimachinery does.

Ports of k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go (``LabelSelectorAsSelector``) and
k8s.io/apimachinery/pkg/labels (``selector.go``: ``NewRequirement`` validation,
``Requirement.Matches``, ``internalSelector.Add`` / ``Empty``; ``labels.go``: ``Set.AsSelector``,
``Merge``):

* a null selector (``None``) is ``labels.Nothing()``: it matches nothing, has no requirements
  (``requirements()`` answers ``None``, Go's ``ok == false``) and is not empty;
* ``{}`` is ``labels.Everything()``: it matches everything and is empty;
* matchLabels become ``=`` requirements, matchExpressions In/NotIn/Exists/DoesNotExist; any other
  operator, In/NotIn without values, Exists/DoesNotExist with values, or an invalid key or value
  is an error (``SelectorError``);
* In (and ``=``) and Exists need the label; NotIn and DoesNotExist match pods without it.

A compiled ``Selector`` is immutable and hashable by ``signature`` (its requirements sorted and
deduplicated), so equal selectors share per-node counts (``kubesched.snapshot.topology``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.validation import is_qualified_name, is_valid_label_value

OP_EQUALS, OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST = "=", "in", "notin", "exists", "!"
_EXPRESSION_OPS = {"In": OP_IN, "NotIn": OP_NOT_IN, "Exists": OP_EXISTS, "DoesNotExist": OP_DOES_NOT_EXIST}

class SelectorError(ValueError):
    """A label selector that ``LabelSelectorAsSelector`` refuses."""


def label_key_error(key: str) -> str | None:
    """validation.IsQualifiedName (what a label key must be): its errors joined, None when valid."""
    errs = is_qualified_name(key)
    return "; ".join(errs) if errs else None


def _label_value_error(value: str) -> str | None:
    errs = is_valid_label_value(value)
    return "; ".join(errs) if errs else None


@dataclass(frozen=True, slots=True, order=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (OP_EQUALS, OP_IN):
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == OP_NOT_IN:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == OP_EXISTS:
            return self.key in labels
        return self.key not in labels  # OP_DOES_NOT_EXIST


def new_requirement(key: str, op: str, values: Iterable[str]) -> Requirement:
    """labels.NewRequirement: validates the key, the values for the operator, and each value."""
    vals = tuple(str(v) for v in values)
    err = label_key_error(key)
    if err:
        raise SelectorError(f'key: Invalid value: "{key}": {err}')
    if op in (OP_IN, OP_NOT_IN) and not vals:
        raise SelectorError("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    if op == OP_EQUALS and len(vals) != 1:
        raise SelectorError(f"values: Invalid value: {list(vals)}: exact-match compatibility requires one single value")
    if op in (OP_EXISTS, OP_DOES_NOT_EXIST) and vals:
        raise SelectorError(
            f"values: Invalid value: {list(vals)}: values set must be empty for exists and does not exist")
    for i, v in enumerate(vals):
        verr = _label_value_error(v)
        if verr:
            raise SelectorError(f'values[{i}]: Invalid value: "{v}": {verr}')
    # Sets in Go: the order of the values does not matter, duplicates collapse.
    return Requirement(key, op, tuple(sorted(set(vals))))


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled label selector (``labels.Selector``)."""

    reqs: tuple[Requirement, ...] = ()
    #: ``labels.Nothing()``: matches nothing.
    nothing: bool = False

    @property
    def signature(self) -> tuple[Any, ...]:
        """A hashable key: equal signatures, equal selectors."""
        return ("nothing",) if self.nothing else self.reqs

    def empty(self) -> bool:
        """``Selector.Empty()``: no requirements (``Everything``); ``Nothing`` is not empty."""
        return not self.nothing and not self.reqs

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for r in self.reqs:  # noqa: SIM110 - a plain loop: no generator on the per-pod hot path
            if not r.matches(labels):
                return False
        return True

    def requirements(self) -> tuple[Requirement, ...] | None:
        """``Selector.Requirements()``: None for ``Nothing`` (Go's ``ok == false``)."""
        return None if self.nothing else self.reqs

    def add(self, *reqs: Requirement) -> Selector:
        """``Selector.Add``: AND more requirements (sorted by key, as upstream; duplicates collapse)."""
        if self.nothing:
            return self  # nothingSelector.Add returns itself
        return Selector(tuple(sorted(set(self.reqs) | set(reqs))))


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """``labels.SelectorFromSet`` / ``Set.AsSelector``: ``=`` requirements, not validated (as
    upstream since apimachinery 1.21); an empty set is ``Everything``."""
    return Selector(tuple(sorted({Requirement(str(k), OP_EQUALS, (str(v),)) for k, v in labels.items()})))


def label_selector_as_selector(raw: Any) -> Selector:
    """``metav1.LabelSelectorAsSelector`` over a raw ``LabelSelector`` dict (or None)."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SelectorError(f"label selector must be an object, got {raw!r}")
    match_labels = raw.get("matchLabels") or {}
    exprs = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(exprs, list):
        raise SelectorError("matchLabels must be a map and matchExpressions a list")
    if len(match_labels) + len(exprs) == 0:
        return EVERYTHING
    reqs: set[Requirement] = set()
    for k, v in match_labels.items():
        reqs.add(new_requirement(str(k), OP_EQUALS, [str(v)]))
    for e in exprs:
        if not isinstance(e, Mapping):
            raise SelectorError(f"matchExpressions entry must be an object, got {e!r}")
        op = _EXPRESSION_OPS.get(str(e.get("operator") or ""))
        if op is None:
            raise SelectorError(f'"{e.get("operator") or ""}" is not a valid label selector operator')
        values = e.get("values") or []
        if not isinstance(values, list):
            raise SelectorError("values must be a list")
        reqs.add(new_requirement(str(e.get("key") or ""), op, values))
    return Selector(tuple(sorted(reqs)))
