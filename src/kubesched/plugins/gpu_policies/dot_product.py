"""DotProduct: Tetris's packing heuristic — the node whose free resources align least with the
pod's request (the smallest dot product) scores highest.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/dot_product_score.go``
(``calculateDotProductScore``), ``pkg/utils/utils.go`` ``GenerateSchedulingMatchGroups`` and
``CalculateVectorDotProduct``, ``pkg/type/resource.go`` ``ToVirtualNodeResourceList`` /
``ToVirtualPodResourceList`` — in the configuration the paper's experiments use
(``-dimext merge -norm max``): vectors [CPU left, total GPU milli left] and [CPU, GPU milli
request], each divided by the largest node (128 CPUs, 8 GPUs); score = int(100 * (1 - dot / 2));
a node with less CPU left than the pod asks scores 0. GPUs are then chosen by GpuShare's
``best`` method, as there.

Difference: scores are clamped to 0-100 (a node larger than the reference's largest could go
negative, which the framework refuses).
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePlugin, Scores
from kubesched.framework.status import Status
from kubesched.snapshot.gpushare.model import MAX_SPEC_MILLI_CPU, MAX_SPEC_MILLI_GPU
from kubesched.snapshot.gpushare.resources import node_resources
from kubesched.snapshot.gpushare.shapes import pod_shape
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows


class DotProduct(ScorePlugin):
    name = "DotProduct"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        shape = pod_shape(pod)
        res = node_resources(table, rows)
        dot = (res.cpu_left / MAX_SPEC_MILLI_CPU) * (shape.milli_cpu / MAX_SPEC_MILLI_CPU) + (
            res.total_free / MAX_SPEC_MILLI_GPU) * (shape.total_milli_gpu / MAX_SPEC_MILLI_GPU)
        scores: Scores = (MAX_NODE_SCORE * (1 - dot / 2)).astype(np.int64)
        scores[res.cpu_left < shape.milli_cpu] = MIN_NODE_SCORE
        np.clip(scores, MIN_NODE_SCORE, MAX_NODE_SCORE, out=scores)
        return scores
