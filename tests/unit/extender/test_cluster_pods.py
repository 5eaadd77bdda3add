"""The extender's pod view: one informer of the pods not finished (kube-scheduler's selector,
pkg/scheduler/scheduler.go ``newPodInformer``), split by ``spec.nodeName`` into the pending pods
(``handle.pending_pods``, the next-pod guess) and the cache (per-node counts). A pod is checked at
each step of its life as the watch delivers it: created, bound, Running, finished or deleted."""

from __future__ import annotations

from typing import Any, cast

from kubesched.extender.cluster import ExtenderCluster
from kubesched.kube.api import ApiClient
from kubesched.kube.informer import UNFINISHED_PODS, reconcile
from kubesched.testing import node
from unit.extender.test_service import ip_pod


def _cluster() -> ExtenderCluster:
    cluster = ExtenderCluster(cast(ApiClient, None))  # never started: the test is the watch
    for name in ("a", "b"):
        cluster.nodes.handlers.on_add(node(name))
    return cluster


def _on(raw: dict[str, Any], node_name: str, rv: str, phase: str = "Pending") -> dict[str, Any]:
    return {**raw, "metadata": {**raw["metadata"], "resourceVersion": rv},
            "spec": {**raw["spec"], "nodeName": node_name}, "status": {"phase": phase}}


def _on_node(cluster: ExtenderCluster, uid: str) -> str | None:
    pod = cluster.cache.table.pod(uid)
    return pod.node_name if pod is not None else None


def test_one_informer_of_the_pods_not_finished() -> None:
    cluster = _cluster()
    assert cluster.pods.path == "/api/v1/pods"
    assert cluster.pods.params == {"fieldSelector": UNFINISHED_PODS}
    assert UNFINISHED_PODS == "status.phase!=Succeeded,status.phase!=Failed"


def test_a_pod_from_pending_to_bound_to_running_to_deleted() -> None:
    cluster = _cluster()
    raw = ip_pod("web")
    uid = raw["metadata"]["uid"]
    cluster.pods.handlers.on_add(raw)
    assert [p.uid for p in cluster.pending_pods()] == [uid]
    assert cluster.next_pending(set()) is not None
    assert _on_node(cluster, uid) is None

    changes, pending_changes = cluster.changes, cluster.pending_changes
    bound = _on(raw, "a", "2")
    cluster.pods.handlers.on_update(raw, bound)  # the bind: one update
    assert list(cluster.pending_pods()) == [] and cluster.pending_pod(uid) is None
    assert cluster.next_pending(set()) is None
    assert _on_node(cluster, uid) == "a"
    assert (cluster.changes, cluster.pending_changes) == (changes + 1, pending_changes + 1)

    running = _on(raw, "a", "3", "Running")
    cluster.pods.handlers.on_update(bound, running)
    assert _on_node(cluster, uid) == "a"
    assert cluster.changes == changes + 1  # a status update changes nothing a plugin reads

    cluster.pods.handlers.on_delete(running)
    assert _on_node(cluster, uid) is None
    assert cluster.changes == changes + 2
    assert cluster.pending_changes == pending_changes + 1


def test_a_pod_deleted_while_pending_leaves_the_pending_pods_only() -> None:
    cluster = _cluster()
    keep, gone = ip_pod("keep"), ip_pod("gone")
    for raw in (keep, gone):
        cluster.pods.handlers.on_add(raw)
    changes = cluster.changes
    cluster.pods.handlers.on_delete(gone)
    assert [p.name for p in cluster.pending_pods()] == ["keep"]
    assert cluster.changes == changes  # the cache's pods are unchanged


def test_a_pod_that_finishes_leaves_the_cache() -> None:
    """It stops matching the selector: the watch sends a delete carrying its final state."""
    cluster = _cluster()
    raw = ip_pod("job")
    uid = raw["metadata"]["uid"]
    cluster.pods.handlers.on_add(_on(raw, "b", "2", "Running"))
    assert _on_node(cluster, uid) == "b"
    cluster.pods.handlers.on_delete(_on(raw, "b", "3", "Succeeded"))
    assert _on_node(cluster, uid) is None
    assert list(cluster.pending_pods()) == []


def test_a_relist_that_finds_a_pending_pod_bound() -> None:
    """After a watch outage the informer reconciles: the pod it had pending comes back bound."""
    cluster = _cluster()
    raw, other = ip_pod("late"), ip_pod("other")
    cluster.pods.store.clear()
    for obj in (raw, other):
        cluster.pods._apply("add", obj)
    for d in reconcile(cluster.pods.store, [_on(raw, "a", "9", "Running"), other]):
        cluster.pods._apply(d.kind, d.obj, d.old)
    assert [p.name for p in cluster.pending_pods()] == ["other"]
    assert _on_node(cluster, raw["metadata"]["uid"]) == "a"
