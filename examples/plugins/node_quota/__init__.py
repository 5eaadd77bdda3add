"""NodeQuota — an example out-of-tree plugin that reads a cluster object of its own.

A ConfigMap (``kube-system/node-pod-quotas`` by default) maps node names to the most pods
kubesched may place there (``data: {node-a: "3"}``); nodes it does not name are unlimited.
The plugin declares ConfigMaps in ``object_kinds``, so without any shell knowing it:
``kubesched simulate --cluster`` keeps ConfigMaps from the dump, ``kubesched run`` and
``kubesched extender`` watch them, and ``kubesched run --print-rbac`` grants list/watch on them.
Changing the ConfigMap requeues the pods it rejected (its events name the ConfigMap kind).

    kubesched simulate --plugins examples/plugins/node_quota \\
        --config examples/plugins/node_quota/config.yaml --cluster examples/plugins/node_quota/cluster.yaml

It imports only ``kubesched.framework``.
"""

from node_quota.plugin import CONFIGMAP, NodeQuota

PLUGINS = [NodeQuota]

__all__ = ["CONFIGMAP", "PLUGINS", "NodeQuota"]
