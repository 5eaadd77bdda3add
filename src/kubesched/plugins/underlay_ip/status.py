"""UnderlayIPPool and UnderlayIPClaim ``status`` from the tracker: what the live leader
merge-patches (changed fields only; an allocation that ended is sent as null, which a JSON merge
patch deletes) and what a simulation reports per pool.

Pool status: ``total``, ``active`` (held by pods), ``reserved`` (kept for claims), ``free`` and
``allocations`` (address → ``{state: Active, pod, node[, claim[, statefulSet]]}`` or
``{state: Reserved, claim[, statefulSet, releasedAt, keepUntil]}``; ``statefulSet`` marks the
claim a StatefulSet's pod has by ``statefulSetKeepDuration``): a restarted scheduler rebuilds the
reservations from it (tracker.py). Claim status: ``phase`` (Pending, Bound, Released, Expired),
``pool``, ``addresses``, and for a released claim ``releasedAt`` and ``keepUntil``.
"""

from __future__ import annotations

import math
from typing import Any

from kubesched.api.timestamps import micro_time
from kubesched.plugins.underlay_ip.kinds import CLAIM, POOL
from kubesched.plugins.underlay_ip.tracker import PoolTracker


class StatusReports:
    def __init__(self, tracker: PoolTracker) -> None:
        self.tracker = tracker
        self._reported: dict[str, dict[str, dict[str, Any]]] = {POOL: {}, CLAIM: {}}

    def _wall(self, clock_time: float) -> str:
        t = self.tracker
        # With microseconds: a reservation rebuilt from it must not end a second early.
        return micro_time(t.wall() + (clock_time - t.handle.clock.now()))

    def allocations(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Pool name → address → its allocation entry."""
        book, implicit = self.tracker.book, self.tracker.implicit
        out: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in book.pools}

        def claimed(entry: dict[str, Any], claim: str) -> dict[str, Any]:
            entry["claim"] = claim
            if (c := implicit.get(claim)) is not None and c.stateful_set is not None:
                entry["statefulSet"] = c.stateful_set  # a claim without an object: rebuilt from this
            return entry

        for a in book.assignments.values():
            if a.pool not in out:
                continue
            for addr in a.addresses:
                entry: dict[str, Any] = {"state": "Active", "pod": a.pod_key, "node": a.node}
                out[a.pool][addr] = entry if a.claim is None else claimed(entry, a.claim)
        for pool, addr, kept in book.kept_items():
            entry = claimed({"state": "Reserved"}, kept.claim)
            if kept.released_at is not None:
                entry["releasedAt"] = self._wall(kept.released_at)
            if kept.until != math.inf:
                entry["keepUntil"] = self._wall(kept.until)
            out[pool][addr] = entry
        return out

    def pool_status(self, with_allocations: bool = True) -> dict[str, dict[str, Any]]:
        allocations = self.allocations() if with_allocations else {}
        out: dict[str, dict[str, Any]] = {}
        for name, pool in sorted(self.tracker.book.pools.items()):
            status: dict[str, Any] = {
                "total": len(pool.addresses),
                "active": pool.active,
                "reserved": len(pool.kept),
                "free": pool.free_count,
            }
            if with_allocations:
                status["allocations"] = allocations.get(name, {})
            out[name] = status
        return out

    def claim_status(self) -> dict[str, dict[str, Any]]:
        t = self.tracker
        book = t.book
        holders = {a.claim: a for a in book.assignments.values() if a.claim is not None}
        kept = {k.claim: k for _, _, k in book.kept_items()}
        out: dict[str, dict[str, Any]] = {}
        for key, raw in t.objects(CLAIM).items():
            status: dict[str, Any]
            if key in book.expired:
                gone = book.expired[key]
                status = {"phase": "Expired"}
                if gone is not None:
                    status |= {"pool": gone[0], "addresses": list(gone[1])}
            elif key in book.claim_bindings:
                pool, addresses = book.claim_bindings[key]
                status = {"pool": pool, "addresses": list(addresses)}
                k = kept.get(key)
                if key in holders:
                    status["phase"] = "Bound"
                elif k is not None and k.released_at is not None:
                    status["phase"] = "Released"
                    status["releasedAt"] = self._wall(k.released_at)
                    if k.until != math.inf:
                        status["keepUntil"] = self._wall(k.until)
                else:
                    status["phase"] = "Pending"
            else:
                previous = raw.get("status") or {}
                if isinstance(previous, dict) and previous.get("phase") == "Expired":
                    continue  # expired before a restart: leave it as it is
                status = {"phase": "Pending"}
            out[key] = status
        return out

    def _stored(self, kind: str, key: str) -> dict[str, Any]:
        """What the object's status holds before our first report: entries a previous scheduler
        left (an allocation of a pod deleted meanwhile) are then sent as null."""
        if kind != POOL or key not in self.tracker.pools:
            return {}
        allocations = (self.tracker.pools[key].raw.get("status") or {}).get("allocations")
        return {"allocations": allocations} if isinstance(allocations, dict) else {}

    def changes(self) -> dict[str, dict[str, dict[str, Any]]]:
        """kind → object key → the status fields that changed since the previous call."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for kind, current in ((POOL, self.pool_status()), (CLAIM, self.claim_status())):
            reported = self._reported[kind]
            changed: dict[str, dict[str, Any]] = {}
            for key, status in current.items():
                before = reported.get(key) or self._stored(kind, key)
                diff = {k: v for k, v in status.items() if before.get(k) != v and k != "allocations"}
                for k in before.keys() - status.keys():
                    diff[k] = None
                if "allocations" in status:
                    old, new = before.get("allocations", {}), status["allocations"]
                    delta = {a: e for a, e in new.items() if old.get(a) != e}
                    delta |= {a: None for a in old.keys() - new.keys()}
                    if delta or "allocations" not in before:
                        diff["allocations"] = delta
                if diff:
                    changed[key] = diff
                reported[key] = status
            for gone in reported.keys() - current.keys():
                del reported[gone]
            if changed:
                out[kind] = changed
        return out
