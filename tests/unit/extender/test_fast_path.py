"""The real server's fast path (extender/connection.py) answers kube-scheduler's plain filter and
prioritize POSTs exactly as the aiohttp app does, and leaves everything else to aiohttp on the same
connection: the client cannot tell which answered, except by speed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubesched.extender.server import ExtenderServer, start_server
from kubesched.extender.service import ExtenderService
from kubesched.framework.registry import Registry
from kubesched.testing import node, pod
from unit.extender.ext_helpers import ip_profile

NODES = [node("a", cpu="4"), node("b", cpu="1"), node("c", cpu="2")]
FILTER = orjson.dumps({"Pod": pod("p", cpu="1500m"), "Nodes": {"items": NODES}})
PRIORITIZE = orjson.dumps({"Pod": pod("p", cpu="1500m"), "Nodes": {"items": NODES[::2]}})


def _post(path: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Conn:
    """A raw keep-alive connection: what was written, and the answers read back one by one."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        body = await asyncio.wait_for(self.reader.readexactly(int(headers["content-length"])), 10)
        return int(lines[0].split(" ")[1]), headers, body


@pytest.fixture
async def served(registry: Registry) -> AsyncIterator[tuple[ExtenderServer, int]]:
    server = ExtenderServer(ExtenderService(ip_profile(registry), registry), timeout=1.0, max_body=1 << 20)
    runner, port = await start_server(server, "127.0.0.1", 0, header_timeout=5.0, idle_timeout=5.0)
    try:
        yield server, port
    finally:
        await runner.cleanup()


@pytest.fixture
async def conn(served: tuple[ExtenderServer, int]) -> AsyncIterator[Conn]:
    reader, writer = await asyncio.open_connection("127.0.0.1", served[1])
    try:
        yield Conn(reader, writer)
    finally:
        writer.close()


async def _through_aiohttp(registry: Registry, path: str, body: bytes) -> tuple[int, bytes]:
    server = ExtenderServer(ExtenderService(ip_profile(registry), registry), timeout=1.0, max_body=1 << 20)
    client = TestClient(TestServer(server.app()))
    await client.start_server()
    try:
        resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
        return resp.status, await resp.read()
    finally:
        await client.close()


@pytest.mark.parametrize(("path", "body"), [
    ("/filter", FILTER),
    ("/prioritize", PRIORITIZE),
    ("/filter", b"{not json"),
    ("/prioritize", b'{"Pod": null, "NodeNames": []}'),
])
async def test_the_fast_answer_is_the_apps_answer(registry: Registry, conn: Conn, path: str, body: bytes) -> None:
    conn.writer.write(_post(path, body))
    status, headers, answer = await conn.answer()
    want_status, want = await _through_aiohttp(registry, path, body)
    assert (status, answer) == (want_status, want)
    assert headers["content-type"] == "application/json"


async def test_a_body_split_over_writes_and_pipelined_requests_are_answered_in_order(conn: Conn) -> None:
    raw = _post("/filter", FILTER)
    conn.writer.write(raw[:40])
    await asyncio.sleep(0.05)
    conn.writer.write(raw[40:-10])
    await asyncio.sleep(0.05)
    conn.writer.write(raw[-10:] + _post("/prioritize", PRIORITIZE) + _post("/filter", FILTER))
    status, headers, body = await conn.answer()
    # Answered on the fast path, not by aiohttp (which names itself in a Server header).
    assert status == 200 and "server" not in headers
    filtered = orjson.loads(body)
    scored = orjson.loads((await conn.answer())[2])
    again = orjson.loads((await conn.answer())[2])
    assert [n["metadata"]["name"] for n in filtered["Nodes"]["items"]] == ["a", "c"]
    assert list(filtered["FailedNodes"] or {}) + list(filtered["FailedAndUnresolvableNodes"] or {}) == ["b"]
    assert [h["Host"] for h in scored] == ["a", "c"]
    assert again == filtered


async def test_other_requests_on_the_connection_go_to_aiohttp_after_fast_ones(conn: Conn) -> None:
    conn.writer.write(_post("/filter", FILTER))
    assert (await conn.answer())[0] == 200
    conn.writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = await conn.answer()
    assert (status, body) == (200, b"ok")
    conn.writer.write(_post("/nosuchverb", b"{}"))
    status, _, body = await conn.answer()
    assert status == 404 and "no such extender endpoint" in orjson.loads(body)["Error"]
    conn.writer.write(_post("/filter", FILTER))  # aiohttp answers the rest of this connection
    status, _, body = await conn.answer()
    assert status == 200 and orjson.loads(body)["Error"] == ""


async def test_connection_close_is_honoured(conn: Conn) -> None:
    conn.writer.write(_post("/filter", FILTER, extra="Connection: close\r\n"))
    assert (await conn.answer())[0] == 200
    assert await asyncio.wait_for(conn.reader.read(), 10) == b""  # then the server closes it


async def test_fast_answers_are_counted_in_the_metrics(served: tuple[ExtenderServer, int], conn: Conn) -> None:
    server, _ = served
    for body in (FILTER, b"{not json"):
        conn.writer.write(_post("/filter", body))
        await conn.answer()
    ok = server.metrics.registry.get_sample_value("kubesched_extender_requests_total",
                                                  {"verb": "filter", "code": "200"})
    bad = server.metrics.registry.get_sample_value("kubesched_extender_errors_total",
                                                   {"verb": "filter", "kind": "bad_request"})
    assert (ok, bad) == (1.0, 1.0)


async def test_an_idle_fast_connection_is_closed(registry: Registry) -> None:
    server = ExtenderServer(ExtenderService(ip_profile(registry), registry))
    runner, port = await start_server(server, "127.0.0.1", 0, header_timeout=5.0, idle_timeout=0.3)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        c = Conn(reader, writer)
        writer.write(_post("/filter", FILTER))
        assert (await c.answer())[0] == 200
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await runner.cleanup()


async def test_a_connection_in_use_outlives_the_idle_timeout_and_closes_once_idle(registry: Registry) -> None:
    # The idle timer is armed once and re-armed when it fires early: requests spread over longer
    # than idle_timeout, none of the gaps as long, keep the connection; then it closes when idle.
    server = ExtenderServer(ExtenderService(ip_profile(registry), registry))
    runner, port = await start_server(server, "127.0.0.1", 0, header_timeout=5.0, idle_timeout=1.0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        c = Conn(reader, writer)
        for _ in range(6):  # ~1.8 s in all
            writer.write(_post("/filter", FILTER))
            assert (await c.answer())[0] == 200
            await asyncio.sleep(0.3)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await runner.cleanup()
