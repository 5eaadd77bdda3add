"""Diagnosis: per-node rejection statuses and the upstream FitError message (framework/diagnosis.py)."""

from __future__ import annotations

import numpy as np

from kubesched.framework.diagnosis import Diagnosis, NodeToStatus, fit_error_message
from kubesched.framework.status import Status


def rows(*r: int) -> np.ndarray:
    return np.array(r, dtype=np.intp)


def codes(*c: int) -> np.ndarray:
    return np.array(c, dtype=np.int32)


def test_node_to_status_records_chunks_and_answers_per_row() -> None:
    cpu = Status.unschedulable("Insufficient cpu", plugin="Fit")
    mem = Status.unschedulable("Insufficient memory", plugin="Fit")
    taint = Status.unresolvable("node(s) had untolerated taint {a: b}", plugin="Taint")
    nts = NodeToStatus()
    nts.add(rows(0, 2, 5), codes(1, 2, 1), [cpu, mem])
    assert len(nts) == 3
    assert nts.get(2) == mem and nts.get(5) == cpu
    assert nts.get(1) is None  # passed or never evaluated
    nts.add_all(rows(7, 8), taint)
    assert len(nts) == 5
    assert nts.get(8) == taint, "the per-row view is rebuilt after a new chunk"
    assert dict(nts.items()) == {0: cpu, 2: mem, 5: cpu, 7: taint, 8: taint}
    assert nts.rejecting_plugins() == {"Fit", "Taint"}


def test_empty_add_is_ignored() -> None:
    nts = NodeToStatus()
    nts.add(rows(), codes(), [Status.unschedulable("x")])
    assert len(nts) == 0 and list(nts.items()) == [] and not nts.reason_histogram()


def test_histogram_counts_each_reason_of_a_multi_reason_status() -> None:
    both = Status.unschedulable("Insufficient cpu", "Insufficient memory")
    cpu = Status.unschedulable("Insufficient cpu")
    nts = NodeToStatus()
    nts.add(rows(0, 1, 2), codes(1, 1, 2), [both, cpu])
    nts.add_all(rows(3), cpu)
    assert nts.reason_histogram() == {"Insufficient cpu": 4, "Insufficient memory": 2}


def test_histogram_is_counted_again_after_a_new_chunk_and_each_caller_gets_its_own() -> None:
    cpu = Status.unschedulable("Insufficient cpu", plugin="Fit")
    nts = NodeToStatus()
    nts.add(rows(0, 1), codes(1, 1), [cpu])
    first = nts.reason_histogram()
    first["Insufficient cpu"] += 10  # fit_error_message adds the absent nodes to its copy
    assert nts.reason_histogram() == {"Insufficient cpu": 2}
    nts.add_all(rows(4), cpu)
    assert nts.reason_histogram() == {"Insufficient cpu": 3}


def test_fit_error_message_sorts_the_histogram_as_strings() -> None:
    d = Diagnosis()
    d.node_to_status.add_all(rows(*range(10)), Status.unschedulable("Insufficient cpu"))
    d.node_to_status.add_all(rows(10, 11), Status.unresolvable("node(s) didn't match Pod's node affinity/selector"))
    d.node_to_status.add_all(rows(12), Status.unschedulable("Too many pods"))
    # Go's sort.Strings: "1 …" < "10 …" < "2 …".
    assert fit_error_message(13, d) == (
        "0/13 nodes are available: 1 Too many pods, 10 Insufficient cpu, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


def test_fit_error_message_with_prefilter_message_ignores_the_per_node_statuses() -> None:
    d = Diagnosis()
    st = Status.unschedulable("pod has unbound immediate PersistentVolumeClaims")
    d.node_to_status.add_all(rows(0, 1, 2), st)
    d.pre_filter_msg = st.message
    assert fit_error_message(3, d) == "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_fit_error_message_appends_the_post_filter_message_as_is() -> None:
    """Upstream types.go: `reasonMsg += fmt.Sprintf(" %v", postFilterMsg)`: no period of its own
    (the real kube-scheduler, in the differential tests, ends with one period)."""
    d = Diagnosis()
    d.node_to_status.add_all(rows(0, 1), Status.unschedulable("Insufficient cpu"))
    d.post_filter_msg = "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    assert fit_error_message(2, d) == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_fit_error_message_without_reasons() -> None:
    assert fit_error_message(4, Diagnosis()) == "0/4 nodes are available:"


def test_status_message_and_str() -> None:
    st = Status.unschedulable("a", "b", plugin="P")
    assert st.message == "a, b"
    assert str(st) == "Unschedulable [P]: a, b"
    assert str(Status.skip()) == "Skip"
    assert st.with_plugin("P") is st and st.with_plugin("Q").plugin == "Q"
    assert Status.unresolvable("x").is_rejected and not Status.error("x").is_rejected


def test_a_filter_window_records_only_its_rejected_rows_and_names_their_plugins() -> None:
    d = Diagnosis()
    taint = Status.unresolvable("node(s) had untolerated taint(s)", plugin="TaintToleration")
    cordon = Status.unresolvable("node(s) were unschedulable", plugin="NodeUnschedulable")
    rows = np.array([10, 11, 12, 13], dtype=np.intp)
    # Code 0 passed; only statuses some row uses count as rejecting plugins.
    d.add_rejections(rows, np.array([0, 1, 0, 1], dtype=np.int32), [taint, cordon], failed=2)
    assert len(d.node_to_status) == 2
    assert dict(d.node_to_status.items()) == {11: taint, 13: taint}
    assert d.node_to_status.get(10) is None
    assert d.unschedulable_plugins == {"TaintToleration"}
    d.unschedulable_plugins.add("NodeAffinity")  # still a plain set for callers that add
    d.add_rejections(rows[:1], np.array([2], dtype=np.int32), [taint, cordon], failed=1)
    assert d.unschedulable_plugins == {"TaintToleration", "NodeAffinity", "NodeUnschedulable"}
    assert fit_error_message(4, d) == (
        "0/4 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint(s)."
    )
