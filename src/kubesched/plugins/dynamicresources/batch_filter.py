"""DynamicResources' Filter over many nodes at once (its batch form).

Nodes are grouped by the claims they would be asked to allocate: the pod's own claims, and for
extended resources backed by DRA the node's own claim (filterExtendedResources, extended.py;
nodes alike share one through ``node_claim``'s memo). quick_filter.py judges each group in one
pass; a node it cannot judge goes through the per-node Filter (and its search), so its status is
upstream's word for word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kubesched.framework.status import Status
from kubesched.framework.types import Verdicts
from kubesched.plugins.dynamicresources.extended import NodeClaim, node_claim
from kubesched.plugins.dynamicresources.state import StateData
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

#: quick_filter's verdicts for some nodes asked the same claims (None: it cannot judge them).
QuickVerdicts = Callable[[Sequence[str], NodeClaim], "list[bool | None] | None"]


def filter_rows(s: StateData, pod: PodInfo, table: NodeTable, rows: Rows, quick: QuickVerdicts,
                one: Callable[[NodeInfo], Status]) -> Verdicts:
    """Filter's verdict per row; ``s``: the pod's PreFilter state (an allocator, no claim already
    allocated that restricts the nodes); ``one``: Filter on one node."""
    names = table.node_names(rows.tolist())
    codes = np.zeros(len(rows), dtype=np.int32)
    statuses = [Status.unresolvable("cannot allocate all claims")]

    def refuse(i: int, status: Status) -> None:
        if status not in statuses:
            statuses.append(status)
        codes[i] = statuses.index(status) + 1

    groups: dict[int, tuple[NodeClaim, list[int]]] = {}
    for i in range(len(rows)):
        node_ext = NodeClaim()
        if s.extended is not None:
            node_ext = node_claim(s.claims[s.extended], pod, s.extended_resources, s.resolver,
                                  NodeInfo(table, int(rows[i])), has_user_claims=s.extended > 0,
                                  memo=s.extended_requests)
            if node_ext.refusal:
                refuse(i, Status.unresolvable(node_ext.refusal))
                continue
            if node_ext.claim is None and s.extended == 0:
                continue  # only extended resources, all from device plugins here
        groups.setdefault(id(node_ext), (node_ext, []))[1].append(i)
    for node_ext, members in groups.values():
        verdicts = quick([names[i] for i in members], node_ext)
        for i, verdict in zip(members, verdicts or [None] * len(members), strict=True):
            if verdict is True:
                s.quick_nodes.add(names[i])  # the search runs on the node the pod gets (Reserve)
                if node_ext.claim is not None:
                    s.node_extended[names[i]] = node_ext
            elif verdict is False:
                codes[i] = 1
            else:
                status = one(NodeInfo(table, int(rows[i])))
                if not status.is_success:
                    refuse(i, status)
    return Verdicts(codes, statuses)
