"""A start with a backlog: the first bind goes out as soon as its pod is assumed (issue 32 item 2),
not after the scheduling loop's first batch of cycles."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubesched.config.load import load_config_text
from kubesched.kube.api import ApiClient, Connection
from kubesched.live.runner import LiveScheduler
from kubesched.plugins.builtin import builtin_registry
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod

CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


async def _run_loop_until(live: LiveScheduler, done: Callable[[], bool]) -> None:
    """The scheduling loop, run until ``done()`` (or 2 s), then stopped."""
    loop_task = asyncio.ensure_future(live._loop())
    for _ in range(400):
        if done() or loop_task.done():
            break
        await asyncio.sleep(0.005)
    live._stop = True
    live._wake.set()
    await loop_task


def test_the_first_bind_is_sent_before_a_batch_of_cycles_runs() -> None:
    async def go() -> list[int]:
        registry = builtin_registry()
        api = ApiClient(Connection(host="http://127.0.0.1:1", ssl_context=False), qps=None)
        live = LiveScheduler(load_config_text(CONFIG, registry), registry, api)
        for i in range(20):
            live.node_informer.store[f"n{i}"] = node(f"n{i}")  # as the informer holds them
            live.scheduler.on_node_add_or_update(live.node_informer.store[f"n{i}"])
        for i in range(200):
            live.scheduler.on_pod_add(PodInfo.from_raw(pod(f"p{i}", cpu="10m")))
        cycles_when_sent: list[int] = []

        async def bind(p: PodInfo, node_name: str, annotations: object = None) -> None:
            cycles_when_sent.append(live.stats.attempts)
            await asyncio.sleep(0.001)  # the apiserver's answer

        live.client.bind = bind  # type: ignore[method-assign,assignment]
        await _run_loop_until(live, lambda: live.stats.bound >= 200)
        await api.close()
        return cycles_when_sent

    sent = asyncio.run(go())
    assert len(sent) == 200
    # The first bind leaves after the first cycle, not after a batch of 32 cycles (or 50 ms) as the
    # later ones may: the first bind of a restart with a backlog is what users wait for.
    assert sent[0] <= 2


def test_the_backlogs_lists_are_interned_once_the_first_bind_is_answered_or_nothing_is_pending() -> None:
    # The interning of the nodes' and pods' lists (~20 µs an object) waits for the backlog to move,
    # rather than sharing the loop with the hand-on and the first cycles; it does not wait for ever.
    async def go(pods: int) -> tuple[bool, bool, bool]:
        registry = builtin_registry()
        api = ApiClient(Connection(host="http://127.0.0.1:1", ssl_context=False), qps=None)
        live = LiveScheduler(load_config_text(CONFIG, registry), registry, api)
        moving = live.pod_informer.intern_after
        assert moving is not None and live.node_informer.intern_after is moving
        live.scheduler.on_node_add_or_update(node("n0"))
        for i in range(pods):
            live.scheduler.on_pod_add(PodInfo.from_raw(pod(f"p{i}", cpu="10m")))
        set_at_first_bind: list[bool] = []

        async def bind(p: PodInfo, node_name: str, annotations: object = None) -> None:
            set_at_first_bind.append(moving.is_set())
            await asyncio.sleep(0.001)

        live.client.bind = bind  # type: ignore[method-assign,assignment]
        before = moving.is_set()
        await _run_loop_until(live, moving.is_set)
        await api.close()
        return before, bool(set_at_first_bind) and set_at_first_bind[0], moving.is_set()

    assert asyncio.run(go(5)) == (False, False, True)  # not while the first bind is in flight; set after
    assert asyncio.run(go(0))[::2] == (False, True)  # nothing pending: set at once
