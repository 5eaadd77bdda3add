"""The built-in plugin registry: the default-equivalent plugins plus kubesched's own (out-of-tree
plugins are loaded by ``kubesched.app.plugin_loading``)."""

from __future__ import annotations

from kubesched.framework.registry import Registry


def builtin_registry() -> Registry:
    from kubesched.plugins.coscheduling import Coscheduling
    from kubesched.plugins.default_binder import DefaultBinder
    from kubesched.plugins.defaultpreemption import DefaultPreemption
    from kubesched.plugins.dynamicresources import DynamicResources
    from kubesched.plugins.gangscheduling import GangScheduling
    from kubesched.plugins.gpu_policies import POLICIES
    from kubesched.plugins.gpushare import GpuShare
    from kubesched.plugins.imagelocality import ImageLocality
    from kubesched.plugins.interpodaffinity import InterPodAffinity
    from kubesched.plugins.node_affinity import NodeAffinity
    from kubesched.plugins.node_name import NodeName
    from kubesched.plugins.node_ports import NodePorts
    from kubesched.plugins.node_unschedulable import NodeUnschedulable
    from kubesched.plugins.nodedeclaredfeatures import NodeDeclaredFeatures
    from kubesched.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
    from kubesched.plugins.nodevolumelimits import NodeVolumeLimits
    from kubesched.plugins.podgrouppodscount import PodGroupPodsCount
    from kubesched.plugins.podtopologyspread import PodTopologySpread
    from kubesched.plugins.priority_sort import PrioritySort
    from kubesched.plugins.real_usage import MemRealUsage, RealUsage
    from kubesched.plugins.schedulinggates import SchedulingGates
    from kubesched.plugins.taint_toleration import TaintToleration
    from kubesched.plugins.topologyaware import TopologyPlacementGenerator
    from kubesched.plugins.underlay_ip import UnderlayIP
    from kubesched.plugins.volumebinding import VolumeBinding
    from kubesched.plugins.volumerestrictions import VolumeRestrictions
    from kubesched.plugins.volumezone import VolumeZone

    return Registry(
        origin="built-in",
        plugins=[
            SchedulingGates,
            PrioritySort,
            NodeUnschedulable,
            NodeName,
            TaintToleration,
            NodeAffinity,
            NodePorts,
            NodeResourcesFit,
            VolumeRestrictions,
            NodeVolumeLimits,
            VolumeBinding,
            VolumeZone,
            DynamicResources,
            PodTopologySpread,
            InterPodAffinity,
            DefaultPreemption,
            NodeResourcesBalancedAllocation,
            ImageLocality,
            DefaultBinder,
            NodeDeclaredFeatures,
            GangScheduling,
            TopologyPlacementGenerator,
            PodGroupPodsCount,
            UnderlayIP,
            Coscheduling,
            RealUsage,
            MemRealUsage,
            GpuShare,
            *POLICIES,
        ]
    )
