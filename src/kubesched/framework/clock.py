"""Injected clocks: the core never reads time itself, so the simulator can run in virtual time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic within one run."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch, for timestamps written to the API (upstream's
        ``time.Now()`` there, e.g. a ResourceClaim's ``allocationTimestamp``)."""
        ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class FakeClock:
    """A clock that only moves when told to (tests and the simulator's virtual time)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        """The virtual time, read as seconds since the epoch (0: 1970-01-01T00:00:00Z)."""
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError("a clock cannot go backwards")
        self._now = t
