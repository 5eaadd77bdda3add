"""The ClusterRole a ``kubesched extender`` with a cluster connection needs, derived from what it
serves: its node informer and its one pod informer (bound pods for the cache, pending ones for
``handle.pending_pods``), ``pods/binding`` when kube-scheduler lets it bind (``bindVerb``), and
list/watch of the objects the served profile's plugins declare (framework/objects.py).
``kubesched extender --print-rbac`` prints it; a test holds the shipped extender manifest to it.

Nothing else: the extender writes no object. The status a plugin reports (``status_updates``,
e.g. UnderlayIP's pool and claim status) is patched only by ``kubesched run``'s leader, the
plugins get no client to update or create objects with (a PreBind that needs one fails the bind
instead), and PreBind's pod annotations (UnderlayIP's address) travel on the Binding itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.kube.rbac import BIND_PODS, WATCH_NODES_AND_PODS, cluster_role, watch_rules


def extender_cluster_role(name: str, kinds: Sequence[ObjectKind], bind: bool) -> dict[str, Any]:
    own = [WATCH_NODES_AND_PODS, BIND_PODS] if bind else [WATCH_NODES_AND_PODS]
    return cluster_role(name, [*own, *watch_rules(kinds)])
