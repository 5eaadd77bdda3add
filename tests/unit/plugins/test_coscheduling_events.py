"""Coscheduling's Events on PodGroups (gang-level failure and admission), their rate limit, and
the events.k8s.io/v1 object the live shell posts for one."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.config.load import load_config_text
from kubesched.framework.clock import FakeClock
from kubesched.framework.objects import ObjectEvent
from kubesched.kube.events import build_object_event
from kubesched.kube.status import StatusPublisher
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL, Coscheduling
from kubesched.plugins.coscheduling.events import REPEAT_SECONDS
from kubesched.plugins.coscheduling.podgroup import POD_GROUP_KIND
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod
from unit.plugins.gang_helpers import coscheduling_config, pod_group

CONFIG = coscheduling_config("gangs")


def members(group: str, n: int, cpu: str) -> list[dict[str, Any]]:
    return [pod(f"{group}-{i}", cpu=cpu, labels={POD_GROUP_LABEL: group}, scheduler_name="gangs") for i in range(n)]


def setup(groups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Scheduler, Coscheduling, FakeClock]:
    registry = builtin_registry()
    config = load_config_text(CONFIG, registry)
    cluster = SimulatedCluster()
    for g in groups:
        cluster.add_object("PodGroup", f"default/{g['metadata']['name']}", g)
    clock = FakeClock()
    sched = Scheduler.build(config.profiles, registry, clock, client=cluster, objects=cluster.kind, seed=0,
                            eager_binding=True)
    cluster.attach(sched)
    for n in range(2):
        cluster.add_node(node(f"n{n}", cpu="4", memory="8Gi"))
    for p in pods:
        cluster.add_pod(PodInfo.from_raw(p))
    plugin = sched.frameworks["gangs"].plugins["Coscheduling"]
    assert isinstance(plugin, Coscheduling)
    return sched, plugin, clock


def drain(sched: Scheduler) -> None:
    while sched.schedule_one():
        pass


def test_a_gang_that_cannot_fit_gets_one_warning_with_the_gang_level_reason_until_it_changes() -> None:
    async def run() -> None:
        sched, plugin, clock = setup([pod_group("big", 5), pod_group("small", 3)],
                                     [*members("big", 5, "2"), *members("small", 3, "1")])
        drain(sched)
        events = plugin.object_events()
        by_group = {(e.key, e.reason): e for e in events}
        big = by_group[("default/big", "FailedScheduling")]
        assert big.note == "1/5 members could not be placed: Insufficient cpu"
        assert (big.kind, big.uid, big.event_type, big.controller) == ("PodGroup", "pg-big", "Warning", "gangs")
        small = by_group[("default/small", "Scheduled")]
        assert (small.note, small.event_type) == ("minMember 3 reached: 3 member(s) placed", "Normal")
        assert len(events) == 2
        assert plugin.object_events() == []  # drained

        def retry() -> list[str]:
            sched.queue.flush(clock.now() + 301)  # the unschedulable flush
            drain(sched)
            return [e.note for e in plugin.object_events()]

        # Retried with the small gang placed: a new reason is a new event ...
        clock.advance(1)
        assert retry() == ["3/5 members could not be placed: Insufficient cpu"]
        # ... the same one within the repeat window is not repeated, after it it is.
        clock.advance(1)
        assert retry() == []
        clock.advance(REPEAT_SECONDS)
        assert retry() == ["3/5 members could not be placed: Insufficient cpu"]

    asyncio.run(run())


def test_object_event_is_an_events_k8s_io_event_regarding_the_pod_group() -> None:
    ev = ObjectEvent("PodGroup", "ml/train", "uid-1", "FailedScheduling",
                     "2/5 members could not be placed: Insufficient cpu", "Warning", "Scheduling", "gangs")
    got = build_object_event(POD_GROUP_KIND, ev, "kubesched-0", wall=1_700_000_000.0)
    assert got["metadata"]["namespace"] == "ml" and got["metadata"]["name"].startswith("train.")
    assert got["regarding"] == {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                "namespace": "ml", "name": "train", "uid": "uid-1"}
    assert (got["reason"], got["type"], got["action"]) == ("FailedScheduling", "Warning", "Scheduling")
    assert (got["reportingController"], got["reportingInstance"]) == ("gangs", "kubesched-0")
    assert got["note"] == "2/5 members could not be placed: Insufficient cpu"


def test_the_live_status_publisher_hands_plugin_events_to_the_event_writer() -> None:
    async def run() -> None:
        sched, _, _ = setup([pod_group("big", 5)], members("big", 5, "2"))
        drain(sched)
        emitted: list[tuple[str, ObjectEvent]] = []
        publisher = StatusPublisher(None, sched.plugins(), [POD_GROUP_KIND],  # type: ignore[arg-type]
                                    emit=lambda kind, ev: emitted.append((kind.kind, ev)))
        publisher.publish_events()
        assert [(k, e.key, e.reason) for k, e in emitted] == [("PodGroup", "default/big", "FailedScheduling")]
        publisher.publish_events()
        assert len(emitted) == 1  # drained once

    asyncio.run(run())
