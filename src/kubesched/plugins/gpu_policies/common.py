"""Score arithmetic the six GPU policies share (what they read of nodes and pods is the
snapshot's GPU-share model: ``kubesched.snapshot.gpushare.resources`` and ``.shapes``).

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/plugin_utils.go``
(``NormalizeScore``, ``sigmoid``).
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.snapshot.table import IntArray


def go_div(a: IntArray, b: int) -> IntArray:
    """Go's integer division (truncates toward zero) for an int64 array and a positive int."""
    q: IntArray = np.sign(a) * (np.abs(a) // b)
    return q


def sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def normalize_min_max(scores: IntArray) -> None:
    """``plugin_utils.go`` ``NormalizeScore``, in place: lowest → 0, highest → 100 (integer
    arithmetic), all 0 when every score is the same."""
    if len(scores) == 0:
        return
    lowest, highest = int(scores.min()), int(scores.max())
    if highest == lowest:
        scores[:] = MIN_NODE_SCORE
        return
    scores[:] = (scores - lowest) * (MAX_NODE_SCORE - MIN_NODE_SCORE) // (highest - lowest) + MIN_NODE_SCORE
