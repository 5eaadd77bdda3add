"""The built-in plugin registry: the default-equivalent plugins plus kubesched's own (out-of-tree
plugins are loaded by ``kubesched.app.plugin_loading``)."""

from __future__ import annotations

from kubesched.framework.registry import Registry


def builtin_registry() -> Registry:
    from kubesched.plugins.coscheduling import Coscheduling
    from kubesched.plugins.default_binder import DefaultBinder
    from kubesched.plugins.defaultpreemption import DefaultPreemption
    from kubesched.plugins.interpodaffinity import InterPodAffinity
    from kubesched.plugins.node_affinity import NodeAffinity
    from kubesched.plugins.node_name import NodeName
    from kubesched.plugins.node_ports import NodePorts
    from kubesched.plugins.node_unschedulable import NodeUnschedulable
    from kubesched.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
    from kubesched.plugins.podtopologyspread import PodTopologySpread
    from kubesched.plugins.priority_sort import PrioritySort
    from kubesched.plugins.real_usage import MemRealUsage, RealUsage
    from kubesched.plugins.taint_toleration import TaintToleration
    from kubesched.plugins.underlay_ip import UnderlayIP

    return Registry(
        origin="built-in",
        plugins=[
            PrioritySort,
            NodeUnschedulable,
            NodeName,
            TaintToleration,
            NodeAffinity,
            NodePorts,
            NodeResourcesFit,
            PodTopologySpread,
            InterPodAffinity,
            DefaultPreemption,
            NodeResourcesBalancedAllocation,
            DefaultBinder,
            UnderlayIP,
            Coscheduling,
            RealUsage,
            MemRealUsage,
        ]
    )
