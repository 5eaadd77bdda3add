"""ClusterRoles a shell needs, built one way for every shell: what the shell itself does (its own
rules) plus what the objects its plugins declare call for (``rbac_rules``). ``kubesched run
--print-rbac`` (live/rbac.py) and ``kubesched extender --print-rbac`` (extender/rbac.py) print
them; tests hold the shipped manifests to what they print."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.kube.objects import rbac_rules

#: The node and pod informers every shell runs (the cache the plugins read).
WATCH_NODES_AND_PODS: dict[str, Any] = {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}
#: ``POST .../pods/NAME/binding``: the scheduler's bind, and the extender's bind verb.
BIND_PODS: dict[str, Any] = {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}


def cluster_role(name: str, rules: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The ClusterRole ``name`` with ``rules``, copied: the constants above are shared, and YAML
    would print one rule object met twice in a document as an anchor and an alias."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": copy.deepcopy(list(rules)),
    }


def watch_rules(kinds: Iterable[ObjectKind]) -> list[dict[str, Any]]:
    """list/watch of each kind and nothing else, for a shell that only reads the declared objects
    (the extender: it runs no status updates and offers its plugins no client to write with)."""
    return rbac_rules(
        replace(k, writes_status=False, writes=(), status_writes=(), subresource_writes=()) for k in kinds
    )
