"""Incremental Filter passes (framework/filter_rows.py): a pod shape's verdicts judged again only
on the nodes changed since its last pass give the full pass's feasible nodes and node statuses —
the same rejections, in the same chunks and order — through pods coming and going, GPUs taken and
freed, nodes changed, added and removed; and a replay is the same with and without them."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kubesched.config import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, NodeToStatus
from kubesched.framework.filter_outcome import pod_shape
from kubesched.framework.filter_rows import RowVerdictStore
from kubesched.framework.runtime import Framework
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import parse_gpu_request
from kubesched.snapshot.pod import PodInfo

from .helpers import add_pods, drain, gpu_node, profile_plugins
from .helpers import gpu_pod as gpu_pod_of
from .test_filter_outcome import EXAMPLES, _simulate

PROFILE = "default-scheduler"


def gpu_pod(name: str, milli: int, **kw: Any) -> dict[str, Any]:
    return gpu_pod_of(name, milli, scheduler_name=PROFILE, **kw)


PROFILES = {
    # The default plugins (the signature filters among them) plus GpuShare.
    "default+GpuShare": {"multiPoint": {"enabled": [{"name": "GpuShare"}]}},
    # The default plugins alone: only the table's own change log says which rows changed.
    "default": {},
    # GpuShare and NodeResourcesFit alone (the reference's filters): no signature filter, whose
    # verdicts are made again when a node changes, so a node's update is seen through the log only.
    "GpuShare+NodeResourcesFit": profile_plugins(),
}


def default_profile_with_gpushare(profile: str = "default+GpuShare") -> tuple[Scheduler, SimulatedCluster]:
    """A profile of ``PROFILES``, every node filtered."""
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "percentageOfNodesToScore": 100,
           "profiles": [{"schedulerName": PROFILE, "plugins": PROFILES[profile]}]}
    loaded = load_config(raw, builtin_registry())
    cluster = SimulatedCluster()
    sched = Scheduler.build(loaded.profiles, builtin_registry(), FakeClock(), client=cluster, seed=1)
    cluster.attach(sched)
    return sched, cluster


def _pass(fwk: Framework, pod: PodInfo, incremental: bool) -> tuple[list[int], list[Any], str] | None:
    """One Filter pass over every node from a rotated start: (feasible rows, the rejections in
    order as (row, status), the FitError reasons); None if the store declined."""
    table = fwk.handle.table
    rows = table.alive_rows()
    state = CycleState()
    pre = Diagnosis()
    narrowed, st = fwk.pre_filter_rows(state, pod, rows, pre)
    assert st.is_success and narrowed is rows
    start = len(rows) // 3
    window = np.concatenate((rows[start:], rows[:start]))
    diagnosis = Diagnosis()
    if incremental:
        answer = fwk.row_verdicts.prepare(state, pod, table, rows, pod_shape(pod))
        if answer is None:
            return None
        earlier = answer.failed_pass(start, rows)
        passing = answer.run_filters(window, diagnosis)
        if earlier is not None:  # the shape's last failed pass, no verdict changed: the same record
            ADOPTED.append(pod.name)
            assert not len(passing)
            assert _record(earlier) == _record(diagnosis.node_to_status)
        if not len(passing):
            diagnosis.node_to_status.freeze()
            answer.remember_failure(start, rows, diagnosis.node_to_status)
    else:
        passing, st = fwk.run_filters(state, pod, window, diagnosis)
        assert st.is_success
    return passing.tolist(), *_record(diagnosis.node_to_status)


#: Probes whose incremental pass could have adopted the shape's last failed pass.
ADOPTED: list[str] = []


def _record(statuses: NodeToStatus) -> tuple[list[tuple[int, Any]], str]:
    """The rejections in order as (row, status), and the FitError reasons."""
    rejected, codes, kept = statuses.rejected()
    return [(int(r), kept[int(c)]) for r, c in zip(rejected, codes, strict=True)], statuses.reasons_text()


def _same_as_full(fwk: Framework, probes: list[PodInfo]) -> None:
    for probe in probes:
        full = _pass(fwk, probe, incremental=False)
        assert _pass(fwk, probe, incremental=True) == full, probe.name


PROBES = [PodInfo.from_raw(gpu_pod(f"probe-{m}-{c}", m, count=c, cpu=cpu))
          for m, c, cpu in [(300, 1, "4"), (500, 1, "30"), (1000, 2, "8"), (1000, 4, "2"), (1000, 8, "200")]]


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_verdicts_judged_again_where_nodes_changed_equal_a_full_pass(profile: str) -> None:
    """Random arrivals, departures, node updates, new and removed nodes, tainted nodes (the
    signature filters' chunk): after every step each probe shape's pass equals the full pass.
    Without GpuShare only the table's own change log tells which rows a pod came to or left (with
    it, the GPU ledger marks them as well)."""
    sched, cluster = default_profile_with_gpushare(profile)
    fwk = sched.frameworks[PROFILE]
    rng = random.Random(7)
    for i in range(12):
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if i % 5 == 0 else []
        cluster.add_node({**gpu_node(f"n{i}", gpus=rng.choice([1, 2, 4, 8]), cpu=str(rng.choice([8, 32, 96])))}
                         | ({"spec": {"taints": taints}} if taints else {}))
    placed: list[PodInfo] = []
    _same_as_full(fwk, PROBES)
    for step in range(60):
        action = rng.random()
        if action < 0.55 or not placed:
            milli, count = rng.choice([(200, 1), (500, 1), (700, 1), (1000, 1), (1000, 2)])
            placed += add_pods(cluster, [gpu_pod(f"p{step}", milli, count=count, cpu=str(rng.choice([1, 4, 16])))])
            drain(sched)
        elif action < 0.8:
            cluster.delete_pod(placed.pop(rng.randrange(len(placed))).uid)
        elif action < 0.9:  # only the Node changes: more or less CPU, no pod moves
            name = f"n{rng.randrange(12)}"
            if name in cluster.nodes:
                cluster.add_node(gpu_node(name, gpus=8, cpu=str(rng.choice([2, 64]))))
        elif action < 0.95:
            cluster.add_node(gpu_node(f"new{step}", gpus=rng.choice([1, 4])))
        else:
            victim = rng.choice(sorted(cluster.nodes))
            cluster.delete_node(victim)
        _same_as_full(fwk, PROBES)
    store = fwk.row_verdicts
    assert store.passes > 0 and store.judged < store.passes * len(fwk.handle.table.alive_rows())
    assert ADOPTED  # some probe failed again with no verdict changed (else the check above was idle)


def test_a_gpu_change_alone_is_in_the_tables_change_log() -> None:
    """The ledger marks a row changed when its GPUs change, even with no pod or node change (a
    pod given other GPUs), so a shape's kept verdicts are judged again there."""
    sched, cluster = default_profile_with_gpushare()
    cluster.add_node(gpu_node("n1", gpus=2))
    pod = add_pods(cluster, [gpu_pod("p", 600)])[0]
    drain(sched)
    table = sched.frameworks[PROFILE].handle.table
    ledger = GpuLedger.of(table)
    placed = table.pod(pod.uid)
    request = parse_gpu_request(pod)
    assert placed is not None and request is not None
    row, clock = table.row_of("n1"), table.row_clock
    assert row is not None
    ledger.assign(placed, row, request, (1,) if ledger.assigned(pod.uid) == (0,) else (0,))
    assert int(table.row_versions[row]) > clock


