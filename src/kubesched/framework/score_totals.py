"""The last step of a scoring cycle: range check, weights and totals of the plugins' scores.

Port of the end of RunScorePlugins (pkg/scheduler/framework/runtime/framework.go): after every
Score and NormalizeScore, each score must lie in [MinNodeScore, MaxNodeScore]; it is then
multiplied by the plugin's weight and summed per node.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, Scores
from kubesched.framework.status import Status


def weighted_totals(
    num_rows: int, normalized: Mapping[str, Scores], weights: Mapping[str, int]
) -> tuple[Scores, dict[str, Scores]] | Status:
    """(totals per row, each plugin's weighted scores), or the range error of the first plugin
    (in Score order) with a score out of range. ``normalized`` holds int64 scores per plugin."""
    # One reduction checks every plugin and both bounds: viewed as unsigned, a negative score is
    # huge. The plugins' scores side by side cost one concatenation instead of a reduction each.
    if num_rows and normalized:
        side_by_side = np.concatenate(list(normalized.values()))
        if int(np.maximum.reduce(side_by_side.view(np.uint64))) > MAX_NODE_SCORE:
            return _range_error(normalized)
    totals: Scores | None = None
    by_plugin: dict[str, Scores] = {}
    for name, scores in normalized.items():
        weight = weights[name]
        weighted = scores if weight == 1 else scores * weight
        by_plugin[name] = weighted
        if totals is None:
            totals = weighted.copy()
        else:
            totals += weighted
    if totals is None:
        totals = np.zeros(num_rows, dtype=np.int64)
    return totals, by_plugin


def _range_error(normalized: Mapping[str, Scores]) -> Status:
    for name, scores in normalized.items():
        low, high = int(scores.min()), int(scores.max())
        if low < MIN_NODE_SCORE or high > MAX_NODE_SCORE:
            return Status.error(
                f'plugin "{name}" returns an invalid score {low if low < MIN_NODE_SCORE else high}, it should '
                f"in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                plugin=name,
            )
    raise AssertionError("a score is out of range but no plugin's is")
