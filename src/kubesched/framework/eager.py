"""Start a coroutine eagerly: run it synchronously until it first has to wait.

The binding cycle of most pods never waits in the simulator (the in-memory bind completes at
once) and waits only on the bind request in the live shell. Creating an asyncio Task per pod up
front costs more than the rest of the binding bookkeeping, so the coroutine is stepped right away
and a Task is made only if it suspends — what Python 3.12's ``asyncio.eager_task_factory`` does,
written out for 3.11.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Generator
from typing import Any

log = logging.getLogger(__name__)


class _Resumed(Coroutine[Any, Any, None]):
    """The rest of a started coroutine, as a coroutine a Task can drive: its first step hands
    the Task the future the coroutine is waiting on; later steps (and cancellation, even before
    the Task first runs) go straight to the coroutine."""

    __slots__ = ("coro", "pending", "started")

    def __init__(self, coro: Coroutine[Any, Any, None], pending: Any) -> None:
        self.coro = coro
        self.pending: Any = pending
        self.started = False

    def send(self, value: Any) -> Any:
        if not self.started:
            self.started = True
            return self.pending
        return self.coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self.started = True
        exc = typ if isinstance(typ, BaseException) else (val if isinstance(val, BaseException) else typ())
        return self.coro.throw(exc)

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("_Resumed is driven by a Task, not awaited")


def start_eagerly(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run ``coro`` until it completes (returns None) or first suspends (returns the Task that
    carries it on). An exception raised before the first suspension is logged, as a Task's would
    be, and does not reach the caller."""
    try:
        pending = coro.send(None)
    except StopIteration:
        return None
    except Exception:
        log.exception("coroutine %s failed", getattr(coro, "__qualname__", coro))
        return None
    return asyncio.get_running_loop().create_task(_Resumed(coro, pending))
