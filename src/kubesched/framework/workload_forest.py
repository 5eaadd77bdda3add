"""CompositePodGroup hierarchies: which root a PodGroup belongs to, and the tree under a root.

Port of pkg/scheduler/backend/queue/workload_forest.go (Kubernetes v1.37.1, CompositePodGroup on).
A PodGroup (``scheduling.k8s.io/v1beta1``) or a CompositePodGroup (``scheduling.k8s.io/v1alpha3``)
names its parent with ``spec.parentCompositePodGroupName``, a CompositePodGroup in its namespace;
a group without one is a root. The scheduler schedules a root CompositePodGroup with every queued
member of every PodGroup under it as one entity (the queue's ``QueuedPodGroupInfo``).

Read from the objects the shell tracks (``handle.objects``) on each call, as upstream's forest is
kept in step with its informers. Where kubesched differs: children are ordered by name (upstream
ranges over a Go set, a random order each cycle), so which child is tried first is reproducible; a
cycle in the parent chain means no root (upstream logs ``cycle detected in composite pod group
hierarchy`` and does the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.framework.podgroup import PodGroupInfo, parent_composite_name

Objects = Mapping[str, dict[str, Any]]


def root_composite_of(pod_groups: Objects, composites: Objects, pod_group_key: str) -> str | None:
    """getRootLookupInfoForPodGroup: the ``namespace/name`` of the root CompositePodGroup above
    the PodGroup ``pod_group_key``; None when the PodGroup is a root itself, is not known, or its
    chain of parents reaches a CompositePodGroup that does not exist (yet) or loops."""
    raw = pod_groups.get(pod_group_key)
    parent = parent_composite_name(raw)
    if parent is None:
        return None
    namespace = pod_group_key.split("/", 1)[0]
    return root_of_composite(composites, namespace, parent)


def root_of_composite(composites: Objects, namespace: str, parent: str) -> str | None:
    """getRootLookupInfoForParentCPG: from the CompositePodGroup ``parent`` follow
    ``parentCompositePodGroupName`` up to a root (None: one on the way is missing, or a loop)."""
    visited: set[str] = set()
    current = parent
    while True:
        key = f"{namespace}/{current}"
        if key in visited:
            return None
        visited.add(key)
        raw = composites.get(key)
        if raw is None:
            return None
        up = parent_composite_name(raw)
        if up is None:
            return key
        current = up


def _children_index(pod_groups: Objects, composites: Objects, namespace: str) -> dict[str, list[tuple[str, bool]]]:
    """Parent CompositePodGroup name → its children ``(name, is_composite)`` in one namespace."""
    children: dict[str, list[tuple[str, bool]]] = {}
    for objects, composite in ((pod_groups, False), (composites, True)):
        for key, raw in objects.items():
            ns, name = key.split("/", 1)
            parent = parent_composite_name(raw) if ns == namespace else None
            if parent is not None:
                children.setdefault(parent, []).append((name, composite))
    for kids in children.values():
        kids.sort()
    return children


def build_tree(pod_groups: Objects, composites: Objects, root_key: str) -> PodGroupInfo | None:
    """buildQueuedPodGroupInfo: the root CompositePodGroup ``root_key`` and every group under it
    (no members yet: the cycle fills ``unscheduled_pods``); None when the root does not exist."""
    raw_root = composites.get(root_key)
    if raw_root is None:
        return None
    namespace, name = root_key.split("/", 1)
    children = _children_index(pod_groups, composites, namespace)
    visited: set[tuple[str, bool]] = set()

    def build(name: str, raw: dict[str, Any]) -> PodGroupInfo:
        info = PodGroupInfo(namespace, name, composite_pod_group=raw)
        for child, composite in children.get(name, ()):
            if (child, composite) in visited:  # a loop: upstream skips the child it saw already
                continue
            visited.add((child, composite))
            child_raw = (composites if composite else pod_groups).get(f"{namespace}/{child}")
            if child_raw is None:
                continue
            info.children.append(build(child, child_raw) if composite
                                 else PodGroupInfo(namespace, child, pod_group=child_raw))
        return info

    visited.add((name, True))
    return build(name, raw_root)
