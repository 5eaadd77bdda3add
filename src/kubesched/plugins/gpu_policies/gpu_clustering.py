"""GpuClustering: put pods of the same GPU kind (share-gpu, 1-gpu, 2-gpu, ...) together.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/gpu_clustering_score.go``
and ``pkg/utils/utils.go`` ``GetNodeResourceViaNodeInfo`` (``GpuAffinity``: GPU pods on the node
by ``GetGpuAffinityFromPodAnnotation``). A pod without GPUs scores 0; else
25 * (8000 - free GPU milli) / 8000 plus 75 on a node whose GPU pods are all of the pod's kind,
50 on one that has some of them among others, 25 on a node without GPU pods, 0 otherwise.
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePlugin, Scores
from kubesched.framework.status import Status
from kubesched.plugins.gpu_policies.common import go_div
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import MAX_SPEC_MILLI_GPU, gpu_request_or_none
from kubesched.snapshot.gpushare.resources import node_resources
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows


class GpuClustering(ScorePlugin):
    name = "GpuClustering"

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        request = gpu_request_or_none(pod)
        if request is None:
            return np.full(len(rows), MIN_NODE_SCORE, dtype=np.int64)
        res = node_resources(table, rows)
        same, kinds = GpuLedger.of(table).tag_counts(rows, request.affinity_tag)
        quarter = MAX_NODE_SCORE // 4
        base = go_div(quarter * (MAX_SPEC_MILLI_GPU - res.total_free), MAX_SPEC_MILLI_GPU)
        bonus = np.where(same > 0, np.where(kinds == 1, quarter * 3, quarter * 2), np.where(kinds == 0, quarter, 0))
        scores: Scores = (base + bonus).astype(np.int64)
        return scores
