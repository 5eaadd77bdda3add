"""The built-in plugin registry: the default-equivalent plugins plus kubesched's own (out-of-tree
plugins are loaded by ``kubesched.app.plugin_loading``). Each is imported when a configuration
first names it (``Registry.register_lazy``)."""

from __future__ import annotations

from kubesched.framework.registry import Registry

#: Plugin name → ``"module:class"``, in the order upstream's registry lists the in-tree plugins,
#: then kubesched's own.
BUILTIN_PLUGINS: dict[str, str] = {
    "SchedulingGates": "kubesched.plugins.schedulinggates:SchedulingGates",
    "PrioritySort": "kubesched.plugins.priority_sort:PrioritySort",
    "NodeUnschedulable": "kubesched.plugins.node_unschedulable:NodeUnschedulable",
    "NodeName": "kubesched.plugins.node_name:NodeName",
    "TaintToleration": "kubesched.plugins.taint_toleration:TaintToleration",
    "NodeAffinity": "kubesched.plugins.node_affinity:NodeAffinity",
    "NodePorts": "kubesched.plugins.node_ports:NodePorts",
    "NodeResourcesFit": "kubesched.plugins.noderesources:NodeResourcesFit",
    "VolumeRestrictions": "kubesched.plugins.volumerestrictions:VolumeRestrictions",
    "NodeVolumeLimits": "kubesched.plugins.nodevolumelimits:NodeVolumeLimits",
    "VolumeBinding": "kubesched.plugins.volumebinding:VolumeBinding",
    "VolumeZone": "kubesched.plugins.volumezone:VolumeZone",
    "DynamicResources": "kubesched.plugins.dynamicresources:DynamicResources",
    "PodTopologySpread": "kubesched.plugins.podtopologyspread:PodTopologySpread",
    "InterPodAffinity": "kubesched.plugins.interpodaffinity:InterPodAffinity",
    "DefaultPreemption": "kubesched.plugins.defaultpreemption:DefaultPreemption",
    "NodeResourcesBalancedAllocation": "kubesched.plugins.noderesources:NodeResourcesBalancedAllocation",
    "ImageLocality": "kubesched.plugins.imagelocality:ImageLocality",
    "DefaultBinder": "kubesched.plugins.default_binder:DefaultBinder",
    "NodeDeclaredFeatures": "kubesched.plugins.nodedeclaredfeatures:NodeDeclaredFeatures",
    "GangScheduling": "kubesched.plugins.gangscheduling:GangScheduling",
    "TopologyPlacementGenerator": "kubesched.plugins.topologyaware:TopologyPlacementGenerator",
    "PodGroupPodsCount": "kubesched.plugins.podgrouppodscount:PodGroupPodsCount",
    "UnderlayIP": "kubesched.plugins.underlay_ip:UnderlayIP",
    "Coscheduling": "kubesched.plugins.coscheduling:Coscheduling",
    "RealUsage": "kubesched.plugins.real_usage:RealUsage",
    "MemRealUsage": "kubesched.plugins.real_usage:MemRealUsage",
    "GpuShare": "kubesched.plugins.gpushare:GpuShare",
    "FGD": "kubesched.plugins.gpu_policies:FGD",
    "BestFit": "kubesched.plugins.gpu_policies:BestFit",
    "DotProduct": "kubesched.plugins.gpu_policies:DotProduct",
    "GpuPacking": "kubesched.plugins.gpu_policies:GpuPacking",
    "GpuClustering": "kubesched.plugins.gpu_policies:GpuClustering",
    "RandomFit": "kubesched.plugins.gpu_policies:RandomFit",
}


def builtin_registry() -> Registry:
    return Registry(origin="built-in", lazy=BUILTIN_PLUGINS)
