"""Killing a scheduler mid-burst, for the tests that check what a SIGKILL leaves behind (the
underlay addresses of issue 30, the DRA devices of issue 27): imported on its own, like
:mod:`kubesched.testing.controlplane`."""

from __future__ import annotations

import os
import signal
import threading


class Killer:
    """SIGKILLs a process from a watch thread at the ``at``-th bind seen (call it with the count of
    binds seen so far); remembers how many the watch had seen then (binds already in flight may
    land after it). Set ``pid`` once the process runs."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.pid: int | None = None
        self.killed_at_bind: int | None = None
        self.done = threading.Event()

    def __call__(self, count: int) -> None:
        if count >= self.at and self.pid is not None and not self.done.is_set():
            os.kill(self.pid, signal.SIGKILL)
            self.killed_at_bind = count
            self.done.set()
