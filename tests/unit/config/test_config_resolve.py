"""Default-profile resolution, default merging and multiPoint expansion (upstream ordering rules)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.config import DEFAULT_MULTI_POINT, UPSTREAM_NOT_IMPLEMENTED, load_config
from kubesched.config.load import _merge_plugin_set
from kubesched.config.models import PluginRef, PluginSet
from kubesched.framework.interfaces import EXTENSION_POINTS, FilterPlugin, ScorePlugin
from kubesched.framework.registry import Registry
from kubesched.framework.status import SUCCESS
from unit.config.config_fakes import BUILTINS, OUT_OF_TREE, NodeResourcesFitArgs, make_registry

V1 = "kubescheduler.config.k8s.io/v1"

DEFAULT_PLUGINS = {
    "preEnqueue": [],
    "queueSort": ["PrioritySort"],
    "preFilter": ["NodeAffinity", "NodePorts", "NodeResourcesFit"],
    "filter": ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit"],
    "postFilter": [],
    "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "NodeResourcesBalancedAllocation"],
    "score": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "NodeResourcesBalancedAllocation"],
    "reserve": [],
    "permit": [],
    "preBind": [],
    "bind": ["DefaultBinder"],
    "postBind": [],
    "placementGenerate": [],
    "placementScore": [],
    "podGroupPostFilter": [],
}
DEFAULT_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1}


def cfg(profiles: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", "profiles": profiles, **extra}


def test_upstream_default_list_is_the_newest_one() -> None:
    # pkg/scheduler/apis/config/v1/default_plugins.go (1.37: DynamicResourceAllocation and
    # NodeDeclaredFeatures on by default). The integration test test_default_profile_upstream.py
    # holds this to the real kube-scheduler.
    assert [n for n, _ in DEFAULT_MULTI_POINT] == [
        "SchedulingGates",
        "PrioritySort",
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
        "NodeDeclaredFeatures",
    ]
    weights = {n: w for n, w in DEFAULT_MULTI_POINT if w is not None}
    assert weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "DynamicResources": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    implemented = {cls.name for cls in BUILTINS}
    assert {n for n, _ in DEFAULT_MULTI_POINT} - implemented <= UPSTREAM_NOT_IMPLEMENTED


def test_default_config_resolves_the_default_profile() -> None:
    c = load_config(None, make_registry())
    assert c.api_version == V1
    assert c.warnings == []
    assert [p.scheduler_name for p in c.profiles] == ["default-scheduler"]
    p = c.profiles[0]
    assert p.plugins == DEFAULT_PLUGINS
    assert list(p.plugins) == list(EXTENSION_POINTS)
    assert p.score_weights == DEFAULT_WEIGHTS
    assert p.percentage_of_nodes_to_score is None
    # Args: defaults for plugins with an args model, None for the others; only enabled plugins.
    assert set(p.plugin_args) == {n for names in DEFAULT_PLUGINS.values() for n in names}
    assert p.plugin_args["NodeName"] is None
    assert p.plugin_args["NodeResourcesFit"] == NodeResourcesFitArgs()
    assert "Coscheduling" not in p.plugin_args


def test_empty_mapping_and_empty_profiles_are_the_default() -> None:
    reg = make_registry()
    a = load_config({"apiVersion": V1, "kind": "KubeSchedulerConfiguration"}, reg)
    b = load_config(cfg([]), reg)
    c = load_config(cfg([{}]), reg)
    for x in (a, b, c):
        assert x.profiles[0].scheduler_name == "default-scheduler"
        assert x.profiles[0].plugins == DEFAULT_PLUGINS


def test_defaults_follow_the_registry() -> None:
    # A default plugin that is not registered is simply absent.
    reg = Registry([cls for cls in BUILTINS if cls.name not in ("NodePorts", "NodeResourcesBalancedAllocation")])
    p = load_config(None, reg).profiles[0]
    assert p.plugins["preFilter"] == ["NodeAffinity", "NodeResourcesFit"]
    assert p.score_weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1}


def test_score_weight_override_keeps_default_order() -> None:
    # A specific point overrides the multiPoint entry: it runs first there, with its own weight.
    c = load_config(
        cfg([{"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]}}}]), make_registry()
    )
    p = c.profiles[0]
    assert p.plugins["score"] == [
        "NodeResourcesFit",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesBalancedAllocation",
    ]
    assert p.score_weights["NodeResourcesFit"] == 7
    # Other points are unaffected.
    assert p.plugins["filter"] == DEFAULT_PLUGINS["filter"]


def test_multipoint_weight_override_of_a_default() -> None:
    # mergePluginSet replaces the default in place (order kept) with the custom entry.
    c = load_config(
        cfg([{"plugins": {"multiPoint": {"enabled": [{"name": "NodeAffinity", "weight": 9}]}}}]), make_registry()
    )
    p = c.profiles[0]
    assert p.plugins == DEFAULT_PLUGINS
    assert p.score_weights["NodeAffinity"] == 9


def test_weight_zero_or_unset_means_one() -> None:
    prof = {
        "plugins": {"score": {"enabled": [{"name": "MemRealUsage", "weight": 0}, {"name": "UnderlayIP"}]}},
        "pluginConfig": [{"name": "MemRealUsage", "args": {"prometheusApiAddr": "http://p:9090"}}],
    }
    p = load_config(cfg([prof]), make_registry()).profiles[0]
    assert p.score_weights["MemRealUsage"] == 1
    assert p.score_weights["UnderlayIP"] == 1


def test_disable_star_at_a_point_skips_multipoint_expansion_there() -> None:
    c = load_config(
        cfg([{"plugins": {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}}]),
        make_registry(),
    )
    p = c.profiles[0]
    assert p.plugins["score"] == [] and p.plugins["preScore"] == []
    assert p.score_weights == {}
    assert p.plugins["filter"] == DEFAULT_PLUGINS["filter"]


def test_disable_one_default_at_one_point() -> None:
    c = load_config(cfg([{"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}]), make_registry())
    p = c.profiles[0]
    assert "TaintToleration" not in p.plugins["filter"]
    assert "TaintToleration" in p.plugins["score"]


def test_disable_in_multipoint_removes_the_default_everywhere() -> None:
    c = load_config(cfg([{"plugins": {"multiPoint": {"disabled": [{"name": "NodeAffinity"}]}}}]), make_registry())
    p = c.profiles[0]
    assert all("NodeAffinity" not in names for names in p.plugins.values())
    assert "NodeAffinity" not in p.plugin_args


def test_multipoint_disable_star_and_enable_only_some() -> None:
    prof = {
        "plugins": {
            "multiPoint": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "PrioritySort"}, {"name": "NodeName"}, {"name": "DefaultBinder"}],
            }
        }
    }
    p = load_config(cfg([prof]), make_registry()).profiles[0]
    assert {k: v for k, v in p.plugins.items() if v} == {
        "queueSort": ["PrioritySort"],
        "filter": ["NodeName"],
        "bind": ["DefaultBinder"],
    }


def test_specific_point_plugins_after_multipoint_ones() -> None:
    # Part 3 of expandMultiPointPlugins: plugins only enabled at the specific point run after the
    # multiPoint ones.
    prof = {"plugins": {"filter": {"enabled": [{"name": "UnderlayIP"}]}}}
    p = load_config(cfg([prof]), make_registry()).profiles[0]
    assert p.plugins["filter"] == [*DEFAULT_PLUGINS["filter"], "UnderlayIP"]
    # Only at filter: not expanded to its other points.
    assert "UnderlayIP" not in p.plugins["score"] and "UnderlayIP" not in p.plugins["reserve"]
    assert p.plugin_args["UnderlayIP"].ips_per_node == 10


def test_overrides_keep_their_specific_order_then_multipoint_then_the_rest() -> None:
    # filter enabled: UnderlayIP (not in multiPoint), NodeName (override), NodePorts (override).
    prof = {"plugins": {"filter": {"enabled": [{"name": "UnderlayIP"}, {"name": "NodeName"}, {"name": "NodePorts"}]}}}
    p = load_config(cfg([prof]), make_registry()).profiles[0]
    assert p.plugins["filter"] == [
        "NodeName",
        "NodePorts",  # part 1: overrides, in their specific-point order
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",  # part 2: multiPoint
        "UnderlayIP",  # part 3: the rest of the specific point
    ]


class CustomPlugin2(FilterPlugin, ScorePlugin):
    name = "CustomPlugin2"

    def filter(self, state: Any, pod: Any, node: Any) -> Any:
        return SUCCESS

    def score(self, state: Any, pod: Any, node: Any) -> Any:
        return 0, SUCCESS


def test_docs_multipoint_hierarchy_example() -> None:
    # kubernetes.io/docs/reference/scheduling/config/#multipoint, with DefaultQueueSort=PrioritySort,
    # CustomQueueSort=Coscheduling, DefaultPlugin1=TaintToleration, DefaultPlugin2=NodeResourcesBalancedAllocation,
    # CustomPlugin1=UnderlayIP.
    reg = make_registry()
    reg.register(CustomPlugin2)
    prof = {
        "schedulerName": "multipoint-scheduler",
        "plugins": {
            "multiPoint": {
                "enabled": [{"name": "Coscheduling"}, {"name": "UnderlayIP", "weight": 3}, {"name": "CustomPlugin2"}],
                "disabled": [{"name": "PrioritySort"}],
            },
            "filter": {"disabled": [{"name": "TaintToleration"}]},
            "score": {"enabled": [{"name": "NodeResourcesBalancedAllocation"}]},
        },
    }
    p = load_config(cfg([prof]), reg).profiles[0]
    assert p.plugins["queueSort"] == ["Coscheduling"]
    # mergePluginSet appends the custom multiPoint plugins after the (remaining) defaults.
    assert p.plugins["filter"] == [
        "NodeName",
        "NodeUnschedulable",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "UnderlayIP",
        "CustomPlugin2",
    ]
    # The re-declared default runs first at score, even before the custom plugins.
    assert p.plugins["score"] == [
        "NodeResourcesBalancedAllocation",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "UnderlayIP",
        "CustomPlugin2",
    ]
    assert p.score_weights == {
        "NodeResourcesBalancedAllocation": 1,
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "UnderlayIP": 3,
        "CustomPlugin2": 1,
    }
    assert p.plugins["permit"] == ["Coscheduling"] and p.plugins["reserve"] == ["Coscheduling", "UnderlayIP"]


def test_v1beta2_defaults_are_per_point_with_old_weights() -> None:
    c = load_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1beta2", "kind": "KubeSchedulerConfiguration"}, make_registry()
    )
    p = c.profiles[0]
    assert p.plugins == {
        "preEnqueue": [],  # SchedulingGates is not in this test registry
        "queueSort": ["PrioritySort"],
        "preFilter": ["NodeResourcesFit", "NodePorts", "NodeAffinity"],
        "filter": ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit"],
        "postFilter": [],
        "preScore": ["TaintToleration", "NodeAffinity"],
        "score": ["NodeResourcesBalancedAllocation", "NodeResourcesFit", "NodeAffinity", "TaintToleration"],
        "reserve": [],
        "permit": [],
        "preBind": [],
        "bind": ["DefaultBinder"],
        "postBind": [],
        "placementGenerate": [],
        "placementScore": [],
        "podGroupPostFilter": [],
    }
    assert p.score_weights == {
        "NodeResourcesBalancedAllocation": 1,
        "NodeResourcesFit": 1,
        "NodeAffinity": 1,
        "TaintToleration": 1,
    }


@pytest.mark.parametrize(
    ("default", "custom", "expected_enabled", "expected_disabled"),
    [
        # pkg/scheduler/apis/config/v1/default_plugins_test.go TestMergePlugins cases.
        (["DefaultPlugin"], (["CustomPlugin"], []), ["DefaultPlugin", "CustomPlugin"], []),
        (
            ["DefaultPlugin1", "DefaultPlugin2"],
            (["CustomPlugin"], ["DefaultPlugin1"]),
            ["DefaultPlugin2", "CustomPlugin"],
            ["DefaultPlugin1"],
        ),
        (["DefaultPlugin1", "DefaultPlugin2"], (["CustomPlugin"], ["*"]), ["CustomPlugin"], ["*"]),
        (
            ["DefaultPlugin1", "DefaultPlugin2"],
            (["DefaultPlugin2", "DefaultPlugin1"], ["*"]),
            ["DefaultPlugin2", "DefaultPlugin1"],
            ["*"],
        ),
        # Re-enabling defaults keeps the default order.
        (
            ["DefaultPlugin1", "DefaultPlugin2"],
            (["DefaultPlugin2", "DefaultPlugin1"], []),
            ["DefaultPlugin1", "DefaultPlugin2"],
            [],
        ),
        # Duplicated custom plugins are kept (the framework step reports them).
        (
            ["DefaultPlugin"],
            (["CustomPlugin", "CustomPlugin"], []),
            ["DefaultPlugin", "CustomPlugin", "CustomPlugin"],
            [],
        ),
    ],
)
def test_merge_plugin_set(
    default: list[str], custom: tuple[list[str], list[str]], expected_enabled: list[str], expected_disabled: list[str]
) -> None:
    d = PluginSet(enabled=[PluginRef(name=n) for n in default])
    c = PluginSet(enabled=[PluginRef(name=n) for n in custom[0]], disabled=[PluginRef(name=n) for n in custom[1]])
    got = _merge_plugin_set(d, c)
    assert [p.name for p in got.enabled] == expected_enabled
    assert [p.name for p in got.disabled] == expected_disabled


def test_out_of_tree_registry_only_changes_nothing_by_default() -> None:
    assert (
        load_config(None, Registry(BUILTINS)).profiles == load_config(None, Registry(BUILTINS + OUT_OF_TREE)).profiles
    )
