"""Ending a process without tearing its heap down.

After ``kubesched simulate`` has written its answer, all that is left is the interpreter's
teardown: freeing every object of the cluster, the scheduler's table and the records one by one
(~0.1 s of CPU at 5,000 nodes / 10,000 pods, more with the cluster's size) to hand the memory back
to an operating system that is about to reclaim it anyway. A command that owns nothing else that
must be finalised (no open files of its own, no threads, no atexit work) asks to skip it; the
console script then flushes stdout and stderr and ends with ``os._exit`` and the same exit code.

Only the console script's call of the command group does this (``kubesched.cli``), never
``main.main(...)`` as click's test runner calls it, so a test process is never ended.
"""

from __future__ import annotations

import os
import sys

_requested = False


def request_fast_exit() -> None:
    """The running command has written all it has to: the process may end without teardown."""
    global _requested
    _requested = True


def reset() -> None:
    """Forget a request (the console script calls this before running a command)."""
    global _requested
    _requested = False


def exit_now_if_requested(code: object) -> None:
    """End the process with ``code`` (a ``SystemExit`` code: None or an int) if a command asked to
    skip teardown; else, or if the output cannot be flushed (a closed pipe), return and let the
    interpreter exit as usual, reporting what it must."""
    if not _requested or not (code is None or isinstance(code, int)):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code or 0)
