"""``/healthz``, ``/readyz`` and ``/metrics`` on a small aiohttp server (plain HTTP)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


def parse_addr(addr: str) -> tuple[str, int]:
    """"host:port", ":port" (all addresses) or "[::1]:port"."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class HealthServer:
    def __init__(
        self,
        addr: str,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, str]],
        healthy: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
    ) -> None:
        self.host, self.port = parse_addr(addr)
        self.registry = registry
        self._ready = ready
        self._healthy = healthy
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None)
        if self.port == 0 and sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("event=serving addr=%s:%d paths=/healthz,/readyz,/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, why = self._healthy()
        return web.Response(status=200 if ok else 500, text=why + "\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, why = self._ready()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
