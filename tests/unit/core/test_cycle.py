"""The scheduling and binding cycle (scheduler.py) end to end with small in-file test plugins.

Every scheduler here runs in virtual time (FakeClock) with an in-memory cluster client, so binding
coroutines are driven by ``await drain(sched)`` and timeouts by ``clock.advance`` + ``tick()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import (
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
    Verdicts,
)
from kubesched.scheduler import ScheduleFailure, Scheduler, ScheduleResult, SchedulerObserver
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows
from kubesched.testing import StaticProfile, node, pod, pod_info

# ---------------------------------------------------------------------------------------------
# Test plugins
# ---------------------------------------------------------------------------------------------


class PrioritySort(QueueSortPlugin):
    name: ClassVar[str] = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.timestamp < b.timestamp


class CpuFit(FilterPlugin):
    """Batch filter: the pod's CPU request must fit in the node's free CPU."""

    name: ClassVar[str] = "CpuFit"

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        ok = table.free(rows)[:, 0] >= pod.requests.milli_cpu
        return Verdicts.from_mask(ok, Status.unschedulable("Insufficient cpu"))

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
            ClusterEvent(POD, ActionType.DELETE),
        )


class BadLabel(FilterPlugin):
    """Per-node filter: rejects nodes labelled bad=true."""

    name: ClassVar[str] = "BadLabel"
    REASON = "node(s) had untolerated taint {bad: true}"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.labels.get("bad") == "true":
            return Status.unresolvable(self.REASON)
        return SUCCESS

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),)


class ByName(ScorePlugin):
    """Per-node score from ``args`` (node name → score), 0 for unlisted nodes."""

    name: ClassVar[str] = "ByName"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return int((self.args or {}).get(node.name, 0)), SUCCESS


class Flat(ScorePlugin):
    """Batch score: every node gets the same score (all ties). Records the rows it scored."""

    name: ClassVar[str] = "Flat"

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.seen: list[list[str]] = []

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores:
        self.seen.append(table.node_names(rows))
        return np.full(len(rows), 50, dtype=np.int64)


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        assert self.handle.client is not None
        try:
            await self.handle.client.bind(pod, node_name)
        except RuntimeError as e:
            return Status.error(str(e))
        return SUCCESS


class InMemoryClient:
    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.fail_next = 0

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("apiserver said no")
        self.bound[pod.name] = node_name


class Recorder(SchedulerObserver):
    def __init__(self) -> None:
        self.failures: list[tuple[str, ScheduleFailure]] = []
        self.results: list[tuple[str, ScheduleResult]] = []
        self.bindings: list[tuple[str, str]] = []

    def scheduled(self, pod: PodInfo, profile: str, result: ScheduleResult) -> None:
        self.results.append((pod.name, result))

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.failures.append((pod.name, failure))

    def bound(self, pod: PodInfo, profile: str, node_name: str) -> None:
        self.bindings.append((pod.name, node_name))


CALLS: list[str] = []


class ReserveA(ReservePlugin):
    name: ClassVar[str] = "ReserveA"

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        CALLS.append(f"reserve:{self.name}:{node_name}")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        CALLS.append(f"unreserve:{self.name}:{node_name}")


class ReserveB(ReserveA):
    name: ClassVar[str] = "ReserveB"


class RejectReserve(ReserveA):
    name: ClassVar[str] = "RejectReserve"

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        CALLS.append(f"reserve:{self.name}:{node_name}")
        return Status.unschedulable("volume not bindable")


class RejectPermit(PermitPlugin):
    name: ClassVar[str] = "RejectPermit"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status.unschedulable("quota exhausted"), 0.0


class PostFilterSpy(PostFilterPlugin):
    name: ClassVar[str] = "PostFilterSpy"

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.calls: list[tuple[str, int]] = []

    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        self.calls.append((pod.name, len(diagnosis.node_to_status)))
        return None, Status.unschedulable("preemption: not eligible")


ALL = [
    PrioritySort,
    CpuFit,
    BadLabel,
    ByName,
    Flat,
    Binder,
    ReserveA,
    ReserveB,
    RejectReserve,
    RejectPermit,
    PostFilterSpy,
]


def build(
    nodes: Sequence[dict[str, Any]] = (),
    extra: Sequence[type] = (),
    seed: int = 1,
    **points: Any,
) -> tuple[Scheduler, FakeClock, InMemoryClient, Recorder]:
    """A scheduler with PrioritySort + Binder plus the given points (e.g. filter=["CpuFit"])."""
    args = points.pop("args", {})
    weights = points.pop("weights", {})
    pct = points.pop("pct", None)
    plugins = {"queueSort": ["PrioritySort"], "bind": ["Binder"]}
    plugins.update(
        {
            k.replace("pre_filter", "preFilter")
            .replace("post_filter", "postFilter")
            .replace("pre_score", "preScore"): v
            for k, v in points.items()
        }
    )
    registry = Registry([*ALL, *extra])
    clock = FakeClock(100.0)
    client = InMemoryClient()
    rec = Recorder()
    sched = Scheduler.build(
        [StaticProfile(plugins, score_weights=weights, plugin_args=args, percentage_of_nodes_to_score=pct)],
        registry,
        clock,
        client=client,
        seed=seed,
        observer=rec,
    )
    for n in nodes:
        sched.on_node_add_or_update(n)
    return sched, clock, client, rec


async def drain(sched: Scheduler) -> None:
    """Run the binding cycles in flight; a Permit wait nobody ends fails the test instead of hanging it."""
    await asyncio.wait_for(sched.drain(), timeout=5)


def fwk(sched: Scheduler) -> Any:
    return sched.frameworks["default-scheduler"]


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


# ---------------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------------


async def test_pod_lands_on_the_only_feasible_node_and_is_bound() -> None:
    sched, _, client, rec = build(
        [node("small", cpu="1"), node("bad", cpu="8", labels={"bad": "true"}), node("ok", cpu="4")],
        filter=["BadLabel", "CpuFit"],
    )
    sched.on_pod_add(pod_info("p", cpu="2"))
    assert sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p": "ok"}
    assert rec.bindings == [("p", "ok")]
    # The assumed pod holds the node's CPU while the informer has not confirmed it yet.
    row = sched.cache.table.row_of("ok")
    assert sched.cache.table.requested[row, 0] == 2000
    assert not sched.schedule_one()  # queue empty


async def test_assumed_pod_resources_are_seen_by_the_next_pod() -> None:
    sched, _, client, _ = build(
        [node("a", cpu="2"), node("b", cpu="2")],
        filter=["CpuFit"],
        score=["ByName"],
        args={"ByName": {"a": 90, "b": 10}},
    )
    sched.on_pod_add(pod_info("p1", cpu="2"))
    sched.on_pod_add(pod_info("p2", cpu="2"))
    assert sched.schedule_one() and sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p1": "a", "p2": "b"}


async def test_queue_sort_decides_which_pod_is_scheduled_first() -> None:
    sched, clock, client, _ = build([node("only", cpu="1")], filter=["CpuFit"])
    sched.on_pod_add(pod_info("low", cpu="1", priority=1))
    clock.advance(1)
    sched.on_pod_add(pod_info("high", cpu="1", priority=10))
    sched.schedule_one()
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {"high": "only"}


# ---------------------------------------------------------------------------------------------
# Failure messages
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            ["true", "", ""],
            "0/3 nodes are available: 1 node(s) had untolerated taint {bad: true}, 2 Insufficient cpu.",
        ),
        (
            ["true", "true", ""],
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {bad: true}.",
        ),
    ],
)
async def test_fit_error_message_is_a_sorted_histogram(labels: list[str], expected: str) -> None:
    nodes = [node(f"n{i}", cpu="1", labels={"bad": v} if v else None) for i, v in enumerate(labels)]
    sched, _, client, rec = build(nodes, filter=["BadLabel", "CpuFit"])
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {}
    [(name, failure)] = rec.failures
    assert name == "p"
    assert failure.message == expected
    assert failure.status.is_rejected
    assert failure.diagnosis.unschedulable_plugins == {"BadLabel", "CpuFit"}


class NotReady(PreFilterPlugin):
    name: ClassVar[str] = "NotReady"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, Status.unschedulable("pod has unbound immediate PersistentVolumeClaims")


async def test_pre_filter_rejection_message_format_and_requeue() -> None:
    sched, _, _, rec = build(
        [node("a"), node("b"), node("c")], extra=[NotReady], pre_filter=["NotReady"], filter=["CpuFit"]
    )
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    # The PreFilter message is printed once, not once per node.
    assert failure.message == "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    assert failure.status.plugin == "NotReady"
    assert sched.queue.counts()["unschedulable"] == 1


class Boom(PreFilterPlugin):
    name: ClassVar[str] = "Boom"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, Status.error("etcd on fire")


async def test_pre_filter_error_backs_off_and_names_the_plugin() -> None:
    sched, _, _, rec = build([node("a")], extra=[Boom], pre_filter=["Boom"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert failure.status.is_error
    assert "Boom" in failure.message and "etcd on fire" in failure.message
    assert sched.queue.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


async def test_no_nodes_message() -> None:
    sched, _, _, rec = build([], filter=["CpuFit"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert failure.message == "no nodes available to schedule pods"


# ---------------------------------------------------------------------------------------------
# PostFilter
# ---------------------------------------------------------------------------------------------


async def test_post_filter_runs_only_when_nothing_fits_and_its_message_is_appended() -> None:
    sched, _, client, rec = build(
        [node("a", cpu="1"), node("b", cpu="1")], filter=["CpuFit"], post_filter=["PostFilterSpy"]
    )
    spy = fwk(sched).plugins["PostFilterSpy"]
    sched.on_pod_add(pod_info("fits", cpu="1"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {"fits": "a"} or client.bound == {"fits": "b"}
    assert spy.calls == []

    sched.on_pod_add(pod_info("big", cpu="4"))
    sched.schedule_one()
    assert spy.calls == [("big", 2)]
    [(_, failure)] = rec.failures
    # Upstream appends the PostFilter message as it is, with no period of its own.
    assert failure.message == "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible"


async def test_post_filter_not_run_on_internal_error() -> None:
    sched, _, _, rec = build([node("a")], extra=[Boom], pre_filter=["Boom"], post_filter=["PostFilterSpy"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    assert fwk(sched).plugins["PostFilterSpy"].calls == []
    assert rec.failures[0][1].status.is_error


# ---------------------------------------------------------------------------------------------
# Reserve / Unreserve
# ---------------------------------------------------------------------------------------------


async def test_reserve_is_called_and_unreserve_not_on_success() -> None:
    sched, _, client, _ = build([node("a")], reserve=["ReserveA", "ReserveB"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p": "a"}
    assert CALLS == ["reserve:ReserveA:a", "reserve:ReserveB:a"]


async def test_permit_rejection_unreserves_in_reverse_order_and_frees_the_node() -> None:
    sched, _, client, rec = build(
        [node("a", cpu="2")], filter=["CpuFit"], reserve=["ReserveA", "ReserveB"], permit=["RejectPermit"]
    )
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {}
    assert CALLS == ["reserve:ReserveA:a", "reserve:ReserveB:a", "unreserve:ReserveB:a", "unreserve:ReserveA:a"]
    table = sched.cache.table
    assert table.requested[table.row_of("a"), 0] == 0
    assert not sched.cache.assumed
    [(_, failure)] = rec.failures
    assert failure.message == "0/1 nodes are available: 1 quota exhausted."
    # Rejected by a plugin (registered for every event): waits in unschedulable.
    assert sched.queue.counts()["unschedulable"] == 1


async def test_reserve_rejection_unreserves_every_plugin_including_the_failing_one() -> None:
    sched, _, _, rec = build([node("a")], reserve=["ReserveA", "RejectReserve", "ReserveB"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert CALLS == [
        "reserve:ReserveA:a",
        "reserve:RejectReserve:a",
        "unreserve:ReserveB:a",
        "unreserve:RejectReserve:a",
        "unreserve:ReserveA:a",
    ]
    assert rec.failures[0][1].message == "0/1 nodes are available: 1 volume not bindable."
    assert not sched.cache.assumed
    assert len(sched.cache.table.pods[sched.cache.table.row_of("a")]) == 0


async def test_bind_failure_unreserves_once_forgets_and_backs_off() -> None:
    sched, clock, client, rec = build([node("a", cpu="2")], filter=["CpuFit"], reserve=["ReserveA", "ReserveB"])
    client.fail_next = 1
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {}
    assert CALLS.count("unreserve:ReserveA:a") == 1 and CALLS.count("unreserve:ReserveB:a") == 1
    assert CALLS[-2:] == ["unreserve:ReserveB:a", "unreserve:ReserveA:a"]
    table = sched.cache.table
    assert table.requested[table.row_of("a"), 0] == 0
    assert not sched.cache.assumed
    [(_, failure)] = rec.failures
    assert failure.status.is_error and "apiserver said no" in failure.message
    assert sched.queue.counts()["backoff"] == 1
    # Backoff of the first attempt is 1 s in virtual time.
    assert sched.next_wakeup(include_unschedulable=False) == pytest.approx(clock.now() + 1.0)
    clock.advance(0.5)
    sched.tick()
    assert not sched.schedule_one()
    clock.advance(0.5)
    sched.tick()
    assert sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p": "a"}


# ---------------------------------------------------------------------------------------------
# Scoring, weights, ties
# ---------------------------------------------------------------------------------------------


class Spread(ScorePlugin):
    name: ClassVar[str] = "Spread"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return {"a": 10, "b": 40}.get(node.name, 0), SUCCESS


async def test_weights_multiply_scores() -> None:
    # ByName prefers a by 30 points; Spread prefers b by 30. The weight decides.
    nodes = [node("a"), node("b")]
    for weight, winner in ((1, None), (3, "a")):
        sched, _, client, rec = build(
            nodes,
            extra=[Spread],
            score=["ByName", "Spread"],
            args={"ByName": {"a": 40, "b": 10}},
            weights={"ByName": weight},
        )
        sched.on_pod_add(pod_info("p"))
        sched.schedule_one()
        await drain(sched)
        [(_, result)] = rec.results
        assert result.scored is not None
        totals = dict(zip(sched.cache.table.node_names(result.scored.rows), result.scored.totals.tolist(), strict=True))
        assert totals == {"a": 40 * weight + 10, "b": 10 * weight + 40}
        if winner:
            assert client.bound == {"p": winner}


class OutOfRange(ScorePlugin):
    name: ClassVar[str] = "OutOfRange"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 101, SUCCESS


async def test_out_of_range_score_is_an_error_and_the_pod_backs_off() -> None:
    sched, _, client, rec = build([node("a"), node("b")], extra=[OutOfRange], score=["OutOfRange"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {}
    [(_, failure)] = rec.failures
    assert failure.status.code == Code.ERROR
    assert "invalid score 101" in failure.message
    assert sched.queue.counts()["backoff"] == 1


async def test_out_of_range_score_message_matches_upstream() -> None:
    sched, _, _, rec = build([node("a"), node("b")], extra=[OutOfRange], score=["OutOfRange"])
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert failure.status.message == (
        'plugin "OutOfRange" returns an invalid score 101, it should in the range of [0, 100] after normalizing'
    )


async def _tie_picks(seed: int) -> list[str]:
    sched, _, client, _ = build([node(f"n{i}") for i in range(6)], score=["Flat"], seed=seed)
    out = []
    for i in range(12):
        sched.on_pod_add(pod_info(f"p{i}"))
        sched.schedule_one()
        await drain(sched)
        out.append(client.bound[f"p{i}"])
    return out


async def test_ties_are_broken_deterministically_for_a_seed_and_vary_across_seeds() -> None:
    a1 = await _tie_picks(1)
    assert a1 == await _tie_picks(1)
    assert len(set(a1)) > 1  # ties really are broken randomly, not always the first node
    others = [await _tie_picks(s) for s in (2, 3, 4)]
    assert any(o != a1 for o in others)


# ---------------------------------------------------------------------------------------------
# percentageOfNodesToScore and the rotating start index
# ---------------------------------------------------------------------------------------------


async def test_only_num_feasible_nodes_are_scored_and_start_index_rotates() -> None:
    # 200 nodes, adaptive percentage: 50 - 200/125 = 49 % = 98 → at least 100 nodes.
    sched, _, _, rec = build([node(f"n{i:03d}") for i in range(200)], filter=["CpuFit"], score=["Flat"])
    flat = fwk(sched).plugins["Flat"]
    for i in range(3):
        sched.on_pod_add(pod_info(f"p{i}"))
        sched.schedule_one()
    await drain(sched)
    assert [len(s) for s in flat.seen] == [100, 100, 100]
    assert flat.seen[0] == [f"n{i:03d}" for i in range(100)]
    assert flat.seen[1] == [f"n{i:03d}" for i in range(100, 200)]
    assert flat.seen[2] == flat.seen[0]
    assert [r.feasible_nodes for _, r in rec.results] == [100, 100, 100]


async def test_percentage_100_evaluates_every_node() -> None:
    sched, _, _, _ = build([node(f"n{i:03d}") for i in range(300)], filter=["CpuFit"], score=["Flat"], pct=100)
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert len(fwk(sched).plugins["Flat"].seen[0]) == 300


async def test_rotation_resumes_after_the_last_feasible_node_kept() -> None:
    # 200 nodes, the first 50 too small: the first cycle keeps n050..n149 and the next starts at n150.
    nodes = [node(f"n{i:03d}", cpu="1" if i < 50 else "8") for i in range(200)]
    sched, _, _, _ = build(nodes, filter=["CpuFit"], score=["Flat"])
    flat = fwk(sched).plugins["Flat"]
    sched.on_pod_add(pod_info("p0", cpu="2"))
    sched.schedule_one()
    sched.on_pod_add(pod_info("p1", cpu="2"))
    sched.schedule_one()
    await drain(sched)
    assert flat.seen[0] == [f"n{i:03d}" for i in range(50, 150)]
    assert flat.seen[1][:50] == [f"n{i:03d}" for i in range(150, 200)]
    assert flat.seen[1][50:] == [f"n{i:03d}" for i in range(50, 100)]


# ---------------------------------------------------------------------------------------------
# Skip
# ---------------------------------------------------------------------------------------------


class SkippingFit(PreFilterPlugin, FilterPlugin):
    """PreFilter returns Skip for pods without the label filter=yes; its Filter rejects everything."""

    name: ClassVar[str] = "SkippingFit"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, (SUCCESS if pod.labels.get("filter") == "yes" else Status.skip())

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status.unschedulable("SkippingFit rejected")


async def test_pre_filter_skip_skips_that_plugins_filter() -> None:
    sched, _, client, rec = build([node("a")], extra=[SkippingFit], pre_filter=["SkippingFit"], filter=["SkippingFit"])
    sched.on_pod_add(pod_info("skipped"))
    sched.on_pod_add(pod_info("filtered", labels={"filter": "yes"}))
    sched.schedule_one()
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {"skipped": "a"}
    assert [(n, f.message) for n, f in rec.failures] == [
        ("filtered", "0/1 nodes are available: 1 SkippingFit rejected.")
    ]


class SkippingScore(PreScorePlugin, ScorePlugin):
    name: ClassVar[str] = "SkippingScore"

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.scored = 0

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        return Status.skip()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        self.scored += 1
        return 100 if node.name == "b" else 0, SUCCESS


async def test_pre_score_skip_skips_score() -> None:
    sched, _, _, rec = build(
        [node("a"), node("b")],
        extra=[SkippingScore],
        pre_score=["SkippingScore"],
        score=["SkippingScore", "ByName"],
        args={"ByName": {"a": 10}},
    )
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert fwk(sched).plugins["SkippingScore"].scored == 0
    [(_, result)] = rec.results
    assert result.node_name == "a"
    assert result.scored is not None and set(result.scored.by_plugin) == {"ByName"}


# ---------------------------------------------------------------------------------------------
# Cluster events through the scheduler
# ---------------------------------------------------------------------------------------------


async def test_deleted_pending_pod_leaves_the_queue() -> None:
    sched, _, client, _ = build([node("a")])
    p = pod_info("p")
    sched.on_pod_add(p)
    assert p.uid in sched.queue
    sched.on_pod_delete(p.uid)
    assert p.uid not in sched.queue
    assert not sched.schedule_one()
    assert client.bound == {}


async def test_pod_bound_by_informer_is_accounted_and_dequeued() -> None:
    sched, _, _, _ = build([node("a", cpu="4")], filter=["CpuFit"])
    raw = pod("p", cpu="1500m")
    sched.on_pod_add(PodInfo.from_raw(raw))
    bound = PodInfo.from_raw({**raw, "spec": {**raw["spec"], "nodeName": "a"}})
    sched.on_pod_update(bound)
    assert bound.uid not in sched.queue
    table = sched.cache.table
    assert table.requested[table.row_of("a"), 0] == 1500
    assert table.pod(bound.uid) is not None


async def test_node_add_retries_a_pod_rejected_for_cpu() -> None:
    sched, _, client, _ = build([node("small", cpu="1")], filter=["CpuFit"])
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    assert sched.queue.counts()["unschedulable"] == 1
    sched.on_node_add_or_update(node("big", cpu="4"))
    # The pod's backoff (1 s after the failure) has not expired: it waits in backoff.
    assert sched.queue.counts()["backoff"] == 1
    sched.clock.advance(1)  # type: ignore[attr-defined]
    sched.tick()
    assert sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p": "big"}


async def test_unrelated_event_does_not_retry_the_pod() -> None:
    sched, _, _, _ = build([node("small", cpu="1")], filter=["CpuFit"])
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    # A label change: CpuFit registered Node/Add and allocatable updates only.
    sched.on_node_add_or_update(node("small", cpu="1", labels={"zone": "z1"}))
    assert sched.queue.counts()["unschedulable"] == 1


# ---------------------------------------------------------------------------------------------
# PreFilter narrowing (PreFilterResult)
# ---------------------------------------------------------------------------------------------


class Narrow(PreFilterPlugin):
    """Narrows candidates to the node names given in args."""

    name: ClassVar[str] = "Narrow"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return PreFilterResult(frozenset(self.args)), SUCCESS

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(NODE, ActionType.ADD),)


class Narrow2(Narrow):
    name: ClassVar[str] = "Narrow2"


class Passive(PreFilterPlugin):
    """A PreFilter plugin that computes state but does not narrow the nodes."""

    name: ClassVar[str] = "Passive"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS


async def test_pre_filter_result_restricts_candidates() -> None:
    sched, _, client, _ = build(
        [node("a"), node("b"), node("c")],
        extra=[Narrow],
        pre_filter=["Narrow"],
        score=["ByName"],
        args={"Narrow": ["b", "c"], "ByName": {"a": 100, "c": 5}},
    )
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    await drain(sched)
    assert client.bound == {"p": "c"}


async def test_pre_filter_result_message_names_the_narrowing_plugin() -> None:
    sched, _, _, rec = build(
        [node("a", cpu="1"), node("b"), node("c")],
        extra=[Narrow],
        pre_filter=["Narrow"],
        filter=["CpuFit"],
        args={"Narrow": ["a"]},
    )
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert (
        failure.message == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [Narrow]."
    )


async def test_pre_filter_result_message_does_not_name_non_narrowing_plugins() -> None:
    sched, _, _, rec = build(
        [node("a", cpu="1"), node("b"), node("c")],
        extra=[Narrow, Passive],
        pre_filter=["Narrow", "Passive"],
        filter=["CpuFit"],
        args={"Narrow": ["a"]},
    )
    sched.on_pod_add(pod_info("p", cpu="2"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert (
        failure.message == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [Narrow]."
    )


async def test_pod_narrowed_to_a_missing_node_waits_for_node_add() -> None:
    sched, _, _, rec = build(
        [node("a"), node("b")], extra=[Narrow], pre_filter=["Narrow"], filter=["CpuFit"], args={"Narrow": ["later"]}
    )
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert failure.message == "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [Narrow]."
    # Upstream: diagnosis.UnschedulablePlugins = {Narrow}; the pod waits for an event Narrow registered.
    assert failure.diagnosis.unschedulable_plugins == {"Narrow"}
    assert sched.queue.counts()["unschedulable"] == 1


async def test_disjoint_pre_filter_results_name_all_narrowing_plugins() -> None:
    sched, _, _, rec = build(
        [node("a"), node("b")],
        extra=[Narrow, Narrow2],
        pre_filter=["Narrow", "Narrow2"],
        args={"Narrow": ["a"], "Narrow2": ["b"]},
    )
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert (
        failure.message == "0/2 nodes are available: node(s) didn't satisfy plugin(s) [Narrow Narrow2] simultaneously."
    )
    assert failure.diagnosis.unschedulable_plugins == {"Narrow", "Narrow2"}


async def test_single_narrowing_plugin_with_empty_result_is_unresolvable() -> None:
    sched, _, client, rec = build([node("a"), node("b")], extra=[Narrow], pre_filter=["Narrow"], args={"Narrow": []})
    sched.on_pod_add(pod_info("p"))
    sched.schedule_one()
    [(_, failure)] = rec.failures
    assert failure.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert failure.message.startswith("0/2 nodes are available: node(s) didn't satisfy plugin")
    assert client.bound == {}


async def test_score_weights_default_to_one_for_unlisted_plugins() -> None:
    sched, _, _, _ = build([node("a")], score=["ByName", "Flat"], weights={"ByName": 5})
    assert fwk(sched).score_weights == {"ByName": 5, "Flat": 1}
