"""The extender's HTTP(S) server (aiohttp): the four verbs, /healthz, /readyz and /metrics.

Status codes:

* 200 — a result. Filter and bind also answer 200 with ``Error`` set when the extender itself
  failed (a plugin error, the deadline, no cluster to bind with): the kube-scheduler then reports
  that message on the pod, where a non-200 status would only say "code 5xx".
* 400 — the request could not be decoded (bad JSON, wrong types, a missing Pod, unknown nodes in
  nodeCacheCapable mode); 404 — no such verb; 405 — not POST; 408 — the body did not arrive within
  the deadline (a slow client); 413 — body over ``max_body``.
  Every error body is JSON with an ``Error`` field, in the verb's response shape where it has one.
* 500 / 503 / 504 on prioritize and preempt (whose upstream results have no ``Error`` field): a
  plugin error, a cache not synced yet, the deadline. The scheduler ignores prioritize failures and
  treats preempt failures as errors unless the extender is ``ignorable``.

Connections are bounded too (``limits.py``): a client must finish its first request's headers
within ``HEADER_TIMEOUT`` and idle keep-alive connections close after ``IDLE_TIMEOUT``, so
slow-loris clients cannot hold connections open for long.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubesched.extender.connection import Connection
from kubesched.extender.limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_TIMEOUT,
    HEADER_TIMEOUT,
    IDLE_TIMEOUT,
    normalize_prefix,
)
from kubesched.extender.metrics import Metrics
from kubesched.extender.requests import SYNC_VERBS, VERBS, Deadline, Reply, ServiceError
from kubesched.extender.service import ExtenderService
from kubesched.extender.wire import WireError, encode_error, parse_body

log = logging.getLogger("kubesched.extender")

_JSON = "application/json"


class ExtenderServer:
    def __init__(
        self,
        service: ExtenderService,
        *,
        url_prefix: str = "/",
        timeout: float = DEFAULT_TIMEOUT,
        max_body: int = DEFAULT_MAX_BODY,
        metrics_registry: CollectorRegistry | None = None,
    ) -> None:
        self.service = service
        self.prefix = normalize_prefix(url_prefix)
        self.timeout = timeout
        self.max_body = max_body
        self.metrics = Metrics(service, metrics_registry)
        #: The last filter request's body and its JSON value (see _parse).
        self._last_filter: tuple[bytes, Any] = (b"", None)

    # -- the app -------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body, middlewares=[self._errors_middleware])
        for verb in VERBS:
            app.router.add_route("*", f"{self.prefix}/{verb}", self._verb_handler(verb))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    def _verb_of(self, path: str) -> str:
        tail = path[len(self.prefix):].strip("/") if path.startswith(self.prefix) else ""
        return tail if tail in VERBS else "other"

    @web.middleware
    async def _errors_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as e:
            # Router answers (404 unknown verb, 405 wrong method): JSON with Error, never HTML/text.
            if e.status < 400:
                raise
            verb = self._verb_of(request.path)
            if e.status == 404:
                msg = (f"no such extender endpoint {request.method} {request.path}; the verbs are "
                       + ", ".join(f"POST {self.prefix}/{v}" for v in VERBS))
            else:
                msg = f"{e.status} {e.reason}: {request.method} {request.path}"
            self.metrics.count(verb, str(e.status))
            return web.Response(status=e.status, body=encode_error(verb, msg), content_type=_JSON)

    def _verb_handler(self, verb: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self.handle(verb, request)

        return handle

    async def handle(self, verb: str, request: web.Request) -> web.StreamResponse:
        start = time.perf_counter()
        if request.method != "POST":
            reply = Reply(405, encode_error(verb, f"{verb} takes POST with a JSON body, got {request.method}"))
            kind = "method"
        else:
            reply, kind = await self._answer(verb, request)
        self._account(verb, start, reply, kind)
        resp = web.Response(status=reply.status, body=reply.body, content_type=_JSON)
        if reply.status == 405:
            resp.headers["Allow"] = "POST"
        return resp

    def _account(self, verb: str, start: float, reply: Reply, kind: str) -> None:
        self.metrics.count(verb, str(reply.status))
        self.metrics.observe(verb, time.perf_counter() - start)
        if kind:
            self.metrics.error(verb, kind)

    # -- the fast path (extender/connection.py) -------------------------------------------------------
    @functools.cached_property
    def fast_paths(self) -> dict[bytes, str]:
        """The request paths answered without aiohttp: the verbs whose answer does not await."""
        return {f"{self.prefix}/{verb}".encode(): verb for verb in SYNC_VERBS}

    def answer_now(self, verb: str, body: bytes) -> Reply:
        """A whole POST to one of the ``fast_paths``: the same reply and metrics as through aiohttp."""
        start = time.perf_counter()
        reply, kind = self._answer_body(verb, body, Deadline(verb, self.timeout), ahead_soon=False)
        self._account(verb, start, reply, kind)
        return reply

    def answered(self) -> None:
        """The fast path has written ``answer_now``'s reply: the work ahead it made due, now, off
        the client's wait and before the connection's next read (no extra turn of the event loop)."""
        if self.service.ahead_due:
            try:
                self.service.work_ahead()
            except Exception:  # never the connection's: the next request computes as always
                log.warning("extender: work ahead failed", exc_info=True)

    def body_late(self, verb: str) -> Reply:
        """The 408 for a body that did not arrive within the deadline (fast path), with its metrics."""
        reply = Reply(408, encode_error(verb, self._late_body_message(verb)))
        self._account(verb, time.perf_counter(), reply, "timeout")
        return reply

    def _late_body_message(self, verb: str) -> str:
        return f"kubesched extender: the {verb} request body did not arrive within {self.timeout:g}s"

    # -- answers -------------------------------------------------------------------------------------
    async def _answer(self, verb: str, request: web.Request) -> tuple[Reply, str]:
        deadline = Deadline(verb, self.timeout)
        try:
            if request.content.is_eof():
                # The whole body has arrived (the usual case): read() will not wait, so no timer.
                body = await request.read()
            else:
                async with asyncio.timeout(deadline.remaining()):
                    body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return Reply(413, encode_error(verb, f"request body larger than {self.max_body} bytes")), "too_large"
        except TimeoutError:
            # The client's fault (kube-scheduler sends its body at once): 408 for every verb.
            return Reply(408, encode_error(verb, self._late_body_message(verb))), "timeout"
        except Exception as e:
            return self._failed(verb, e)
        if verb != "bind":
            return self._answer_body(verb, body, deadline)
        try:
            data = parse_body(body)
            try:
                async with asyncio.timeout(max(deadline.remaining(), 0.001)):
                    reply = await self.service.bind(data, deadline)
            except TimeoutError:
                return self._server_error(
                    verb, 504, f"kubesched extender: bind exceeded its {self.timeout:g}s deadline"
                ), "timeout"
            return reply, reply.kind
        except Exception as e:
            return self._failed(verb, e)

    def _answer_body(self, verb: str, body: bytes, deadline: Deadline, ahead_soon: bool = True) -> tuple[Reply, str]:
        """filter, prioritize, preempt: synchronous from the body on. ``ahead_soon``: schedule the
        work ahead the answer made due (aiohttp's path; the fast path calls ``answered``)."""
        try:
            reply: Reply = getattr(self.service, verb)(self._parse(verb, body), deadline)
        except Exception as e:
            return self._failed(verb, e)
        if ahead_soon and self.service.ahead_due:
            # After this callback, once aiohttp has written the answer: off the client's wait.
            asyncio.get_running_loop().call_soon(self.service.work_ahead)
        return reply, reply.kind

    def _parse(self, verb: str, body: bytes) -> Any:
        """``parse_body(body)``; for a prioritize request with the bytes of the last filter request,
        that request's value. kube-scheduler sends prioritize the ExtenderArgs it sent filter when
        every node passed (the same pod, the same NodeNames), and equal bytes are an equal JSON
        value, so the service sees the same object again and reuses what it decoded from it
        (ExtenderService._decode). Nothing here or in the service modifies a request's value."""
        last_body, last_data = self._last_filter
        if verb == "prioritize" and last_data is not None and body == last_body:
            return last_data
        data = parse_body(body)
        if verb == "filter":
            self._last_filter = (body, data)
        return data

    def _failed(self, verb: str, e: Exception) -> tuple[Reply, str]:
        if isinstance(e, WireError):
            return Reply(400, encode_error(verb, f"kubesched extender: bad {verb} request: {e}")), "bad_request"
        if isinstance(e, ServiceError):
            kind = "timeout" if e.status == 504 else ("bad_request" if e.status < 500 else "internal")
            if e.status < 500:
                return Reply(e.status, encode_error(verb, f"kubesched extender: {e.message}")), kind
            return self._server_error(verb, e.status, e.message), kind
        # Only the request varies between calls; a body that makes a plugin trip is a bad request.
        log.warning("extender: %s request could not be evaluated", verb, exc_info=e)
        msg = f"kubesched extender: could not evaluate this {verb} request: {type(e).__name__}: {e}"
        return Reply(400, encode_error(verb, msg)), "bad_request"

    @staticmethod
    def _server_error(verb: str, status: int, message: str) -> Reply:
        # Filter and bind results carry Error: answer 200 so the scheduler shows our message.
        if verb in ("filter", "bind"):
            return Reply(200, encode_error(verb, message))
        return Reply(status, encode_error(verb, message))

    # -- health and metrics --------------------------------------------------------------------------
    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        cluster = self.service.cluster
        if cluster is not None and not cluster.synced:
            return web.Response(status=503, text="node cache not synced")
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(self.metrics.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp


def server_ssl_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """TLS 1.2+; with ``client_ca``, clients must present a certificate signed by it (CERT_REQUIRED)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    if client_ca is not None:
        ctx.load_verify_locations(cafile=str(client_ca))
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _GuardedSite(web.BaseSite):
    """A TCP site whose connections are :class:`~kubesched.extender.connection.Connection`: the
    header deadline, and kube-scheduler's plain filter/prioritize requests answered on the fast path."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, *, ssl_context: ssl.SSLContext | None,
                 header_timeout: float, idle_timeout: float, fast: ExtenderServer) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=1024)
        self._host, self._port = host, port
        self._header_timeout, self._idle_timeout, self._fast = header_timeout, idle_timeout, fast
        self._connections: set[Connection] = set()

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        sockets = getattr(self._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        handler_factory = self._runner.server
        assert handler_factory is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: Connection(handler_factory, self._header_timeout, self._idle_timeout, self._fast,
                               self._connections),
            self._host, self._port, ssl=self._ssl_context, backlog=self._backlog, reuse_address=True,
        )

    async def stop(self) -> None:
        await super().stop()
        for conn in list(self._connections):
            conn.close()


