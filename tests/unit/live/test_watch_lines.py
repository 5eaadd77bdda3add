"""The watch stream splitter (kube/api.py _lines): objects cut anywhere by the network."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from kubesched.kube.api import _lines


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


class _Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)


EVENTS = [{"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}, "data": "x" * (i * 37)}} for i in range(6)]
STREAM = b"".join(orjson.dumps(e) + b"\n" for e in EVENTS)


async def collect(chunks: list[bytes]) -> list[dict[str, Any]]:
    return [e async for e in _lines(_Response(chunks))]  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [1, 7, 64, 1000, len(STREAM)])
async def test_events_come_out_whole_whatever_the_chunking(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert await collect(chunks) == EVENTS


async def test_blank_lines_are_skipped_and_a_last_line_without_newline_counts() -> None:
    body = b"\n" + orjson.dumps(EVENTS[0]) + b"\n\n  \n" + orjson.dumps(EVENTS[1])
    assert await collect([body[:5], body[5:]]) == EVENTS[:2]
