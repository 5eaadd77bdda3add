"""GpuPacking: fill GPUs already in use first, then GPUs of nodes already in use, then idle nodes.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/gpu_packing_score.go``
(``getPackingScore``): a pod without GPUs scores 0; on a node whose GPUs are all free,
max(33 - free GPUs, free GPUs); else the pod takes the GPUs with the least free milli that fit
(``SortedMilliGpuLeftIndexList`` ascending): if it needs fully free ones, max(50 - their number,
33); if only shared ones, max(100 - sum(free milli * 100 / 1000) / 10, 50) (integer arithmetic).

Difference: a node where the pod's GPUs do not fit scores 0 (the reference returns an Error,
which GpuShare's Filter makes unreachable).
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePlugin, Scores
from kubesched.framework.status import Status
from kubesched.snapshot.gpushare.model import MILLI
from kubesched.snapshot.gpushare.resources import node_resources
from kubesched.snapshot.gpushare.shapes import pod_shape
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows


class GpuPacking(ScorePlugin):
    name = "GpuPacking"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        shape = pod_shape(pod)
        scores = np.full(len(rows), MIN_NODE_SCORE, dtype=np.int64)
        if shape.milli_gpu <= 0:
            return scores
        res = node_resources(table, rows)
        fully = ((res.free == MILLI) & res.exists).sum(axis=1)
        if shape.shared:
            # The least-free GPU that fits is the one the pod takes.
            fitting = res.exists & (res.free >= shape.milli_gpu)
            fits = fitting.any(axis=1)
            tightest = np.where(fitting, res.free, MILLI + 1).min(axis=1)
            shared = np.maximum(MAX_NODE_SCORE - (tightest * 100 // MILLI) // 10, MAX_NODE_SCORE // 2)
            new_gpu = np.maximum(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3)
            scores = np.where(fits, np.where(tightest == MILLI, new_gpu, shared), MIN_NODE_SCORE)
        else:
            fits = fully >= shape.gpu_count
            new_gpus = np.maximum(MAX_NODE_SCORE // 2 - shape.gpu_count, MAX_NODE_SCORE // 3)
            scores = np.where(fits, new_gpus, MIN_NODE_SCORE).astype(np.int64)
        idle = fully == res.gpu_count
        scores[idle] = np.maximum(MAX_NODE_SCORE // 3 - fully[idle], fully[idle])
        return scores.astype(np.int64)
