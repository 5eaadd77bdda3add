"""Declared-object informers: start-up waits for each kind's first list, but not for a kind the
apiserver refuses (403 for this identity, 404 when the CRD is not installed) — those cannot sync
by waiting, and the scheduler must not sit idle for the sync timeout because of them."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubesched.framework.objects import ObjectKind
from kubesched.kube.api import ApiClient, Connection
from kubesched.kube.objects import ObjectInformers

FORBIDDEN = ObjectKind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", namespaced=False)
NOT_INSTALLED = ObjectKind("UnderlayIPPool", "underlay.kubesched.io", "v1alpha1", "underlayippools", namespaced=False)
FINE = ObjectKind("ConfigMap", "", "v1", "configmaps")
#: Set never: the watch the fake apiserver holds open.
NEVER = web.AppKey("never", asyncio.Event)


async def _server() -> tuple[TestServer, ApiClient]:
    async def handle(request: web.Request) -> web.Response:
        if "priorityclasses" in request.path:
            return web.json_response({"kind": "Status", "reason": "Forbidden", "code": 403}, status=403)
        if "underlayippools" in request.path:
            return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)
        if request.query.get("watch"):
            await request.app[NEVER].wait()  # a watch that stays open
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                  "items": [{"metadata": {"name": "q", "namespace": "kube-system", "uid": "u1",
                                                          "resourceVersion": "1"}}]})

    app = web.Application()
    app[NEVER] = asyncio.Event()
    app.router.add_route("GET", "/{tail:.*}", handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Connection(host=str(server.make_url("")).rstrip("/"), ssl_context=False), qps=None)
    return server, api


async def test_a_refused_kind_does_not_hold_up_start() -> None:
    server, api = await _server()
    informers = ObjectInformers(api, [FORBIDDEN, FINE])
    try:
        started = time.monotonic()
        await informers.start(sync_timeout=10.0)
        assert time.monotonic() - started < 5.0  # not the 10 s timeout
        assert informers.objects("ConfigMap").keys() == {"kube-system/q"}
        assert informers.objects("PriorityClass") == {}
        assert informers.informers["PriorityClass"].stats.last_status == 403
    finally:
        await informers.stop()
        await api.close()
        await server.close()


async def test_the_warning_says_what_to_check_for_a_refused_kind(caplog: pytest.LogCaptureFixture) -> None:
    """403: the RBAC either shell's --print-rbac prints; 404: the kind's CRD."""
    server, api = await _server()
    informers = ObjectInformers(api, [FORBIDDEN, NOT_INSTALLED, FINE])
    try:
        with caplog.at_level(logging.WARNING, logger="kubesched.kube.objects"):
            await informers.start(sync_timeout=10.0)
        warned = {r.args[0]: r.getMessage() for r in caplog.records if "objects_not_synced" in r.getMessage()}
        assert warned.keys() == {"PriorityClass", "UnderlayIPPool"}
        assert "kubesched extender --print-rbac" in warned["PriorityClass"]
        assert "CustomResourceDefinition installed" in warned["UnderlayIPPool"]
        assert "print-rbac" not in warned["UnderlayIPPool"]
    finally:
        await informers.stop()
        await api.close()
        await server.close()
