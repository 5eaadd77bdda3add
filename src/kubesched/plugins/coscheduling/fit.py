"""The gang-fit check: could the members a gang still needs all be placed now?

Before a group's members reserve anything, the ``minMember - assigned`` members still needed must
fit the node table's free resources (``table.available``): in total per resource (the sum of the
cheapest members' requests) and per node (how many copies of the group's smallest member fit on
each node), less what other gangs already waiting at Permit still need. A necessary condition (it
never refuses a gang that could be placed by resources), one vector pass over the node table per
gang round (members placed one after another without interference reuse the verdict), and
O(members) for the group's demand (cached per change of its members). Also upstream's minResources
check (``resource_gap``, scheduler-plugins CheckClusterResource).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from kubesched.api.quantity import format_milli_cpu
from kubesched.plugins.coscheduling.podgroup import PodGroup, PodGroupSpecError
from kubesched.plugins.helpers.gang_members import MemberIndex
from kubesched.snapshot.table import PODS, NodeTable

IntArray = npt.NDArray[np.int64]


class Demand:
    """What ``k`` members of a group need at least: per resource the sum of the k smallest
    requests (``cum[k - 1]``), and the element-wise smallest request (one member, pods = 1)."""

    __slots__ = ("cum", "smallest")

    def __init__(self, vectors: list[IntArray], ncols: int) -> None:
        m = np.zeros((max(len(vectors), 1), ncols), dtype=np.int64)
        for i, v in enumerate(vectors):
            m[i, : len(v)] = v
        m[:, PODS] = 1
        m.sort(axis=0)
        self.cum: IntArray = np.cumsum(m, axis=0)
        self.smallest: IntArray = m[0]

    def of(self, k: int) -> IntArray:
        """Resources k members need at least (beyond the known members: k copies of the smallest)."""
        n = len(self.cum)
        if k <= n:
            row: IntArray = self.cum[k - 1]
            return row
        extra: IntArray = self.cum[n - 1] + (k - n) * self.smallest
        return extra


class GangFit:
    def __init__(
        self, members: MemberIndex, pod_group: Callable[[str], PodGroup | PodGroupSpecError | None]
    ) -> None:
        self.members = members
        self.pod_group = pod_group
        #: Group key → (members version, resource columns, demand).
        self._demand: dict[str, tuple[int, int, Demand]] = {}
        #: Group key → (table generation, members version, assigned, claims, shortfall) of its last check.
        self._fit: dict[str, tuple[int, int, int, tuple[tuple[str, int], ...], str]] = {}

    def _demand_of(self, key: str, table: NodeTable) -> Demand:
        version = self.members.version.get(key, 0)
        ncols = len(table.resource_names)
        cached = self._demand.get(key)
        if cached is not None and cached[0] == version and cached[1] == ncols:
            return cached[2]
        vectors = [table.request_vector(p) for p in self.members.pending_of(key).values()]
        ncols = len(table.resource_names)  # request_vector may add extended-resource columns
        demand = Demand(vectors, ncols)
        self._demand[key] = (version, ncols, demand)
        return demand

    def shortfall(self, pg: PodGroup, table: NodeTable, waiting: dict[str, int]) -> str:
        """Why the members the group still needs could not all be placed now (gang level, e.g.
        ``1/5 members could not be placed: Insufficient cpu``), or "" when they may fit;
        ``waiting``: groups with members waiting at Permit → how many."""
        key = pg.key
        assigned = len(self.members.assigned_of(key))
        needed = pg.min_member - assigned
        if needed <= 0:
            return ""
        claims = tuple(sorted((g, n) for g, n in waiting.items() if g != key))
        version = self.members.version.get(key, 0)
        gen = table.generation
        last = self._fit.get(key)
        if last is not None and last[3] == claims:
            if last[0] == gen and last[1] == version:
                return last[4]
            # Since the last check only this group's own pending members were assumed (one table
            # generation and one members version each): a verdict that they fit still holds.
            grown = assigned - last[2]
            if not last[4] and grown > 0 and gen - last[0] == grown and version - last[1] == grown:
                self._fit[key] = (gen, version, assigned, claims, "")
                return ""
        short = self._compute(pg, table, needed, assigned, claims)
        self._fit[key] = (gen, version, assigned, claims, short)
        return short

    def _compute(
        self, pg: PodGroup, table: NodeTable, needed: int, assigned: int, claims: tuple[tuple[str, int], ...]
    ) -> str:
        demand = self._demand_of(pg.key, table)
        ncols = len(demand.smallest)
        rows = table.alive_rows()
        free = np.maximum(table.available[rows, :ncols], 0) if len(rows) else np.zeros((0, ncols), dtype=np.int64)
        total = free.sum(axis=0)
        claim_slots = 0
        # Gangs already waiting at Permit come first: what they still need is not free for this one.
        for other, _n in claims:
            opg = self.pod_group(other)
            if not isinstance(opg, PodGroup):
                continue
            outstanding = opg.min_member - len(self.members.assigned_of(other))
            if outstanding > 0:
                odemand = self._demand_of(other, table)
                vec = odemand.of(outstanding)
                total[: min(len(vec), ncols)] -= vec[:ncols]
                claim_slots += outstanding
        smallest = demand.smallest
        cols = np.flatnonzero(smallest > 0)
        copies = free[:, cols] // smallest[cols]  # per node and resource: copies of the smallest member
        per_node = int(copies.min(axis=1).sum()) - claim_slots if len(cols) else needed
        per_resource = copies.sum(axis=0) - claim_slots
        # Aggregate: how many members the free totals hold (the cheapest first).
        fits_total = needed
        while fits_total > 0 and bool((demand.of(fits_total) > total).any()):
            fits_total -= 1
        placeable = max(min(per_node, fits_total), 0)
        if placeable >= needed:
            return ""
        need_vec = demand.of(needed)
        short_cols = {
            int(c) for c, slots in zip(cols, per_resource, strict=True) if slots < needed or need_vec[c] > total[c]
        }
        if not short_cols:  # no single resource is short: the members do not fit any one node
            short_cols = {int(c) for c in cols}
        names = table.resource_names
        reasons = ["Too many pods"] if PODS in short_cols else []
        reasons += [f"Insufficient {names[c]}" for c in sorted(short_cols) if c != PODS]
        missing = pg.min_member - assigned - placeable
        return f"{missing}/{pg.min_member} members could not be placed: {', '.join(reasons)}"

    def resource_gap(self, pg: PodGroup, table: NodeTable) -> str:
        """What the whole cluster lacks for the group's minResources (with minMember pods), counting
        the group's own placed pods as free (upstream CheckClusterResource); "" when it fits."""
        rows = table.alive_rows()
        free = table.free(rows).sum(axis=0) if len(rows) else np.zeros(len(table.resource_names), dtype=np.int64)
        for p in self.members.assigned_of(pg.key).values():
            vec = table.request_vector(p)
            free[: len(vec)] += vec
            free[PODS] += 1
        want = dict(pg.min_resources)
        want["pods"] = pg.min_member
        missing: list[str] = []
        for res, amount in sorted(want.items()):
            col = table.resource_index.get(res)
            have = int(free[col]) if col is not None and col < len(free) else 0
            if amount > have:
                short = amount - have
                missing.append(f"{res}: {format_milli_cpu(short) if res == 'cpu' else short}")
        return ", ".join(missing)
