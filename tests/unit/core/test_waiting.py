"""Permit: pods waiting at Permit (framework/waiting.py) and how the scheduler allows, rejects and
times them out in virtual time."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import BindPlugin, FilterPlugin, PermitPlugin, QueueSortPlugin, ReservePlugin
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import QueuedPodInfo, Verdicts
from kubesched.framework.waiting import MAX_PERMIT_TIMEOUT, WaitingPod, WaitingPods
from kubesched.scheduler import ScheduleFailure, Scheduler, SchedulerObserver
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows
from kubesched.testing import StaticProfile, node, pod_info


class Sort(QueueSortPlugin):
    name: ClassVar[str] = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return (-a.pod.priority, a.timestamp) < (-b.pod.priority, b.timestamp)


class CpuFit(FilterPlugin):
    name: ClassVar[str] = "CpuFit"

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        return Verdicts.from_mask(
            table.free(rows)[:, 0] >= pod.requests.milli_cpu, Status.unschedulable("Insufficient cpu")
        )


class Gate(PermitPlugin):
    """Permit plugin that asks every pod to wait ``args`` seconds (default 10)."""

    name: ClassVar[str] = "Gate"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status.wait(), float(self.args if self.args is not None else 10)


class Gate2(Gate):
    name: ClassVar[str] = "Gate2"


class Counter(ReservePlugin):
    name: ClassVar[str] = "Counter"

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.reserved = 0
        self.unreserved = 0

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.reserved += 1
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.unreserved += 1


class Binder(BindPlugin):
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        assert self.handle.client is not None
        await self.handle.client.bind(pod, node_name)
        return SUCCESS


class Client:
    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        self.bound[pod.name] = node_name


class Failures(SchedulerObserver):
    def __init__(self) -> None:
        self.failures: list[ScheduleFailure] = []

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        self.failures.append(failure)


def build(
    permit: list[str], args: dict[str, Any] | None = None, start: float = 0.0
) -> tuple[Scheduler, FakeClock, Client, Failures]:
    plugins = {
        "queueSort": ["Sort"],
        "filter": ["CpuFit"],
        "reserve": ["Counter"],
        "permit": permit,
        "bind": ["Binder"],
    }
    clock = FakeClock(start)
    client = Client()
    obs = Failures()
    sched = Scheduler.build(
        [StaticProfile(plugins, plugin_args=args or {})],
        Registry([Sort, CpuFit, Gate, Gate2, Counter, Binder]),
        clock,
        client=client,
        seed=1,
        observer=obs,
    )
    sched.on_node_add_or_update(node("a", cpu="2"))
    return sched, clock, client, obs


async def drain(sched: Scheduler) -> None:
    """Run the binding cycles in flight; a Permit wait nobody ends fails the test instead of hanging it."""
    await asyncio.wait_for(sched.drain(), timeout=5)


def counter(sched: Scheduler) -> Counter:
    plugin = sched.frameworks["default-scheduler"].plugins["Counter"]
    assert isinstance(plugin, Counter)
    return plugin


def requested_cpu(sched: Scheduler, name: str = "a") -> int:
    t = sched.cache.table
    return int(t.requested[t.row_of(name), 0])


# ---------------------------------------------------------------------------------------------
# Through the scheduler
# ---------------------------------------------------------------------------------------------


async def test_wait_then_allow_binds_the_pod() -> None:
    sched, _, client, _ = build(["Gate"])
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)  # the binding cycle starts and blocks on Permit
    assert client.bound == {}
    wp = sched.waiting_pods.get(p.uid)
    assert wp is not None and wp.node_name == "a" and wp.pending_plugins == ["Gate"]
    # While waiting, the pod's resources are held.
    assert requested_cpu(sched) == 1000
    wp.allow("Gate")
    await drain(sched)
    assert client.bound == {"p": "a"}
    assert sched.waiting_pods.get(p.uid) is None
    assert counter(sched).unreserved == 0


async def test_pod_waits_for_every_plugin_that_asked() -> None:
    sched, _, client, _ = build(["Gate", "Gate2"])
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    wp = sched.waiting_pods.get(p.uid)
    assert wp is not None and wp.pending_plugins == ["Gate", "Gate2"]
    wp.allow("Gate")
    await asyncio.sleep(0)
    assert client.bound == {} and not wp.decided
    wp.allow("Gate2")
    await drain(sched)
    assert client.bound == {"p": "a"}


async def test_allow_before_the_binding_cycle_starts_still_binds() -> None:
    sched, _, client, _ = build(["Gate"])
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    wp = sched.waiting_pods.get(p.uid)
    assert wp is not None
    wp.allow("Gate")
    await drain(sched)
    assert client.bound == {"p": "a"}


async def test_reject_unreserves_frees_resources_and_reports_the_reason() -> None:
    sched, _, client, obs = build(["Gate"])
    p = pod_info("p", cpu="2")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    assert sched.waiting_pods.reject(p.uid, "Gate", "gang is incomplete")
    await drain(sched)
    assert client.bound == {}
    assert counter(sched).unreserved == 1
    assert requested_cpu(sched) == 0 and not sched.cache.assumed
    [failure] = obs.failures
    assert failure.status.is_rejected and failure.status.plugin == "Gate"
    assert failure.message == "0/1 nodes are available: 1 gang is incomplete."
    assert p.uid in sched.queue


async def test_waiting_pod_rejected_because_its_node_was_deleted_still_says_why() -> None:
    """The live shell rejects pods waiting on a node that is deleted; the node has no row any more,
    and the message used to come out empty ("0/1 nodes are available:"), seen in the chaos suite."""
    sched, _, client, obs = build(["Gate"])
    p = pod_info("p", cpu="2")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    sched.waiting_pods.reject(p.uid, "", "node a was deleted")
    sched.on_node_delete("a")
    await drain(sched)
    assert client.bound == {}
    [failure] = obs.failures
    assert failure.message == "0/1 nodes are available: 1 node a was deleted."


async def test_rejected_waiting_pod_goes_to_unschedulable() -> None:
    sched, _, _, _ = build(["Gate"])
    p = pod_info("p", cpu="2")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    sched.waiting_pods.reject(p.uid, "Gate", "gang is incomplete")
    await drain(sched)
    # Upstream handleBindingCycleError defers the move (excluding the pod itself) for rejections.
    assert sched.queue.counts()["unschedulable"] == 1


async def test_timeout_in_virtual_time_rejects_with_upstream_message() -> None:
    sched, clock, client, obs = build(["Gate"], start=50.0)
    p = pod_info("p", cpu="2")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    assert sched.next_wakeup(include_unschedulable=False) == 60.0
    clock.advance(9.9)
    sched.tick()
    await asyncio.sleep(0)
    assert sched.binds_in_flight == 1 and not obs.failures
    clock.advance(0.1)
    sched.tick()
    await drain(sched)
    assert client.bound == {}
    [failure] = obs.failures
    assert failure.status.reasons == ("rejected due to timeout after waiting 10s at plugin Gate",)
    assert failure.status.plugin == "Gate"
    assert counter(sched).unreserved == 1
    assert requested_cpu(sched) == 0
    assert len(sched.waiting_pods) == 0


async def test_timeout_longer_than_15_minutes_is_capped_in_time_and_message() -> None:
    sched, clock, _, obs = build(["Gate"], args={"Gate": 3600})
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    assert sched.next_wakeup(include_unschedulable=False) == MAX_PERMIT_TIMEOUT
    clock.advance(MAX_PERMIT_TIMEOUT)
    sched.tick()
    await drain(sched)
    [failure] = obs.failures
    assert failure.status.reasons == ("rejected due to timeout after waiting 15m0s at plugin Gate",)


async def test_next_wakeup_reports_a_deadline_at_time_zero() -> None:
    sched, _, _, _ = build(["Gate"], args={"Gate": 0}, start=0.0)
    sched.on_pod_add(pod_info("p", cpu="1"))
    sched.schedule_one()
    await asyncio.sleep(0)
    assert sched.waiting_pods.next_deadline() == 0.0
    assert sched.next_wakeup() == 0.0


async def test_deleting_a_waiting_pod_rejects_it_without_requeue() -> None:
    sched, _, client, _ = build(["Gate"])
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    sched.on_pod_delete(p.uid)
    await drain(sched)
    assert client.bound == {}
    assert p.uid not in sched.queue
    assert requested_cpu(sched) == 0
    assert len(sched.waiting_pods) == 0


# ---------------------------------------------------------------------------------------------
# WaitingPod / WaitingPods units
# ---------------------------------------------------------------------------------------------


def test_waiting_pod_deadlines_and_pending_plugins() -> None:
    wp = WaitingPod(pod_info("p"), "n1", {"B": 5.0, "A": 20.0}, now=100.0)
    assert wp.pending_plugins == ["A", "B"]
    assert wp.deadlines == {"A": 120.0, "B": 105.0}
    assert wp.next_deadline() == 105.0
    wp.allow("B")
    assert wp.next_deadline() == 120.0 and not wp.decided
    wp.allow("A")
    assert wp.decided and wp.next_deadline() is None


async def test_reject_after_allow_is_ignored_and_first_decision_wins() -> None:
    wp = WaitingPod(pod_info("p"), "n1", {"A": 5.0}, now=0.0)
    wp.allow("A")
    wp.reject("A", "too late")
    assert (await wp.wait()).is_success

    wp2 = WaitingPod(pod_info("q"), "n1", {"A": 5.0, "B": 5.0}, now=0.0)
    wp2.reject("B", "no")
    wp2.allow("A")
    st = await wp2.wait()
    assert st.code == Code.UNSCHEDULABLE and st.reasons == ("no",) and st.plugin == "B"


async def test_waiter_is_woken_by_a_later_decision() -> None:
    wp = WaitingPod(pod_info("p"), "n1", {"A": 5.0}, now=0.0)
    task = asyncio.ensure_future(wp.wait())
    await asyncio.sleep(0)
    assert not task.done()
    wp.reject("A", "nope")
    assert (await task).reasons == ("nope",)


def test_waiting_pods_expire_only_past_deadlines() -> None:
    pods = WaitingPods()
    a, b = pod_info("a"), pod_info("b")
    pods.add(WaitingPod(a, "n1", {"P": 10.0}, now=0.0))
    pods.add(WaitingPod(b, "n1", {"P": 1.5}, now=0.0))
    assert pods.next_deadline() == 1.5
    pods.expire(1.0)
    assert not any(wp.decided for wp in pods)
    pods.expire(1.5)
    wb = pods.get(b.uid)
    assert wb is not None and wb.decided
    assert wb._result is not None
    assert wb._result.reasons == ("rejected due to timeout after waiting 1.5s at plugin P",)
    assert pods.next_deadline() == 10.0
    pods.remove(b.uid)
    assert len(pods) == 1 and pods.reject(b.uid, "P", "x") is False


def test_expire_blames_the_plugin_whose_wait_ran_out_first() -> None:
    pods = WaitingPods()
    p = pod_info("p")
    pods.add(WaitingPod(p, "n1", {"Alpha": 20.0, "Beta": 10.0}, now=0.0))
    pods.expire(25.0)
    wp = pods.get(p.uid)
    assert wp is not None and wp._result is not None
    assert wp._result.reasons == ("rejected due to timeout after waiting 10s at plugin Beta",)


@pytest.mark.parametrize(("seconds", "text"), [(10, "10s"), (1.5, "1.5s"), (60, "1m0s"), (90, "1m30s"), (900, "15m0s")])
def test_timeout_message_uses_go_duration_format(seconds: float, text: str) -> None:
    pods = WaitingPods()
    p = pod_info("p")
    pods.add(WaitingPod(p, "n1", {"P": seconds}, now=0.0))
    pods.expire(float(seconds))
    wp = pods.get(p.uid)
    assert wp is not None and wp._result is not None
    assert wp._result.reasons == (f"rejected due to timeout after waiting {text} at plugin P",)


async def test_update_of_a_pod_waiting_at_permit_does_not_queue_it_twice() -> None:
    sched, _, client, _ = build(["Gate"])
    p = pod_info("p", cpu="1")
    sched.on_pod_add(p)
    sched.schedule_one()
    await asyncio.sleep(0)
    sched.on_pod_update(PodInfo.from_raw(p.raw))  # an informer update of the still-unbound pod
    assert p.uid not in sched.queue
    wp = sched.waiting_pods.get(p.uid)
    assert wp is not None
    wp.allow("Gate")
    await drain(sched)
    assert client.bound == {"p": "a"}
    assert not sched.schedule_one()
