"""A tiny synchronous HTTPS JSON client for the apiserver (stdlib only): one connection per request,
client-certificate auth. Blocking on purpose: tests and benchmarks drive the cluster from threads."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

__all__ = ["ApiError", "KubeClient"]


class ApiError(RuntimeError):
    """A non-2xx answer from the apiserver; ``status`` is the HTTP code, ``body`` the parsed Status."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method, self.path, self.status, self.body = method, path, status, body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {msg}")

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


class KubeClient:
    """Raw JSON over HTTPS with the CA and a client certificate; one connection per request."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path, timeout: float = 30.0) -> None:
        assert server.startswith("https://")
        hostport = server[len("https://") :].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.ctx.load_cert_chain(str(cert), str(key))

    def _conn(self, timeout: float | None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        if params:
            path += ("&" if "?" in path else "?") + urlencode({k: v for k, v in params.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        conn = self._conn(timeout or self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if resp.status >= 300:
            raise ApiError(method, path, resp.status, parsed)
        return parsed

    def watch(
        self, path: str, *, params: Mapping[str, Any] | None = None, timeout: float = 60.0
    ) -> Iterator[dict[str, Any]]:
        """Yield watch events ({"type":..., "object":...}) until the server ends the stream.

        An HTTP error before the stream starts raises ApiError; errors during the stream arrive as
        ``{"type": "ERROR", "object": <Status>}`` events, exactly as the apiserver sends them."""
        p = dict(params or {})
        p["watch"] = "true"
        p.setdefault("timeoutSeconds", max(1, int(timeout)))
        full = path + ("&" if "?" in path else "?") + urlencode(p)
        conn = self._conn(timeout + 10)
        try:
            conn.request("GET", full, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status >= 300:
                raw = resp.read()
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                raise ApiError("WATCH", full, resp.status, body)
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)
        finally:
            conn.close()
