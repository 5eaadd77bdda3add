"""Leader election state machine (client-go semantics) with a fake clock and an in-memory Lease."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from kubesched.live.leader import ConflictError, LeaderElectionRecord, LeaderElector


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class MemoryLease:
    """One Lease with resourceVersion-checked updates; ``fail`` makes every call raise."""

    def __init__(self) -> None:
        self.record: LeaderElectionRecord | None = None
        self.rv = 0
        self.fail = False
        self.writes = 0

    async def get(self) -> tuple[LeaderElectionRecord, str] | None:
        if self.fail:
            raise OSError("apiserver unreachable")
        return None if self.record is None else (self.record, str(self.rv))

    async def create(self, record: LeaderElectionRecord) -> str:
        if self.fail:
            raise OSError("apiserver unreachable")
        if self.record is not None:
            raise ConflictError("exists")
        self.record, self.rv = record, self.rv + 1
        self.writes += 1
        return str(self.rv)

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> str:
        if self.fail:
            raise OSError("apiserver unreachable")
        if resource_version != str(self.rv):
            raise ConflictError("stale")
        self.record, self.rv = record, self.rv + 1
        self.writes += 1
        return str(self.rv)


def elector(lease: MemoryLease, clock: Clock, ident: str) -> LeaderElector:
    async def no_sleep(_: float) -> None:
        await asyncio.sleep(0)

    return LeaderElector(lease, ident, 15.0, 10.0, 2.0, now=clock, wall=clock, sleep=no_sleep)


async def test_first_candidate_creates_the_lease_second_waits_until_expiry() -> None:
    lease, clock = MemoryLease(), Clock()
    a, b = elector(lease, clock, "a"), elector(lease, clock, "b")
    assert await a.try_acquire_or_renew()
    assert a.is_leader and lease.record is not None
    assert lease.record.holder_identity == "a" and lease.record.lease_duration_seconds == 15
    assert lease.record.leader_transitions == 0

    assert not await b.try_acquire_or_renew()  # held and fresh
    assert b.leader == "a" and not b.is_leader
    clock.t += 14.9
    assert not await b.try_acquire_or_renew()  # b first saw it 14.9 s ago: still valid
    clock.t += 0.2
    assert await b.try_acquire_or_renew()  # expired from b's own observation
    assert lease.record.holder_identity == "b"
    assert lease.record.leader_transitions == 1


async def test_renewals_keep_the_lease_and_the_acquire_time() -> None:
    lease, clock = MemoryLease(), Clock()
    a, b = elector(lease, clock, "a"), elector(lease, clock, "b")
    assert await a.try_acquire_or_renew()
    acquired = lease.record.acquire_time if lease.record else ""
    for _ in range(10):
        clock.t += 2
        assert await a.try_acquire_or_renew()  # fast path: optimistic update
        assert not await b.try_acquire_or_renew()  # b sees the record change each time
    assert lease.record is not None
    assert lease.record.acquire_time == acquired
    assert lease.record.leader_transitions == 0


async def test_observed_time_uses_the_local_clock_not_the_holders_timestamps() -> None:
    lease, clock = MemoryLease(), Clock()
    lease.record = LeaderElectionRecord("other", 15, "1999-01-01T00:00:00.000000Z", "1999-01-01T00:00:00.000000Z")
    lease.rv = 7
    b = elector(lease, clock, "b")
    # renewTime is ancient by wall clock, but b only just observed the record: not expired for b.
    assert not await b.try_acquire_or_renew()
    clock.t += 16
    assert await b.try_acquire_or_renew()


async def test_released_lease_is_taken_at_once() -> None:
    lease, clock = MemoryLease(), Clock()
    a, b = elector(lease, clock, "a"), elector(lease, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a.release()
    assert lease.record is not None
    assert lease.record.holder_identity == "" and lease.record.lease_duration_seconds == 1
    assert not a.is_leader
    assert await b.try_acquire_or_renew()  # no waiting for the 15 s lease
    assert lease.record.holder_identity == "b" and lease.record.leader_transitions == 1


async def test_release_after_a_renewal_the_elector_never_saw_answered() -> None:
    """A renewal cancelled by the shutdown may still be applied by the apiserver: the elector's
    resourceVersion is stale (409) while the lease is still its own. It reads the lease again and
    releases it, so the standby takes over at once (a fresh-clone CI run saw it wait instead)."""
    lease, clock = MemoryLease(), Clock()
    a, b = elector(lease, clock, "a"), elector(lease, clock, "b")
    assert await a.try_acquire_or_renew()
    assert lease.record is not None
    lease.record, lease.rv = replace(lease.record, renew_time="later"), lease.rv + 1  # applied, unseen
    assert await a.release()
    assert lease.record.holder_identity == ""
    assert await b.try_acquire_or_renew()
    # Someone else's lease is not given up.
    lease.record, lease.rv = replace(lease.record, holder_identity="c"), lease.rv + 1
    assert await b.release() and lease.record.holder_identity == "c"


async def test_concurrent_takeover_only_one_wins() -> None:
    lease, clock = MemoryLease(), Clock()
    lease.record = LeaderElectionRecord("", 1, "", "")
    lease.rv = 3
    b, c = elector(lease, clock, "b"), elector(lease, clock, "c")
    results = await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert lease.record.holder_identity in ("b", "c")


async def test_hold_returns_when_renewals_fail_past_the_renew_deadline() -> None:
    lease, clock = MemoryLease(), Clock()
    slept: list[float] = []

    async def sleep(d: float) -> None:
        slept.append(d)
        clock.t += d
        await asyncio.sleep(0)

    a = LeaderElector(lease, "a", 15.0, 10.0, 2.0, now=clock, wall=lambda: 1.7e9, sleep=sleep)
    assert await a.try_acquire_or_renew()
    lease.fail = True
    start = clock.t
    await asyncio.wait_for(a.hold(), 5)
    # gave up once renewDeadline (10 s) passed without a successful renewal, not before
    assert 10.0 <= clock.t - start <= 12.0 + 2.0
    assert not a.is_leader


async def test_hold_returns_when_someone_else_holds_the_lease() -> None:
    lease, clock = MemoryLease(), Clock()

    async def sleep(d: float) -> None:
        clock.t += d
        await asyncio.sleep(0)

    a = LeaderElector(lease, "a", 15.0, 10.0, 2.0, now=clock, wall=lambda: 1.7e9, sleep=sleep)
    assert await a.try_acquire_or_renew()
    assert lease.record is not None
    lease.record = replace(lease.record, holder_identity="intruder")  # e.g. a manual edit
    lease.rv += 1
    await asyncio.wait_for(a.hold(), 5)
    assert not a.is_leader and a.leader == "intruder"


async def test_acquire_retries_until_the_lease_is_free() -> None:
    lease, clock = MemoryLease(), Clock()
    lease.record = LeaderElectionRecord("other", 15, "", "")
    lease.rv = 1

    async def sleep(d: float) -> None:
        clock.t += d
        await asyncio.sleep(0)

    b = LeaderElector(lease, "b", 15.0, 10.0, 2.0, now=clock, wall=lambda: 1.7e9, sleep=sleep)
    await asyncio.wait_for(b.acquire(), 5)
    assert b.is_leader
    assert clock.t - 1000.0 >= 15.0


def test_invalid_timings_are_rejected() -> None:
    with pytest.raises(ValueError, match="leaseDuration"):
        LeaderElector(MemoryLease(), "a", 10.0, 10.0, 2.0)
    with pytest.raises(ValueError, match="retryPeriod"):
        LeaderElector(MemoryLease(), "a", 15.0, 2.0, 2.0)


def test_lease_record_round_trip() -> None:
    rec = LeaderElectionRecord("me", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z", 3)
    assert LeaderElectionRecord.from_lease({"spec": rec.to_spec()}) == rec
