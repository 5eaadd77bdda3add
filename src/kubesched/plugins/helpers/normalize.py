"""Score normalisation shared by score plugins.

Port of pkg/scheduler/framework/plugins/helper/normalize_score.go (DefaultNormalizeScore).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubesched.framework.interfaces import MAX_NODE_SCORE


def default_normalize_score(
    scores: npt.NDArray[np.int64], reverse: bool = False, max_priority: int = MAX_NODE_SCORE
) -> None:
    """Scale ``scores`` in place from [0, max(scores)] to [0, max_priority]; ``reverse`` flips them.

    Exactly upstream's integer arithmetic: ``max_priority * score / maxCount`` with Go's truncating
    division, and when every score is 0 (or the list is empty) the scores stay 0, or all become
    ``max_priority`` when reversed. Scores are assumed non-negative, as upstream.
    """
    max_count = int(scores.max()) if len(scores) else 0
    if max_count <= 0:
        # upstream: maxCount starts at 0, so an all-zero (or all-negative) list lands here.
        if reverse:
            scores[:] = max_priority
        return
    scaled = max_priority * scores
    # Go's int64 division truncates toward zero; floor division differs only for negatives.
    quotient = np.abs(scaled) // max_count * np.sign(scaled)
    if reverse:
        quotient = max_priority - quotient
    scores[:] = quotient
