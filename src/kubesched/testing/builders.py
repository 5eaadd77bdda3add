"""Builders of raw v1 Node and Pod objects, and of the parsed views the framework works on.

Two kinds of pod: :func:`pod` is a pod as the scheduler's cache sees it (it has a ``uid`` and a
``creationTimestamp``, which order the queue), for in-memory tests; :func:`pod_manifest` is a pod
to create through the API (the apiserver fills in both). :func:`node` is a node with allocatable
resources; :func:`kwok_node` is the same node shaped for a real cluster whose kubelets KWOK plays.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

__all__ = [
    "KWOK_ANNOTATION",
    "kwok_node",
    "node",
    "pod",
    "pod_info",
    "pod_manifest",
    "table_of",
]

#: The annotation KWOK selects the nodes it manages by (value ``fake``).
KWOK_ANNOTATION = "kwok.x-k8s.io/node"

_seq = itertools.count()


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int | str = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
    *,
    annotations: Mapping[str, str] | None = None,
    ephemeral_storage: str | None = "100Gi",
    node_info: bool = False,
) -> dict[str, Any]:
    """A v1 Node with allocatable = capacity = ``cpu``, ``memory``, ``pods``, ``ephemeral_storage``
    (None: not listed) and the ``extra`` resources (extended resources, hugepages, overrides).

    ``labels`` are added to ``kubernetes.io/hostname``; ``annotations`` (when given) become
    ``metadata.annotations``; ``node_info`` adds ``status.nodeInfo`` (linux/amd64)."""
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if ephemeral_storage is not None:
        alloc["ephemeral-storage"] = ephemeral_storage
    alloc.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    metadata: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    status: dict[str, Any] = {"allocatable": alloc, "capacity": alloc}
    if node_info:
        status["nodeInfo"] = {"architecture": "amd64", "operatingSystem": "linux"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec, "status": status}


def kwok_node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int | str = 110,
    extended: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    kwok: bool = True,
) -> dict[str, Any]:
    """A Node to create on a real control plane (:mod:`kubesched.testing.controlplane`).

    Labelled linux/amd64; with ``kwok`` (the default) annotated ``kwok.x-k8s.io/node=fake`` and
    labelled ``type=kwok``, so KWOK marks it Ready and runs its pods. No ephemeral-storage is listed."""
    lbl = {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **({"type": "kwok"} if kwok else {}),
        **(labels or {}),
    }
    ann = {"node.alpha.kubernetes.io/ttl": "0", **({KWOK_ANNOTATION: "fake"} if kwok else {}), **(annotations or {})}
    return node(
        name,
        cpu,
        memory,
        pods,
        labels=lbl,
        taints=taints,
        extra=extended,
        annotations=ann,
        ephemeral_storage=None,
        node_info=True,
    )


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
    """A v1 Pod with one container requesting ``cpu``/``memory``/``extra_requests``; keyword
    arguments in camelCase (``tolerations=``, ``nodeSelector=``, ``containers=``...) go to ``spec``.

    Each call gets a unique ``uid`` and a later ``creationTimestamp`` than the previous one."""
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


def pod_manifest(
    name: str,
    namespace: str = "default",
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    affinity: Mapping[str, Any] | None = None,
    priority_class_name: str | None = None,
    node_name: str | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    container_name: str = "main",
    ports: Sequence[int] = (),
    extra_spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A v1 Pod to create through the API: one container (``image``, ``ports``, ``requests``,
    ``limits``), no grace period, no service-account token; ``extra_spec`` is merged into ``spec``."""
    container: dict[str, Any] = {"name": container_name, "image": image}
    if ports:
        container["ports"] = [{"containerPort": p} for p in ports]
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = dict(requests)
    if limits:
        res["limits"] = dict(limits)
    if res:
        container["resources"] = res
    spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        **(extra_spec or {}),
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def pod_info(name: str, **kw: Any) -> PodInfo:
    """:func:`pod` parsed into the framework's :class:`~kubesched.snapshot.pod.PodInfo`."""
    return PodInfo.from_raw(pod(name, **kw))


def table_of(*nodes: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> NodeTable:
    """A :class:`~kubesched.snapshot.table.NodeTable` holding ``nodes`` and the bound ``pods``."""
    t = NodeTable()
    for n in nodes:
        t.upsert_node(n)
    for p in pods or []:
        t.add_pod(PodInfo.from_raw(p))
    return t
