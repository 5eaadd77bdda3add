"""Pools and claims as the cluster declares them, kept in step with the pods the node table accounts.

A pod that consumes underlay IPs gets its addresses when it starts counting on a pool-served node
(a pod observer of the node table: the scheduler's assume, a bound pod from the cluster, a node
returning), and lets go of them when the table no longer knows the pod at all (forgotten after a
failed bind or Reserve, deleted, terminated). A node that leaves keeps its pods' addresses held:
its pods still exist. Who gets what:

1. a pod with the address annotation keeps that address (a restart, a failover: the annotation,
   written at bind, is the record of what the pod was given); if another pod or a claim's
   reservation has it too, it stays taken until all of them are gone;
2. else the pod is *counted* on a pool serving its node, no address in particular (a pod bound by
   someone else without the annotation stays so), until the scheduler's Reserve picks:
3. for a pod of a claim (same namespace/name), the claim's address, or the lowest free address of
   its pool (``spec.pool``) or the one it pins (``spec.address``), which binds the claim;
4. for any other pod, the lowest free address of the first pool (by name) serving its node that
   has enough.

Reservations that outlive their pod (a claim's ``keepDuration``) are rebuilt from the pools'
``status.allocations`` when a pool is first seen, so a restarted scheduler keeps them.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.framework.handle import Handle
from kubesched.plugins.helpers.owners import controller_of
from kubesched.plugins.underlay_ip.addresses import AddressBook, Assignment
from kubesched.plugins.underlay_ip.kinds import (
    CLAIM,
    POOL,
    Claim,
    Pool,
    UnderlaySpecError,
    parse_claim,
    parse_pool,
    parse_rfc3339,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import Rows

log = logging.getLogger(__name__)

#: Pools and claims are compared with the informer's objects at most this often (clock seconds),
#: and whenever the number of pools changes, so a cycle never walks every pool.
REFRESH_SECONDS = 1.0
#: A pod whose attempt failed after Reserve (a failed bind, a Permit rejection) retries: its claim
#: keeps the address at least this long, whatever its keepDuration, so it comes back to it.
RETRY_KEEP_SECONDS = 300.0
_LAST_RELEASED_MAX = 1024


class PoolTracker:
    def __init__(self, handle: Handle, needed: Callable[[PodInfo], int], annotation_key: str,
                 wall: Callable[[], float] = time.time, stateful_set_keep: float | None = None) -> None:
        self.handle = handle
        self.needed = needed
        self.annotation_key = annotation_key
        #: statefulSetKeepDuration in seconds: StatefulSet pods have a claim without an object.
        self.stateful_set_keep = stateful_set_keep
        #: Pod key → its StatefulSet claim (``claim_of``), while the pod or its reservation lasts.
        self.implicit: dict[str, Claim] = {}
        #: Wall-clock seconds, only to write and read the times in objects' status.
        self.wall = wall
        self.book = AddressBook()
        self.pools: dict[str, Pool] = {}
        #: Pool name → why its spec cannot be used (said once per object version).
        self.pool_errors: dict[str, str] = {}
        self._pool_raws: dict[str, dict[str, Any]] = {}
        self._claim_uids: dict[str, str] = {}
        self._checked_at = -math.inf
        self._pool_count = -1
        #: Node name → the pools serving it, by name.
        self.serving: dict[str, tuple[str, ...]] = {}
        self._serving_key: tuple[int, int] = (-1, -1)
        self._version = 0
        self._pool_list: list[str] = []
        self._pair_rows: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._pair_pools: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        #: Row → served by any pool; pool → its rows (built on first use): per serving version.
        self._served: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._served_by_pool: dict[str, npt.NDArray[np.bool_]] = {}
        #: Free addresses per pool, in ``_pool_list`` order, refreshed from ``book.changed`` only.
        self._free: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._pool_position: dict[str, int] = {}
        #: Row → the free addresses of the pools serving it, summed: kept incrementally (a pool's
        #: change adds its delta to its rows), so Filter and Score only gather it.
        self._sum_by_row: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        #: Pool position → the rows it serves.
        self._rows_of_pool: list[npt.NDArray[np.intp]] = []
        #: Row → the best single serving pool's free addresses (pods needing more than one IP),
        #: rebuilt on first use after a change.
        self._best_by_row: npt.NDArray[np.int64] | None = None
        #: Assignments of pods the table dropped a moment ago (``add_pod`` of a known uid removes
        #: then adds): the same pod coming back gets the same addresses.
        self._last_released: OrderedDict[str, Assignment] = OrderedDict()
        #: The pod in the scheduling cycle (set at PreFilter): assumed, not yet given its addresses.
        self.cycle_uid = ""
        #: The pod being unreserved (set at Unreserve, just before the scheduler forgets it).
        self.unreserving = ""
        handle.table.observe_pods(self._observe)

    @property
    def active(self) -> bool:
        """Pools exist: every node's underlay IPs come from them (else the per-node budget)."""
        return bool(self.pools)

    # -- objects ----------------------------------------------------------------------------------
    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        return self.handle.objects(kind)

    def refresh(self, force: bool = False) -> None:
        """Catch up with pools and claims (gated, see REFRESH_SECONDS), expire reservations."""
        now = self.handle.clock.now()
        raws = self.objects(POOL)
        if force or len(raws) != self._pool_count or now - self._checked_at >= REFRESH_SECONDS:
            self._checked_at = now
            self._pool_count = len(raws)
            self._sync_pools(raws)
            self._sync_claims()
        self.book.expire(now)
        self._end_implicit()
        self._sync_serving()

    def _sync_pools(self, raws: Mapping[str, dict[str, Any]]) -> None:
        changed = False
        new_pools: list[Pool] = []
        for name in list(self._pool_raws):
            if name not in raws:
                del self._pool_raws[name]
                self.pools.pop(name, None)
                self.pool_errors.pop(name, None)
                self.book.drop_pool(name)
                changed = True
        for name, raw in raws.items():
            old = self._pool_raws.get(name)
            if old is raw:
                continue
            self._pool_raws[name] = raw
            if old is not None and name in self.pools and old.get("spec") == raw.get("spec"):
                # Only its status changed (the leader patches it every few seconds): the parsed
                # pool stands, with the new object (its status is what a restart rebuilds from).
                self.pools[name] = replace(self.pools[name], raw=raw)
                continue
            changed = True
            try:
                pool = parse_pool(raw)
            except UnderlaySpecError as e:
                if self.pool_errors.get(name) != str(e):
                    log.error("event=underlay_pool_invalid pool=%s err=%s (the pool is not used)", name, e)
                self.pool_errors[name] = str(e)
                self.pools.pop(name, None)
                self.book.drop_pool(name)
                continue
            self.pool_errors.pop(name, None)
            first = name not in self.book.pools
            self.pools[name] = pool
            self.book.set_pool(name, pool.addresses)
            if first:
                new_pools.append(pool)
        if changed:
            self._version += 1
            self._sync_serving()
            for pool in new_pools:
                self._rebuild_kept(pool)
            self._assign_unassigned()

    def _sync_claims(self) -> None:
        """Drop reservations of claims deleted (or recreated: another uid); keep pinned addresses."""
        raws = self.objects(CLAIM)
        for key in [*self.book.claim_bindings, *self.book.expired]:
            if key in self.implicit and key not in raws:
                continue
            raw = raws.get(key)
            uid = str((raw.get("metadata") or {}).get("uid") or "") if raw is not None else None
            if raw is None or uid != self._claim_uids.get(key, uid):
                self.book.forget_claim(key)
                self._claim_uids.pop(key, None)
        for key, raw in raws.items():
            spec = raw.get("spec") or {}
            if isinstance(spec, dict) and spec.get("address") and key not in self.book.claim_bindings:
                claim = self.claim(key)
                if claim is not None and claim.pool is not None and claim.address is not None:
                    self._note_claim(claim)
                    self.book.keep_for_claim(key, claim.pool, (claim.address,), math.inf, None)

    def claim(self, key: str) -> Claim | None:
        """The claim of this key as it is now; what was kept for an earlier claim of the same name
        (deleted and created again, another uid) is dropped first."""
        raw = self.objects(CLAIM).get(key)
        if raw is None:
            return None
        try:
            claim = parse_claim(raw)
        except UnderlaySpecError:
            return None
        noted = self._claim_uids.get(key)
        if noted is not None and noted != claim.uid:
            self.book.forget_claim(key)
            del self._claim_uids[key]
        return claim

    def claim_of(self, pod: PodInfo) -> Claim | None:
        """The pod's claim: the UnderlayIPClaim of its namespace/name, else (with
        ``statefulSetKeepDuration``) the claim a StatefulSet's pod has without an object."""
        if pod.key in self.objects(CLAIM) or self.stateful_set_keep is None:
            return self.claim(pod.key)
        implicit = self.implicit.get(pod.key)
        if implicit is None:
            owner = controller_of(pod)
            if owner is not None and owner.get("kind") == "StatefulSet" and owner.get("apiVersion") == "apps/v1":
                implicit = self._implicit(pod.key, str(owner.get("name") or ""))
        return implicit

    def _implicit(self, key: str, stateful_set: str) -> Claim:
        claim = Claim(key, "", None, None, self.stateful_set_keep, {}, stateful_set)
        self.implicit[key] = claim
        return claim

    def _end_implicit(self) -> None:
        """A StatefulSet claim whose reservation expired ends: its pod, coming back later, gets a
        new address as any pod (an expired declared claim refuses its pod instead)."""
        for key in [k for k in self.book.expired if k in self.implicit]:
            del self.book.expired[key]
            del self.implicit[key]

    def claim_error(self, key: str) -> str | None:
        raw = self.objects(CLAIM).get(key)
        if raw is None:
            return None
        try:
            parse_claim(raw)
        except UnderlaySpecError as e:
            return f"underlay IP claim {key} is invalid: {e}"
        return None

    def _note_claim(self, claim: Claim) -> None:
        if claim.stateful_set is None:
            self._claim_uids[claim.key] = claim.uid

    def is_expired(self, claim: Claim) -> bool:
        if claim.stateful_set is not None:
            return False
        if claim.key in self.book.expired:
            return True
        if claim.key in self.book.claim_bindings:
            return False
        status = claim.raw.get("status") or {}
        return isinstance(status, dict) and status.get("phase") == "Expired"

    def _rebuild_kept(self, pool: Pool) -> None:
        """Reservations a previous scheduler recorded in the pool's status (state Reserved)."""
        allocations = (pool.raw.get("status") or {}).get("allocations") or {}
        if not isinstance(allocations, dict):
            return
        by_claim: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for address, entry in allocations.items():
            if isinstance(entry, dict) and entry.get("state") in ("Reserved", "Active") and entry.get("claim"):
                by_claim.setdefault(str(entry["claim"]), []).append((str(address), entry))
        now, wall = self.handle.clock.now(), self.wall()
        for key, entries in sorted(by_claim.items()):
            claim = self.claim(key)
            stateful_set = entries[0][1].get("statefulSet")
            if claim is None and key not in self.objects(CLAIM) and stateful_set and self.stateful_set_keep:
                claim = self.implicit.get(key) or self._implicit(key, str(stateful_set))
            if claim is None or key in self.book.claim_bindings or self.is_expired(claim):
                continue
            first = entries[0][1]
            if first.get("state") == "Active":
                # Its pod held it when the status was written. If the pod is still there it takes
                # it back from its annotation; if it was deleted meanwhile, its claim keeps it for
                # keepDuration from now (when it went is unknown: the longer keep).
                until = math.inf if claim.keep_seconds is None else now + claim.keep_seconds
                released_at: float | None = now
            else:
                keep_until = parse_rfc3339(first.get("keepUntil"))
                released = parse_rfc3339(first.get("releasedAt"))
                until = math.inf if keep_until is None else now + (keep_until - wall)
                released_at = None if released is None else now - (wall - released)
            self._note_claim(claim)
            if until <= now:
                self.book.expire_claim(key, now)
                self._end_implicit()
            else:
                self.book.keep_for_claim(key, pool.name, tuple(sorted(a for a, _ in entries)), until, released_at)

    # -- which pools serve which nodes -------------------------------------------------------------
    def _sync_serving(self) -> None:
        table = self.handle.table
        key = (self._version, table.node_generation)
        if key == self._serving_key:
            return
        self._serving_key = key
        self._pool_list = sorted(self.pools)
        serving: dict[str, list[str]] = {}
        rows: list[int] = []
        pools: list[int] = []
        for p, name in enumerate(self._pool_list):
            pool = self.pools[name]
            if pool.node_selector is None:
                candidates = [(n, r) for n in pool.node_names if (r := table.row_of(n)) is not None]
            else:
                candidates = [(table.names[r], int(r)) for r in table.alive_rows().tolist()]
            for node, row in candidates:
                if pool.serves(node, table.labels[row]):
                    serving.setdefault(node, []).append(name)
                    rows.append(row)
                    pools.append(p)
        self.serving = {n: tuple(sorted(ps)) for n, ps in serving.items()}
        self._pair_rows = np.asarray(rows, dtype=np.intp)
        self._pair_pools = np.asarray(pools, dtype=np.intp)
        self._served = np.zeros(len(table.alive), dtype=bool)
        self._served[self._pair_rows] = True
        self._served_by_pool = {}
        self._pool_position = {n: i for i, n in enumerate(self._pool_list)}
        self._free = np.array([self.book.pools[n].free_count for n in self._pool_list], dtype=np.int64)
        self._rows_of_pool = [self._pair_rows[self._pair_pools == p] for p in range(len(self._pool_list))]
        self._sum_by_row = np.bincount(self._pair_rows, weights=self._free[self._pair_pools],
                                       minlength=len(table.alive)).astype(np.int64)[: len(table.alive)]
        self.book.changed.clear()
        self._best_by_row = None

    def free_by_row(self, rows: Rows, best: bool = False) -> npt.NDArray[np.int64]:
        """Free addresses of the pools serving each row: summed, or the best single pool's."""
        free = self._free
        if self.book.changed:
            for name in self.book.changed:
                if (i := self._pool_position.get(name)) is not None:
                    count = self.book.pools[name].free_count
                    if count != free[i]:
                        self._sum_by_row[self._rows_of_pool[i]] += count - free[i]
                        free[i] = count
                        self._best_by_row = None
            self.book.changed.clear()
        if not best:
            summed: npt.NDArray[np.int64] = self._sum_by_row[rows]
            return summed
        if self._best_by_row is None:
            self._best_by_row = np.zeros(len(self._served), dtype=np.int64)
            if len(self._pair_rows):
                np.maximum.at(self._best_by_row, self._pair_rows, free[self._pair_pools])
        result: npt.NDArray[np.int64] = self._best_by_row[rows]
        return result

    def served_mask(self, rows: Rows, pool: str | None = None) -> npt.NDArray[np.bool_]:
        """Whether each row is served by any pool (or by ``pool``)."""
        mask = self._served if pool is None else self._served_by_pool.get(pool)
        if mask is None:
            mask = np.zeros(len(self._served), dtype=bool)
            if pool in self.pools:
                mask[self._pair_rows[self._pair_pools == self._pool_list.index(pool)]] = True
            self._served_by_pool[str(pool)] = mask
        result: npt.NDArray[np.bool_] = mask[rows]
        return result

    def nodes_of(self, pool: str) -> frozenset[str]:
        return frozenset(n for n, ps in self.serving.items() if pool in ps)

    # -- pods -------------------------------------------------------------------------------------
    def _observe(self, row: int, pod: PodInfo, sign: int) -> None:
        if sign > 0:
            if pod.uid not in self.book.assignments and self.pools:
                self._assign(pod)
            return
        if pod.uid not in self.book.assignments and pod.uid not in self.book.unaddressed:
            return
        if self.handle.table.pod(pod.uid) is not None:
            return  # still accounted: its node left (the pod still exists), or a newer object
        claim = self.claim_of(pod)
        keep = claim.keep_seconds if claim is not None else None
        if pod.uid == self.unreserving and keep is not None:
            keep = max(keep, RETRY_KEEP_SECONDS)  # not gone: retrying
        self.unreserving = ""
        a = self.book.release(pod.uid, self.handle.clock.now(), keep)
        if a is not None:
            self._last_released[pod.uid] = a
            if len(self._last_released) > _LAST_RELEASED_MAX:
                self._last_released.popitem(last=False)

    def _assign_unassigned(self) -> None:
        """After pools changed: pods already placed on served nodes get their addresses (those with
        the annotation first, so they keep theirs)."""
        table = self.handle.table
        pods = [p for p in (*table.all_pods(), *table.orphaned_pods()) if p.uid not in self.book.assignments]
        pods.sort(key=lambda p: (not self.annotated(p), p.key))
        for pod in pods:
            self._assign(pod)

    def annotated(self, pod: PodInfo) -> tuple[str, ...]:
        text = (pod.raw.get("metadata") or {}).get("annotations", {}).get(self.annotation_key)
        return tuple(a.strip() for a in str(text).split(",") if a.strip()) if text else ()

    def _assign(self, pod: PodInfo) -> None:
        """A pod starts counting on a node: its annotated (or just released) addresses, else a count
        on a pool until Reserve picks its addresses (``reserve``)."""
        need = self.needed(pod)
        if not need:
            return
        serving = self.serving.get(pod.node_name, ())
        claim = self.claim_of(pod)
        if claim is not None:
            self._note_claim(claim)
        # What a pod carries it holds, whether or not its node is (still) served or known.
        a = self._from_annotation(pod, serving, claim) or self._from_last_released(pod)
        if a is not None:
            self.book.take(pod.uid, a)
            return
        if not serving:
            return
        if pod.uid == self.cycle_uid:
            # The pod being assumed: Reserve comes next and would pick these very addresses
            # (``reserve``); picking them now spares counting it on a pool only to uncount it.
            a = self.choose(pod, need, serving, claim)
            if a is not None:
                self.book.take(pod.uid, a)
                return
        pool = serving[0]
        bound = self.claim_addresses(claim) if claim is not None else None
        if bound is not None and bound[0] in serving:
            pool = bound[0]
        elif claim is not None and claim.pool in serving:
            pool = claim.pool
        else:
            pool = next((p for p in serving if self.book.pools[p].free_count >= need), pool)
        self.book.count(pod.uid, pool, need)

    def reserve(self, pod: PodInfo) -> bool:
        """Pick the assumed pod's addresses (deterministic: its claim's, else the lowest free of the
        first pool serving its node that has enough). False: none to give."""
        if pod.uid in self.book.assignments:
            return True
        need = self.needed(pod)
        serving = self.serving.get(pod.node_name, ())
        counted = self.book.uncount(pod.uid)
        a = self.choose(pod, need, serving, self.claim_of(pod)) if need and serving else None
        if a is not None:
            self.book.take(pod.uid, a)
            return True
        if counted is not None:
            self.book.count(pod.uid, *counted)
        return False

    def _from_annotation(self, pod: PodInfo, serving: tuple[str, ...], claim: Claim | None) -> Assignment | None:
        """The addresses a pod from the cluster carries: what it really has, so it takes them even if
        a claim's reservation or another pod says otherwise (neither then gets them while it holds
        them). Not for the pod being scheduled (``cycle_uid``): its own annotation is no request."""
        addresses = self.annotated(pod)
        if not addresses or pod.uid == self.cycle_uid:
            return None
        mine = claim.key if claim is not None else None
        for name in (*serving, *(p for p in self._pool_list if p not in serving)):
            pool = self.book.pools[name]
            idx = [pool.index.get(a) for a in addresses]
            if any(i is None for i in idx):
                continue
            if any(i is not None and not pool.is_free(i) and not (i in pool.kept and pool.kept[i].claim == mine)
                   for i in idx):
                log.warning("event=underlay_ip_conflict pod=%s pool=%s addresses=%s (another pod holds them or a "
                            "claim keeps them: they stay taken until all are gone)", pod.key, name, ",".join(addresses))
            return Assignment(name, addresses, pod.key, pod.node_name, mine)
        return None

    def _from_last_released(self, pod: PodInfo) -> Assignment | None:
        a = self._last_released.pop(pod.uid, None)
        if a is None or a.node != pod.node_name:
            return None
        pool = self.book.pools.get(a.pool)
        if pool is None or not all((i := pool.index.get(x)) is not None and pool.is_free(i) for x in a.addresses):
            return None
        return a

    def claim_addresses(self, claim: Claim) -> tuple[str, tuple[str, ...]] | None:
        """The (pool, addresses) a claim is bound to or pins, if any."""
        binding = self.book.claim_bindings.get(claim.key)
        if binding is not None:
            return binding
        if claim.pool is not None and claim.address is not None:
            return claim.pool, (claim.address,)
        return None

    def claim_holders(self, claim: Claim) -> set[str]:
        """Uids of pods other than the claim's own holding the claim's addresses."""
        bound = self.claim_addresses(claim)
        if bound is None:
            return set()
        out: set[str] = set()
        for addr in bound[1]:
            out |= {u for u in self.book.holders_of(bound[0], addr)
                    if (a := self.book.assignments.get(u)) is None or a.pod_key != claim.key}
        return out

    def choose(self, pod: PodInfo, need: int, serving: tuple[str, ...], claim: Claim | None) -> Assignment | None:
        """The addresses ``pod`` gets on its node (served by ``serving``), or None."""
        key = claim.key if claim is not None else None
        if claim is not None:
            if self.is_expired(claim):
                return None
            bound = self.claim_addresses(claim)
            if bound is not None:
                pool = self.book.pools.get(bound[0])
                if pool is None or bound[0] not in serving or self.claim_holders(claim):
                    return None
                if any(pool.index.get(a) is None for a in bound[1]):
                    return None
                return Assignment(bound[0], bound[1], pod.key, pod.node_name, key)
            if claim.pool is not None:
                serving = (claim.pool,) if claim.pool in serving else ()
        for name in serving:
            pool = self.book.pools[name]
            if pool.free_count < need:
                continue
            picked = pool.lowest_free(need)
            if len(picked) == need:
                return Assignment(name, tuple(pool.addresses[i] for i in picked), pod.key, pod.node_name, key)
        return None
