"""Slow and oversized clients against the extender's real server (``start_server``, a TCP socket):
trickled headers are cut off, a trickled body gets 408, an oversized one 413, both with a JSON
``Error``; and the server keeps answering others meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from kubesched.extender.server import ExtenderServer, start_server
from kubesched.extender.service import ExtenderService
from kubesched.framework.registry import Registry
from kubesched.testing import node, pod
from unit.extender.ext_helpers import ip_profile

HEADER_TIMEOUT = 0.5
BODY_TIMEOUT = 0.5
MAX_BODY = 64 * 1024
VALID = orjson.dumps({"Pod": pod("p", cpu="100m"), "Nodes": {"items": [node("a")]}})


@pytest.fixture
async def port(registry: Registry) -> AsyncIterator[int]:
    server = ExtenderServer(ExtenderService(ip_profile(registry), registry), timeout=BODY_TIMEOUT, max_body=MAX_BODY)
    runner, bound = await start_server(server, "127.0.0.1", 0, header_timeout=HEADER_TIMEOUT, idle_timeout=5.0)
    try:
        yield bound
    finally:
        await runner.cleanup()


async def _request(port: int, raw: bytes) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(
            b"content-length"))
        body = await asyncio.wait_for(reader.readexactly(length), 5)
        return int(head.split(b" ")[1]), orjson.loads(body)
    finally:
        writer.close()


def _post(path: str, body: bytes, length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n\r\n"
            .encode() + body)


async def test_trickled_headers_are_cut_off_and_others_are_served_meanwhile(port: int) -> None:
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(50)]
    t0 = time.monotonic()
    for _, w in conns:
        w.write(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
    status, answer = await _request(port, _post("/filter", VALID))  # not held up by the 50 slow ones
    assert status == 200 and answer["Error"] == ""
    for i in range(8):  # keep trickling a header line every 0.2 s: the deadline is from the connection's start
        for _, w in conns:
            with contextlib.suppress(OSError):  # closed by the server already
                w.write(f"X-Slow-{i}: y\r\n".encode())
        await asyncio.sleep(0.2)
    closed = 0
    for r, w in conns:
        try:
            got = await asyncio.wait_for(r.read(), 5)  # EOF: the server closed it
        except ConnectionError:  # or reset it
            got = b""
        closed += got == b""
        w.close()
    assert closed == len(conns)
    assert time.monotonic() - t0 < HEADER_TIMEOUT + 5


async def test_trickled_body_gets_408_with_an_error(port: int) -> None:
    t0 = time.monotonic()
    status, answer = await _request(port, _post("/filter", VALID[:10], length=len(VALID)))
    assert status == 408
    assert str(answer["Error"]).startswith("kubesched extender: the filter request body did not arrive")
    assert time.monotonic() - t0 < BODY_TIMEOUT + 3


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
async def test_oversized_body_gets_413_with_an_error(port: int, verb: str) -> None:
    status, answer = await _request(port, _post(f"/{verb}", b"{" + b" " * (MAX_BODY + 10) + b"}"))
    assert status == 413
    assert "larger than" in str(answer["Error"])


async def test_oversized_chunked_body_gets_413_with_an_error(port: int) -> None:
    chunk = b" " * 16384
    chunks = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(6)) + b"0\r\n\r\n"
    raw = (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
           + chunks)
    status, answer = await _request(port, raw)
    assert status == 413 and "larger than" in str(answer["Error"])
