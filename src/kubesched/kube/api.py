"""The apiserver connection: one aiohttp session, raw JSON with orjson, a client-side QPS limiter.

Credentials come from kubernetes_asyncio's own loaders (``load_kube_config`` for a kubeconfig file,
``KUBECONFIG`` or ``~/.kube/config``, exec plugins included; ``load_incluster_config`` inside a pod):
host, CA, client certificate/key and bearer token are read from the resulting ``Configuration`` and
turned into one SSL context. kubernetes_asyncio's generated models are never used: objects stay the
apiserver's JSON, parsed once with orjson.

Writes and lists go through a :class:`TokenBucket` (``clientConnection.qps``/``burst``); watches are
exempt, as in client-go. Each :class:`ApiClient` has its own bucket, so the event writer gets a
second client (kube-scheduler gives its event broadcaster a separate clientset, too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubesched.kube.aiohttp_import import aiohttp
from kubesched.kube.kubeconfig_loaders import kubeconfig_loaders
from kubesched.kube.ratelimit import TokenBucket

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """A non-2xx answer, with the Status object's reason and message when the apiserver sent one."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", "")) if isinstance(body, dict) else ""
        message = body.get("message", "") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {message}".rstrip(": "))


class ConnectionConfigError(Exception):
    """No usable kubeconfig / in-cluster configuration."""


@dataclass(slots=True)
class Connection:
    """What a request needs: the server URL, TLS settings and how to get the Authorization header."""

    host: str
    ssl_context: ssl.SSLContext | bool
    server_hostname: str | None = None
    #: kubernetes_asyncio Configuration (for bearer tokens that refresh: in-cluster, exec plugins).
    k8s_config: Any = None
    #: Background task refreshing exec-plugin tokens (kubernetes_asyncio.config.refresh_token).
    refresher: asyncio.Task[None] | None = None
    static_headers: dict[str, str] = field(default_factory=dict)
    #: The namespace of the kubeconfig context (in a pod: the service account's), for commands
    #: that default ``-n`` as kubectl does; None when it names none.
    namespace: str | None = None
    #: The kubeconfig cluster's ``proxy-url`` (http:// or https://), every request sent through it.
    proxy: str | None = None


async def load_connection(
    kubeconfig: str | None = None, context: str | None = None, *, in_cluster: bool = False
) -> Connection:
    """Resolve credentials: ``kubeconfig`` if given, else ``$KUBECONFIG`` / ``~/.kube/config``, else in-cluster;
    ``in_cluster`` goes straight to the pod's service account (as kubectl in a pod without a kubeconfig).

    Always through kubernetes_asyncio's maintained loaders (exec and auth-provider plugins, token
    files, inline data, in-cluster), imported without its generated API classes
    (kube/kubeconfig_loaders.py: 0.1 s and ~4 MiB instead of 0.7 s and ~37 MiB).
    """
    # KUBECONFIG may list several files: kubectl merges them, and so does kubernetes_asyncio's
    # loader (KubeConfigMerger) when handed the whole list.
    env_paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    path = kubeconfig or os.pathsep.join(env_paths) or None
    default_path = os.path.expanduser("~/.kube/config")
    if in_cluster and kubeconfig:
        raise ConnectionConfigError("--in-cluster and --kubeconfig exclude each other")
    if kubeconfig and not os.path.isfile(kubeconfig):
        raise ConnectionConfigError(f"--kubeconfig {kubeconfig}: no such file")
    env_missing = env_paths and not any(os.path.isfile(os.path.expanduser(p)) for p in env_paths)
    if not in_cluster and not kubeconfig and env_missing:
        raise ConnectionConfigError(f"KUBECONFIG {os.pathsep.join(env_paths)}: no such file")

    loaders = kubeconfig_loaders()
    k8s_config = loaders.config
    cfg = loaders.configuration_class()
    loader: Any = None
    namespace: str | None = None
    try:
        if in_cluster:
            if not os.environ.get("KUBERNETES_SERVICE_HOST"):
                raise ConnectionConfigError("--in-cluster: not in a pod (KUBERNETES_SERVICE_HOST is not set)")
            k8s_config.load_incluster_config(client_configuration=cfg)
            namespace = _read_first_line(SERVICE_ACCOUNT_NAMESPACE_FILE)
        elif path or os.path.exists(default_path):
            loader = await k8s_config.load_kube_config(
                config_file=path, context=context, client_configuration=cfg, persist_config=False
            )
            current = loader.current_context or {}
            namespace = (current.get("context") or {}).get("namespace") or None
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
            namespace = _read_first_line(SERVICE_ACCOUNT_NAMESPACE_FILE)
        else:
            raise ConnectionConfigError(
                "no kubeconfig: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod"
            )
    except ConnectionConfigError:
        raise
    except Exception as e:  # the loaders raise ConfigException, FileNotFoundError, ...
        raise ConnectionConfigError(f"cannot load the cluster configuration: {e}") from None

    host = str(cfg.host or "")
    if not host:
        raise ConnectionConfigError("the cluster configuration has no server address")
    proxy = _proxy_url(getattr(cfg, "proxy", None))
    # The loader's parsed cluster entry (kubernetes_asyncio reads no disable-compression of its own).
    cluster = getattr(loader, "_cluster", None)
    no_compression = cluster is not None and cluster.safe_get("disable-compression") is True
    ctx: ssl.SSLContext | bool
    if host.startswith("https"):
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = False
    conn = Connection(
        host=host.rstrip("/"),
        ssl_context=ctx,
        server_hostname=getattr(cfg, "tls_server_name", None) or None,
        k8s_config=cfg,
        namespace=namespace,
        proxy=proxy,
        # client-go's DisableCompression: no gzipped answers (aiohttp asks for them otherwise).
        static_headers={"Accept-Encoding": "identity"} if no_compression else {},
    )
    if loader is not None and "exec" in (getattr(loader, "_user", None) or {}):
        conn.refresher = asyncio.get_running_loop().create_task(k8s_config.refresh_token(loader, cfg))
    return conn


SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _proxy_url(url: object) -> str | None:
    """The kubeconfig cluster's ``proxy-url``, which client-go honours (http, https and socks5):
    http and https proxies are taken, anything else is refused by name rather than bypassed (a
    cluster reachable only through its proxy would otherwise fail with a bare connection error)."""
    if not url:
        return None
    text = str(url)
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if scheme not in ("http", "https"):
        raise ConnectionConfigError(
            f"the kubeconfig's proxy-url {text!r}: kubesched reaches the apiserver through http:// and "
            "https:// proxies only (a socks5 proxy can be fronted by an HTTP CONNECT proxy)"
        )
    return text


def _read_first_line(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.readline().strip() or None
    except OSError:
        return None


#: Bytes asyncio reads from a TLS socket at once (``asyncio.sslproto.SSLProtocol.max_size``).
TLS_READ_BUFFER = 32 * 1024


def small_tls_read_buffers() -> None:
    """Give every TLS connection a 32 KiB socket read buffer instead of asyncio's 256 KiB.

    asyncio allocates that buffer (a zero-filled bytearray, so resident) for each TLS connection,
    and HTTP/1.1 means a connection per request in flight: a bind burst opens up to the pool's 256
    connections, 64 MiB of buffers. Measured with tracemalloc on the openb cut (544 pods pending):
    65 MiB at ``asyncio/sslproto.py`` ``self._ssl_buffer = bytearray(self.max_size)``, most of
    kubesched's RSS above its imports (kube-scheduler multiplexes its requests over one HTTP/2
    connection). A TLS record carries at most 16 KiB, so 32 KiB still takes two per read; a large
    list or watch-list stream costs a few more reads. Process-wide (asyncio has no per-connection
    setting), and only ever lowered."""
    from asyncio import sslproto

    if sslproto.SSLProtocol.max_size > TLS_READ_BUFFER:
        sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


class ApiClient:
    """Raw-JSON requests against one apiserver over a shared aiohttp session."""

    def __init__(
        self,
        conn: Connection,
        qps: float | None = 50.0,
        burst: int = 100,
        session: aiohttp.ClientSession | None = None,
        request_timeout: float = 30.0,
        user_agent: str = "kubesched",
        max_connections: int = 256,
    ) -> None:
        self.conn = conn
        self.limiter = TokenBucket(qps, burst) if qps else None
        self._own_session = session is None
        self._session = session
        self.max_connections = max_connections
        #: Siblings share the connection (and its credential refresher) but do not own it.
        self._owns_connection = True
        self.request_timeout = request_timeout
        self.user_agent = user_agent
        self._auth: str | None = None
        self._auth_at = -1e9
        #: Requests sent, by HTTP status (for logs and tests).
        self.requests: dict[int, int] = {}

    def rate_limit(self, qps: float | None, burst: int) -> None:
        """Requests from now on at most ``qps`` a second, ``burst`` at once (None: no limit); a client
        made before its configuration was decoded gets the configuration's here (live/early.py)."""
        self.limiter = TokenBucket(qps, burst) if qps else None

    def sibling(
        self, qps: float | None, burst: int, *, user_agent: str | None = None, max_connections: int | None = None
    ) -> ApiClient:
        """Another client on the same credentials with its own rate limiter. With ``max_connections``
        it also gets its own connection pool: requests of a client that must never wait behind
        another's (the Lease renewal behind hundreds of binds, as upstream gives leader election and
        events clients of their own in cmd/kube-scheduler/app/options/options.go) neither share its
        token bucket nor queue for its connections."""
        own_pool = max_connections is not None
        sibling = ApiClient(
            self.conn,
            qps,
            burst,
            None if own_pool else self.session,
            self.request_timeout,
            user_agent or self.user_agent,
            max_connections if max_connections is not None else self.max_connections,
        )
        sibling._owns_connection = False
        return sibling

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            small_tls_read_buffers()
            connector = aiohttp.TCPConnector(
                ssl=self.conn.ssl_context, limit=self.max_connections, enable_cleanup_closed=True
            )
            # The apiserver sets no cookies: a dummy jar skips per-request cookie filtering.
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(),
                cookie_jar=aiohttp.DummyCookieJar(), proxy=self.conn.proxy,
            )
        return self._session

    async def close(self) -> None:
        if self._owns_connection and self.conn.refresher is not None:
            self.conn.refresher.cancel()
            with contextlib.suppress(BaseException):
                await self.conn.refresher
            self.conn.refresher = None
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self.user_agent, **self.conn.static_headers}
        if content_type:
            headers["Content-Type"] = content_type
        cfg = self.conn.k8s_config
        if cfg is not None and cfg.api_key:
            now = time.monotonic()
            if self._auth is None or now - self._auth_at > 30.0:  # lets file/exec tokens rotate
                self._auth = await cfg.get_api_key_with_prefix("BearerToken")
                self._auth_at = now
            if self._auth:
                headers["Authorization"] = self._auth
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
        limited: bool = True,
    ) -> Any:
        """One request; returns the parsed JSON body, raises :class:`ApiError` on non-2xx."""
        if limited and self.limiter is not None:
            await self.limiter.acquire()
        data = orjson.dumps(body) if body is not None else None
        ct = content_type or (JSON if data is not None else None)
        for attempt in (0, 1):
            headers = await self._headers(ct)
            async with self.session.request(
                method,
                self.conn.host + path,
                params=_params(params),
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.request_timeout),
                server_hostname=self.conn.server_hostname,
            ) as resp:
                raw = await resp.read()
                self.requests[resp.status] = self.requests.get(resp.status, 0) + 1
                if resp.status == 401 and attempt == 0 and self._auth is not None:
                    self._auth = None  # a rotated token: read it again once
                    continue
                parsed = _loads(raw)
                if resp.status >= 300:
                    raise ApiError(method, path, resp.status, parsed)
                return parsed
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, Any], read_timeout: float, total_timeout: float
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """A watch: yields an iterator of decoded events (one JSON object per line). Not rate-limited."""
        headers = await self._headers(None)
        async with self.session.get(
            self.conn.host + path,
            params=_params(params),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=total_timeout, sock_read=read_timeout),
            server_hostname=self.conn.server_hostname,
        ) as resp:
            self.requests[resp.status] = self.requests.get(resp.status, 0) + 1
            if resp.status >= 300:
                raise ApiError("WATCH", path, resp.status, _loads(await resp.read()))
            yield _lines(resp)


async def _lines(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """Split the chunked body on newlines without a line-length limit (nodes can be large)."""
    # Chunks are joined only when a line ends (a large object spans many chunks: no quadratic
    # re-concatenation), and a chunk's lines are split in one call.
    pending: list[bytes] = []
    async for chunk in resp.content.iter_any():
        pending.append(chunk)
        if b"\n" not in chunk:
            continue
        *lines, rest = b"".join(pending).split(b"\n")
        pending = [rest] if rest else []
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
    tail = b"".join(pending)
    if tail.strip():
        yield orjson.loads(tail)


def _loads(raw: bytes) -> Any:
    if not raw:
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw[:300].decode(errors="replace")}


def _params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    out: dict[str, str] = {}
    for k, v in params.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out
