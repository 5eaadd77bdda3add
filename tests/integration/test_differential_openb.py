"""The openb production GPU trace, differential: the real kube-scheduler (the oracle) and `kubesched
run`, one after the other, each with its default profile and the whole cut pending before it starts
(a backlog, as after a failover). The cut: about 250 of the trace's 1,523 nodes and the matching
tasks (every 6th node and task, ``kubesched.testing.openb``), more GPUs requested than the nodes
have, so every placement counts. Compared: pods bound, within the run-to-run spread of
kube-scheduler itself (it queues a backlog and orders its nodes in Go map order and breaks ties at
random, so two of its runs differ), and the unschedulable reasons.

Measured on this cut (bench/results/openb-2026-11-27.json and this test): kube-scheduler bound
1,155 / 1,167 / 1,170 / 1,178, kubesched 1,169 / 1,172 / 1,175 / 1,181. Two single runs can be 2 %
apart, so the test allows 2.5 %: it catches an outcome that differs grossly (a wrong score, filter
or order); the finer comparison (the 0.7 % of issue 32) needs the full trace and several runs.

The full-size comparison is ``python -m bench openb`` (bench/openb.py). The trace is not part of the
project: read from $KUBESCHED_OPENB_TRACE (default ../shared/traces/openb next to the checkout);
outside CI the test skips without it; under CI=true (which runs with shared/ beside the clone) a
missing trace is a failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.openb import TraceError, load_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.openb import DEFAULT_TRACE, Outcome, create_nodes, run_contender

pytestmark = pytest.mark.integration

GROUP = "kubesched.test/group"
#: Four runs of kube-scheduler on this cut spanned 23 pods (1.7 %); see the module docstring.
TOLERANCE = 0.025


def test_openb_cut_binds_as_many_pods_as_kube_scheduler(
    control_plane: ControlPlane, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    try:
        trace = load_trace(DEFAULT_TRACE).cut_to(250)
    except TraceError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: the openb trace is required (shared/traces/openb beside the clone): {e}")
        pytest.skip(f"the openb trace is not available: {e}")
    cp = control_plane
    group = f"openb-{tmp_path.name[-6:]}"
    nodes_to_delete += [n.name for n in trace.nodes]
    create_nodes(cp, trace, labels={GROUP: group}, timeout=180)

    def run(kind: str) -> Outcome:
        return run_contender(cp, trace, kind, tmp_path, node_selector={GROUP: group}, timeout=300, quiet=3.0)

    oracle = run("kube-scheduler")
    ours = run("kubesched")
    print(f"\n[differential-openb] kube-scheduler: {oracle}\n[differential-openb] kubesched:      {ours}")
    pods = len(trace.tasks)
    assert oracle.pods == ours.pods == pods
    assert oracle.bound < pods  # the cut is over-committed: placements decide how many bind
    assert abs(ours.bound - oracle.bound) <= TOLERANCE * pods, (oracle.bound, ours.bound)
    # Every pod left pending says why in the same words (node counts aside).
    assert set(ours.reasons) == set(oracle.reasons)
