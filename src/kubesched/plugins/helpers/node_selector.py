"""Node selector matching: v1.NodeSelector / NodeSelectorTerm / nodeSelector maps, vectorised.

Port of k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go with the label
requirement rules of k8s.io/apimachinery/pkg/labels/selector.go (NewRequirement validation and
Requirement.Matches):

* terms are ORed, a term's requirements ANDed; a term with neither matchExpressions nor
  matchFields is dropped (it "selects no objects"), so a selector without usable terms matches
  nothing;
* a term with a parse error (unknown operator, In/NotIn without values, Exists/DoesNotExist
  with values, Gt/Lt without exactly one int64 value, invalid label key or value, matchFields
  other than In/NotIn with exactly one value) matches nothing, while the other terms still count
  (LazyErrorNodeSelector). The errors are kept on the compiled selector for callers that must
  report them (NodeAffinity's PreScore and args validation);
* NotIn and DoesNotExist match nodes without the label; In, Exists, Gt and Lt need it;
* Gt/Lt parse the node's label with strconv.ParseInt semantics (optional sign, decimal digits,
  int64 range); a label that does not parse fails the requirement;
* matchFields only know ``metadata.name``; any other field reads as "".

Compile once (``compile_node_selector`` / ``compile_terms`` / ``compile_preferred_terms``) and
evaluate many times over table rows with ``match_terms`` / ``NodeSelector.match``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.api.validation import field_invalid, field_not_supported, is_qualified_name, is_valid_label_value
from kubesched.snapshot.table import LabelColumn, NodeTable, Rows

BoolArray = npt.NDArray[np.bool_]

OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST, OP_GT, OP_LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
_LABEL_OPERATORS = (OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST, OP_GT, OP_LT)
_FIELD_OPERATORS = (OP_IN, OP_NOT_IN)
#: metav1.ObjectNameField
OBJECT_NAME_FIELD = "metadata.name"

# strconv.ParseInt(s, 10, 64): optional sign then ASCII digits.
_GO_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(value: str) -> int | None:
    """strconv.ParseInt(value, 10, 64), None on error."""
    if not _GO_DECIMAL.fullmatch(value):
        return None
    n = int(value)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]
    #: Gt/Lt: the parsed bound.
    bound: int = 0


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One compiled term. ``errors`` non-empty means the term matches nothing."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


def _as_list(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else []


def _requirements(
    raw: list[Any], path: str, errs: list[str], operators: tuple[str, ...]
) -> Iterator[tuple[str, str, str, tuple[str, ...]]]:
    """(path, key, operator, values) of each NodeSelectorRequirement object with one of ``operators``;
    non-objects and other operators are errors."""
    for i, expr in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(expr, dict):
            errs.append(field_invalid(p, expr, "must be an object"))
            continue
        op = str(expr.get("operator") or "")
        if op not in operators:
            errs.append(field_not_supported(f"{p}.operator", op, operators))
            continue
        values = tuple(str(v) for v in _as_list(expr.get("values")))
        yield p, str(expr.get("key") or ""), op, values


def _compile_expressions(raw: list[Any], path: str) -> tuple[list[Requirement], list[str]]:
    """nodeSelectorRequirementsAsSelector + labels.NewRequirement validation."""
    reqs: list[Requirement] = []
    errs: list[str] = []
    for p, key, op, values in _requirements(raw, path, errs, _LABEL_OPERATORS):
        bad: list[str] = []
        key_errs = is_qualified_name(key)  # labels.go validateLabelKey
        if key_errs:
            bad.append(field_invalid(f"{p}.key", key, "; ".join(key_errs)))
        bound = 0
        if op in (OP_IN, OP_NOT_IN):
            if not values:
                bad.append(field_invalid(f"{p}.values", [], "for 'in', 'notin' operators, values set can't be empty"))
        elif op in (OP_EXISTS, OP_DOES_NOT_EXIST):
            if values:
                bad.append(field_invalid(f"{p}.values", list(values),
                                         "values set must be empty for exists and does not exist"))
        else:  # Gt, Lt
            if len(values) != 1:
                bad.append(field_invalid(f"{p}.values", list(values),
                                         "for 'Gt', 'Lt' operators, exactly one value is required"))
            for j, v in enumerate(values):
                n = parse_int64(v)
                if n is None:
                    bad.append(field_invalid(f"{p}.values[{j}]", v,
                                             "for 'Gt', 'Lt' operators, the value must be an integer"))
                else:
                    bound = n
        for j, v in enumerate(values):
            value_errs = is_valid_label_value(v)  # labels.go validateLabelValue
            if value_errs:
                bad.append(field_invalid(f"{p}.values[{j}]", v, "; ".join(value_errs)))
        if bad:
            errs.extend(bad)
        else:
            reqs.append(Requirement(key, op, values, bound))
    return reqs, errs


def _compile_fields(raw: list[Any], path: str) -> tuple[list[Requirement], list[str]]:
    """nodeSelectorRequirementsAsFieldSelector: In/NotIn with exactly one value."""
    reqs: list[Requirement] = []
    errs: list[str] = []
    for p, key, op, values in _requirements(raw, path, errs, _FIELD_OPERATORS):
        if len(values) != 1:
            errs.append(field_invalid(f"{p}.values", list(values), "must have one element"))
        else:
            reqs.append(Requirement(key, op, values))
    return reqs, errs


def is_empty_term(raw: Any) -> bool:
    """isEmptyNodeSelectorTerm: neither matchExpressions nor matchFields."""
    return not isinstance(raw, dict) or (not _as_list(raw.get("matchExpressions")) and
                                         not _as_list(raw.get("matchFields")))


def compile_term(raw: Any, path: str = "") -> NodeSelectorTerm:
    """newNodeSelectorTerm. Callers drop empty terms first (see ``compile_terms``)."""
    if not isinstance(raw, dict):
        return NodeSelectorTerm(errors=(field_invalid(path, raw, "must be an object"),))
    exprs, e1 = _compile_expressions(_as_list(raw.get("matchExpressions")), f"{path}.matchExpressions")
    fields, e2 = _compile_fields(_as_list(raw.get("matchFields")), f"{path}.matchFields")
    return NodeSelectorTerm(tuple(exprs), tuple(fields), tuple(e1 + e2))


def compile_terms(raw_terms: Iterable[Any], path: str = "nodeSelectorTerms") -> tuple[NodeSelectorTerm, ...]:
    """NewLazyErrorNodeSelector over raw v1.NodeSelectorTerm dicts: empty terms are dropped."""
    return tuple(compile_term(t, f"{path}[{i}]") for i, t in enumerate(raw_terms) if not is_empty_term(t))


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A compiled v1.NodeSelector (ORed terms)."""

    terms: tuple[NodeSelectorTerm, ...] = ()

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(e for t in self.terms for e in t.errors)

    def match(self, table: NodeTable, rows: Rows) -> BoolArray:
        return match_terms(table, rows, self.terms)

    def match_node(self, labels: Mapping[str, str], name: str) -> bool:
        return any(term_matches_node(t, labels, name) for t in self.terms)


