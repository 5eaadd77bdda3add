"""Lease-based leader election, a port of client-go ``tools/leaderelection`` on a ``coordination.k8s.io/v1`` Lease.

Semantics kept from client-go (``leaderelection.go``):

* ``try_acquire_or_renew``: a leader first renews optimistically; otherwise the Lease is read (created
  when missing). Another holder's lease counts as valid until ``leaseDuration`` after *we* last saw
  its record change (``observedTime``, our own monotonic clock — never the other node's timestamps,
  so clock skew between replicas does not matter). An expired or released (empty holder) lease is
  taken over with ``leaseTransitions + 1``. Every write is an update with the read
  ``resourceVersion``, so two candidates cannot both win (the loser gets 409).
* acquiring retries every ``retryPeriod`` (jittered by up to 20 %);
* renewing retries every ``retryPeriod``; when no renewal succeeded for ``renewDeadline`` the
  leadership is lost — the caller must stop scheduling at once (kube-scheduler exits);
* ``release`` on a clean shutdown writes an empty holder with ``leaseDurationSeconds: 1`` so a
  standby takes over immediately instead of waiting for the lease to expire.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote

from kubesched.api.timestamps import micro_time
from kubesched.kube.api import ApiClient, ApiError
from kubesched.kube.ratelimit import Now

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2


def default_identity() -> str:
    """hostname_uuid, as kube-scheduler's ``id := hostname + "_" + string(uuid.NewUUID())``."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str
    renew_time: str
    leader_transitions: int = 0

    @staticmethod
    def from_lease(lease: dict[str, Any]) -> LeaderElectionRecord:
        spec = lease.get("spec") or {}
        return LeaderElectionRecord(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.leader_transitions,
        }


class ConflictError(Exception):
    """Someone else wrote the lease since we read it (HTTP 409)."""


class LeaseBackend(Protocol):
    async def get(self) -> tuple[LeaderElectionRecord, str] | None:
        """The current record and its resourceVersion, or None when the Lease does not exist."""
        ...

    async def create(self, record: LeaderElectionRecord) -> str: ...

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> str: ...


class LeaseLock:
    """A coordination.k8s.io/v1 Lease through the apiserver."""

    def __init__(self, api: ApiClient, namespace: str, name: str, timeout: float = 10.0) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.timeout = timeout
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"

    async def get(self) -> tuple[LeaderElectionRecord, str] | None:
        try:
            lease = await self.api.request("GET", f"{self._collection}/{quote(self.name)}", timeout=self.timeout)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return LeaderElectionRecord.from_lease(lease), str(lease["metadata"].get("resourceVersion", ""))

    async def create(self, record: LeaderElectionRecord) -> str:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        try:
            lease = await self.api.request("POST", self._collection, body, timeout=self.timeout)
        except ApiError as e:
            if e.status == 409:
                raise ConflictError(str(e)) from None
            raise
        return str(lease["metadata"].get("resourceVersion", ""))

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> str:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": resource_version},
            "spec": record.to_spec(),
        }
        try:
            lease = await self.api.request("PUT", f"{self._collection}/{quote(self.name)}", body, timeout=self.timeout)
        except ApiError as e:
            if e.status == 409:
                raise ConflictError(str(e)) from None
            raise
        return str(lease["metadata"].get("resourceVersion", ""))


