"""A renewal attempt ends at its deadline, whatever the request does with the cancellation.

The chaos suite's partition found a leader stopping 6 s after the cut with a 3 s renewDeadline:
the request's own timeout turned the elector's cancellation into a TimeoutError (nested timeouts),
the renewal's fast path caught it and went on to a full GET. The lock below does that on purpose."""

from __future__ import annotations

import asyncio
import time

from kubesched.live.leader import LeaderElectionRecord, LeaderElector


class SwallowingLease:
    """Every request hangs; a cancellation becomes a TimeoutError, as a nested timeout makes it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def _hang(self, what: str) -> str:
        self.calls.append(what)
        try:
            await asyncio.sleep(2.0)
        except asyncio.CancelledError:
            raise TimeoutError() from None
        return "1"

    async def get(self) -> tuple[LeaderElectionRecord, str] | None:
        await self._hang("get")
        return None

    async def create(self, record: LeaderElectionRecord) -> str:
        return await self._hang("create")

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> str:
        return await self._hang("update")


async def test_a_renewal_ends_at_its_deadline_even_when_the_request_swallows_the_cancellation() -> None:
    lease = SwallowingLease()
    el = LeaderElector(lease, "me", 4.0, 3.0, 0.5)
    # Leading with a valid lease: the next attempt takes the fast path (update, then get on failure).
    el.observed = LeaderElectionRecord("me", 4, "", "")
    el.observed_rv, el.observed_time = "1", time.monotonic()
    t0 = time.monotonic()
    assert not await el._attempt(0.3)
    assert time.monotonic() - t0 < 1.0  # not 0.3 + the GET's 2 s
    assert el.attempts["failed"] == 1
    assert lease.calls == ["update"]


async def test_hold_gives_the_lease_up_within_renew_deadline_plus_a_retry() -> None:
    lease = SwallowingLease()
    el = LeaderElector(lease, "me", 1.5, 0.5, 0.1)
    el.observed = LeaderElectionRecord("me", 2, "", "")
    el.observed_rv, el.observed_time = "1", time.monotonic()
    t0 = time.monotonic()
    await asyncio.wait_for(el.hold(), 5.0)
    assert time.monotonic() - t0 < 0.5 + 0.1 + 0.5  # renewDeadline + retryPeriod + slack
    assert not el.is_leader
