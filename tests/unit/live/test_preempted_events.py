"""The live shell's Preempted Events, as kube-scheduler v1.37.1's preemption executor writes them
(pkg/scheduler/framework/preemption/executor.go): one per victim it acts on, none for a victim
already being deleted (the executor skips it before PreemptPod)."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.config.load import load_config_text
from kubesched.framework.handle import Preemptor
from kubesched.kube.api import ApiClient, Connection
from kubesched.live.runner import LiveScheduler
from kubesched.plugins.builtin import builtin_registry
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import pod

CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def test_a_victim_already_being_deleted_gets_no_preempted_event() -> None:
    high = PodInfo.from_raw(pod("high"))

    async def go() -> list[dict[str, Any]]:
        registry = builtin_registry()
        api = ApiClient(Connection(host="http://127.0.0.1:1", ssl_context=False), qps=None)
        live = LiveScheduler(load_config_text(CONFIG, registry), registry, api)
        posted: list[dict[str, Any]] = []

        async def create(event: dict[str, Any]) -> None:
            posted.append(event)

        live.events._create_event = create  # type: ignore[method-assign]
        raw = pod("terminating", node_name="n0")
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        victims = [PodInfo.from_raw(raw), PodInfo.from_raw(pod("running", node_name="n0"))]
        live.preempted(high, "default-scheduler", "n0", victims, [], Preemptor.of_pod(high, "n0"))
        live.events.start()
        await live.events.stop()
        await api.close()
        return posted

    posted = asyncio.run(go())
    assert [(e["regarding"]["name"], e["reason"], e["note"]) for e in posted] == [
        ("running", "Preempted", f"Preempted by pod {high.uid} on node n0")]
    assert "related" not in posted[0]  # as kube-scheduler's, which cannot reference its pod preemptor


def test_a_victim_rejected_while_waiting_at_permit_is_told_it_was_in_memory() -> None:
    """executor.go: a victim waiting at Permit is rejected without a delete call, and its event
    says `` (in kube-scheduler memory).``."""
    high = PodInfo.from_raw(pod("high"))

    async def go() -> list[str]:
        registry = builtin_registry()
        api = ApiClient(Connection(host="http://127.0.0.1:1", ssl_context=False), qps=None)
        live = LiveScheduler(load_config_text(CONFIG, registry), registry, api)
        posted: list[str] = []

        async def create(event: dict[str, Any]) -> None:
            posted.append(event["note"])

        live.events._create_event = create  # type: ignore[method-assign]
        waiting = PodInfo.from_raw(pod("waiting", node_name="n0"))
        running = PodInfo.from_raw(pod("running", node_name="n0"))
        live.preempted(high, "default-scheduler", "n0", [waiting, running], [], Preemptor.of_pod(high, "n0"),
                       in_memory={waiting.uid})
        live.events.start()
        await live.events.stop()
        await api.close()
        return posted

    assert sorted(asyncio.run(go())) == [f"Preempted by pod {high.uid} on node n0",
                                         f"Preempted by pod {high.uid} on node n0 (in kube-scheduler memory)."]
