"""Run one plugin's PreFilter and then its Filter on the first node, as the framework would."""

from __future__ import annotations

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable


def pre_filter_then_filter(plugin: PreFilterPlugin, pod: PodInfo, table: NodeTable) -> tuple[Status, Status | None]:
    """(PreFilter status, Filter status on row 0 or None when it passed); no Filter after a
    PreFilter that did not succeed."""
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, table)
    if not pre.is_success:
        return pre, None
    assert isinstance(plugin, FilterPlugin)
    v = plugin.filter_batch(state, pod, table, np.array([0], dtype=np.intp))
    code = int(v.codes[0])
    return pre, (None if code == 0 else v.statuses[code - 1])
