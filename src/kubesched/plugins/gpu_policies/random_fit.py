"""RandomFit: a feasible node chosen uniformly at random.

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/random_score.go``:
PreScore picks ``rand.Intn(len(nodes))`` of the feasible nodes, Score gives it 100 and the others
0. Here the draw comes from the scheduler's seeded RNG (``handle.rng``), so a run is the same for
the same ``--seed``. The experiments pair it with GpuShare's ``gpuSelMethod: random``.
"""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, PreScorePlugin, ScorePlugin, Scores
from kubesched.framework.status import SUCCESS, Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

_STATE_KEY = "PreScoreRandomFit"


class RandomFit(PreScorePlugin, ScorePlugin):
    name = "RandomFit"

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        state.write(_STATE_KEY, int(rows[self.handle.rng.randrange(len(rows))]) if len(rows) else -1)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        chosen = state.get(_STATE_KEY)
        if not isinstance(chosen, int):
            return Status.error(f"reading {_STATE_KEY!r} from cycleState: not found")
        return np.where(rows == chosen, MAX_NODE_SCORE, MIN_NODE_SCORE).astype(np.int64)
