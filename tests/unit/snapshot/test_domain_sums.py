"""DomainSums: per-domain sums built once, then moved by pod events (snapshot/domain_sums.py)."""

from __future__ import annotations

import numpy as np

from kubesched.snapshot.domain_sums import DomainSums, follow


def test_built_sums_count_only_rows_in_a_domain_and_inside_the_mapping() -> None:
    row_domains = np.array([0, 1, -1, 1], dtype=np.int32)
    rows = np.array([0, 1, 2, 3, 7], dtype=np.intp)  # row 7: beyond the mapping (a newer row)
    counts = np.array([2, 1, 5, 3, 4], dtype=np.int64)
    d = DomainSums(3, row_domains, rows, counts, size=3)
    assert d.sums.tolist() == [2, 4, 0]
    assert d.counted == 6  # the 5 pods of the row without a domain and row 7's 4 are not counted


def test_moves_follow_pod_events_as_a_recount_would() -> None:
    row_domains = np.array([0, 1, -1], dtype=np.int32)
    d = DomainSums(0, row_domains, np.array([], dtype=np.intp), np.array([], dtype=np.int64), size=2)
    assert d.counted == 0
    for row, sign in ((1, 1), (1, 1), (0, 1), (2, 1), (1, -1), (5, 1)):
        d.move(row, sign)
    assert d.sums.tolist() == [1, 1]
    assert d.counted == 2


def test_follow_drops_sums_of_another_node_generation_and_moves_the_rest() -> None:
    row_domains = np.array([0, 1], dtype=np.int32)
    empty_rows, empty_counts = np.array([], dtype=np.intp), np.array([], dtype=np.int64)
    kept = {"zone": DomainSums(4, row_domains, empty_rows, empty_counts, 2),
            "old": DomainSums(3, row_domains, empty_rows, empty_counts, 2)}
    follow(kept, 4, 1, 1)
    assert list(kept) == ["zone"]
    assert kept["zone"].sums.tolist() == [0, 1]