def compile_node_selector(raw: Any, path: str = "") -> NodeSelector:
    """A raw v1.NodeSelector ``{"nodeSelectorTerms": [...]}``."""
    terms = raw.get("nodeSelectorTerms") if isinstance(raw, dict) else None
    prefix = f"{path}.nodeSelectorTerms" if path else "nodeSelectorTerms"
    return NodeSelector(compile_terms(_as_list(terms), prefix))


def compile_preferred_terms(raw: Iterable[Any], path: str = "") -> tuple[tuple[PreferredTerm, ...], tuple[str, ...]]:
    """NewPreferredSchedulingTerms: terms with weight 0 or an empty preference are skipped;
    returns the usable terms and all parse errors (upstream refuses the whole list on any error)."""
    out: list[PreferredTerm] = []
    errs: list[str] = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            errs.append(field_invalid(f"{path}[{i}]", t, "must be an object"))
            continue
        weight = t.get("weight") or 0
        pref = t.get("preference")
        if not isinstance(weight, int) or weight == 0 or is_empty_term(pref):
            continue
        term = compile_term(pref, f"{path}[{i}]")
        if term.errors:
            errs.extend(term.errors)
        else:
            out.append(PreferredTerm(weight, term))
    return tuple(out), tuple(errs)


# -- vectorised evaluation -------------------------------------------------------------------------

_int_luts: dict[int, tuple[LabelColumn, int, npt.NDArray[np.int64], BoolArray]] = {}


def _int_lut(col: LabelColumn) -> tuple[npt.NDArray[np.int64], BoolArray]:
    """Per value code: the label parsed as int64 (ParseInt semantics) and whether it parsed.
    The trailing entry stands for code -1 (label absent) and is invalid."""
    n = len(col.values)
    cached = _int_luts.get(id(col))
    if cached is not None and cached[0] is col and cached[1] == n:
        return cached[2], cached[3]
    lut = np.zeros(n + 1, dtype=np.int64)
    valid = np.zeros(n + 1, dtype=np.bool_)
    for v, c in col.values.items():
        parsed = parse_int64(v)
        if parsed is not None:
            lut[c] = parsed
            valid[c] = True
    if len(_int_luts) > 4096:
        _int_luts.clear()
    _int_luts[id(col)] = (col, n, lut, valid)
    return lut, valid


def _match_expression(table: NodeTable, rows: Rows, req: Requirement) -> BoolArray:
    col = table.label_column(req.key)
    codes = col.codes[rows]
    op = req.operator
    if op == OP_EXISTS:
        result: BoolArray = codes >= 0
    elif op == OP_DOES_NOT_EXIST:
        result = codes < 0
    elif op in (OP_IN, OP_NOT_IN):
        # A lookup table over the value codes (a gather) instead of np.isin (a sort per call).
        member = np.zeros(len(col.values) + 1, dtype=np.bool_)  # the extra entry: code -1, no label
        member[col.codes_for(req.values)] = True
        result = member[codes] if op == OP_IN else ~member[codes]
    else:  # Gt / Lt
        lut, valid = _int_lut(col)
        vals = lut[codes]  # code -1 indexes the trailing (invalid) entry
        cmp = vals > req.bound if op == OP_GT else vals < req.bound
        result = valid[codes] & cmp
    return result


