"""bench/openb.py: the FitError phrases compared between kube-scheduler and kubesched."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.openb import reason_phrases


def test_reason_phrases_drop_node_counts_and_keep_preemption() -> None:
    msg = ("0/305 nodes are available: 2 Insufficient cpu, 303 Insufficient nvidia.com/gpu. "
           "preemption: 0/305 nodes are available: 305 No preemption victims found for incoming pod.")
    assert reason_phrases(msg) == (
        "Insufficient cpu", "Insufficient nvidia.com/gpu",
        "preemption: No preemption victims found for incoming pod",
    )
    assert reason_phrases("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") == ("Insufficient nvidia.com/gpu",)
    assert reason_phrases("something else") == ("something else",)
