"""Factories for raw v1 Node and Pod objects used across unit tests."""

from __future__ import annotations

import itertools
from typing import Any

from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

_seq = itertools.count()


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    alloc.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    namespace: str = "default",
    node_name: str = "",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    scheduler_name: str | None = None,
    extra_requests: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    n = next(_seq)
    body: dict[str, Any] = {
        "containers": [{"name": "app", "image": "app", "resources": {"requests": requests} if requests else {}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    if priority is not None:
        body["priority"] = priority
    if scheduler_name:
        body["schedulerName"] = scheduler_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}-{n}",
            "labels": labels or {},
            "creationTimestamp": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z",
        },
        "spec": body,
    }


def pod_info(name: str, **kw: Any) -> PodInfo:
    return PodInfo.from_raw(pod(name, **kw))


def table_of(*nodes: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> NodeTable:
    t = NodeTable()
    for n in nodes:
        t.upsert_node(n)
    for p in pods or []:
        t.add_pod(PodInfo.from_raw(p))
    return t
