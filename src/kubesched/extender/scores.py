"""prioritize's scores: the profile's weighted Score mapped to the extender range.

The framework normalises each Score plugin to 0–100 and applies its weight; the weighted total is
mapped to 0–10 (MaxExtenderPriority, staging/src/k8s.io/kube-scheduler/extender/v1/types.go) as
``total * 10 // (100 * sum of the weights of the plugins that scored)``: the weighted mean score in
tenths, rounded down. kube-scheduler then multiplies it by the extender's ``weight`` and by
MaxNodeScore/MaxExtenderPriority = 10 (pkg/scheduler/schedule_one.go ``prioritizeNodes``).
"""

from __future__ import annotations

import numpy as np

from kubesched.extender.requests import Deadline, ServiceError
from kubesched.extender.rows import unique_rows
from kubesched.extender.wire import MAX_EXTENDER_PRIORITY
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import MAX_NODE_SCORE
from kubesched.framework.runtime import Framework, plugin_error
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, Rows


def extender_scores(
fwk: Framework, pod: PodInfo, rows: Rows, deadline: Deadline, pre_filtered: CycleState | None = None,
    unique: tuple[Rows, Rows] | None = None,
) -> IntArray:
    """Per row: the profile's weighted score mapped to 0..MaxExtenderPriority (see module doc).
    ``pre_filtered``: a state PreFilter succeeded in for this pod, still current; ``unique``:
    ``unique_rows(rows, inverse=True)`` when known."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    state = pre_filtered
    if state is None:
        state = CycleState()
        _, st = fwk.run_pre_filter(state, pod)
        if not st.is_success:
            if st.is_rejected:
                # The pod fits nowhere by this profile: no preference among the nodes.
                return np.zeros(len(rows), dtype=np.int64)
            raise ServiceError(500, plugin_error("PreFilter", st))
    if unique is not None:
        uniq, inverse = unique
    else:
        uniq, maybe_inverse = unique_rows(rows, inverse=True)
        assert maybe_inverse is not None
        inverse = maybe_inverse
    st = fwk.run_pre_score(state, pod, uniq)
    if not st.is_success:
        raise ServiceError(500, plugin_error("PreScore", st))
    deadline.check("pre-score")
    scored = fwk.run_score(state, pod, uniq)
    if isinstance(scored, Status):
        raise ServiceError(500, plugin_error("Score", scored))
    weights = sum(fwk.score_weights[p] for p in scored.normalized)  # the plugins that scored
    if weights <= 0:
        return np.zeros(len(rows), dtype=np.int64)
    mapped = scored.totals * MAX_EXTENDER_PRIORITY // (MAX_NODE_SCORE * weights)
    # np.minimum/np.maximum: the same as np.clip without its Python-level dispatch.
    mapped = np.minimum(np.maximum(mapped, 0, out=mapped), MAX_EXTENDER_PRIORITY, out=mapped)
    out: IntArray = mapped[inverse]
    return out
