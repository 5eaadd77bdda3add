"""NodeName: a pod with spec.nodeName fits only that node.

Port of pkg/scheduler/framework/plugins/nodename/node_name.go. The newest upstream also narrows
the candidates at PreFilter to the named node (PreFilterResult{NodeNames: {nodeName}}) and
returns (nil, nil) — not Skip — for pods without a nodeName.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import FilterPlugin, PreFilterPlugin
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import EVENT_NODE_ADD, ClusterEvent, PreFilterResult, Verdicts
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

#: ErrReason
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(PreFilterPlugin, FilterPlugin):
    name: ClassVar[str] = "NodeName"

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (node_name.go): the pod's spec.nodeName."""
        return ((signers.NODE_NAME, pod.spec.get("nodeName") or ""),)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream: Node/Add only (no queueing hint needed: a new node is always worth a retry).
        return (EVENT_NODE_ADD,)

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if pod.node_name:
            return PreFilterResult(frozenset((pod.node_name,))), SUCCESS
        return None, SUCCESS

    def filter_signature(self, state: CycleState, pod: PodInfo) -> Hashable:
        return pod.node_name

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        # Fits: len(pod.Spec.NodeName) == 0 || pod.Spec.NodeName == node.Name
        if not pod.node_name:
            return Verdicts.all_pass(len(rows))
        row = table.row_of(pod.node_name)
        ok = rows == row if row is not None else np.zeros(len(rows), dtype=np.bool_)
        return Verdicts.from_mask(ok, Status.unresolvable(ERR_REASON))
