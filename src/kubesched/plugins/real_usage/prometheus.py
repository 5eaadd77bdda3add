"""A small client of Prometheus's HTTP API (instant queries) and the per-node usage cache."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import aiohttp

Sample = tuple[dict[str, str], float]


class PrometheusError(Exception):
    """A query that did not return a usable instant vector."""


class Fetcher(Protocol):
    async def query(self, promql: str) -> list[Sample]: ...

    async def close(self) -> None: ...


class PrometheusFetcher:
    """GET {addr}/api/v1/query?query=... with one aiohttp session."""

    def __init__(self, addr: str, timeout_seconds: float) -> None:
        # aiohttp is imported here, not at module level: every command imports the built-in
        # plugins, and aiohttp (with ssl) costs a tenth of a second that only this plugin needs.
        import aiohttp

        self.addr = addr.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def query(self, promql: str) -> list[Sample]:
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        async with self._session.get(f"{self.addr}/api/v1/query", params={"query": promql}) as resp:
            try:
                body: Any = await resp.json(content_type=None)
            except (ValueError, aiohttp.ContentTypeError) as e:
                raise PrometheusError(f"HTTP {resp.status}: not JSON ({e})") from None
        return parse_response(body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def parse_response(body: Any) -> list[Sample]:
    """Samples of a /api/v1/query answer; raises PrometheusError for errors and non-vectors."""
    if not isinstance(body, dict):
        raise PrometheusError("answer is not a JSON object")
    if body.get("status") != "success":
        raise PrometheusError(f"{body.get('errorType', 'error')}: {body.get('error', 'query failed')}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusError(f"expected an instant vector, got {data.get('resultType')!r}")
    out: list[Sample] = []
    for item in data.get("result") or []:
        try:
            metric = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # one malformed sample is skipped, not the whole answer
        out.append((metric, value))
    return out


_PORT = re.compile(r":\d+$")


def node_key(value: str) -> str:
    """A label value as a node name or address: ``10.0.0.1:9100`` → ``10.0.0.1``, ``[::1]:9100`` → ``::1``."""
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    return _PORT.sub("", value) if value.count(":") == 1 else value


class UsageCache:
    """Resource → node key → (used fraction, time of the poll that returned it)."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self.values: dict[str, dict[str, tuple[float, float]]] = {}
        #: Bumped on every update; scoring caches are keyed on it.
        self.version = 0

    def update(self, resource: str, samples: dict[str, float]) -> None:
        t = self.now()
        bucket = self.values.setdefault(resource, {})
        for key, v in samples.items():
            bucket[key] = (v, t)
        self.version += 1
