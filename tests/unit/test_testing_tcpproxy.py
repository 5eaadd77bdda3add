"""kubesched.testing.tcpproxy: what a client on the far side of the proxy sees for each fault."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesched.testing.tcpproxy import TcpProxy, retarget_kubeconfig


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with TcpProxy("127.0.0.1", server.server_address[1]) as p:
        yield p
    server.shutdown()
    server.server_close()


def _connect(p: TcpProxy, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", p.port), timeout=timeout)


def _echo(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_forwards_both_ways_and_adds_latency(proxy: TcpProxy) -> None:
    with _connect(proxy) as s:
        assert _echo(s, b"hello") == b"hello"
        proxy.latency = 0.2
        t0 = time.monotonic()
        assert _echo(s, b"slow") == b"slow"
        assert time.monotonic() - t0 >= 0.4  # held once each way
    assert proxy.stats.bytes_up >= 9 and proxy.stats.bytes_down >= 9


def test_reset_aborts_open_connections_and_new_ones_work(proxy: TcpProxy) -> None:
    with _connect(proxy) as s:
        assert _echo(s, b"a") == b"a"
        assert proxy.reset() == 1
        with pytest.raises(OSError):  # reset by peer, or a clean EOF turned into an error below
            s.sendall(b"b")
            if not s.recv(10):
                raise ConnectionResetError("closed")
    with _connect(proxy) as s:
        assert _echo(s, b"c") == b"c"


def test_partition_holds_everything_and_heal_drops_what_was_held(proxy: TcpProxy) -> None:
    held = _connect(proxy, timeout=0.5)
    assert _echo(held, b"x") == b"x"
    proxy.partition()
    held.sendall(b"lost")
    with pytest.raises(TimeoutError):
        held.recv(10)
    fresh = _connect(proxy, timeout=0.5)  # accepted, never answered
    fresh.sendall(b"y")
    with pytest.raises(TimeoutError):
        fresh.recv(10)
    proxy.heal()
    for s in (held, fresh):  # aborted at the heal: nothing written during the partition arrives late
        s.settimeout(2)
        with pytest.raises(OSError):
            if not s.recv(10):
                raise ConnectionResetError("closed")
        s.close()
    with _connect(proxy) as s:
        assert _echo(s, b"after") == b"after"


def test_retarget_kubeconfig_points_every_cluster_at_the_proxy(tmp_path: Path) -> None:
    src = tmp_path / "kc"
    src.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                                          "certificate-authority": "/ca"}}]}))
    out = yaml.safe_load(retarget_kubeconfig(src, "127.0.0.1:9", tmp_path / "out").read_text())
    assert out["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:9", "certificate-authority": "/ca"}