def _match_field(table: NodeTable, rows: Rows, req: Requirement) -> BoolArray:
    want = req.values[0]
    if req.key == OBJECT_NAME_FIELD:
        row = table.row_of(want)
        eq: BoolArray = rows == row if row is not None else np.zeros(len(rows), dtype=np.bool_)
    else:
        # nodes expose no other field: the field reads as ""
        eq = np.full(len(rows), want == "", dtype=np.bool_)
    return eq if req.operator == OP_IN else ~eq


def match_term(table: NodeTable, rows: Rows, term: NodeSelectorTerm) -> BoolArray:
    """Rows matching one term (all its requirements); a term with parse errors matches nothing."""
    ok = np.full(len(rows), not term.errors, dtype=np.bool_)
    if term.errors:
        return ok
    for req in term.expressions:
        ok &= _match_expression(table, rows, req)
    for req in term.fields:
        ok &= _match_field(table, rows, req)
    return ok


def match_terms(table: NodeTable, rows: Rows, terms: Sequence[NodeSelectorTerm]) -> BoolArray:
    """Rows matching any of the (ORed) terms; no terms → nothing matches."""
    ok = np.zeros(len(rows), dtype=np.bool_)
    for term in terms:
        ok |= match_term(table, rows, term)
    return ok


def match_node_selector_terms(table: NodeTable, rows: Rows, terms: Sequence[Any]) -> BoolArray:
    """Rows matching the ORed terms, given compiled ``NodeSelectorTerm``s or raw term dicts."""
    compiled = tuple(t for t in terms if isinstance(t, NodeSelectorTerm))
    if len(compiled) != len(terms):
        compiled = compile_terms(terms)
    return match_terms(table, rows, compiled)


def match_labels(table: NodeTable, rows: Rows, selector: Mapping[str, str]) -> BoolArray:
    """Rows whose labels contain every key=value of ``selector`` (a pod's spec.nodeSelector)."""
    ok = np.ones(len(rows), dtype=np.bool_)
    for key, value in selector.items():
        col = table.label_column(key)
        code = col.values.get(value)
        if code is None:
            return np.zeros(len(rows), dtype=np.bool_)
        ok &= col.codes[rows] == code
    return ok


def score_preferred(table: NodeTable, rows: Rows, terms: Sequence[PreferredTerm]) -> npt.NDArray[np.int64]:
    """Sum of the weights of the matching terms (PreferredSchedulingTerms.Score)."""
    out = np.zeros(len(rows), dtype=np.int64)
    for t in terms:
        out += np.where(match_term(table, rows, t.term), t.weight, 0)
    return out


# -- per-node evaluation (plain dicts, e.g. for plugins working on raw Node objects) --------------

def _expression_matches_node(req: Requirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    op = req.operator
    if op == OP_EXISTS:
        return present
    if op == OP_DOES_NOT_EXIST:
        return not present
    if op == OP_IN:
        return present and labels[req.key] in req.values
    if op == OP_NOT_IN:
        return not present or labels[req.key] not in req.values
    if not present:
        return False
    n = parse_int64(labels[req.key])
    if n is None:
        return False
    return n > req.bound if op == OP_GT else n < req.bound


def term_matches_node(term: NodeSelectorTerm, labels: Mapping[str, str], name: str) -> bool:
    if term.errors:
        return False
    if not all(_expression_matches_node(r, labels) for r in term.expressions):
        return False
    if not name:  # upstream skips field matching for a node without fields
        return True
    for r in term.fields:
        got = name if r.key == OBJECT_NAME_FIELD else ""
        if (got == r.values[0]) != (r.operator == OP_IN):
            return False
    return True


def node_matches_terms(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], name: str) -> bool:
    return any(term_matches_node(t, labels, name) for t in terms)


@dataclass(slots=True)
class RequiredNodeAffinity:
    """nodeaffinity.RequiredNodeAffinity: a pod's spec.nodeSelector AND its required node affinity."""

    node_selector: Mapping[str, str] | None = None
    required: NodeSelector | None = None

    @staticmethod
    def of(spec: Mapping[str, Any]) -> RequiredNodeAffinity:
        ns = spec.get("nodeSelector")
        selector = {str(k): str(v) for k, v in ns.items()} if isinstance(ns, dict) and ns else None
        aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        required = compile_node_selector(aff) if isinstance(aff, dict) else None
        return RequiredNodeAffinity(selector, required)

    def match(self, table: NodeTable, rows: Rows) -> BoolArray:
        ok = match_labels(table, rows, self.node_selector) if self.node_selector else np.ones(len(rows), np.bool_)
        if self.required is not None:
            ok &= self.required.match(table, rows)
        return ok

    def match_node(self, labels: Mapping[str, str], name: str) -> bool:
        if self.node_selector and any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.required is None or self.required.match_node(labels, name)
