"""bench/parity.py: the bound counts of kube-scheduler's and kubesched's openb runs compared as
samples (issue 32 item 1), not by the literal "inside three runs' range" check."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.parity import compare, comparisons, inside_range_chance, permutation_p


def test_inside_range_chance_matches_a_simulation_of_one_distribution() -> None:
    # 3 runs against 3 from one distribution: all three inside the others' range only 1 time in 5.
    assert inside_range_chance(3, 3) == pytest.approx(0.2)
    rng = random.Random(7)
    hits = 0
    for _ in range(20_000):
        old = [rng.gauss(0, 1) for _ in range(3)]
        new = [rng.gauss(0, 1) for _ in range(3)]
        hits += min(old) <= min(new) and max(new) <= max(old)
    assert hits / 20_000 == pytest.approx(0.2, abs=0.015)


def test_permutation_p_is_exact_for_small_samples() -> None:
    # Completely separated groups of 3: 2 of the 20 splits are as extreme (one per side).
    assert permutation_p([1, 2, 3], [10, 11, 12]) == pytest.approx(2 / 20)
    # Identical groups: every split is at least as extreme as a difference of zero.
    assert permutation_p([5, 5, 5], [5, 5, 5]) == 1.0
    # Symmetric in the order of the samples.
    a, b = [7147, 7163, 7159], [7141, 7137, 7146]
    assert permutation_p(a, b) == permutation_p(b, a)


def test_permutation_p_samples_large_pools_reproducibly() -> None:
    rng = random.Random(3)
    a = [rng.gauss(0, 1) for _ in range(20)]
    b = [rng.gauss(3, 1) for _ in range(20)]
    assert math.comb(40, 20) > 200_000  # the sampled path
    p = permutation_p(a, b)
    assert p < 0.001
    assert p == permutation_p(a, b)


def test_compare_reports_a_real_gap_and_a_draw_differently() -> None:
    oracle = [7174, 7173, 7165, 7147, 7163, 7159]
    draw = compare(oracle, [7155, 7169, 7156, 7171, 7150, 7166])
    assert draw["permutation_p"] > 0.1
    assert draw["runs"] == [6, 6]
    gap = compare(oracle, [7074, 7076, 7080, 7070, 7079, 7073])  # the 0.7 % the issue was filed with
    assert gap["permutation_p"] < 0.01
    assert gap["difference"] < -80 and gap["every_run_inside_oracle_range"] is False


def test_comparisons_need_kube_scheduler_runs() -> None:
    assert comparisons({"kubesched": [1, 2]}) == {}
    both = comparisons({"kube-scheduler": [10, 12], "kubesched@/t/src": [11, 13]})
    assert list(both) == ["kubesched@/t/src"]