def test_a_plugin_without_a_row_key_turns_the_store_off() -> None:
    """Pods waiting for GPUs in the ledger: GpuShare says so (the full pass places them)."""
    sched, cluster = default_profile_with_gpushare()
    cluster.add_node(gpu_node("n1", gpus=2))
    fwk = sched.frameworks[PROFILE]
    _pass(fwk, PROBES[0], incremental=False)  # the signature filters' family, cached from now on
    assert _pass(fwk, PROBES[0], incremental=True) is not None
    # A pod bound by someone else without gpu-index waits in the ledger until its next read.
    fwk.handle.table.add_pod(PodInfo.from_raw(gpu_pod("foreign", 500, node_name="n1")))
    assert GpuLedger.of(fwk.handle.table).unsettled
    assert _pass(fwk, PROBES[0], incremental=True) is None


@pytest.mark.parametrize("policy", ["gpushare-bestfit.yaml", "gpushare.yaml"])
def test_a_replay_is_the_same_with_and_without_incremental_passes(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["--trace", f"openb:{EXAMPLES / 'openb-mini'}", "--arrivals", "sequential", "--inflate", "1.3",
            "--tie-break", "shuffled", "--seed", "3", "--config", str(EXAMPLES / policy)]
    answered: list[bool] = []
    prepare = RowVerdictStore.prepare

    def counted(self: RowVerdictStore, *a: Any) -> Any:
        found = prepare(self, *a)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(RowVerdictStore, "prepare", counted)
    incremental = _simulate(args)
    assert sum(answered) > 0  # else this test compares nothing
    monkeypatch.setattr(RowVerdictStore, "prepare", lambda self, *a: None)
    assert _simulate(args) == incremental
