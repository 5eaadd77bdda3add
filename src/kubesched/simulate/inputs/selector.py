"""Label selectors in kubectl's string form (``kubectl get nodes -l ...``, ``kubectl drain
--selector``): ``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``,
``key`` (exists), ``!key`` (does not exist), ``key>N``, ``key<N``; requirements joined by commas
are ANDed. Semantics and key/value validation as apimachinery's ``labels.Parse``
(k8s.io/apimachinery/pkg/labels/selector.go): a ``!=`` or ``notin`` requirement also matches
objects without the label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubesched.api.validation import is_qualified_name, is_valid_label_value

__all__ = ["LabelSelector", "SelectorSyntaxError", "parse_selector"]


class SelectorSyntaxError(ValueError):
    """A selector that does not parse; the message quotes the part that is wrong."""


_KEY = r"[A-Za-z0-9./_-]+"
_TERM = re.compile(
    rf"""^\s*(?:
        (?P<not>!)\s*(?P<nkey>{_KEY})
      | (?P<skey>{_KEY})\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\)
      | (?P<key>{_KEY})\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[^\s,()=!<>]*)
      | (?P<ekey>{_KEY})
    )\s*$""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    #: "in", "notin", "exists", "!", "gt", "lt"
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "in":
            return value is not None and value in self.values
        if self.op == "notin":
            return value is None or value not in self.values
        if self.op == "exists":
            return value is not None
        if self.op == "!":
            return value is None
        # gt / lt: the label must hold an integer (upstream: strconv.ParseInt, else no match)
        try:
            have = int(value) if value is not None else None
        except ValueError:
            return False
        bound = int(next(iter(self.values)))
        return have is not None and (have > bound if self.op == "gt" else have < bound)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def _split_terms(text: str) -> list[str]:
    """Split on the commas that are not inside ``( )``."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorSyntaxError(f"unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorSyntaxError(f"unbalanced '(' in {text!r}")
    terms.append(text[start:])
    return terms


def _check_key(key: str, term: str) -> None:
    errs = is_qualified_name(key)
    if errs:
        raise SelectorSyntaxError(f"{term.strip()!r}: invalid label key {key!r}: {'; '.join(errs)}")


def _check_value(value: str, term: str) -> None:
    errs = is_valid_label_value(value)
    if errs:
        raise SelectorSyntaxError(f"{term.strip()!r}: invalid label value {value!r}: {'; '.join(errs)}")


def parse_selector(text: str) -> LabelSelector:
    """Parse a selector; an empty one matches everything (as upstream's ``labels.Everything``)."""
    reqs: list[Requirement] = []
    if text.strip():
        for term in _split_terms(text):
            m = _TERM.match(term)
            if m is None:
                raise SelectorSyntaxError(
                    f"{term.strip()!r} is not a label requirement (key, !key, key=value, key!=value, "
                    "key in (a,b), key notin (a,b), key>N, key<N)"
                )
            if m["nkey"]:
                _check_key(m["nkey"], term)
                reqs.append(Requirement(m["nkey"], "!"))
            elif m["skey"]:
                _check_key(m["skey"], term)
                values = [v.strip() for v in m["values"].split(",")] if m["values"].strip() else []
                if not values:
                    raise SelectorSyntaxError(f"{term.strip()!r}: '{m['setop']}' needs at least one value")
                for v in values:
                    _check_value(v, term)
                reqs.append(Requirement(m["skey"], m["setop"], frozenset(values)))
            elif m["key"]:
                _check_key(m["key"], term)
                op, value = m["op"], m["value"]
                if op in (">", "<"):
                    if not re.fullmatch(r"-?\d+", value):
                        raise SelectorSyntaxError(f"{term.strip()!r}: {op} needs an integer, got {value!r}")
                    reqs.append(Requirement(m["key"], "gt" if op == ">" else "lt", frozenset([value])))
                    continue
                _check_value(value, term)
                reqs.append(Requirement(m["key"], "notin" if op == "!=" else "in", frozenset([value])))
            else:
                _check_key(m["ekey"], term)
                reqs.append(Requirement(m["ekey"], "exists"))
    return LabelSelector(text, tuple(reqs))
