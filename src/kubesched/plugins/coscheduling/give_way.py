"""Gangs giving way to older gangs, so two gangs that each hold part of the cluster at Permit cannot
starve each other.

When a member of a PodGroup fits nowhere, Coscheduling's PostFilter looks for younger groups
(:meth:`GiveWay.rank`: the older PodGroup goes first), still short of quorum, with members waiting
at Permit on nodes that rejected the pod for a reason freeing them may resolve
(:meth:`GiveWay.blockers`). Those groups are rejected and give way: their pods are refused at
PreFilter (:meth:`GiveWay.winner`) until the older group completes its quorum, fails
(:meth:`GiveWay.release`) or its Permit timeout passes. This is one of the README's differences
from scheduler-plugins, where two gangs each holding part of the cluster can reject each other for
ever.
"""

from __future__ import annotations

from collections.abc import Callable

from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Handle
from kubesched.framework.status import Code
from kubesched.framework.waiting import WaitingPod
from kubesched.plugins.coscheduling.podgroup import PodGroup, PodGroupSpecError, group_key
from kubesched.plugins.helpers.gang_members import MemberIndex

__all__ = ["GiveWay", "rejected"]


def rejected(wp: WaitingPod) -> bool:
    """Whether a waiting pod was rejected (by a plugin, a timeout or its deletion) and is not
    released yet. Allowing pops a plugin's deadline, rejecting does not: a decided pod with
    deadlines left was rejected."""
    return wp.decided and bool(wp.deadlines)


class GiveWay:
    """Which groups give way to which, until when (one per Coscheduling plugin instance)."""

    def __init__(
        self,
        handle: Handle,
        members: MemberIndex,
        pod_group: Callable[[str], PodGroup | PodGroupSpecError | None],
    ) -> None:
        self.handle = handle
        self.members = members
        self.pod_group = pod_group
        #: Group key → (the older group it gives way to, until when at the latest).
        self._yield_to: dict[str, tuple[str, float]] = {}

    @staticmethod
    def rank(pg: PodGroup) -> tuple[float, str]:
        """Between gangs competing for the same resources, the older PodGroup goes first."""
        return pg.creation_ts, pg.key

    def _complete(self, key: str, pg: PodGroup) -> bool:
        return len(self.members.assigned_of(key)) >= pg.min_member

    def blockers(self, pg: PodGroup, diagnosis: Diagnosis) -> list[str]:
        """Groups ranked after ``pg``, short of quorum, with members waiting at Permit on nodes
        that rejected this pod for a reason that freeing them may resolve."""
        mine = self.rank(pg)
        nodes_of: dict[str, list[str]] = {}
        for wp in self.handle.waiting_pods:
            other = group_key(wp.pod)
            # Members already rejected but not yet released count: their resources are on the way.
            if other is not None and other != pg.key and (not wp.decided or rejected(wp)):
                nodes_of.setdefault(other, []).append(wp.node_name)
        found: list[str] = []
        table = self.handle.table
        for other, nodes in sorted(nodes_of.items()):
            opg = self.pod_group(other)
            if not isinstance(opg, PodGroup) or self.rank(opg) <= mine or self._complete(other, opg):
                continue
            for node in nodes:
                row = table.row_of(node)
                st = diagnosis.node_to_status.get(row) if row is not None else None
                if st is not None and st.code == Code.UNSCHEDULABLE:
                    found.append(other)
                    break
        return found

    def give_way(self, losers: list[str], winner: str, until: float) -> None:
        """``losers`` keep out of ``winner``'s way until it completes, fails or ``until``."""
        for key in losers:
            self._yield_to[key] = (winner, until)

    def winner(self, key: str) -> str | None:
        """The group ``key`` gives way to, while that group is still assembling."""
        entry = self._yield_to.get(key)
        if entry is None:
            return None
        winner, deadline = entry
        pg = self.pod_group(winner)
        if self.handle.clock.now() >= deadline or not isinstance(pg, PodGroup) or self._complete(winner, pg):
            del self._yield_to[key]
            return None
        return winner

    def release(self, winner: str) -> None:
        """``winner`` failed: the groups that gave way to it may go again."""
        for key in [k for k, (w, _) in self._yield_to.items() if w == winner]:
            del self._yield_to[key]
