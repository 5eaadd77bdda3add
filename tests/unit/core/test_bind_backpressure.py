"""Scheduler.wait_for_binds_below: the live loop's cap on binds waiting for the apiserver."""

from __future__ import annotations

import asyncio

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.scheduler import Scheduler
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod_info


class SlowAPI:
    """Binds wait until the test releases them, like requests queued at an apiserver."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.bound: list[str] = []

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        await self.gate.wait()
        self.bound.append(pod.name)


async def test_the_loop_can_wait_until_binds_in_progress_drop_below_a_limit() -> None:
    registry = builtin_registry()
    api = SlowAPI()
    sched = Scheduler.build(load_config(None, registry).profiles, registry, FakeClock(), client=api)
    sched.on_node_add_or_update(node("n1", cpu="64"))
    for i in range(5):
        sched.on_pod_add(pod_info(f"p{i}", cpu="100m"))
    for _ in range(3):
        assert sched.schedule_one()
    await asyncio.sleep(0)
    assert sched.binds_in_progress() == 3

    waiter = asyncio.ensure_future(sched.wait_for_binds_below(3))
    await asyncio.sleep(0.01)
    assert not waiter.done()  # 3 in progress: the loop must not schedule more yet
    api.gate.set()
    await asyncio.wait_for(waiter, 1)
    assert sched.binds_in_progress() < 3
    await sched.drain()
    assert sorted(api.bound) == ["p0", "p1", "p2"]
    await sched.wait_for_binds_below(1)  # nothing in flight: returns at once
