"""Per-node rejections kept columnar (simulate/engine/records.py Rejections, framework/diagnosis.py
NodeToStatus.rejected): passed rows dropped, chunks merged, node names looked up only when the
per-node view is asked for, equal (plugin, reason) pairs of different chunks shown once."""

from __future__ import annotations

import numpy as np

from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.status import Status
from kubesched.simulate.engine.records import Rejections

NAMES = [f"n{i}" for i in range(10)]


def test_rejections_keep_only_rejected_rows_and_group_them_by_plugin_and_reason() -> None:
    cpu = Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit")
    taint = Status.unresolvable("node(s) had untolerated taint(s)", plugin="TaintToleration")
    d = Diagnosis()
    # Window 1: rows 0..4, row 1 and 3 passed.
    d.add_rejections(np.arange(5), np.array([1, 0, 2, 0, 1], dtype=np.int32), [cpu, taint], failed=3)
    # Window 2: rows 7..9 all rejected, with another Status object of the same plugin and reason.
    again = Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit")
    d.add_rejections(np.arange(7, 10), np.array([1, 1, 1], dtype=np.int32), [again], failed=3)
    rej = Rejections.of(d)
    assert rej is not None and len(rej) == 6 == len(d.node_to_status)
    assert rej.codes.dtype == np.uint16 and rej.rows.dtype == np.int32
    assert rej.by_plugin(NAMES) == {
        "NodeResourcesFit": {"Insufficient cpu": ["n0", "n4", "n7", "n8", "n9"]},
        "TaintToleration": {"node(s) had untolerated taint(s)": ["n2"]},
    }
    # The same answer as the per-row view of the diagnosis.
    per_row = {NAMES[r]: (s.plugin, s.message) for r, s in d.node_to_status.items()}
    flat = {n: (p, reason) for p, reasons in rej.by_plugin(NAMES).items() for reason, ns in reasons.items() for n in ns}
    assert flat == per_row


def test_no_rejection_keeps_nothing() -> None:
    d = Diagnosis()
    d.add_rejections(np.arange(3), np.zeros(3, dtype=np.int32), [], failed=0)
    assert Rejections.of(d) is None
    assert Rejections.of(Diagnosis()) is None
