"""What the informer tests share: a recorder of handler calls, waiting for a condition, a fast
backoff, and an informer started against the fake apiserver (fakeapi.py) and always torn down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from kubesched.kube.informer import Handlers, Informer
from kubesched.kube.ratelimit import Backoff
from unit.live.fakeapi import FakeCollection, serve


class Recorder:
    """The handler calls an informer made, as (kind, name, uid)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, str]] = []
        self.changed = asyncio.Event()

    def handlers(self) -> Handlers:
        def add(o: dict[str, Any]) -> None:
            self._rec("add", o)

        def update(old: dict[str, Any], o: dict[str, Any]) -> None:
            self._rec("update", o)

        def delete(o: dict[str, Any]) -> None:
            self._rec("delete", o)

        return Handlers(add, update, delete)

    def _rec(self, kind: str, o: dict[str, Any]) -> None:
        self.log.append((kind, o["metadata"]["name"], o["metadata"]["uid"]))
        self.changed.set()

    async def wait_for(self, n: int, timeout: float = 5.0) -> None:
        async def go() -> None:
            while len(self.log) < n:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(go(), timeout)


async def until(pred: Callable[[], Any], timeout: float = 5.0) -> None:
    async def go() -> None:
        while not pred():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(go(), timeout)


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, cap=0.05, jitter=0.0)


async def collection_of(*names: str) -> FakeCollection:
    """A fake collection holding an object per name (uid ``uid-NAME``)."""
    coll = FakeCollection()
    for name in names:
        await coll.put(name)
    return coll


@asynccontextmanager
async def started_informer(
    coll: FakeCollection, handlers: Handlers | None = None, **options: Any
) -> AsyncIterator[tuple[Informer, Recorder]]:
    """An informer on ``coll`` served by the fake apiserver, started (with a fast backoff unless
    ``options`` say otherwise), and its handler calls recorded unless ``handlers`` are given;
    stopped and closed on the way out, whatever happened."""
    server, api = await serve(coll)
    rec = Recorder()
    options.setdefault("backoff", fast_backoff())
    inf = Informer(api, coll.path, handlers if handlers is not None else rec.handlers(), **options)
    inf.start()
    try:
        yield inf, rec
    finally:
        await inf.stop()
        await api.close()
        await server.close()
