"""Event writer (rate limiting, series, condition patches), metrics wrapping and pod-update filtering."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from prometheus_client import generate_latest

from kubesched.api.timestamps import micro_time
from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.handle import Preemptor
from kubesched.kube.events import EventWriter, pod_scheduled_false_patch
from kubesched.live.cluster_feed import scheduling_relevant_update
from kubesched.live.health import parse_addr
from kubesched.live.metrics import SchedulerMetrics, instrument_framework
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod, pod_info


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        self.calls.append((method, path, body, kw.get("content_type")))
        return {}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


MSG = "0/3 nodes are available: 3 Insufficient cpu."


async def _writer(clock: Clock) -> tuple[EventWriter, FakeApi]:
    api = FakeApi()
    w = EventWriter(api, "kubesched-test", interval=30.0, now=clock)  # type: ignore[arg-type]
    w.start()
    return w, api


async def test_failed_writes_event_and_condition_then_rate_limits() -> None:
    clock = Clock()
    w, api = await _writer(clock)
    p = pod_info("stuck", cpu="100")
    for _ in range(5):
        w.failed(p, "my-scheduler", MSG, unschedulable=True)
    await w.flush(2)
    assert len(api.calls) == 2
    ev = next(c for c in api.calls if c[1].endswith("/events"))
    assert ev[0] == "POST" and ev[1] == "/apis/events.k8s.io/v1/namespaces/default/events"
    body = ev[2]
    assert body["reason"] == "FailedScheduling" and body["type"] == "Warning" and body["action"] == "Scheduling"
    assert body["note"] == MSG
    assert body["reportingController"] == "my-scheduler" and body["reportingInstance"] == "kubesched-test"
    assert body["regarding"]["kind"] == "Pod" and body["regarding"]["uid"] == p.uid
    st = next(c for c in api.calls if c[1].endswith("/status"))
    assert st[0] == "PATCH" and st[3] == "application/strategic-merge-patch+json"
    cond = st[2]["status"]["conditions"][0]
    assert cond["type"] == "PodScheduled" and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == MSG and "lastTransitionTime" in cond
    assert w.stats.suppressed == 4

    # Same message after the interval: the event's series is bumped, the condition rewritten
    # without moving lastTransitionTime.
    clock.t = 31.0
    w.failed(p, "my-scheduler", MSG, unschedulable=True)
    await w.flush(2)
    series = [c for c in api.calls[2:] if "/events/" in c[1]]
    assert len(series) == 1 and series[0][0] == "PATCH"
    assert series[0][2]["series"]["count"] == 2
    cond2 = next(c for c in api.calls[2:] if c[1].endswith("/status"))[2]["status"]["conditions"][0]
    assert "lastTransitionTime" not in cond2

    # A different message: a new event at once.
    w.failed(p, "my-scheduler", "0/4 nodes are available: 4 Insufficient cpu.", unschedulable=True)
    await w.flush(2)
    assert sum(1 for c in api.calls if c[0] == "POST") == 2
    await w.stop()


async def test_scheduled_event_matches_upstream() -> None:
    w, api = await _writer(Clock())
    p = pod_info("web", cpu="1", namespace="shop")
    w.scheduled(p, "node-7", "my-scheduler")
    await w.flush(2)
    (method, path, body, _), = api.calls
    assert (method, path) == ("POST", "/apis/events.k8s.io/v1/namespaces/shop/events")
    assert body["reason"] == "Scheduled" and body["type"] == "Normal" and body["action"] == "Binding"
    assert body["note"] == "Successfully assigned shop/web to node-7"
    assert body["metadata"]["name"].startswith("web.")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", body["eventTime"])
    await w.stop()


async def test_scheduler_error_reason_and_full_queue_drops() -> None:
    api = FakeApi()
    w = EventWriter(api, "x", max_queue=2)  # type: ignore[arg-type]  # not started: nothing drains
    w.failed(pod_info("a"), "s", "boom", unschedulable=False)
    w.failed(pod_info("b"), "s", "boom", unschedulable=False)
    assert w.stats.dropped == 2  # 4 writes, room for 2
    w.start()
    await w.flush(2)
    cond = next(c for c in api.calls if c[1].endswith("/status"))[2]["status"]["conditions"][0]
    assert cond["reason"] == "SchedulerError"
    await w.stop()


def test_condition_patch_keeps_transition_time_when_already_false() -> None:
    raw = pod("p")
    raw["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": "t0"}]}
    patch = pod_scheduled_false_patch(PodInfo.from_raw(raw), "Unschedulable", MSG)
    assert "lastTransitionTime" not in patch["status"]["conditions"][0]
    patch = pod_scheduled_false_patch(pod_info("q"), "Unschedulable", MSG)
    assert "lastTransitionTime" in patch["status"]["conditions"][0]


def test_micro_time_format() -> None:
    assert micro_time(0.5) == "1970-01-01T00:00:00.500000Z"


def test_status_only_updates_of_pending_pods_are_not_scheduling_relevant() -> None:
    old = pod("p", cpu="1")
    new = {**old, "metadata": {**old["metadata"], "resourceVersion": "99", "managedFields": [{}]}}
    new["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    assert not scheduling_relevant_update(old, new)
    labelled = {**new, "metadata": {**new["metadata"], "labels": {"a": "b"}}}
    assert scheduling_relevant_update(old, labelled)
    respec = {**old, "spec": {**old["spec"], "nodeSelector": {"x": "y"}}}
    assert scheduling_relevant_update(old, respec)
    bound = {**old, "spec": {**old["spec"], "nodeName": "n1"}}
    assert scheduling_relevant_update(old, bound)
    # kube-controller-manager created the pod's claim from its template: DynamicResources' gate lifts
    claimed = {**new, "status": {**new["status"],
                                 "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]}}
    assert scheduling_relevant_update(new, claimed)


def test_parse_addr() -> None:
    assert parse_addr("127.0.0.1:10251") == ("127.0.0.1", 10251)
    assert parse_addr(":8080") == ("0.0.0.0", 8080)
    assert parse_addr("[::1]:9") == ("::1", 9)
    with pytest.raises(ValueError):
        parse_addr("localhost")


async def test_instrumented_framework_schedules_the_same_and_records_upstream_metrics() -> None:
    registry = builtin_registry()
    config = load_config(None, registry)
    cluster = SimulatedCluster()
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, objects=cluster.kind)
    cluster.attach(sched)
    metrics = SchedulerMetrics()
    for fwk in sched.frameworks.values():
        instrument_framework(fwk, metrics)
    metrics.watch_queue(sched.queue)
    for i in range(3):
        cluster.add_node(node(f"n{i}", cpu="2"))
    cluster.add_pod(pod_info("fits", cpu="1"))
    cluster.add_pod(pod_info("too-big", cpu="64"))
    while sched.schedule_one():
        pass
    await sched.drain()
    assert next(p for p in cluster.pods.values() if p.name == "fits").node_name
    text = generate_latest(metrics.registry).decode()
    assert 'scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",' in text
    assert re.search(r'extension_point="Bind",profile="default-scheduler",status="Success"\} 1\.0', text)
    assert re.search(r'extension_point="Filter",profile="default-scheduler",status="Success"\} \d', text)
    assert 'scheduler_pending_pods{queue="unschedulable"} 1.0' in text
    metrics.attempt("scheduled", "default-scheduler", 0.002)
    text = generate_latest(metrics.registry).decode()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in text
    # OpportunisticBatching's counters, as kube-scheduler v1.37.1 counts them with its default
    # profile (measured in bench/openb.py): every pod past PreFilter asks for a hint and gets
    # none; every placed pod flushes the batch, unsignable (PodTopologySpread's system defaults).
    metrics.watch_plugins(sched.plugins())
    text = generate_latest(metrics.registry).decode()
    assert 'scheduler_batch_attempts_total{profile="default-scheduler",result="no_hint"} 2.0' in text
    assert 'scheduler_batch_cache_flushed_total{profile="default-scheduler",reason="pod_not_batchable"} 1.0' in text
    await asyncio.sleep(0)


class RefusingApi(FakeApi):
    """The apiserver refusing a nomination for a pod bound meanwhile (v1.37 validation)."""

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        from kubesched.kube.api import ApiError

        self.calls.append((method, path, body, kw.get("content_type")))
        if path.endswith("/status") and "nominatedNodeName" in (body or {}).get("status", {}):
            raise ApiError("PATCH", path, 422, {"reason": "Invalid", "message": 'Pod "p" is invalid: '
                           "status.nominatedNodeName: Forbidden: may not be set on pods that are already bound "
                           "to a node"})
        return {}


async def test_a_nomination_for_a_pod_bound_meanwhile_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    api = RefusingApi()
    w = EventWriter(api, "kubesched-test", interval=30.0, now=Clock())  # type: ignore[arg-type]
    w.start()
    w.nominated(pod_info("preemptor", cpu="1"), "node-1")
    await w.flush(2)
    assert len(api.calls) == 1  # tried once, not retried
    assert w.stats.errors == 0
    assert "write_failed" not in caplog.text
    await w.stop()


async def test_a_nomination_is_written_before_the_events_queued_ahead_of_it() -> None:
    """While a preemption burst queues thousands of Events, the preemptor's nominatedNodeName must
    not wait behind them (it would arrive after the bind, and nobody would see it)."""
    api = FakeApi()
    w = EventWriter(api, "kubesched-test", workers=1, now=Clock())  # type: ignore[arg-type]
    preemptor = pod_info("preemptor", cpu="1")
    for i in range(50):
        w.preempted(pod_info(f"victim-{i}"), Preemptor.of_pod(preemptor, "node-1"), "my-scheduler")
    w.nominated(preemptor, "node-1")
    w.nominated(pod_info("other"), "")  # a cleared nomination: same lane, in order
    w.start()
    await w.flush(2)
    assert [c[1].rsplit("/", 2)[-2:] for c in api.calls[:2]] == [["preemptor", "status"], ["other", "status"]]
    assert api.calls[0][2] == {"status": {"nominatedNodeName": "node-1"}}
    assert len(api.calls) == 52
    await w.stop()


def test_plugins_own_metrics_are_served_with_upstreams_names() -> None:
    """DynamicResources' binding-conditions metrics (kube-scheduler v1.37 metrics.go) on /metrics:
    nothing before a wait, then the counter and the histogram by profile, driver and outcome."""
    registry = builtin_registry()
    config = load_config(None, registry)
    cluster = SimulatedCluster()
    sched = Scheduler.build(config.profiles, registry, FakeClock(), client=cluster, objects=cluster.kind)
    metrics = SchedulerMetrics()
    metrics.watch_plugins(sched.plugins())
    assert "scheduler_dra_bindingconditions" not in generate_latest(metrics.registry).decode().replace(
        "# HELP scheduler_dra_bindingconditions", "").replace("# TYPE scheduler_dra_bindingconditions", "")
    dra = next(p for p in sched.plugins() if p.name == "DynamicResources")
    claim = {"status": {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0",
         "bindingConditions": ["Attached"]},
        {"request": "r", "driver": "nic.example.com", "pool": "p", "device": "nic-0"}]}}}}
    dra.binding_metrics.record("default-scheduler", [claim], "success", 0.3)  # type: ignore[attr-defined]
    text = generate_latest(metrics.registry).decode()
    assert ('scheduler_dra_bindingconditions_allocations_total{driver="gpu.example.com",profile="default-scheduler",'
            'status="success"} 1.0') in text
    assert "nic.example.com" not in text.split("scheduler_dra_bindingconditions_wait_duration_seconds")[0]
    for driver in ("gpu.example.com", "nic.example.com"):
        rest = 'profile="default-scheduler",status="success"'
        name = "scheduler_dra_bindingconditions_wait_duration_seconds"
        for le, n in (("0.2", 0), ("0.4", 1), ("+Inf", 1)):
            assert f'{name}_bucket{{driver="{driver}",le="{le}",{rest}}} {n}.0' in text
        assert f'{name}_count{{driver="{driver}",{rest}}} 1.0' in text


class SlowFirstApi(FakeApi):
    """The apiserver answering the first status patch of each object late (a slow connection),
    everything else at once; ``landed`` is the order in which patches were applied."""

    def __init__(self) -> None:
        super().__init__()
        self.landed: list[tuple[str, Any]] = []
        self._seen: set[str] = set()

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        self.calls.append((method, path, body, kw.get("content_type")))
        if method == "PATCH" and path not in self._seen:
            self._seen.add(path)
            await asyncio.sleep(0.05)
        self.landed.append((path, body))
        return {}


async def test_writes_to_one_object_land_in_the_order_they_were_queued() -> None:
    """With several workers, a PodGroup's False condition (its gang preempting) and the True
    written a moment later (the gang bound) must not land True first: the group would show
    False for good. Writes to other objects still go on meanwhile."""
    from kubesched.framework.objects import ObjectKind

    api = SlowFirstApi()
    w = EventWriter(api, "kubesched-test", workers=4, now=Clock())  # type: ignore[arg-type]
    w.start()
    kind = ObjectKind("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups")
    for status in ("False", "True"):
        w.object_status(kind, "ns1/pg", "pg-uid", {"conditions": [{"type": "PodGroupInitiallyScheduled",
                                                                    "status": status}]})
    p = pod_info("member", cpu="1")
    w.failed(p, "my-scheduler", MSG, unschedulable=True)
    w.failed(p, "my-scheduler", MSG.replace("3 Insufficient", "2 Insufficient"), unschedulable=True)
    assert await w.flush(2)
    group = [body["status"]["conditions"][0]["status"] for path, body in api.landed if "podgroups" in path]
    assert group == ["False", "True"]
    messages = [body["status"]["conditions"][0]["message"] for path, body in api.landed if "/pods/" in path]
    assert messages == [MSG, MSG.replace("3 Insufficient", "2 Insufficient")]
    assert w.stats.errors == 0
    await w.stop()


async def test_writes_waiting_behind_a_stuck_write_stay_within_the_queue_bound() -> None:
    """Writes to an object whose write hangs (an apiserver that does not answer) wait in order,
    but count against ``max_queue`` as queued ones do: beyond it they are dropped and counted,
    and a stop after its flush timeout counts what still waited as dropped (nothing left
    unfinished for a later flush to hang on)."""
    gate = asyncio.Event()
    done: list[int] = []

    async def stuck() -> None:
        await gate.wait()

    def quick(i: int) -> Any:
        async def write() -> None:
            done.append(i)
        return write

    w = EventWriter(FakeApi(), "kubesched-test", max_queue=10, workers=2, now=Clock())  # type: ignore[arg-type]
    w.start()
    w._put(stuck, "pod/u1")
    await asyncio.sleep(0)
    for i in range(100):
        w._put(quick(i), "pod/u1")
        await asyncio.sleep(0)
    assert w.pending == 10 and w.stats.dropped == 90
    await w.stop(flush_timeout=0.1)
    assert done == [] and w.stats.dropped == 100
    assert await w.flush(0.1)  # nothing unfinished
