"""A tiny in-memory apiserver for one collection (list with pagination, watch with an event log,
bookmarks, compaction → 410, outages), served by aiohttp's test server. Pure logic only: the real
apiserver is exercised by tests/integration/test_live_*.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubesched.kube.api import ApiClient, Connection


class FakeCollection:
    def __init__(self, path: str = "/api/v1/pods", kind: str = "PodList") -> None:
        self.path = path
        self.kind = kind
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self.gone_as_http = False
        self.down = False
        self.watch_requests: list[dict[str, str]] = []
        self.list_requests: list[dict[str, str]] = []
        self.fail_continue_once = False
        self.changed = asyncio.Condition()
        self.bookmark_every: float | None = None
        #: Serve watch-lists (sendInitialEvents=true); False answers them 422 as an apiserver
        #: without the WatchList feature does.
        self.watch_list = True
        self._watchers: set[web.StreamResponse] = set()

    # -- mutations (as a client of the real apiserver would cause) ----------------------------------
    async def _record(self, etype: str, obj: dict[str, Any]) -> None:
        self.log.append((self.rv, etype, copy.deepcopy(obj)))
        async with self.changed:
            self.changed.notify_all()

    async def put(self, name: str, uid: str | None = None, ns: str = "default", **spec: Any) -> dict[str, Any]:
        self.rv += 1
        key = f"{ns}/{name}"
        old = self.objects.get(key)
        obj = {
            "metadata": {"name": name, "namespace": ns, "uid": uid or (old or {}).get("metadata", {}).get("uid")
                         or f"uid-{name}", "resourceVersion": str(self.rv)},
            "spec": spec,
        }
        self.objects[key] = obj
        await self._record("MODIFIED" if old is not None else "ADDED", obj)
        return obj

    async def delete(self, name: str, ns: str = "default") -> None:
        self.rv += 1
        obj = self.objects.pop(f"{ns}/{name}")
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        await self._record("DELETED", obj)

    def silent_put(self, name: str, uid: str | None = None, ns: str = "default", **spec: Any) -> None:
        """A change the watch will never deliver (it happened in a compacted window)."""
        self.rv += 1
        self.objects[f"{ns}/{name}"] = {
            "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "resourceVersion": str(self.rv)},
            "spec": spec,
        }

    def silent_delete(self, name: str, ns: str = "default") -> None:
        self.rv += 1
        del self.objects[f"{ns}/{name}"]

    def compact(self) -> None:
        self.compacted = self.rv
        self.log = [e for e in self.log if e[0] > self.compacted]

    async def drop_watches(self) -> None:
        for w in list(self._watchers):
            task = getattr(w, "_kubesched_task", None)
            if task is not None:
                task.cancel()

    # -- HTTP ----------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            return web.json_response({"kind": "Status", "code": 503, "message": "down"}, status=503)
        q = dict(request.query)
        if q.get("watch") == "true":
            return await self._watch(request, q)
        return self._list(q)

    def _list(self, q: dict[str, str]) -> web.Response:
        self.list_requests.append(q)
        if q.get("continue") and self.fail_continue_once:
            self.fail_continue_once = False
            return web.json_response({"kind": "Status", "code": 410, "reason": "Expired"}, status=410)
        items = sorted(self.objects.values(), key=lambda o: o["metadata"]["name"])
        start = int(q.get("continue") or 0)
        limit = int(q.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return web.json_response({"kind": self.kind, "apiVersion": "v1", "metadata": meta, "items": page})

    async def _watch(self, request: web.Request, q: dict[str, str]) -> web.StreamResponse:
        self.watch_requests.append(q)
        initial = q.get("sendInitialEvents") == "true"
        if initial and not self.watch_list:
            message = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
            status = {"kind": "Status", "code": 422, "reason": "Invalid", "message": message}
            return web.json_response(status, status=422)
        # A watch-list starts from the current state: never too old.
        since = self.rv if initial else int(q.get("resourceVersion") or 0)
        if since < self.compacted:
            status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
            if self.gone_as_http:
                return web.json_response(status, status=410)
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        if since < self.compacted:
            await resp.write(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
            return resp
        self._watchers.add(resp)
        resp._kubesched_task = asyncio.current_task()  # type: ignore[attr-defined]
        sent = since
        try:
            if initial:  # the current state, then the bookmark that ends it; then a watch from there
                for obj in sorted(self.objects.values(), key=lambda o: o["metadata"]["name"]):
                    await resp.write(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n")
                end = {"metadata": {"resourceVersion": str(self.rv),
                                    "annotations": {"k8s.io/initial-events-end": "true"}}}
                await resp.write(orjson.dumps({"type": "BOOKMARK", "object": end}) + b"\n")
                sent = self.rv
            while True:
                for rv, etype, obj in list(self.log):
                    if rv > sent:
                        await resp.write(orjson.dumps({"type": etype, "object": obj}) + b"\n")
                        sent = rv
                async with self.changed:
                    try:
                        await asyncio.wait_for(self.changed.wait(), self.bookmark_every or 3600)
                    except TimeoutError:
                        bm = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
                        await resp.write(orjson.dumps(bm) + b"\n")
                        sent = max(sent, self.rv)
        except asyncio.CancelledError:
            pass
        finally:
            self._watchers.discard(resp)
        return resp


async def serve(coll: FakeCollection) -> tuple[TestServer, ApiClient]:
    app = web.Application()
    app.router.add_get(coll.path, coll.handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Connection(host=str(server.make_url("")).rstrip("/"), ssl_context=False), qps=None)
    return server, api
