"""Token bucket (client QPS/burst), reconnect backoff and per-key rate limiting."""

from __future__ import annotations

import random

import pytest

from kubesched.kube.ratelimit import Backoff, PerKeyRateLimiter, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_token_bucket_burst_then_qps() -> None:
    clock = Clock()
    tb = TokenBucket(qps=10, burst=5, now=clock)
    assert [tb.reserve() for _ in range(5)] == [0.0] * 5
    # The bucket is empty: each further request reserves the next token 0.1 s later.
    assert [round(tb.reserve(), 6) for _ in range(3)] == [0.1, 0.2, 0.3]
    clock.t = 1.0  # the refill pays the debt (3 tokens) and leaves 7 → capped at burst 5? no: 10-3=7 → 5
    assert [tb.reserve() for _ in range(5)] == [0.0] * 5
    assert tb.reserve() > 0


def test_token_bucket_long_run_rate_never_exceeds_qps() -> None:
    clock = Clock()
    tb = TokenBucket(qps=50, burst=100, now=clock)
    granted_at = []
    for _ in range(1000):
        granted_at.append(clock.t + tb.reserve())
    # 100 immediately, then 900 more at 50/s = 18 s
    assert granted_at[-1] == pytest.approx(18.0)


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)


def test_backoff_doubles_with_jitter_and_caps_then_resets() -> None:
    b = Backoff(initial=0.8, cap=30.0, rng=random.Random(1))
    delays = [b.next() for _ in range(10)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0]
    for d, base in zip(delays, bases, strict=True):
        assert base <= d <= min(2 * base, 30.0)
    assert delays[-1] == 30.0
    b.reset()
    assert 0.8 <= b.next() < 1.6


def test_backoff_without_jitter_is_exact() -> None:
    b = Backoff(initial=1.0, cap=5.0, jitter=0.0)
    assert [b.next() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_per_key_limiter_once_per_interval_unless_the_message_changes() -> None:
    clock = Clock()
    rl = PerKeyRateLimiter(30.0, now=clock)
    assert rl.allow("pod-a", "0/3 nodes are available: 3 Insufficient cpu.")
    assert not rl.allow("pod-a", "0/3 nodes are available: 3 Insufficient cpu.")
    assert rl.allow("pod-b", "0/3 nodes are available: 3 Insufficient cpu.")  # per key
    assert rl.allow("pod-a", "0/4 nodes are available: 4 Insufficient cpu.")  # the message changed
    clock.t = 29.9
    assert not rl.allow("pod-a", "0/4 nodes are available: 4 Insufficient cpu.")
    clock.t = 30.0
    assert rl.allow("pod-a", "0/4 nodes are available: 4 Insufficient cpu.")
    rl.forget("pod-a")
    assert rl.allow("pod-a", "0/4 nodes are available: 4 Insufficient cpu.")


def test_per_key_limiter_is_bounded() -> None:
    clock = Clock()
    rl = PerKeyRateLimiter(30.0, now=clock, max_keys=100)
    for i in range(1000):
        clock.t += 0.001
        assert rl.allow(f"pod-{i}", "m")
    assert len(rl) <= 100
