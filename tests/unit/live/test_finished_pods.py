"""``kubesched run`` lists only unfinished pods, as kube-scheduler does; the pods that finished
still reach the plugins that count them (Coscheduling's PodGroup ``succeeded``/``failed``) through
a finished-pods informer, made only for such plugins: those that finish, those that finished before
a restart, and their deletions."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.config.load import load_config_text
from kubesched.kube.api import ApiClient, Connection
from kubesched.live.runner import LiveScheduler
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL, Coscheduling
from kubesched.testing import node, pod
from unit.live.fakeapi import FakeCollection, serve
from unit.live.informer_harness import until
from unit.plugins.gang_helpers import coscheduling_config, pod_group

DEFAULT = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
FINISHED = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def _live(config: str, api: ApiClient | None = None) -> LiveScheduler:
    registry = builtin_registry()
    api = api or ApiClient(Connection(host="http://127.0.0.1:1", ssl_context=False), qps=None)
    return LiveScheduler(load_config_text(config, registry), registry, api)


def _coscheduling(live: LiveScheduler) -> Coscheduling:
    (plugin,) = (p for p in live.scheduler.plugins() if isinstance(p, Coscheduling))
    return plugin


def _member(name: str, phase: str, node_name: str = "n0") -> dict[str, Any]:
    raw = pod(name, cpu="100m", node_name=node_name, labels={POD_GROUP_LABEL: "g"})
    raw["status"] = {"phase": phase}
    return raw


def _with_group(live: LiveScheduler) -> None:
    """The PodGroup ``default/g`` (minMember 2) as its informer would hold it."""
    live.objects.informers["PodGroup"].store["default/g"] = pod_group("g", 2)


def test_a_member_that_finishes_is_counted_from_the_finished_watch_and_forgotten_once_deleted() -> None:
    async def go() -> tuple[list[tuple[int, int]], bool, dict[str, Any]]:
        live = _live(coscheduling_config())
        _with_group(live)
        live._node_add(node("n0"))
        running = _member("a", "Running")
        live._pod_add(running)
        done = {**running, "status": {"phase": "Succeeded"}}
        counts = []

        def count() -> None:
            status = _coscheduling(live).pod_group_status("default/g")
            assert status is not None
            counts.append((status["succeeded"], status["failed"]))

        # The unfinished-pods watch: the pod left the selector's set, a deletion there (as in
        # kube-scheduler): off its node, and not counted from this watch.
        live._pod_delete(done)
        uid = running["metadata"]["uid"]
        gone = live.scheduler.cache.table.pod(uid) is None and uid not in live.scheduler.queue
        count()
        live._finished_pod(done)  # the finished-pods watch: ADDED
        count()
        live._finished_pod_deleted(done)  # ... and DELETED: a pod that no longer exists
        count()
        await live.api.close()
        return counts, gone, _coscheduling(live).members.finished

    counts, gone, kept = asyncio.run(go())
    assert gone
    assert counts == [(0, 0), (1, 0), (0, 0)]  # scheduler-plugins counts the group's pods that exist
    assert kept == {}  # nothing kept of a deleted pod


def test_members_that_finished_before_the_start_are_listed_and_counted() -> None:
    async def go() -> tuple[LiveScheduler, FakeCollection, dict[str, Any] | None, list[str]]:
        coll = FakeCollection()
        for raw in (_member("done", "Succeeded"), _member("broke", "Failed"), _member("never", "Failed", "")):
            coll.objects[f"default/{raw['metadata']['name']}"] = raw
        server, api = await serve(coll)
        live = _live(coscheduling_config(), api)
        _with_group(live)
        finished = live.finished_pod_informer
        assert finished is not None
        finished.start()
        try:
            await until(finished.synced.is_set)  # set once the list is handed on
        finally:
            await finished.stop()
            await api.close()
            await server.close()
        held = [uid for uid in (r["metadata"]["uid"] for r in coll.objects.values())
                if live.scheduler.cache.table.pod(uid) is not None or uid in live.scheduler.queue]
        return live, coll, _coscheduling(live).pod_group_status("default/g"), held

    live, coll, status, held = asyncio.run(go())
    # Asked with the complement of kube-scheduler's selector (field selectors can only AND).
    asked = [*coll.watch_requests, *coll.list_requests]
    assert asked and all(q.get("fieldSelector") == FINISHED for q in asked)
    assert status is not None and (status["succeeded"], status["failed"]) == (1, 2)
    assert held == []  # counted, never queued nor accounted on a node
    # Watched like the other informers: readiness, liveness and the connectivity metrics see it.
    assert live.finished_pod_informer in live._informers()


def test_scheduling_does_not_wait_for_the_finished_pods_but_the_published_status_does() -> None:
    # The whole run() against a fake apiserver. A batch cluster may keep tens of thousands of
    # finished pods, which no placement reads (kube-scheduler does not list them at all): the
    # scheduler is synced and ready without them. The PodGroup status it publishes counts them,
    # so nothing is published before they are listed.
    async def go() -> tuple[tuple[bool, str], list[dict[str, Any]], list[dict[str, Any]]]:
        from aiohttp import web
        from aiohttp.test_utils import TestServer

        from kubesched.live.settings import LiveOptions

        nodes = FakeCollection("/api/v1/nodes", "NodeList")
        nodes.objects["n0"] = node("n0")
        unfinished, finished = FakeCollection(), FakeCollection()
        finished.objects["default/done"] = _member("done", "Succeeded")
        groups = FakeCollection("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "PodGroupList")
        groups.objects["default/g"] = pod_group("g", 2)
        answer_finished = asyncio.Event()
        patches: list[dict[str, Any]] = []

        async def pods(request: web.Request) -> web.StreamResponse:
            if request.query.get("fieldSelector") == FINISHED:
                await answer_finished.wait()
                return await finished.handle(request)
            return await unfinished.handle(request)

        async def patch_status(request: web.Request) -> web.StreamResponse:
            patches.append((await request.json())["status"])
            return web.json_response({})

        app = web.Application()
        app.router.add_get(nodes.path, nodes.handle)
        app.router.add_get("/api/v1/pods", pods)
        app.router.add_get(groups.path, groups.handle)
        app.router.add_patch("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/{name}/status",
                             patch_status)
        server = TestServer(app)
        await server.start_server()
        api = ApiClient(Connection(host=str(server.make_url("")).rstrip("/"), ssl_context=False), qps=None)
        registry = builtin_registry()
        options = LiveOptions(health_addr="127.0.0.1:0", leader_elect=False, replace_default_scheduler=True,
                              install_signal_handlers=False)
        live = LiveScheduler(load_config_text(coscheduling_config(), registry), registry, api, options)
        live.status.interval = 0.05
        run = asyncio.ensure_future(live.run())
        try:
            await until(lambda: live.synced or run.done(), timeout=10.0)
            ready = live._readiness()
            await asyncio.sleep(0.3)  # six publishing intervals: a publisher not waiting would have sent
            before = list(patches)
            answer_finished.set()
            await until(lambda: any(p.get("succeeded") == 1 for p in patches) or run.done(), timeout=10.0)
        finally:
            live.request_stop()
            await asyncio.wait_for(run, 10.0)
            await api.close()
            await server.close()
        return ready, before, patches

    ready, before, patches = asyncio.run(go())
    assert ready == (True, "ok")  # synced and ready while the finished pods are still being listed
    assert before == []  # no status counted without them
    assert any(p.get("succeeded") == 1 for p in patches)


def test_the_default_profile_lists_no_finished_pods() -> None:
    async def go() -> LiveScheduler:
        live = _live(DEFAULT)
        await live.api.close()
        return live

    live = asyncio.run(go())
    assert not live.scheduler.counts_finished_pods
    assert live.finished_pod_informer is None
    names = [inf.name for inf in live._informers()]
    assert names[:2] == ["nodes", "pods"] and "finished-pods" not in names
    assert live.pod_informer.params.get("fieldSelector") == UNFINISHED
