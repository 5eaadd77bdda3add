"""The last step of a scoring cycle: range check, weights and totals of the plugins' scores, and
the result (ScoredNodes).

Port of the end of RunScorePlugins (pkg/scheduler/framework/runtime/framework.go): after every
Score and NormalizeScore, each score must lie in [MinNodeScore, MaxNodeScore]; it is then
multiplied by the plugin's weight and summed per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, Scores
from kubesched.framework.status import Status
from kubesched.snapshot.table import Rows


@dataclass(slots=True)
class ScoredNodes:
    """Feasible rows with their weighted totals and each plugin's (weighted) contribution."""

    rows: Rows
    totals: Scores
    #: Each plugin's scores after NormalizeScore, before its weight, and the weights.
    normalized: dict[str, Scores]
    weights: Mapping[str, int]
    _by_plugin: dict[str, Scores] | None = None

    @property
    def by_plugin(self) -> dict[str, Scores]:
        """Each plugin's weighted scores for every row, built on first use (the scheduling cycle
        reads only the totals)."""
        if self._by_plugin is None:
            self._by_plugin = weighted_scores(self.normalized, self.weights)
        return self._by_plugin

    def by_plugin_at(self, positions: npt.NDArray[np.intp]) -> dict[str, list[int]]:
        """Each plugin's weighted scores at these positions of ``rows`` only (the simulator's
        records show the chosen node or a top k: no whole arrays weighted for a few values)."""
        return {name: (scores[positions] * self.weights[name]).tolist() for name, scores in self.normalized.items()}


def weighted_totals(num_rows: int, normalized: Mapping[str, Scores], weights: Mapping[str, int]) -> Scores | Status:
    """Totals per row, or the range error of the first plugin (in Score order) with a score out
    of range. ``normalized`` holds int64 scores per plugin. Each plugin's weighted scores are
    :func:`weighted_scores`, computed only when asked for."""
    # One reduction checks every plugin and both bounds: viewed as unsigned, a negative score is
    # huge. The plugins' scores side by side cost one concatenation instead of a reduction each.
    if num_rows and normalized:
        side_by_side = np.concatenate(list(normalized.values()))
        if int(np.maximum.reduce(side_by_side.view(np.uint64))) > MAX_NODE_SCORE:
            return _range_error(normalized)
    totals: Scores | None = None
    for name, scores in normalized.items():
        weight = weights[name]
        if totals is None:
            totals = scores * weight  # a new array: the plugin's scores are kept as they are
        elif weight == 1:
            totals += scores
        else:
            totals += scores * weight
    if totals is None:
        totals = np.zeros(num_rows, dtype=np.int64)
    return totals


def weighted_scores(normalized: Mapping[str, Scores], weights: Mapping[str, int]) -> dict[str, Scores]:
    """Each plugin's scores times its weight (what it added to the totals)."""
    return {name: scores if weights[name] == 1 else scores * weights[name] for name, scores in normalized.items()}


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
