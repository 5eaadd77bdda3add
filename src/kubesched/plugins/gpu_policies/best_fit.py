"""BestFit: the node the pod leaves the least free CPU and GPU on.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/best_fit_score.go``
(``getBestFitScore``: raw = int((1 - sum(w_i (free_i - request_i) / maxSpec_i)) * 100) over CPU
and total GPU milli, weights 0.5/0.5, maxSpec 128 CPUs / 8 GPUs; then ``NormalizeScore`` of
``plugin_utils.go``, min-max to 0-100).

Difference: a node with less free CPU or GPU than the pod's non-zero request gets the lowest raw
score (the reference returns an Error, failing the pod's attempt).
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, ScorePlugin, Scores
from kubesched.framework.status import SUCCESS, Status
from kubesched.plugins.gpu_policies.common import normalize_min_max
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import MAX_SPEC_MILLI_CPU, MAX_SPEC_MILLI_GPU
from kubesched.snapshot.gpushare.shapes import pod_shape
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, NodeTable, Rows


class BestFit(ScorePlugin):
    name = "BestFit"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        shape = pod_shape(pod)
        # What ``node_resources`` gives as ``cpu_left`` and ``total_free``, read without the rest.
        free_cpu = table.available_by_resource[CPU].take(rows)
        free_gpu = GpuLedger.of(table).free_totals(rows)
        waste = (0.5 * (free_cpu - shape.milli_cpu) / MAX_SPEC_MILLI_CPU
                 + 0.5 * (free_gpu - shape.total_milli_gpu) / MAX_SPEC_MILLI_GPU)
        scores: Scores = np.trunc((1.0 - waste) * MAX_NODE_SCORE).astype(np.int64)
        short = (free_cpu < shape.milli_cpu) | (free_gpu < shape.total_milli_gpu)
        if short.any():
            scores[short] = scores.min() - 1 if (~short).any() else 0
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        normalize_min_max(scores)
        return SUCCESS
