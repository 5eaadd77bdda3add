"""Tests for plugins/helpers: DefaultNormalizeScore and toleration matching.

Tables mirror upstream helper/normalize_score_test.go and k8s.io/api/core/v1/toleration_test.go.
"""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.plugins.helpers import (
    Toleration,
    count_intolerable_taints,
    default_normalize_score,
    find_matching_untolerated_taint,
    tolerates_taint,
    untolerated_mask,
)
from kubesched.snapshot.table import Taint
from kubesched.testing import node, table_of


# helper/normalize_score_test.go TestDefaultNormalizeScore
@pytest.mark.parametrize(
    ("reverse", "scores", "expected"),
    [
        (False, [1, 2, 3, 4], [25, 50, 75, 100]),
        (True, [1, 2, 3, 4], [75, 50, 25, 0]),
        (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
        (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
        (False, [1, 1, 1, 1], [100, 100, 100, 100]),
        (True, [1, 1, 1, 1], [0, 0, 0, 0]),
        (False, [0, 0, 0, 0], [0, 0, 0, 0]),
        (True, [0, 0, 0, 0], [100, 100, 100, 100]),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], expected: list[int]) -> None:
    arr = np.array(scores, dtype=np.int64)
    default_normalize_score(arr, reverse)
    assert arr.tolist() == expected


def test_default_normalize_score_empty() -> None:
    arr = np.zeros(0, dtype=np.int64)
    default_normalize_score(arr, True)
    assert arr.tolist() == []


NS = "NoSchedule"


# k8s.io/api/core/v1/toleration_test.go TestTolerationToleratesTaint (Lt/Gt rows with the gate on)
@pytest.mark.parametrize(
    ("tol", "taint", "expected"),
    [
        (Toleration("foo", "Exists", "", NS), Taint("foo", "", NS), True),
        (Toleration("foo", "Exists", "", NS), Taint("foo", "bar", NS), True),
        (Toleration("", "Exists", "", NS), Taint("foo", "bar", NS), True),
        (Toleration("foo", "Equal", "bar", NS), Taint("foo", "bar", NS), True),
        (Toleration("foo", "Equal", "value1", NS), Taint("foo", "value2", NS), False),
        (Toleration("foo", "Equal", "bar", NS), Taint("foo", "bar", "NoExecute"), False),
        (Toleration("node.kubernetes.io/sla", "Gt", "950", NS), Taint("node.kubernetes.io/sla", "800", NS), False),
        (Toleration("node.kubernetes.io/sla", "Gt", "750", NS), Taint("node.kubernetes.io/sla", "950", NS), True),
        (Toleration("node.kubernetes.io/sla", "Lt", "800", NS), Taint("node.kubernetes.io/sla", "950", NS), False),
        (Toleration("node.kubernetes.io/sla", "Lt", "950", NS), Taint("node.kubernetes.io/sla", "800", NS), True),
        (Toleration("node.kubernetes.io/sla", "Gt", "950", NS), Taint("node.kubernetes.io/sla", "950", NS), False),
        (Toleration("node.kubernetes.io/sla", "Gt", "950", NS), Taint("node.kubernetes.io/sla", "high", NS), False),
        (Toleration("test-key", "Gt", "-100", NS), Taint("test-key", "-200", NS), False),
        (Toleration("test-key", "Gt", "9223372036854775806", NS), Taint("test-key", "100", NS), False),
        # extra: empty operator means Equal, empty effect matches all, unknown operator nothing
        (Toleration("foo", "", "bar", ""), Taint("foo", "bar", "PreferNoSchedule"), True),
        (Toleration("foo", "Bogus", "bar", ""), Taint("foo", "bar", NS), False),
        # canonical integers only (content.IsDecimalInteger): leading zeros / "+" do not parse
        (Toleration("k", "Gt", "0100", NS), Taint("k", "200", NS), False),
        (Toleration("k", "Lt", "100", NS), Taint("k", "+50", NS), False),
        (Toleration("k", "Lt", "100", NS), Taint("k", "-50", NS), True),
    ],
)
def test_tolerates_taint(tol: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates_taint(tol, taint, enable_comparison_operators=True) is expected


def test_comparison_operators_gated_off_by_default() -> None:
    tol = Toleration("sla", "Gt", "750", NS)
    taint = Taint("sla", "950", NS)
    assert tolerates_taint(tol, taint, enable_comparison_operators=True)
    assert not tolerates_taint(tol, taint)


def test_find_matching_untolerated_taint_returns_first() -> None:
    taints = (Taint("a", "1", "PreferNoSchedule"), Taint("b", "2", NS), Taint("c", "3", NS))
    tols = (Toleration("c", "Exists"),)
    assert find_matching_untolerated_taint(taints, tols) == taints[0]
    only_hard = find_matching_untolerated_taint(taints, tols, lambda t: t.effect == NS)
    assert only_hard == taints[1]
    assert find_matching_untolerated_taint(taints, (Toleration("", "Exists"),)) is None


def test_vectorised_taint_helpers_match_per_node() -> None:
    t = table_of(
        node("n0"),
        node("n1", taints=[{"key": "a", "value": "1", "effect": NS}]),
        node("n2", taints=[{"key": "b", "value": "2", "effect": "PreferNoSchedule"},
                           {"key": "c", "value": "3", "effect": "PreferNoSchedule"}]),
        node("n3", taints=[{"key": "a", "value": "1", "effect": NS}]),
        node("n4", taints=[{"key": "b", "value": "2", "effect": "PreferNoSchedule"}]),
    )
    rows = t.alive_rows()[::-1].copy()  # order must not matter
    tols = (Toleration("b", "Exists", "", "PreferNoSchedule"),)
    assert untolerated_mask(t, rows, tols).tolist() == [False, True, False, True, False]
    assert count_intolerable_taints(t, rows, tols).tolist() == [0, 0, 1, 0, 0]
    assert untolerated_mask(t, rows[:0], tols).tolist() == []


@pytest.mark.parametrize("reverse", [False, True])
def test_default_normalize_score_equals_upstream_arithmetic_for_every_range(reverse: bool) -> None:
    # Small non-negative scores go through a lookup table, others through the arithmetic: both
    # must equal maxPriority * score / maxCount (truncated), reversed as upstream.
    rng = np.random.default_rng(7)
    for high in (1, 2, 3, 7, 100, 1024, 1025, 5000):
        for low in (0, -3):
            raw = rng.integers(low, high + 1, size=50)
            raw[0] = high
            arr = raw.astype(np.int64)
            default_normalize_score(arr, reverse, 100)
            expected = [int(100 * s / high) for s in raw.tolist()]
            assert arr.tolist() == ([100 - e for e in expected] if reverse else expected)
