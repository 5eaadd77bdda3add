"""The built-in plugin registry: the default-equivalent plugins plus kubesched's own."""

from __future__ import annotations

from kubesched.framework.registry import Registry


def builtin_registry() -> Registry:
    from kubesched.plugins.default_binder import DefaultBinder
    from kubesched.plugins.node_affinity import NodeAffinity
    from kubesched.plugins.node_name import NodeName
    from kubesched.plugins.node_ports import NodePorts
    from kubesched.plugins.node_unschedulable import NodeUnschedulable
    from kubesched.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
    from kubesched.plugins.priority_sort import PrioritySort
    from kubesched.plugins.taint_toleration import TaintToleration
    from kubesched.plugins.underlay_ip import UnderlayIP

    return Registry(
        [
            PrioritySort,
            NodeUnschedulable,
            NodeName,
            TaintToleration,
            NodeAffinity,
            NodePorts,
            NodeResourcesFit,
            NodeResourcesBalancedAllocation,
            DefaultBinder,
            UnderlayIP,
        ]
    )
