"""``kubesched sweep --engine dask`` (simulate/whatif/sweep_dask.py) before any simulation runs: the options,
the missing extra, and every wrong address or cluster failing with one line in bounded time. The
sweep itself on a real multi-process Dask cluster: tests/integration/test_sweep_dask.py."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from kubesched.app.startup import UserError
from kubesched.cli import main


def run_sweep(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["sweep", "-q", *args], env={"COLUMNS": "300", **(env or {})})


def failed(result: Result, fragment: str) -> None:
    assert result.exit_code == 2 and fragment in result.output, (result.exit_code, result.output)
    assert "Traceback" not in result.output


def test_without_dask_installed_the_engine_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    failed(run_sweep("--engine", "dask", "--dask-scheduler", "tcp://127.0.0.1:8786", "--nodes", "20"),
           "--engine dask needs Dask's distributed package: pip install 'kubesched[dask]'")


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "dask"], "--engine dask: give --dask-scheduler tcp://HOST:PORT (or set DASK_SCHEDULER_ADDRESS)"),
    (["--engine", "dask", "--dask-scheduler", "tcp://127.0.0.1:8786", "--workers", "2"],
     "--workers is for --engine local"),
    (["--dask-scheduler", "tcp://127.0.0.1:8786"], "--dask-scheduler needs --engine dask"),
    (["--engine", "dask", "--dask-scheduler", "scheduler-host"], "--dask-scheduler 'scheduler-host': missing port"),
    (["--engine", "dask", "--dask-scheduler", "http://127.0.0.1:8787"], "unknown address scheme 'http'"),
])
def test_engine_options_that_cannot_work_are_refused(args: list[str], message: str) -> None:
    failed(run_sweep(*args, "--nodes", "20"), message)


def test_the_dask_address_from_the_environment_does_not_disturb_a_local_sweep() -> None:
    result = run_sweep("--nodes", "20", "--workers", "1", env={"DASK_SCHEDULER_ADDRESS": "tcp://127.0.0.1:1"})
    assert result.exit_code == 0 and "on 1 worker(s), over the seeds" in result.output, result.output


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_nothing_listening_fails_at_once_naming_the_address() -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    failed(run_sweep("--engine", "dask", "--dask-scheduler", address, "--nodes", "20"),
           f"cannot reach the Dask scheduler at {address}")


@pytest.fixture
def tcp_server() -> Iterator[Callable[[bytes | None], str]]:
    """A TCP server that answers every connection with ``reply`` and closes it (None: says nothing,
    keeps it open) — not a Dask scheduler."""
    servers: list[socket.socket] = []
    held: list[socket.socket] = []

    def start(reply: bytes | None) -> str:
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)

        def serve() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                if reply is None:
                    held.append(conn)
                else:
                    conn.recv(65536)
                    conn.sendall(reply)
                    conn.close()

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{srv.getsockname()[1]}"

    yield start
    for s in servers + held:
        s.close()


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"],
                         ids=["silent", "http"])
def test_a_server_that_is_not_a_dask_scheduler_is_named_within_the_timeout(
        tcp_server: Callable[[bytes | None], str], reply: bytes | None) -> None:
    from kubesched.simulate.whatif.sweep_dask import connect

    address = tcp_server(reply)
    start = time.monotonic()
    with pytest.raises(UserError, match=f"{address} did not answer as a Dask scheduler"), connect(address, timeout=1):
        pass
    assert time.monotonic() - start < 10  # bounded by the timeout (a Dask Client alone would wait for ever)


def test_a_scheduler_without_workers_or_with_another_kubesched_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import LocalCluster

    import kubesched
    from kubesched.simulate.whatif.sweep_dask import connect

    # In this process (threads), on a real TCP port.
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0"
                      ) as cluster:
        with pytest.raises(UserError, match=r"has no workers .* start some with: dask worker tcp://"), \
                connect(cluster.scheduler_address, timeout=1):
            pass
        cluster.scale(1)
        monkeypatch.setattr(kubesched, "__version__", "0.0.0+other")
        with pytest.raises(UserError, match=r"has kubesched 0\.1\.0 \(here: 0\.0\.0\+other\); install the same"), \
                connect(cluster.scheduler_address, timeout=30):
            pass
