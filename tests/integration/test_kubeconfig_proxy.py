"""A kubeconfig's ``proxy-url``: kubesched reaches the real apiserver through an HTTP CONNECT proxy,
TLS and client certificate end to end, lists as well as watch-list streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from kubesched.kube.api import ApiClient, load_connection
from kubesched.kube.informer import Informer
from kubesched.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def _connect_proxy(tunnels: list[str]) -> AsyncIterator[str]:
    """An HTTP proxy that only tunnels (CONNECT host:port), as a corporate or bastion proxy does for
    https; notes each tunnel's target; yields its URL."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        tunnels.append(target)
        host, _, port = target.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


def _with_proxy(kubeconfig: Path, proxy: str, out: Path) -> Path:
    doc = yaml.safe_load(kubeconfig.read_text())
    for entry in doc["clusters"]:
        entry["cluster"]["proxy-url"] = proxy
    out.write_text(yaml.safe_dump(doc))
    return out


def test_requests_and_watch_lists_go_through_the_kubeconfigs_proxy(
    control_plane: ControlPlane, cp_namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    cp.create_pod("through-proxy", cp_namespace, requests={"cpu": "100m"})

    async def via_proxy() -> tuple[list[str], str, set[str]]:
        tunnels: list[str] = []
        async with _connect_proxy(tunnels) as proxy:
            kubeconfig = _with_proxy(cp.scheduler_kubeconfig, proxy, tmp_path / "via-proxy.kubeconfig")
            api = ApiClient(await load_connection(str(kubeconfig)), qps=None)
            pods = Informer(api, f"/api/v1/namespaces/{cp_namespace}/pods", name="pods", watch_list=True)
            try:
                namespace = await api.request("GET", f"/api/v1/namespaces/{cp_namespace}")
                pods.start()
                await asyncio.wait_for(pods.synced.wait(), 30)
                listed = {obj["metadata"]["name"] for obj in pods.store.values()}
            finally:
                await pods.stop()
                await api.close()
        return tunnels, namespace["metadata"]["name"], listed

    tunnels, namespace, listed = asyncio.run(via_proxy())
    assert namespace == cp_namespace
    assert listed == {"through-proxy"}
    apiserver = cp.server.removeprefix("https://")
    assert tunnels and set(tunnels) == {apiserver}  # every connection was a tunnel to the apiserver