async def start_server(
    server: ExtenderServer, host: str, port: int, ssl_context: ssl.SSLContext | None = None, *,
    header_timeout: float = HEADER_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT,
) -> tuple[web.AppRunner, int]:
    """Start listening; returns the runner (``await runner.cleanup()`` to stop) and the bound port."""
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, keepalive_timeout=idle_timeout)
    await runner.setup()
    site = _GuardedSite(runner, host, port, ssl_context=ssl_context, header_timeout=header_timeout,
                        idle_timeout=idle_timeout, fast=server)
    await site.start()
    return runner, site.port


#: The young generation's threshold once serving (CPython's default is 700 allocations).
SERVING_GC_THRESHOLD = 20_000


def settle_heap() -> None:
    """Once the extender serves: what it holds by then (imports, the profile's plugins, the synced
    informer cache) is kept for the process's life, so it leaves the collector's generations
    (gc.freeze) and the young generation is collected less often. Each request allocates a few
    hundred containers (the decoded Pod, the answer) that die with it, and a bound pod adds some
    that stay; with CPython's default threshold a collection ran every ~20 pods and walked the
    survivors, a quarter of the extender's CPU per pod on the recorded stream of
    bench/extender_replay.py. Garbage cycles are still collected, later."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(SERVING_GC_THRESHOLD, gen1, gen2)
