"""Pure rate-limiting pieces of the live shell, each driven by an injected clock.

* :class:`TokenBucket` — client-go's client-side QPS/burst limiter (``flowcontrol.NewTokenBucketRateLimiter``,
  i.e. ``golang.org/x/time/rate``): a bucket of ``burst`` tokens refilled at ``qps`` per second; a
  request that finds the bucket empty *reserves* a future token and sleeps until then, so waiting
  callers are served in arrival order and the long-run rate never exceeds ``qps``.
* :class:`Backoff` — the reflector's reconnect backoff (client-go ``wait.NewExponentialBackoffManager``
  with 800 ms initial, 30 s cap, factor 2, full jitter, reset after a quiet period).
* :class:`PerKeyRateLimiter` — "at most once per interval per key unless the message changed", used
  for FailedScheduling events and PodScheduled condition writes so a stuck pod cannot flood the
  apiserver.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

Now = Callable[[], float]


class TokenBucket:
    def __init__(self, qps: float, burst: int, now: Now = time.monotonic) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive (use None for no limit)")
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._now = now
        self._tokens = float(self.burst)
        self._last = now()

    def reserve(self) -> float:
        """Take one token now, possibly on credit; return how long the caller must wait for it."""
        now = self._now()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


class Backoff:
    """Exponential reconnect backoff with jitter: 0.8 s, 1.6 s, ... capped at 30 s.

    ``next()`` returns the delay before the next attempt; ``reset()`` after a healthy connection.
    The delay is uniformly jittered in [d, 2d) as client-go's jitter factor 1.0, then capped.
    """

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._step = initial

    def next(self) -> float:
        base = self._step
        self._step = min(self.cap, self._step * self.factor)
        delay = base + (base * self.jitter * self._rng.random() if self.jitter > 0 else 0.0)
        return min(delay, self.cap)

    def reset(self) -> None:
        self._step = self.initial


class PerKeyRateLimiter:
    """Allow an action for a key at most once per ``interval`` seconds unless its message changed."""

    def __init__(self, interval: float, now: Now = time.monotonic, max_keys: int = 100_000) -> None:
        self.interval = interval
        self._now = now
        self._max_keys = max_keys
        self._last: dict[str, tuple[float, str]] = {}

    def allow(self, key: str, message: str) -> bool:
        now = self._now()
        seen = self._last.get(key)
        if seen is not None and seen[1] == message and now - seen[0] < self.interval:
            return False
        if seen is None and len(self._last) >= self._max_keys:
            self._evict(now)
        self._last[key] = (now, message)
        return True

    def forget(self, key: str) -> None:
        self._last.pop(key, None)

    def __len__(self) -> int:
        return len(self._last)

    def _evict(self, now: float) -> None:
        """Drop entries older than the interval (they would be allowed again anyway)."""
        for k in [k for k, (t, _) in self._last.items() if now - t >= self.interval]:
            del self._last[k]
        if len(self._last) >= self._max_keys:  # still full: drop the oldest half
            for k in sorted(self._last, key=lambda k: self._last[k][0])[: len(self._last) // 2]:
                del self._last[k]
