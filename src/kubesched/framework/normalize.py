"""Score normalisation for score plugins (public: `kubesched.framework.default_normalize_score`).

Port of pkg/scheduler/framework/plugins/helper/normalize_score.go (DefaultNormalizeScore).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.framework.interfaces import MAX_NODE_SCORE

#: Largest maximum score normalised through a lookup table (one entry per score 0..max).
_MAX_TABLED: Final = 1024
#: (max_priority, max score, reverse) → the normalised value of every score 0..max. A pure
#: function of its key (nothing to invalidate); bounded by clearing when full.
_TABLES: dict[tuple[int, int, bool], npt.NDArray[np.int64]] = {}
_MAX_TABLES: Final = 4096


def default_normalize_score(
    scores: npt.NDArray[np.int64], reverse: bool = False, max_priority: int = MAX_NODE_SCORE
) -> None:
    """Scale ``scores`` in place from [0, max(scores)] to [0, max_priority]; ``reverse`` flips them.

    Exactly upstream's integer arithmetic: ``max_priority * score / maxCount`` with Go's truncating
    division, and when every score is 0 (or the list is empty) the scores stay 0, or all become
    ``max_priority`` when reversed. Scores are assumed non-negative, as upstream.
    """
    max_count = int(np.maximum.reduce(scores)) if len(scores) else 0
    if max_count <= 0:
        # upstream: maxCount starts at 0, so an all-zero (or all-negative) list lands here.
        if reverse:
            scores[:] = max_priority
        return
    if max_count <= _MAX_TABLED and int(np.minimum.reduce(scores)) >= 0:
        # Scores are small counts or weight sums (TaintToleration, NodeAffinity): one gather from
        # the normalised value of each possible score replaces the arithmetic below.
        scores[:] = _normalized_values(max_priority, max_count, reverse)[scores]
        return
    scaled = max_priority * scores
    # Go's int64 division truncates toward zero; floor division differs only for negatives.
    quotient = np.abs(scaled) // max_count * np.sign(scaled)
    if reverse:
        quotient = max_priority - quotient
    scores[:] = quotient


def _normalized_values(max_priority: int, max_count: int, reverse: bool) -> npt.NDArray[np.int64]:
    key = (max_priority, max_count, reverse)
    values = _TABLES.get(key)
    if values is None:
        # Non-negative scores: Go's truncating division is floor division.
        # (built with numpy: a score that is a free count, e.g. UnderlayIP's, changes max_count
        # on almost every pod, so a table is built about as often as it is used)
        values = max_priority * np.arange(max_count + 1, dtype=np.int64) // max_count
        if reverse:
            values = max_priority - values
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        _TABLES[key] = values
    return values
