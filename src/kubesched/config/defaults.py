"""The default plugin sets, and which upstream plugins kubesched does not implement.

* v1 (and v1beta3): ``pkg/scheduler/apis/config/v1/default_plugins.go`` ``getDefaultPlugins``.
  Every default plugin is enabled through ``multiPoint`` in this order, with these Score weights.
  This is the list of Kubernetes 1.31+ (the in-tree cloud volume-limit plugins ``EBSLimits``,
  ``GCEPDLimits``, ``AzureDiskLimits`` were removed from it and are listed as invalid for v1 in
  ``validation.go`` ``invalidPluginsByVersion``); ``applyFeatureGates`` inserts
  ``DynamicResources`` before ``DefaultPreemption`` when the ``DynamicResourceAllocation`` feature
  gate is on (GA and on by default since 1.34), and appends ``NodeDeclaredFeatures`` (its gate is GA
  and locked on in 1.37). The gates that add further plugins are off by default in 1.37 and not
  listed: with ``featureGates: {GenericWorkload: true}`` (config/features.py) GangScheduling is
  appended to multiPoint as upstream's ``applyGangScheduling`` does;
  TopologyAwareWorkloadScheduling (TopologyPlacementGenerator, PodGroupPodsCount) and
  InPlacePodVerticalScalingSchedulerPreemption are not supported.
  ``tests/integration/test_default_profile_upstream.py`` holds this list to the real
  kube-scheduler's ``--write-config-to`` output.
* v1beta2: ``pkg/scheduler/apis/config/v1beta2/default_plugins.go`` (final version, 1.27): the
  defaults are listed per extension point (v1beta2 has no ``multiPoint``) and the Score weights
  differ: TaintToleration 1, NodeAffinity 1, InterPodAffinity 1 (v1beta3/v1: 3, 2, 2).

A default plugin that is not in the registry is left out of the resolved profile (kubesched builds
defaults from what is registered).

The defaulting code: ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_KubeSchedulerConfiguration``
(:func:`set_defaults`: one profile when none is given, ``schedulerName: default-scheduler`` only when
there is a single profile, client-connection / leader-election / extender timeout defaults) and
``default_plugins.go`` ``mergePlugins`` / ``mergePluginSet`` (:func:`default_plugin_sets`,
:func:`merge_plugin_set`: the default plugins merged into each profile's sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kubesched.config.decode import V1BETA2
from kubesched.config.features import GENERIC_WORKLOAD, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING
from kubesched.config.models import (
    DEFAULT_SCHEDULER_NAME,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    PluginRef,
    Plugins,
    PluginSet,
)
from kubesched.framework.interfaces import EXTENSION_POINTS, Plugin
from kubesched.framework.registry import Registry

__all__ = [
    "DEFAULT_EXTENDER_TIMEOUT_SECONDS",
    "DEFAULT_MULTI_POINT",
    "REMOVED_IN_V1",
    "UPSTREAM_IN_TREE",
    "UPSTREAM_NOT_IMPLEMENTED",
    "V1BETA2_DEFAULT_PLUGINS",
    "default_plugin_sets",
    "implements",
    "merge_plugin_set",
    "set_defaults",
]

#: pkg/scheduler/extender.go DefaultExtenderTimeout.
DEFAULT_EXTENDER_TIMEOUT_SECONDS: Final = 5.0

#: (name, weight or None) — v1 getDefaultPlugins().MultiPoint.Enabled with v1.37's default gates.
DEFAULT_MULTI_POINT: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
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
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)

#: v1beta2 getDefaultPlugins(): config point name -> [(name, weight or None)], with the gates of its
#: last release (1.27): PodSchedulingReadiness (beta, on) adds SchedulingGates at PreEnqueue;
#: VolumeBinding's Score needed the alpha VolumeCapacityPriority gate (off).
V1BETA2_DEFAULT_PLUGINS: Final[dict[str, tuple[tuple[str, int | None], ...]]] = {
    "preEnqueue": (("SchedulingGates", None),),
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

#: Upstream in-tree plugins (pkg/scheduler/framework/plugins/registry.go) that kubesched may lack:
#: the ones of these a registry does not hold are the ones "not implemented" (validate.py subtracts
#: the registry everywhere). Enabling one of those explicitly is dropped with a warning; disabling
#: one is fine; its pluginConfig is accepted and ignored with a warning. A plugin stays listed
#: after kubesched implements it (PodTopologySpread), so a registry without it, e.g. an extender
#: build or a test's, still treats the name as upstream's rather than unknown.
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
        "NodeDeclaredFeatures",
        # Off by default upstream (feature gates off in the newest releases).
        "GangScheduling",
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


def set_defaults(cfg: KubeSchedulerConfiguration) -> tuple[KubeSchedulerConfiguration, list[KubeSchedulerProfile]]:
    """defaults.go SetDefaults_KubeSchedulerConfiguration: the defaulted configuration and its profiles."""
    profiles = list(cfg.profiles) or [KubeSchedulerProfile()]
    if len(profiles) == 1 and profiles[0].scheduler_name is None:
        profiles[0] = profiles[0].model_copy(update={"scheduler_name": DEFAULT_SCHEDULER_NAME})
    cc = cfg.client_connection.model_copy(
        update={
            "content_type": cfg.client_connection.content_type or "application/vnd.kubernetes.protobuf",
            "qps": cfg.client_connection.qps or 50.0,
            "burst": cfg.client_connection.burst or 100,
        }
    )
    le = cfg.leader_election.model_copy(
        update={
            "resource_lock": cfg.leader_election.resource_lock or "leases",
            "resource_name": cfg.leader_election.resource_name or "kube-scheduler",
            "resource_namespace": cfg.leader_election.resource_namespace or "kube-system",
        }
    )
    extenders = [
        e.model_copy(update={"http_timeout": e.http_timeout or DEFAULT_EXTENDER_TIMEOUT_SECONDS}) for e in cfg.extenders
    ]
    cfg = cfg.model_copy(update={"client_connection": cc, "leader_election": le, "extenders": extenders})
    return cfg, profiles


def implements(cls: type[Plugin], point: str) -> bool:
    """Whether a plugin class implements the interface of a (configuration) extension point."""
    base = EXTENSION_POINTS.get(point)
    return base is not None and issubclass(cls, base)


def default_plugin_sets(
    registry: Registry, api_version: str, gates: Mapping[str, bool] | None = None
) -> dict[str, PluginSet]:
    """The default plugin set of every point (getDefaultPlugins), limited to what ``registry`` has:
    v1/v1beta3 enable everything through multiPoint; v1beta2 lists each point. ``gates``: the
    feature gates (applyFeatureGates; v1beta2 predates GenericWorkload)."""
    reg = registry
    sets = {point: PluginSet() for point in Plugins().by_point()}
    if api_version == V1BETA2:
        for point, entries in V1BETA2_DEFAULT_PLUGINS.items():
            refs = []
            for name, weight in entries:
                cls = reg.get(name)
                if cls is not None and implements(cls, point):
                    refs.append(PluginRef(name=name, weight=weight))
            sets[point] = PluginSet(enabled=refs)
    else:
        multi_point = list(DEFAULT_MULTI_POINT)
        if (gates or {}).get(GENERIC_WORKLOAD):
            multi_point.append(("GangScheduling", None))  # applyGangScheduling
        if (gates or {}).get(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING):  # applyTopologyAwareWorkloadScheduling
            multi_point.extend((("TopologyPlacementGenerator", None), ("PodGroupPodsCount", 1)))
        sets["multiPoint"] = PluginSet(enabled=[PluginRef(name=n, weight=w) for n, w in multi_point if n in reg])
    return sets


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """default_plugins.go mergePluginSet: disabled (incl. "*") defaults dropped, re-enabled defaults
    replaced in place (keeping the default order), other custom plugins appended in order. Disabled
    names are kept so that multiPoint expansion can skip them."""
    disabled_names = {p.name for p in custom.disabled} | {p.name for p in default.disabled}
    disabled = [PluginRef(name=p.name) for p in (*custom.disabled, *default.disabled)]
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for d in default.enabled:
            if d.name in disabled_names:
                continue
            i = custom_index.get(d.name)
            if i is not None:
                enabled.append(custom.enabled[i])
                replaced.add(i)
            else:
                enabled.append(d)
    # Duplicated custom plugins are still appended; the framework step reports them.
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled=enabled, disabled=disabled)
