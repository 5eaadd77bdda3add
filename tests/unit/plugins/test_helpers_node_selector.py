"""Tests for plugins/helpers/node_selector: operator semantics and parse errors, vectorised vs per-node.

Mirrors k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity_test.go and the
labels.Requirement rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.plugins.helpers import (
    compile_node_selector,
    compile_preferred_terms,
    compile_terms,
    match_labels,
    match_node_selector_terms,
    node_matches_terms,
    score_preferred,
)
from kubesched.testing import node, table_of


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    d: dict[str, Any] = {"key": key, "operator": op}
    if values:
        d["values"] = list(values)
    return d


NODES = [
    node("n-a", labels={"foo": "bar", "kernel-version": "0206", "GPU": "NVIDIA-GRID-K1"}),
    node("n-b", labels={"foo": "baz", "kernel-version": "0204", "mem-type": "DDR3"}),
    node("n-c", labels={"kernel-version": "abc"}),
    node("n-d", labels={"kernel-version": "-5", "big": "9223372036854775807"}),
]
NAMES = ["n-a", "n-b", "n-c", "n-d"]


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([{"matchExpressions": [expr("foo", "In", "bar", "value2")]}], ["n-a"]),
        ([{"matchExpressions": [expr("foo", "NotIn", "bar")]}], ["n-b", "n-c", "n-d"]),
        ([{"matchExpressions": [expr("foo", "Exists")]}], ["n-a", "n-b"]),
        ([{"matchExpressions": [expr("foo", "DoesNotExist")]}], ["n-c", "n-d"]),
        ([{"matchExpressions": [expr("kernel-version", "Gt", "0204")]}], ["n-a"]),
        ([{"matchExpressions": [expr("kernel-version", "Lt", "0206")]}], ["n-b", "n-d"]),
        ([{"matchExpressions": [expr("big", "Gt", "9223372036854775806")]}], ["n-d"]),
        # ANDed within a term, ORed across terms
        ([{"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}], ["n-a"]),
        ([{"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}], []),
        ([{"matchExpressions": [expr("foo", "In", "bar")]}, {"matchExpressions": [expr("mem-type", "Exists")]}],
         ["n-a", "n-b"]),
        # matchFields on metadata.name
        ([{"matchFields": [expr("metadata.name", "In", "n-b")]}], ["n-b"]),
        ([{"matchFields": [expr("metadata.name", "NotIn", "n-b")]}], ["n-a", "n-c", "n-d"]),
        ([{"matchFields": [expr("metadata.name", "In", "nope")]}], []),
        ([{"matchFields": [expr("metadata.name", "In", "n-a")], "matchExpressions": [expr("foo", "In", "bar")]}],
         ["n-a"]),
        # empty selector / empty term select nothing
        ([], []),
        ([{}], []),
        ([{"matchExpressions": []}], []),
        # parse errors: the term matches nothing, other terms still count
        ([{"matchExpressions": [expr("kernel-version", "Gt", "abc")]}], []),
        ([{"matchExpressions": [expr("kernel-version", "Gt", "1", "2")]}], []),
        ([{"matchExpressions": [expr("kernel-version", "Gt", "-1")]}], []),  # "-1" is not a valid label value
        ([{"matchExpressions": [expr("foo", "In")]}], []),
        ([{"matchExpressions": [expr("foo", "Exists", "bar")]}], []),
        ([{"matchExpressions": [expr("foo", "Bogus", "bar")]}], []),
        ([{"matchExpressions": [expr("invalid key", "In", "bar")]}], []),
        ([{"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}], []),
        ([{"matchFields": [expr("metadata.name", "In", "n-a", "n-b")]}], []),
        ([{"matchFields": [expr("metadata.name", "Exists")]}], []),
        ([{"matchExpressions": [expr("foo", "Gt", "x")]}, {"matchExpressions": [expr("foo", "In", "baz")]}],
         ["n-b"]),
    ],
)
def test_match_terms_vectorised_and_per_node(terms: list[dict[str, Any]], expected: list[str]) -> None:
    t = table_of(*NODES)
    rows = t.alive_rows()
    got = match_node_selector_terms(t, rows, terms)
    assert [NAMES[i] for i in np.flatnonzero(got)] == expected
    compiled = compile_terms(terms)
    per_node = [n for i, n in enumerate(NAMES) if node_matches_terms(compiled, t.labels[int(rows[i])], n)]
    assert per_node == expected


def test_parse_errors_are_reported() -> None:
    ns = compile_node_selector({"nodeSelectorTerms": [{"matchExpressions": [expr("k", "Gt", "x")]}]})
    assert ns.errors and "must be an integer" in ns.errors[0]
    ok = compile_node_selector({"nodeSelectorTerms": [{"matchExpressions": [expr("k", "Gt", "5")]}]})
    assert ok.errors == ()


def test_match_labels_and_preferred_scores() -> None:
    t = table_of(*NODES)
    rows = t.alive_rows()
    assert match_labels(t, rows, {"foo": "bar"}).tolist() == [True, False, False, False]
    assert match_labels(t, rows, {"foo": "nope"}).tolist() == [False] * 4
    assert match_labels(t, rows, {}).tolist() == [True] * 4
    terms, errs = compile_preferred_terms([
        {"weight": 2, "preference": {"matchExpressions": [expr("foo", "Exists")]}},
        {"weight": 5, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}},
        {"weight": 0, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}},  # skipped
        {"weight": 9, "preference": {}},  # empty: skipped
    ])
    assert errs == ()
    assert score_preferred(t, rows, terms).tolist() == [7, 2, 0, 0]


def test_label_column_values_added_later_are_seen() -> None:
    t = table_of(node("x", labels={"v": "3"}))
    terms = compile_terms([{"matchExpressions": [expr("v", "Gt", "2")]}])
    assert match_node_selector_terms(t, t.alive_rows(), terms).tolist() == [True]
    t.upsert_node(node("y", labels={"v": "10"}))
    assert match_node_selector_terms(t, t.alive_rows(), terms).tolist() == [True, True]
