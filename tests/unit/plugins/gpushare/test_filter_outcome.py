"""Reusing a failed Filter pass for an identical pod (framework/filter_outcome.py): the reuse
happens, it never changes an outcome, and anything a filter could see changing makes the kept
pass stale — a freed GPU, a changed node, state a plugin keeps itself — while a plugin that
cannot say what it reads turns the reuse off."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.config import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis, NodeToStatus
from kubesched.framework.filter_outcome import FilterOutcomeCache, pod_shape
from kubesched.framework.interfaces import FilterPlugin
from kubesched.framework.status import Status
from kubesched.framework.types import Verdicts
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import ScheduleFailure, Scheduler, SchedulerObserver
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

from .helpers import PROFILE, add_pods, config, drain, gpu_node, gpu_pod

EXAMPLES = Path(__file__).parents[4] / "examples"


class Failures(SchedulerObserver):
    def __init__(self) -> None:
        self.messages: dict[str, list[str]] = {}

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.messages.setdefault(pod.name, []).append(failure.message)


class Gate(FilterPlugin):
    """Rejects every node while ``open`` is False: state of its own, read by no generation."""

    name: ClassVar[str] = "Gate"
    open = False

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        codes = np.zeros(len(rows), dtype=np.int32) if self.open else np.ones(len(rows), dtype=np.int32)
        return Verdicts(codes, [Status.unschedulable("gate closed")])


class CountedGate(Gate):
    """The same, opted in: its key is a counter it bumps whenever ``open`` changes."""

    name: ClassVar[str] = "CountedGate"
    version = 0

    def filter_outcome_key(self, state: CycleState, pod: PodInfo) -> int:
        return self.version


def gpu_scheduler(extra: type[FilterPlugin] | None = None) -> tuple[Scheduler, SimulatedCluster, Failures]:
    registry = builtin_registry()
    raw = config()
    if extra is not None:
        registry.register(extra)
        raw["profiles"][0]["plugins"]["multiPoint"]["enabled"].append({"name": extra.name})
    loaded = load_config(raw, registry)
    cluster = SimulatedCluster()
    failures = Failures()
    sched = Scheduler.build(loaded.profiles, registry, FakeClock(), client=cluster, seed=1, observer=failures)
    cluster.attach(sched)
    return sched, cluster, failures


def outcomes(sched: Scheduler) -> FilterOutcomeCache:
    return sched.frameworks[PROFILE].filter_outcomes


def bound(cluster: SimulatedCluster, pods: list[PodInfo]) -> list[str]:
    return [cluster.pods[p.uid].node_name for p in pods]


def test_a_pod_like_one_that_just_failed_reuses_its_pass_and_fails_alike() -> None:
    sched, cluster, failures = gpu_scheduler()
    cluster.add_node(gpu_node("n1", gpus=1))
    add_pods(cluster, [gpu_pod("busy", 1000, node_name="n1", index="0")])
    first, second = add_pods(cluster, [gpu_pod("first", 500), gpu_pod("second", 500)])
    drain(sched)
    assert bound(cluster, [first, second]) == ["", ""]
    assert outcomes(sched).stored == 1 and outcomes(sched).hits == 1
    assert failures.messages == {
        "first": ["0/1 nodes are available: 1 Insufficient alibabacloud.com/gpu-milli."],
        "second": failures.messages["first"],
    }


def test_a_freed_gpu_makes_the_kept_failure_stale() -> None:
    sched, cluster, _ = gpu_scheduler()
    cluster.add_node(gpu_node("n1", gpus=1))
    busy = add_pods(cluster, [gpu_pod("busy", 1000, node_name="n1", index="0")])[0]
    first = add_pods(cluster, [gpu_pod("first", 500)])[0]
    drain(sched)
    assert outcomes(sched).stored == 1
    cluster.delete_pod(busy.uid)
    second = add_pods(cluster, [gpu_pod("second", 500)])[0]
    drain(sched)
    assert bound(cluster, [first, second]) == ["n1", "n1"]
    assert outcomes(sched).hits == 0


def test_a_changed_node_makes_the_kept_failure_stale() -> None:
    """Only the Node changes (more CPU): no pod comes or goes, the GPU ledger does not move."""
    sched, cluster, _ = gpu_scheduler()
    cluster.add_node(gpu_node("n1", gpus=1, cpu="2"))
    first = add_pods(cluster, [gpu_pod("first", 500, cpu="4")])[0]
    drain(sched)
    assert bound(cluster, [first]) == [""] and outcomes(sched).stored == 1
    cluster.add_node(gpu_node("n1", gpus=1, cpu="16"))
    second = add_pods(cluster, [gpu_pod("second", 500, cpu="4")])[0]
    drain(sched)
    assert bound(cluster, [first, second]) == ["n1", "n1"]
    assert outcomes(sched).hits == 0


@pytest.mark.parametrize("gate", [Gate, CountedGate])
def test_state_a_plugin_keeps_is_seen_undeclared_or_through_its_counter(gate: type[Gate]) -> None:
    sched, cluster, _ = gpu_scheduler(gate)
    plugin = sched.frameworks[PROFILE].plugins[gate.name]
    assert isinstance(plugin, Gate)
    cluster.add_node(gpu_node("n1", gpus=1))
    first = add_pods(cluster, [gpu_pod("first", 500)])[0]
    drain(sched)
    assert bound(cluster, [first]) == [""]
    # No pod placed, no node changed: only the plugin's own state tells the next pod apart.
    plugin.open = True
    if isinstance(plugin, CountedGate):
        plugin.version += 1
    second = add_pods(cluster, [gpu_pod("second", 500)])[0]
    drain(sched)
    assert bound(cluster, [second]) == ["n1"]
    assert outcomes(sched).hits == 0
    assert outcomes(sched).stored == (1 if gate is CountedGate else 0)


def test_no_pass_is_reused_while_a_pod_is_nominated() -> None:
    sched, cluster, _ = gpu_scheduler()
    cluster.add_node(gpu_node("n1", gpus=1))
    add_pods(cluster, [gpu_pod("busy", 1000, node_name="n1", index="0")])
    # A pod of another scheduler nominated to n1 (its own attempts would clear it otherwise).
    nominated = add_pods(cluster, [gpu_pod("nominated", 100, scheduler_name="other")])[0]
    sched.queue.nominator.add(nominated, "n1")
    add_pods(cluster, [gpu_pod("first", 500), gpu_pod("second", 500)])
    asyncio.run(_schedule_all(sched))
    assert sched.frameworks[PROFILE].handle.nominated
    assert outcomes(sched).stored == 0 and outcomes(sched).hits == 0


async def _schedule_all(sched: Scheduler) -> None:
    while sched.schedule_one():
        pass
    await sched.drain()


def test_the_shape_leaves_out_name_uid_and_times_but_not_what_filters_read() -> None:
    a = PodInfo.from_raw(gpu_pod("a", 500))
    b = PodInfo.from_raw({**gpu_pod("b", 500), "status": {"phase": "Pending"}})
    b.raw["metadata"]["creationTimestamp"] = "2026-11-27T00:00:00Z"
    assert pod_shape(a) == pod_shape(b)
    assert pod_shape(a) != pod_shape(PodInfo.from_raw(gpu_pod("a", 600)))
    assert pod_shape(a) != pod_shape(PodInfo.from_raw(gpu_pod("a", 500, model="T4")))
    labelled = PodInfo.from_raw(gpu_pod("a", 500, labels={"team": "x"}))
    assert pod_shape(a) != pod_shape(labelled)


def test_kept_statuses_are_frozen() -> None:
    statuses = NodeToStatus()
    statuses.add_all(np.array([0, 1], dtype=np.intp), Status.unschedulable("full"))
    with pytest.raises(RuntimeError):
        Diagnosis().adopt(statuses)  # only frozen statuses are shared
    statuses.freeze()
    with pytest.raises(RuntimeError):
        statuses.add_all(np.array([2], dtype=np.intp), Status.unschedulable("full"))
    rows, _codes, _ = statuses.rejected()
    with pytest.raises(ValueError):
        rows[0] = 5  # handed out to every attempt that shares them
    diagnosis = Diagnosis()
    diagnosis.adopt(statuses)
    assert diagnosis.node_to_status.reasons_text() == "2 full"


def _simulate(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["simulate", *args, "-o", "json", "-q"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = orjson.loads(result.stdout)
    for volatile in ("wallSeconds", "podsPerSecond"):
        doc["summary"].pop(volatile)
    return doc


@pytest.mark.parametrize("policy", ["gpushare-bestfit.yaml", "gpushare.yaml"])
def test_a_replay_is_the_same_with_and_without_reuse(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--trace", f"openb:{EXAMPLES / 'openb-mini'}", "--arrivals", "sequential", "--inflate", "1.3",
            "--tie-break", "shuffled", "--seed", "3", "--config", str(EXAMPLES / policy)]
    hits: list[int] = []
    get = FilterOutcomeCache.get

    def counted(self: FilterOutcomeCache, key: Any, table: NodeTable) -> Any:
        found = get(self, key, table)
        hits.append(found is not None)
        return found

    monkeypatch.setattr(FilterOutcomeCache, "get", counted)
    reused = _simulate(args)
    assert sum(hits) > 0  # else this test compares nothing
    monkeypatch.setattr(FilterOutcomeCache, "get", lambda self, key, table: None)
    assert _simulate(args) == reused
