"""A TCP proxy that injects network faults, for chaos tests and benchmarks.

Put it between a client and a server (kubesched and the kube-apiserver, kube-scheduler and an
extender) and, while traffic flows, change what the network does:

* ``latency`` — every chunk is held this long before it is forwarded (each direction);
* ``reset()`` — every open connection is aborted (the peers see a connection reset);
* ``partition()`` / ``heal()`` — a black hole: open connections stay open but nothing passes
  (what a dead link or a dropped route looks like; the peers only find out by timing out) and new
  connections are accepted and then ignored. ``heal()`` aborts the held connections, so nothing
  written during the partition is ever delivered late, and forwards again.

TLS passes through untouched (it is plain TCP here), so a kubeconfig only needs its ``server``
pointed at :attr:`TcpProxy.address`. The proxy runs on an event loop of its own in a daemon
thread; every method is safe to call from any thread::

    with TcpProxy("127.0.0.1", apiserver_port) as proxy:
        kubeconfig = retarget_kubeconfig(original, proxy.address, "/tmp/via-proxy.kubeconfig")
        ...
        proxy.latency = 0.2
        proxy.partition(); time.sleep(30); proxy.heal()
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ProxyStats", "TcpProxy", "retarget_kubeconfig"]

_CHUNK = 64 * 1024


@dataclass
class ProxyStats:
    connections: int = 0
    resets: int = 0
    partitions: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


class TcpProxy:
    """Listens on ``listen_host:listen_port`` (0: a free port) and forwards to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1",
                 listen_port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = listen_port
        self.stats = ProxyStats()
        self._latency = 0.0
        self._partitioned = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._flowing = asyncio.Event()  # set while not partitioned (created here, bound to the loop lazily)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    def start(self) -> TcpProxy:
        self._thread = threading.Thread(target=self._run, name=f"tcpproxy-{self.target[1]}", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(10)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> TcpProxy:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = loop.run_until_complete(
                asyncio.start_server(self._accept, self.listen_host, self.port, backlog=512)
            )
            self.port = int(self._server.sockets[0].getsockname()[1])
        except BaseException as e:
            self._error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._flowing.set()  # connections held by a partition end (aborted just below)
        self._abort_all()
        # The forwarding tasks end on the aborted connections; give them a moment to (no
        # "Task was destroyed but it is pending" when the loop stops).
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)

    # -- faults ----------------------------------------------------------------------------------
    @property
    def latency(self) -> float:
        """Seconds each chunk waits before it is forwarded, in each direction."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        self._latency = max(0.0, float(seconds))

    @property
    def partitioned(self) -> bool:
        return self._partitioned

    def reset(self) -> int:
        """Abort every open connection; returns how many there were."""
        return self._call(self._abort_all)

    def partition(self) -> None:
        """Stop forwarding anything, in both directions, until :meth:`heal`."""
        def cut() -> int:
            self._partitioned = True
            self.stats.partitions += 1
            self._flowing.clear()
            return 0

        self._call(cut)

    def heal(self) -> None:
        """End a partition: the connections held through it are aborted, new ones flow again."""
        def mend() -> int:
            n = self._abort_all() if self._partitioned else 0
            self._partitioned = False
            self._flowing.set()
            return n

        self._call(mend)

    def _call(self, fn: Any) -> int:
        loop = self._loop
        if loop is None:
            raise RuntimeError("TcpProxy is not started")

        async def run() -> int:
            return int(fn())

        return asyncio.run_coroutine_threadsafe(run(), loop).result(10)

    def _abort_all(self) -> int:
        n = len(self._conns)
        for down, up in list(self._conns):
            for w in (down, up):
                if w is not None:
                    w.transport.abort()
        self._conns.clear()
        self.stats.resets += n
        return n

    # -- forwarding ------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (writer, None)
        self._conns.add(pair)
        try:
            await self._flowing.wait()  # a partition also swallows new connections
            if pair not in self._conns:
                return
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._conns.discard(pair)
            writer.transport.abort()
            return
        if pair not in self._conns:  # aborted while connecting
            up_writer.transport.abort()
            return
        self._conns.discard(pair)
        pair = (writer, up_writer)
        self._conns.add(pair)
        try:
            await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))
        finally:
            self._conns.discard(pair)
            for w in (writer, up_writer):
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        """Forward one direction. Latency delays each chunk from when it arrived, not from when
        the previous one left (a slow link, not a narrow one)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            try:
                while data := await reader.read(_CHUNK):
                    queue.put_nowait((loop.time() + self._latency, data))
            except OSError:
                pass
            queue.put_nowait((loop.time() + self._latency, b""))

        reading = asyncio.ensure_future(read())
        try:
            while True:
                due, data = await queue.get()
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not self._flowing.is_set():
                    # Swallowed by the partition: this connection is aborted when it heals.
                    await self._flowing.wait()
                    return
                if not data:
                    if writer.can_write_eof():
                        with contextlib.suppress(OSError):
                            writer.write_eof()
                    return
                if writer.transport.is_closing():
                    return
                if upstream:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
                writer.write(data)
                await writer.drain()
        except OSError:
            return
        finally:
            reading.cancel()


def retarget_kubeconfig(source: str | Path, address: str, dest: str | Path) -> Path:
    """A copy of the kubeconfig ``source`` whose clusters point at ``https://<address>`` (the
    proxy); certificates are kept, so the apiserver's certificate must also be valid for the
    proxy's host (127.0.0.1 for the local control plane)."""
    doc = yaml.safe_load(Path(source).read_text())
    for cluster in doc.get("clusters") or []:
        cluster["cluster"]["server"] = f"https://{address}"
    out = Path(dest)
    out.write_text(yaml.safe_dump(doc))
    return out
