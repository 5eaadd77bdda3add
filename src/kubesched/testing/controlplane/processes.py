"""Child processes of the control plane: each in its own process group, logging to a file, killed
with its parent; plus the polling helper every start-up waits with."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = [
    "Component",
    "ComponentDied",
    "free_port",
    "stop_all",
    "tail_file",
    "terminate_group",
    "wait_for",
]

T = TypeVar("T")


class ComponentDied(RuntimeError):
    """A component process exited while something was waiting for it."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free now: another process may take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Component:
    """One child process in its own process group, logging to a file. ``stop()`` is idempotent."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        env: Mapping[str, str] | None = None,
        *,
        die_with_parent: bool = True,
    ) -> None:
        self.name, self.argv, self.log_path = name, list(argv), log
        self.env = dict(env) if env is not None else None
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Component:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: signals from a terminal's Ctrl-C don't reach it
                preexec_fn=_die_with_parent if self.die_with_parent else None,
                env=self.env,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        p = self.proc
        if p is None:
            return
        terminate_group(p.pid, p, timeout)
        self.proc = None

    def tail(self, lines: int = 60) -> str:
        return tail_file(self.log_path, lines)


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the parent dies, even by SIGKILL, when atexit and
    finalizers never run (Linux only; a no-op elsewhere). PR_SET_PDEATHSIG = 1. Note that it fires
    when the *thread* that started the child exits: start clusters from a long-lived thread."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before prctl
            os._exit(1)


def terminate_group(pid: int, popen: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM the process group, wait, then SIGKILL it."""
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if popen is not None:
                if popen.poll() is not None:
                    break
            elif not _pid_alive(pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    # the group may hold children (none of ours fork, but be thorough)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(Exception):
            popen.wait(timeout=5)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def tail_file(path: Path, lines: int = 60) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * lines))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _stop_order(c: Component) -> int:
    # clients first, then the apiserver, etcd last (whatever order they were (re)started in)
    for i, prefix in enumerate(("kube-scheduler", "kwok", "kube-apiserver", "etcd")):
        if c.name.startswith(prefix):
            return i
    return -1


def stop_all(components: list[Component]) -> None:
    for c in sorted(components, key=_stop_order):
        with contextlib.suppress(Exception):
            c.stop(timeout=10.0)
    components.clear()


def wait_for(predicate: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1, message: str = "") -> T:
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` expires.

    Exceptions from the predicate count as "not yet"; the last one is chained to the TimeoutError."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            v = predicate()
            if v:
                return v
        except ComponentDied:
            raise  # no point waiting for a process that is gone
        except Exception as e:
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {message or predicate}") from last_exc
        time.sleep(interval)
