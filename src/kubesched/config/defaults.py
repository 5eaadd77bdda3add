"""The default plugin sets, and which upstream plugins kubesched does not implement.

* v1 (and v1beta3): ``pkg/scheduler/apis/config/v1/default_plugins.go`` ``getDefaultPlugins``.
  Every default plugin is enabled through ``multiPoint`` in this order, with these Score weights.
  This is the list of Kubernetes 1.31+ (the in-tree cloud volume-limit plugins ``EBSLimits``,
  ``GCEPDLimits``, ``AzureDiskLimits`` were removed from it and are listed as invalid for v1 in
  ``validation.go`` ``invalidPluginsByVersion``); ``applyFeatureGates`` inserts
  ``DynamicResources`` before ``DefaultPreemption`` when the ``DynamicResourceAllocation`` feature
  gate is on (GA and on by default since 1.34). Newer alpha gates (GangScheduling,
  TopologyAwareWorkloadScheduling, NodeDeclaredFeatures) add further plugins; they are off by
  default and not listed.
* v1beta2: ``pkg/scheduler/apis/config/v1beta2/default_plugins.go`` (final version, 1.27): the
  defaults are listed per extension point (v1beta2 has no ``multiPoint``) and the Score weights
  differ: TaintToleration 1, NodeAffinity 1, InterPodAffinity 1 (v1beta3/v1: 3, 2, 2).

A default plugin that is not in the registry is left out of the resolved profile (kubesched builds
defaults from what is registered).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_MULTI_POINT",
    "REMOVED_IN_V1",
    "UPSTREAM_IN_TREE",
    "UPSTREAM_NOT_IMPLEMENTED",
    "V1BETA2_DEFAULT_PLUGINS",
]

#: (name, weight or None) — v1 getDefaultPlugins().MultiPoint.Enabled with DynamicResourceAllocation on.
DEFAULT_MULTI_POINT: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", None),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)

#: v1beta2 getDefaultPlugins(): config point name -> [(name, weight or None)].
#: (PreEnqueue SchedulingGates only with the PodSchedulingReadiness gate; VolumeBinding Score only
#: with the alpha VolumeCapacityPriority gate — neither is implemented by kubesched.)
V1BETA2_DEFAULT_PLUGINS: Final[dict[str, tuple[tuple[str, int | None], ...]]] = {
    "queueSort": (("PrioritySort", None),),
    "preFilter": (
        ("NodeResourcesFit", None),
        ("NodePorts", None),
        ("VolumeRestrictions", None),
        ("PodTopologySpread", None),
        ("InterPodAffinity", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("NodeAffinity", None),
        ("TaintToleration", None),
    ),
    "filter": (
        ("NodeUnschedulable", None),
        ("NodeName", None),
        ("TaintToleration", None),
        ("NodeAffinity", None),
        ("NodePorts", None),
        ("NodeResourcesFit", None),
        ("VolumeRestrictions", None),
        ("EBSLimits", None),
        ("GCEPDLimits", None),
        ("NodeVolumeLimits", None),
        ("AzureDiskLimits", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", None),
        ("InterPodAffinity", None),
    ),
    "postFilter": (("DefaultPreemption", None),),
    "preScore": (
        ("InterPodAffinity", None),
        ("PodTopologySpread", None),
        ("TaintToleration", None),
        ("NodeAffinity", None),
    ),
    "score": (
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ),
    "reserve": (("VolumeBinding", None),),
    "preBind": (("VolumeBinding", None),),
    "bind": (("DefaultBinder", None),),
}

#: Upstream in-tree plugins (pkg/scheduler/framework/plugins/registry.go) that kubesched does not
#: implement. Enabling one explicitly is dropped with a warning; disabling one is fine; its
#: pluginConfig is accepted and ignored with a warning.
#: SchedulingGates: kubesched's queue keeps gated pods out natively (PreEnqueue is not a kubesched
#: extension point).
UPSTREAM_NOT_IMPLEMENTED: Final[frozenset[str]] = frozenset(
    {
        "SchedulingGates",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DefaultPreemption",
        "ImageLocality",
        "DynamicResources",
        # Off by default upstream (alpha feature gates in the newest releases).
        "GangScheduling",
        "NodeDeclaredFeatures",
        "TopologyPlacementGenerator",
        "PodGroupPodsCount",
    }
)

#: Plugins upstream removed. The four cloud volume-limit plugins are rejected for v1 by upstream
#: validation ("was invalid in version ..."); SelectorSpread was removed with v1 ("use
#: PodTopologySpread"). In a v1beta2/v1beta3 file (where they were valid) they are dropped with a
#: warning instead.
REMOVED_IN_V1: Final[dict[str, str]] = {
    "AzureDiskLimits": "NodeVolumeLimits (CSI)",
    "CinderLimits": "NodeVolumeLimits (CSI)",
    "EBSLimits": "NodeVolumeLimits (CSI)",
    "GCEPDLimits": "NodeVolumeLimits (CSI)",
    "SelectorSpread": "PodTopologySpread",
}

#: The upstream in-tree plugin names kubesched knows of (implemented or not).
UPSTREAM_IN_TREE: Final[frozenset[str]] = frozenset(
    {name for name, _ in DEFAULT_MULTI_POINT} | UPSTREAM_NOT_IMPLEMENTED
)
