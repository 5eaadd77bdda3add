"""NodeQuota: at most N pods per node, N read from a ConfigMap (see the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kubesched.framework import (
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    ObjectKind,
    PodInfo,
    Rows,
    Status,
    Verdicts,
)
from kubesched.framework import NodeTable as Table

CONFIGMAP = ObjectKind("ConfigMap", "", "v1", "configmaps")
QUOTAS = "kube-system/node-pod-quotas"


class NodeQuota(FilterPlugin):
    name = "NodeQuota"
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = (CONFIGMAP,)

    def quotas(self) -> dict[str, int]:
        """Node name → pod quota, from the ConfigMap (entries that are not integers are ignored)."""
        cm: dict[str, Any] = dict(self.handle.objects(CONFIGMAP.kind).get(QUOTAS) or {})
        out = {}
        for node, value in (cm.get("data") or {}).items():
            try:
                out[str(node)] = int(value)
            except (TypeError, ValueError):
                continue
        return out

    def filter_batch(self, state: CycleState, pod: PodInfo, table: Table, rows: Rows) -> Verdicts:
        quotas = self.quotas()
        if not quotas:
            return Verdicts.all_pass(len(rows))
        names = table.node_names(rows)
        full = np.fromiter(
            (n in quotas and len(table.pods[int(r)]) >= quotas[n] for n, r in zip(names, rows.tolist(), strict=True)),
            dtype=np.bool_,
            count=len(rows),
        )
        return Verdicts.from_mask(~full, Status.unschedulable("node(s) reached their pod quota"))

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent(CONFIGMAP.kind, ActionType.ALL, "ConfigMapChange"),
            ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),
            ClusterEvent(NODE, ActionType.ADD, "NodeAdd"),
        )