class LeaderElector:
    def __init__(
        self,
        lock: LeaseBackend,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        now: Now = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        self.lock = lock
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._now = now
        self._wall = wall
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.observed: LeaderElectionRecord | None = None
        self.observed_rv = ""
        self.observed_time = -1e18
        self.transitions_seen = 0
        self.attempts: dict[str, int] = {"ok": 0, "failed": 0}

    # -- state -------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.observed is not None and self.observed.holder_identity == self.identity

    @property
    def leader(self) -> str:
        return self.observed.holder_identity if self.observed is not None else ""

    def _lease_valid(self, now: float) -> bool:
        if self.observed is None:
            return False
        return self.observed_time + self.observed.lease_duration_seconds > now

    def _observe(self, record: LeaderElectionRecord, rv: str, now: float) -> None:
        if record != self.observed:
            if self.observed is not None and record.holder_identity != self.observed.holder_identity:
                log.info("leader=%s event=new_leader_observed", record.holder_identity or "<none>")
            self.observed = record
            self.observed_time = now
        self.observed_rv = rv

    # -- one step ----------------------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        now = self._now()
        stamp = micro_time(self._wall())
        desired = LeaderElectionRecord(self.identity, round(self.lease_duration), stamp, stamp)
        if self.is_leader and self._lease_valid(now) and self.observed is not None:
            mine = replace(
                desired,
                acquire_time=self.observed.acquire_time,
                leader_transitions=self.observed.leader_transitions,
            )
            try:
                rv = await self.lock.update(mine, self.observed_rv)
                self.observed, self.observed_rv, self.observed_time = mine, rv, now
                return True
            except Exception as e:
                log.info("event=lease_renew_fast_path_failed err=%r", f"{type(e).__name__}: {e}")

        current = await self.lock.get()
        if current is None:
            try:
                rv = await self.lock.create(desired)
            except ConflictError:
                return False
            self.observed, self.observed_rv, self.observed_time = desired, rv, now
            return True
        record, rv = current
        self._observe(record, rv, now)
        if record.holder_identity and self._lease_valid(now) and not self.is_leader:
            return False
        if self.is_leader:
            desired = replace(
                desired, acquire_time=record.acquire_time, leader_transitions=record.leader_transitions
            )
        else:
            desired = replace(desired, leader_transitions=record.leader_transitions + 1)
        try:
            new_rv = await self.lock.update(desired, rv)
        except ConflictError:
            return False
        self.observed, self.observed_rv, self.observed_time = desired, new_rv, now
        return True

    async def _attempt(self, timeout: float | None = None) -> bool:
        ok = False
        try:
            if timeout is None:
                ok = await self.try_acquire_or_renew()
            else:
                # Not asyncio.wait_for: its cancellation, landing as the request's own timeout
                # fires, became that TimeoutError (nested timeouts, Python < 3.12), the fast path
                # swallowed it and went on to a full GET: a partitioned leader stopped 6 s after the
                # cut with a 3 s renewDeadline (chaos suite). The attempt now ends at the deadline.
                task = asyncio.ensure_future(self.try_acquire_or_renew())
                try:
                    done, _ = await asyncio.wait({task}, timeout=timeout)
                except asyncio.CancelledError:
                    task.cancel()
                    raise
                if not done:
                    task.cancel()
                    task.add_done_callback(lambda t: t.cancelled() or t.exception())
                    raise TimeoutError(f"no answer within {timeout:.1f}s")
                ok = task.result()
            return ok
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("event=lease_error err=%r", f"{type(e).__name__}: {e}")
            return False
        finally:
            # Acquire or renew attempts, by result (kubesched_lease_attempts_total).
            self.attempts["ok" if ok else "failed"] += 1

    # -- loops ---------------------------------------------------------------------------------------
    async def acquire(self) -> None:
        """Block until this candidate holds the lease (cancel to give up)."""
        log.info("identity=%s event=acquiring", self.identity)
        while not await self._attempt(self.renew_deadline):
            await self._sleep(self.retry_period * (1.0 + (JITTER_FACTOR - 1.0) * self._rng.random()))
        log.info("identity=%s event=acquired", self.identity)

    async def hold(self) -> None:
        """Renew every retryPeriod; return when no renewal succeeded within renewDeadline (lost)."""
        while True:
            deadline = self._now() + self.renew_deadline
            while True:
                remaining = deadline - self._now()
                if remaining > 0 and await self._attempt(remaining) and self.is_leader:
                    break
                if self._now() >= deadline or (self.observed is not None and not self.is_leader):
                    log.error("identity=%s leader=%s event=lost_lease", self.identity, self.leader)
                    self.observed_time = -1e18
                    if self.is_leader and self.observed is not None:  # forget our own stale claim
                        self.observed = replace(self.observed, holder_identity="")
                    return
                await self._sleep(self.retry_period)
            await self._sleep(self.retry_period)

    async def release(self) -> bool:
        """Give the lease up (empty holder, 1 s duration) if we hold it."""
        if not self.is_leader or self.observed is None:
            return True
        stamp = micro_time(self._wall())
        record = LeaderElectionRecord("", 1, stamp, stamp, self.observed.leader_transitions)
        try:
            try:
                rv = await self.lock.update(record, self.observed_rv)
            except ConflictError:
                # A renewal cancelled by the shutdown may still have been applied: our
                # resourceVersion is then stale, while the lease is still ours. Read it again and
                # release that (a standby otherwise waits for the lease to expire).
                current = await self.lock.get()
                if current is None or current[0].holder_identity != self.identity:
                    return True  # not ours any more: nothing to give up
                record = replace(record, leader_transitions=current[0].leader_transitions)
                rv = await self.lock.update(record, current[1])
        except Exception as e:
            log.warning("event=lease_release_failed err=%r", f"{type(e).__name__}: {e}")
            return False
        self.observed, self.observed_rv, self.observed_time = record, rv, self._now()
        log.info("identity=%s event=released", self.identity)
        return True


#: kube-scheduler's own profile and Lease (cmd/kube-scheduler defaults).
DEFAULT_SCHEDULER_NAME = "default-scheduler"
KUBE_SCHEDULER_LEASE = ("kube-system", "kube-scheduler")


async def kube_scheduler_holds_lease(lease_api: ApiClient) -> str:
    """Why a ``default-scheduler`` profile must not schedule, or "": while the real kube-scheduler
    holds its Lease (renewed within its duration) both would bind the same pods twice over."""
    namespace, name = KUBE_SCHEDULER_LEASE
    try:
        found = await LeaseLock(lease_api, namespace, name, timeout=10.0).get()
    except Exception as e:  # e.g. 403: we cannot tell, so we do not risk it
        return (f"profile {DEFAULT_SCHEDULER_NAME!r} needs a check that kube-scheduler is not running, and "
                f"reading Lease {namespace}/{name} failed ({e}); grant get on it, give the profile another "
                "schedulerName, or pass --replace-default-scheduler")
    if found is None:
        return ""
    record, _ = found
    if not record.holder_identity or not record.renew_time:
        return ""
    try:
        renewed = datetime.fromisoformat(record.renew_time).timestamp()
    except ValueError:
        renewed = time.time()
    if time.time() - renewed > max(record.lease_duration_seconds, 1):
        return ""  # expired: nobody is scheduling as default-scheduler right now
    return (f"profile {DEFAULT_SCHEDULER_NAME!r} would schedule the same pods as kube-scheduler, which holds "
            f"Lease {namespace}/{name} ({record.holder_identity!r}); give the profile its own schedulerName, "
            "or pass --replace-default-scheduler if kubesched replaces kube-scheduler")
