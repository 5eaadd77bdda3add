"""Credentials come from kubernetes_asyncio's maintained loaders, whatever the kubeconfig holds."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.kube.api import ApiClient, ConnectionConfigError, load_connection
from kubesched.testing import controlplane


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    p = controlplane.PKI(tmp_path_factory.mktemp("pki"))
    crt, key = p.issue("client", "someone", client=True)
    return p.ca_crt, crt, key


def _kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


async def test_client_certificate_files(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, crt, key = pki
    kc = controlplane.write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", ca, crt, key)
    conn = await load_connection(str(kc))
    assert conn.host == "https://127.0.0.1:6443"
    assert isinstance(conn.ssl_context, ssl.SSLContext) and conn.ssl_context.verify_mode == ssl.CERT_REQUIRED


async def test_inline_data_and_token(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, _, _ = pki
    kc = _kubeconfig(
        tmp_path / "kc",
        {"server": "https://10.0.0.1:6443", "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()},
        {"token": "s3cret"},
    )
    conn = await load_connection(str(kc))
    assert conn.host == "https://10.0.0.1:6443"
    api = ApiClient(conn)
    try:
        headers = await api._headers(None)  # what every request sends
    finally:
        await api.close()
    assert headers["Authorization"] == "Bearer s3cret"


async def test_a_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("clusters: [")
    with pytest.raises(ConnectionConfigError, match="cannot load the cluster configuration"):
        await load_connection(str(bad))


async def test_a_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConnectionConfigError, match=r"--kubeconfig .*nope: no such file"):
        await load_connection(str(tmp_path / "nope"))


@contextlib.asynccontextmanager
async def _http_server(seen: list[tuple[str, str]]) -> AsyncIterator[str]:
    """A plain-HTTP server on a free port that answers every request with a Version object and notes
    its request target and Accept-Encoding; yields its URL. It stands for an HTTP proxy (a proxy is
    sent the absolute URL of the server asked for) or for the apiserver itself."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    async def answer(request: web.Request) -> web.Response:
        seen.append((request.raw_path, request.headers.get("Accept-Encoding", "")))
        return web.json_response({"major": "1", "minor": "37"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    server = TestServer(app)
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def test_the_kubeconfigs_proxy_url_carries_every_request(tmp_path: Path) -> None:
    # The server's name does not resolve: only a request sent to the proxy can be answered.
    seen: list[tuple[str, str]] = []
    async with _http_server(seen) as proxy:
        kc = _kubeconfig(tmp_path / "kc", {"server": "http://apiserver.invalid:6443", "proxy-url": proxy},
                         {"token": "t"})
        api = ApiClient(await load_connection(str(kc)), qps=None)
        try:
            assert await api.request("GET", "/version") == {"major": "1", "minor": "37"}
        finally:
            await api.close()
    assert [target for target, _ in seen] == ["http://apiserver.invalid:6443/version"]


async def test_a_proxy_url_of_a_kind_kubesched_cannot_use_is_a_clear_error(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://10.0.0.1:6443", "proxy-url": "socks5://127.0.0.1:1080"},
                     {"token": "t"})
    with pytest.raises(ConnectionConfigError, match=r"proxy-url 'socks5://127.0.0.1:1080'.*http:// and https://"):
        await load_connection(str(kc))


@pytest.mark.parametrize(("disable", "expected"), [(None, "gzip"), (False, "gzip"), (True, "identity")])
async def test_disable_compression_asks_for_answers_as_they_are(tmp_path: Path, disable: bool | None,
                                                                expected: str) -> None:
    seen: list[tuple[str, str]] = []
    async with _http_server(seen) as server:
        cluster: dict[str, Any] = {"server": server}
        if disable is not None:
            cluster["disable-compression"] = disable
        api = ApiClient(await load_connection(str(_kubeconfig(tmp_path / "kc", cluster, {"token": "t"}))), qps=None)
        try:
            await api.request("GET", "/version")
        finally:
            await api.close()
    (_, accept_encoding), = seen
    assert (accept_encoding == "identity") if expected == "identity" else ("gzip" in accept_encoding)


def test_loading_credentials_leaves_kubernetes_asyncio_whole_for_later_imports(tmp_path: Path) -> None:
    """The loaders are imported without kubernetes_asyncio's ~860 generated modules (a fresh
    process: what `kubesched run` pays at start-up), and a plugin importing the package afterwards
    still gets all of it."""
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://10.0.0.1:6443"}, {"token": "t"})
    script = f"""
import asyncio, sys
from kubesched.kube.api import load_connection
conn = asyncio.run(load_connection({str(kc)!r}))
loaded = sum(1 for m in sys.modules if m.startswith("kubernetes_asyncio"))
import kubernetes_asyncio.client
print(conn.host, loaded, hasattr(kubernetes_asyncio.client, "CoreV1Api"))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["https://10.0.0.1:6443", "0", "True"]


def test_the_loaders_import_urllib3_and_the_api_client_only_when_used(tmp_path: Path) -> None:
    """Loading credentials imports neither urllib3 nor kubernetes_asyncio's ApiClient (python-dateutil,
    multiprocessing): ~0.05 s of every start-up. The loaders' ``new_client_from_config`` still
    returns the real ApiClient, and the Configuration's urllib3 is the real module once read."""
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://10.0.0.1:6443"}, {"token": "t"})
    script = f"""
import asyncio, sys
from kubesched.kube.api import load_connection
from kubesched.kube.kubeconfig_loaders import kubeconfig_loaders
conn = asyncio.run(load_connection({str(kc)!r}))
early = sorted({{m.split(".")[0] for m in sys.modules}} & {{"urllib3", "dateutil", "multiprocessing"}})
loaders = kubeconfig_loaders()
client = asyncio.run(loaders.config.new_client_from_config(config_file={str(kc)!r}))
urllib3 = loaders.configuration_class.__init__.__globals__["urllib3"]
print(conn.host, early or "none", type(client).__module__, client.configuration.host, urllib3.PoolManager.__module__)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["https://10.0.0.1:6443", "none", "kubernetes_asyncio.client.api_client", "https://10.0.0.1:6443",
                   "urllib3.poolmanager"]


def test_a_missing_module_the_loaders_import_later_fails_at_once_with_its_name() -> None:
    script = """
import importlib.util, sys
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "urllib3" else real(name, *a)
from kubesched.kube.kubeconfig_loaders import kubeconfig_loaders
try:
    kubeconfig_loaders()
except ImportError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "No module named 'urllib3'"
