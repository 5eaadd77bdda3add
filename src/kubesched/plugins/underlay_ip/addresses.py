"""Who holds which underlay address: per-pool free sets kept incrementally, and claims' reservations.

An address of a pool is in exactly one state (BlueKing v3 ``BCSNetIP``: Available, Active,
Reserved):

* **free** — on the pool's min-heap of free indexes, so the lowest free address is found in
  O(log n) (entries are dropped lazily when taken another way);
* **active** — held by one or more pod uids (more than one only if pods arrive from the cluster
  with the same address, which kubesched never assigns: the address is then not free until all
  of them are gone);
* **kept** — reserved for a claim until a clock time (``math.inf``: as long as the claim exists),
  after its pod is gone or because the claim pins it.

Pure bookkeeping: no Kubernetes objects, no clock reads (times are passed in), so the property
test drives it through the plugin under any interleaving.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(slots=True)
class Kept:
    claim: str
    until: float
    #: Clock time the claim's pod let go of it (None: pinned by spec.address, never held yet).
    released_at: float | None


class PoolAddresses:
    """One pool's addresses (lowest first) and their state."""

    def __init__(self, name: str, addresses: Iterable[str], changed: set[str] | None = None) -> None:
        self.name = name
        #: Names of pools whose free count changed, shared by the book (readers refresh only those).
        self._changed = changed if changed is not None else set()
        self.addresses: tuple[str, ...] = tuple(addresses)
        self.index = {a: i for i, a in enumerate(self.addresses)}
        self.holders: dict[int, set[str]] = {}
        self.kept: dict[int, Kept] = {}
        self._heap = list(range(len(self.addresses)))
        self._queued = set(self._heap)
        self._free = len(self.addresses)
        self._changed.add(name)
        #: Addresses counted for pods that hold none in particular (see AddressBook.count).
        self.unaddressed = 0

    @property
    def free_count(self) -> int:
        """Addresses a new pod can get (pods counted without addresses taken off)."""
        return self._free

    @free_count.setter
    def free_count(self, n: int) -> None:
        self._free = n
        self._changed.add(self.name)

    def is_free(self, i: int) -> bool:
        return i not in self.holders and i not in self.kept

    def _push(self, i: int) -> None:
        if i not in self._queued:
            heapq.heappush(self._heap, i)
            self._queued.add(i)

    def lowest_free(self, n: int) -> list[int]:
        """The ``n`` lowest free indexes (fewer if the pool has fewer), left free."""
        taken: list[int] = []
        while self._heap and len(taken) < n:
            i = heapq.heappop(self._heap)
            self._queued.discard(i)
            if self.is_free(i):
                taken.append(i)
        for i in taken:
            self._push(i)
        return taken

    def hold(self, i: int, uid: str) -> None:
        if self.is_free(i):
            self.free_count -= 1
        self.kept.pop(i, None)
        self.holders.setdefault(i, set()).add(uid)

    def let_go(self, i: int, uid: str) -> None:
        """``uid`` no longer holds ``i``; the address is free unless another holder or a claim keeps it."""
        uids = self.holders.get(i)
        if uids is None:
            return
        uids.discard(uid)
        if not uids:
            del self.holders[i]
            if i not in self.kept:
                self.free_count += 1
                self._push(i)

    def keep(self, i: int, kept: Kept) -> None:
        """Reserve ``i`` for a claim (while no pod holds it)."""
        if i in self.holders:
            return
        if i not in self.kept:
            self.free_count -= 1
        self.kept[i] = kept

    def unkeep(self, i: int, claim: str) -> bool:
        have = self.kept.get(i)
        if have is None or have.claim != claim:
            return False
        del self.kept[i]
        if i not in self.holders:
            self.free_count += 1
            self._push(i)
        return True

    @property
    def active(self) -> int:
        return len(self.holders)


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one accounted pod holds: addresses of one pool (unknown to the pool's current spec if
    the pool changed since: they are then just remembered)."""

    pool: str
    addresses: tuple[str, ...]
    pod_key: str
    node: str
    #: The claim the pod is the identity of (its address stays reserved after it), if any.
    claim: str | None


class AddressBook:
    def __init__(self) -> None:
        self.pools: dict[str, PoolAddresses] = {}
        #: Pools whose free count changed since a reader last cleared this.
        self.changed: set[str] = set()
        #: uid → what it holds.
        self.assignments: dict[str, Assignment] = {}
        #: claim key → (pool, addresses) it is bound to (held by its pod or kept for it).
        self.claim_bindings: dict[str, tuple[str, tuple[str, ...]]] = {}
        #: (until, claim) for kept addresses that expire; stale entries are skipped.
        self._expiry: list[tuple[float, str]] = []
        #: Claims whose reservation expired (their pod, if it comes back, is told so), with the
        #: (pool, addresses) they had.
        self.expired: dict[str, tuple[str, tuple[str, ...]] | None] = {}
        #: Addresses held by pods (the cluster-wide quota counts them), kept in step.
        self.active_count = 0
        #: uid → (pool, n): pods counted on a pool without particular addresses: a pod the
        #: scheduler assumed, until its Reserve picks them, or one bound without the annotation
        #: (by another scheduler, before pools existed). Their count is not free.
        self.unaddressed: dict[str, tuple[str, int]] = {}

    # -- pools ------------------------------------------------------------------------------------
    def set_pool(self, name: str, addresses: tuple[str, ...]) -> PoolAddresses:
        """Install or replace a pool's address list, carrying over who holds and keeps what."""
        old = self.pools.get(name)
        if old is not None and old.addresses == addresses:
            return old
        pool = PoolAddresses(name, addresses, self.changed)
        self.pools[name] = pool
        for uid, a in self.assignments.items():
            if a.pool == name:
                for addr in a.addresses:
                    if (i := pool.index.get(addr)) is not None:
                        pool.hold(i, uid)
        for name_, n in self.unaddressed.values():
            if name_ == name:
                pool.free_count -= n
                pool.unaddressed += n
        if old is not None:
            for i, kept in old.kept.items():
                if (j := pool.index.get(old.addresses[i])) is not None:
                    pool.keep(j, kept)
        return pool

    def drop_pool(self, name: str) -> None:
        """A deleted pool: its pods keep their addresses (remembered in ``assignments``)."""
        self.pools.pop(name, None)

    # -- pods -------------------------------------------------------------------------------------
    def count(self, uid: str, pool_name: str, n: int) -> None:
        """``uid`` uses ``n`` addresses of the pool, none in particular."""
        self.uncount(uid)
        self.unaddressed[uid] = (pool_name, n)
        self.active_count += n
        if (pool := self.pools.get(pool_name)) is not None:
            pool.free_count -= n
            pool.unaddressed += n

    def uncount(self, uid: str) -> tuple[str, int] | None:
        counted = self.unaddressed.pop(uid, None)
        if counted is not None:
            self.active_count -= counted[1]
            if (pool := self.pools.get(counted[0])) is not None:
                pool.free_count += counted[1]
                pool.unaddressed -= counted[1]
        return counted

    def take(self, uid: str, a: Assignment) -> None:
        """``uid`` holds ``a.addresses`` (chosen by the caller from free or its claim's)."""
        self.uncount(uid)
        self.assignments[uid] = a
        self.active_count += len(a.addresses)
        pool = self.pools.get(a.pool)
        if pool is not None:
            for addr in a.addresses:
                if (i := pool.index.get(addr)) is not None:
                    pool.hold(i, uid)
        if a.claim is not None:
            self.claim_bindings[a.claim] = (a.pool, a.addresses)
            self.expired.pop(a.claim, None)

    def release(self, uid: str, now: float, keep_seconds: float | None) -> Assignment | None:
        """``uid`` is gone: its addresses return to the free set, or stay kept for its claim
        ``keep_seconds`` (None: as long as the claim exists; the caller passes the claim's)."""
        self.uncount(uid)
        a = self.assignments.pop(uid, None)
        if a is None:
            return None
        self.active_count -= len(a.addresses)
        pool = self.pools.get(a.pool)
        keeps = a.claim is not None and self.claim_bindings.get(a.claim) == (a.pool, a.addresses)
        until = math.inf if keep_seconds is None else now + keep_seconds
        if keeps and until <= now:
            keeps = False
            assert a.claim is not None
            self.expire_claim(a.claim, now)
        for addr in a.addresses:
            i = pool.index.get(addr) if pool is not None else None
            if i is None or pool is None:
                continue
            if keeps and a.claim is not None and pool.holders.get(i) == {uid}:
                del pool.holders[i]
                pool.kept[i] = Kept(a.claim, until, now)
            else:
                pool.let_go(i, uid)
        if keeps and a.claim is not None and until != math.inf:
            heapq.heappush(self._expiry, (until, a.claim))
        return a

    # -- claims -----------------------------------------------------------------------------------
    def keep_for_claim(self, claim: str, pool_name: str, addresses: tuple[str, ...], until: float,
                       released_at: float | None) -> bool:
        """Reserve addresses for a claim (rebuilt from status, or pinned by its spec) unless another
        pod holds one of them or they are kept for another claim. True if reserved."""
        pool = self.pools.get(pool_name)
        if pool is None:
            return False
        idx = [pool.index.get(a) for a in addresses]
        if any(i is None for i in idx):
            return False
        for i in idx:
            assert i is not None
            other = pool.kept.get(i)
            if other is not None and other.claim != claim:
                return False
        held_by_other = any(i in pool.holders and not self._held_by_claim(pool, i, claim) for i in idx if i is not None)
        if held_by_other:
            return False
        for i in idx:
            assert i is not None
            pool.keep(i, Kept(claim, until, released_at))
        self.claim_bindings[claim] = (pool_name, addresses)
        if until != math.inf:
            heapq.heappush(self._expiry, (until, claim))
        return True

    def _held_by_claim(self, pool: PoolAddresses, i: int, claim: str) -> bool:
        return all((a := self.assignments.get(u)) is not None and a.claim == claim for u in pool.holders.get(i, ()))

    def forget_claim(self, claim: str) -> None:
        """A deleted claim: its kept addresses are free again (held ones stay with their pod)."""
        binding = self.claim_bindings.pop(claim, None)
        self.expired.pop(claim, None)
        if binding is None:
            return
        pool = self.pools.get(binding[0])
        if pool is not None:
            for addr in binding[1]:
                if (i := pool.index.get(addr)) is not None:
                    pool.unkeep(i, claim)

    def expire_claim(self, claim: str, now: float) -> None:
        binding = self.claim_bindings.get(claim)
        self.forget_claim(claim)
        self.expired[claim] = binding

    def expire(self, now: float) -> list[str]:
        """Expire the reservations whose time has come; returns the claims expired."""
        done: list[str] = []
        while self._expiry and self._expiry[0][0] <= now:
            until, claim = heapq.heappop(self._expiry)
            binding = self.claim_bindings.get(claim)
            if binding is None:
                continue
            pool = self.pools.get(binding[0])
            kept = [pool.kept.get(pool.index.get(a, -1)) for a in binding[1]] if pool is not None else []
            if kept and all(k is not None and k.claim == claim and k.until == until for k in kept):
                self.expire_claim(claim, now)
                done.append(claim)
        return done

    def kept_items(self) -> Iterator[tuple[str, str, Kept]]:
        """(pool, address, reservation) of every kept address."""
        for name, pool in self.pools.items():
            for i, k in pool.kept.items():
                yield name, pool.addresses[i], k

    def holders_of(self, pool_name: str, address: str) -> set[str]:
        pool = self.pools.get(pool_name)
        i = pool.index.get(address) if pool is not None else None
        return set(pool.holders.get(i, ())) if pool is not None and i is not None else set()
