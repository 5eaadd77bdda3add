"""The scheduler cache: the node table plus assumed pods (upstream backend/cache/cache.go).

A placement is *assumed* right after the scheduling cycle picks a node, so the next pod sees the
resources as taken while the bind is still in flight. The informer's view of the pod later
*confirms* it; a failed bind *forgets* it. An assumption never expires on a timer, as upstream
(pkg/scheduler/scheduler.go: durationToExpireAssumedPod = 0 since kubernetes#106361, where expiry
raced with slow binds and double-counted resources). Every cluster change returns the
ClusterEvent the queue uses to retry unschedulable pods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable


class SchedulerCache:
    def __init__(self, table: NodeTable | None = None) -> None:
        self.table = table if table is not None else NodeTable()
        #: uid → assumed PodInfo (with node_name set) awaiting confirmation from the cluster.
        self.assumed: dict[str, PodInfo] = {}
        #: Called with (the assumed pod, the cluster's pod or None when it is gone) when the
        #: cluster's view of an assumed pod arrives, before it is applied: the extender releases
        #: what it holds for that pod there (extender/holds.py). The callee may forget the pod.
        self.assumed_observer: Callable[[PodInfo, PodInfo | None], None] | None = None

    # -- assumed pods -----------------------------------------------------------------------------
    def assume(self, pod: PodInfo, node_name: str) -> PodInfo:
        assumed = pod.with_node(node_name)
        self.table.add_pod(assumed)
        self.assumed[pod.uid] = assumed
        return assumed

    def forget(self, uid: str) -> None:
        """Undo an assumption (bind failed or the attempt was rolled back)."""
        if self.assumed.pop(uid, None) is not None:
            self.table.remove_pod(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    # -- pods from the cluster --------------------------------------------------------------------
    def add_or_update_pod(self, pod: PodInfo) -> ClusterEvent | None:
        """An assigned pod seen in the cluster. Confirms an assumption; re-accounts a change."""
        if not pod.node_name:
            return None
        if pod.terminal:
            # Terminated pods release their resources (upstream skips them in the cache).
            return self.remove_pod(pod.uid)
        if self.assumed_observer is not None and pod.uid in self.assumed:
            self.assumed_observer(self.assumed[pod.uid], pod)
        self.assumed.pop(pod.uid, None)
        existing = self.table.pod(pod.uid)
        if existing is pod:
            # The simulator confirms a bind with the assumed object itself: nothing changes.
            return None
        if existing is not None and _same_accounting(existing, pod):
            # The common confirmation of an assumed pod: nothing to re-account, keep the new object.
            self.table.replace_pod(pod)
            return None
        self.table.add_pod(pod)
        if existing is None:
            return ClusterEvent(POD, ActionType.ADD, "AssignedPodAdd")
        if existing.labels != pod.labels:
            return ClusterEvent(POD, ActionType.UPDATE_POD_LABEL, "AssignedPodUpdate")
        if existing.requests != pod.requests:
            return ClusterEvent(POD, ActionType.UPDATE_POD_SCALE_DOWN, "AssignedPodUpdate")
        return None

    def remove_pod(self, uid: str) -> ClusterEvent | None:
        if self.assumed_observer is not None and uid in self.assumed:
            self.assumed_observer(self.assumed[uid], None)
        self.assumed.pop(uid, None)
        if self.table.remove_pod(uid) is None:
            return None
        return ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete")

    # -- nodes ------------------------------------------------------------------------------------
    def add_or_update_node(self, raw: dict[str, Any]) -> ClusterEvent | None:
        name = (raw.get("metadata") or {}).get("name", "")
        row = self.table.row_of(name)
        if row is None:
            self.table.upsert_node(raw)
            return ClusterEvent(NODE, ActionType.ADD, "NodeAdd")
        old = self.table.nodes[row]
        self.table.upsert_node(raw)
        action = node_update_action(old, raw)
        return ClusterEvent(NODE, action, "NodeUpdate") if action else None

    def remove_node(self, name: str) -> ClusterEvent | None:
        if self.table.row_of(name) is None:
            return None
        self.table.remove_node(name)
        return ClusterEvent(NODE, ActionType.DELETE, "NodeDelete")


def _same_accounting(a: PodInfo, b: PodInfo) -> bool:
    """Whether swapping a for b changes nothing the table or plugin columns derive from a pod."""
    # Identity first: a confirmation usually carries the objects of the assumed copy.
    return (
        a.node_name == b.node_name
        and (a.requests is b.requests or a.requests == b.requests)
        and a.host_ports == b.host_ports
        and (a.labels is b.labels or a.labels == b.labels)
        and a.scheduler_name == b.scheduler_name
    )


def node_update_action(old: dict[str, Any], new: dict[str, Any]) -> ActionType:
    """Which scheduling-relevant properties changed (upstream nodeSchedulingPropertiesChange)."""
    action = ActionType(0)
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
    o_status, n_status = old.get("status") or {}, new.get("status") or {}
    if bool(o_spec.get("unschedulable")) != bool(n_spec.get("unschedulable")):
        action |= ActionType.UPDATE_NODE_TAINT
    if o_status.get("allocatable") != n_status.get("allocatable"):
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if o_meta.get("labels") != n_meta.get("labels"):
        action |= ActionType.UPDATE_NODE_LABEL
    if o_spec.get("taints") != n_spec.get("taints"):
        action |= ActionType.UPDATE_NODE_TAINT
    if _conditions(o_status) != _conditions(n_status):
        action |= ActionType.UPDATE_NODE_CONDITION
    if o_meta.get("annotations") != n_meta.get("annotations"):
        action |= ActionType.UPDATE_NODE_ANNOTATION
    if (o_status.get("declaredFeatures") or []) != (n_status.get("declaredFeatures") or []):
        action |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return action


def _conditions(status: dict[str, Any]) -> dict[str, str]:
    # Heartbeat timestamps change constantly; only type → status matters (upstream strips times).
    return {c.get("type", ""): c.get("status", "") for c in status.get("conditions") or []}
