"""Invalid configurations: the exact error text (file, upstream field path, what was expected)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.config import ConfigError, load_config, load_config_text
from kubesched.framework.registry import Registry
from unit.config import config_fakes as fakes
from unit.config.config_fakes import make_registry

DATA = Path(__file__).parent / "data"
V1 = "kubescheduler.config.k8s.io/v1"
KNOWN = (
    "known plugins: Coscheduling, DefaultBinder, MemRealUsage, NodeAffinity, NodeName, NodePorts, "
    "NodeResourcesBalancedAllocation, NodeResourcesFit, NodeUnschedulable, PrioritySort, TaintToleration, "
    "UnderlayIP; upstream plugins kubesched does not implement: DefaultPreemption, DynamicResources, "
    "GangScheduling, ImageLocality, InterPodAffinity, NodeDeclaredFeatures, NodeVolumeLimits, PodGroupPodsCount, "
    "PodTopologySpread, SchedulingGates, TopologyPlacementGenerator, VolumeBinding, VolumeRestrictions, VolumeZone; "
    "load out-of-tree plugins with --plugins MODULE (a module name, a package directory or a .py file)"
)
QS_COSCHEDULING = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}}


def c(profiles: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", **extra}
    if profiles is not None:
        d["profiles"] = profiles
    return d


def error_of(source: Any, registry: Registry | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(source, registry or make_registry())
    return str(e.value)


# -- files ------------------------------------------------------------------------------------------


def test_unknown_field_typo_names_the_file_and_suggests() -> None:
    f = DATA / "invalid_typo.yaml"
    assert error_of(f) == f'{f}: profiles[0].plugins.scroe: unknown field (did you mean "score"?)'


def test_yaml_syntax_error_gives_the_line() -> None:
    f = DATA / "invalid_syntax.yaml"
    assert error_of(f) == f"{f}: invalid YAML: line 5, column 21: expected the node content, but found '}}'"


def test_multiple_documents() -> None:
    f = DATA / "invalid_multi_doc.yaml"
    assert error_of(f) == (
        f"{f}: expected exactly one YAML document (a KubeSchedulerConfiguration), found 2 "
        "(KubeSchedulerConfiguration, ConfigMap)"
    )


def test_queue_sort_mismatch_across_profiles() -> None:
    f = DATA / "invalid_queue_sort.yaml"
    assert error_of(f) == (
        f'{f}: profiles[1].plugins.queueSort: Invalid value: {{"enabled":[{{"name":"Coscheduling"}}],'
        f'"disabled":[{{"name":"*"}}]}}: must be the same for all profiles'
    )


def test_policy_file_is_rejected_with_the_replacement() -> None:
    f = DATA / "invalid_policy.json"
    assert error_of(f) == (
        f'{f}: kind: Invalid value: "Policy": the scheduler Policy API (predicates, priorities, extenders; '
        "--policy-config-file) was removed in Kubernetes 1.23; write a KubeSchedulerConfiguration (apiVersion "
        "kubescheduler.config.k8s.io/v1) instead: predicates and priorities become plugins enabled or disabled per "
        "extension point in profiles[].plugins (filter, score with weights), and extenders move to the top-level "
        "extenders list"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "sched.yaml: expected a mapping (a KubeSchedulerConfiguration), found a list"),
        ("# nothing\n", "sched.yaml: the configuration is empty; expected a KubeSchedulerConfiguration"),
        (
            f"apiVersion: {V1}\nkind: KubeSchedulerConfiguration\nparallelism: 1\nparallelism: 2\n",
            'sched.yaml: invalid YAML: line 4, column 1: duplicate key "parallelism"',
        ),
        (
            "apiVersion: v1\n\tkind: x\n",
            "sched.yaml: invalid YAML: line 2, column 1: found character '\\t' that cannot start any token",
        ),
    ],
)
def test_yaml_shape_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config_text(text, make_registry(), source_name="sched.yaml")
    assert str(e.value) == message
    assert e.value.source == "sched.yaml"


# -- apiVersion / kind ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration"},
            'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1beta1": apiVersion '
            "kubescheduler.config.k8s.io/v1beta1 was removed in Kubernetes 1.23; migrate the file to "
            "kubescheduler.config.k8s.io/v1",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration"},
            'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1alpha1": apiVersion '
            "kubescheduler.config.k8s.io/v1alpha1 was removed in Kubernetes 1.19; migrate the file to "
            "kubescheduler.config.k8s.io/v1",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v2", "kind": "KubeSchedulerConfiguration"},
            'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v2": supported versions: '
            "kubescheduler.config.k8s.io/v1 (also kubescheduler.config.k8s.io/v1beta3 and "
            "kubescheduler.config.k8s.io/v1beta2, with a warning)",
        ),
        ({"kind": "KubeSchedulerConfiguration"}, "apiVersion: Required value: expected kubescheduler.config.k8s.io/v1"),
        ({"apiVersion": V1}, "kind: Required value: expected KubeSchedulerConfiguration"),
        (
            {"apiVersion": V1, "kind": "KubeletConfiguration"},
            'kind: Invalid value: "KubeletConfiguration": expected KubeSchedulerConfiguration',
        ),
        (
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1beta2",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "UnderlayIP"}]}}}],
            },
            "profiles[0].plugins.multiPoint: unknown field "
            "(multiPoint was added in kubescheduler.config.k8s.io/v1beta3)",
        ),
    ],
)
def test_api_version_and_kind(doc: dict[str, Any], message: str) -> None:
    assert error_of(doc) == message


# -- fields -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (c(parallelsm=3), 'parallelsm: unknown field (did you mean "parallelism"?)'),
        (
            c(featureGates={"A": True}),
            "featureGates.A: unrecognized feature gate: A "
            "(kubesched knows: CompositePodGroup, GenericWorkload, OpportunisticBatching, PodGroupPreemptionPolicy, "
            "TopologyAwareWorkloadScheduling)",
        ),
        (
            c(featureGates={"CompositePodGroup": True, "GenericWorkload": True}),
            "featureGates.CompositePodGroup: CompositePodGroup is enabled, but depends on features that are "
            "disabled: [TopologyAwareWorkloadScheduling]",
        ),
        (
            c(featureGates={"GenericWorkload": "on"}),
            'featureGates.GenericWorkload: Invalid value: "on": expected a boolean (true or false)',
        ),
        (c(parallelism="16"), 'parallelism: Invalid value: "16": expected an integer'),
        (
            c(leaderElection={"leaderElect": "true"}),
            'leaderElection.leaderElect: Invalid value: "true": expected a boolean (true or false)',
        ),
        (
            c(leaderElection={"leaseDuration": "15"}),
            'leaderElection.leaseDuration: Invalid value: "15": expected a Go duration string such as "15s", "1m30s" '
            'or "100ms" (units ns, us, ms, s, m, h)',
        ),
        (
            c(leaderElection={"leaseDuration": 15}),
            'leaderElection.leaseDuration: Invalid value: 15: expected a Go duration string such as "15s", "1m30s" '
            'or "100ms" (units ns, us, ms, s, m, h)',
        ),
        (c(extenders=[{"filterVerb": "filter"}]), "extenders[0].urlPrefix: Required value"),
        (
            c([{"percentageOfNodesToScore": -1}]),
            "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
        ),
    ],
)
def test_field_errors(doc: dict[str, Any], message: str) -> None:
    assert error_of(doc) == message


def test_global_validation_errors_are_all_reported() -> None:
    doc = c(
        parallelism=0,
        percentageOfNodesToScore=101,
        podInitialBackoffSeconds=5,
        podMaxBackoffSeconds=2,
        clientConnection={"burst": -1},
        leaderElection={"leaseDuration": "5s", "resourceLock": "endpoints"},
    )
    assert error_of(doc) == (
        "6 errors:\n"
        "  - clientConnection.burst: Invalid value: -1: must be non-negative\n"
        # upstream prints RenewDeadline as the value here (sic)
        "  - leaderElection.leaseDuration: Invalid value: 10s: LeaseDuration must be greater than RenewDeadline\n"
        '  - leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases"\n'
        "  - parallelism: Invalid value: 0: should be an integer value greater than zero\n"
        "  - percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]\n"
        "  - podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"
    )


def test_leader_election_is_not_validated_when_disabled() -> None:
    cfg = load_config(
        c(leaderElection={"leaderElect": False, "leaseDuration": "1s", "resourceLock": "endpoints"}), make_registry()
    )
    assert cfg.leader_election.lease_duration == 1.0


def test_extender_validation() -> None:
    doc = c(
        extenders=[
            {
                "urlPrefix": "a",
                "prioritizeVerb": "p",
                "bindVerb": "b",
                "managedResources": [{"name": "cpu"}, {"name": "example.com/x"}],
            },
            {"urlPrefix": "b", "bindVerb": "b", "managedResources": [{"name": "example.com/x"}]},
        ]
    )
    assert error_of(doc) == (
        "4 errors:\n"
        "  - extenders[0].weight: Invalid value: 0: must have a positive weight applied to it\n"
        '  - extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name\n'
        '  - extenders[1].managedResources[0].name: Invalid value: "example.com/x": duplicate extender managed '
        "resource name\n"
        '  - extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind'
    )


# -- profiles and plugins ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        (
            [{"schedulerName": "a"}, {"schedulerName": "a"}],
            'profiles[1].schedulerName: Duplicate value: "a" (also used by profiles[0].schedulerName)',
        ),
        # schedulerName is only defaulted for a lone profile.
        ([{"schedulerName": "a"}, {}], "profiles[1].schedulerName: Required value"),
        (
            [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": QS_COSCHEDULING}],
            'profiles[1].plugins.queueSort: Invalid value: {"enabled":[{"name":"Coscheduling"}],'
            '"disabled":[{"name":"*"}]}: must be the same for all profiles',
        ),
        # Same (explicit) queueSort sets, different args.
        (
            [
                {
                    "schedulerName": "a",
                    "plugins": QS_COSCHEDULING,
                    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
                },
                {
                    "schedulerName": "b",
                    "plugins": QS_COSCHEDULING,
                    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 20}}],
                },
            ],
            'profiles[1].pluginConfig.args: Invalid value: {"permitWaitingTimeSeconds":20}: queueSort must be the same '
            "for all profiles",
        ),
        # Identical explicit sets, but the resolved queue sort differs (profile.go cfgValidator).
        (
            [
                {
                    "schedulerName": "a",
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}
                    },
                },
                {"schedulerName": "b"},
            ],
            'different queue sort plugins for profile "b": "PrioritySort", first: "Coscheduling"',
        ),
        (
            [
                {
                    "schedulerName": "a",
                    "plugins": QS_COSCHEDULING,
                    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
                },
                {"schedulerName": "b", "plugins": QS_COSCHEDULING},
            ],
            'different queue sort plugin args for profile "b"',
        ),
    ],
)
def test_profile_errors(profiles: list[dict[str, Any]], message: str) -> None:
    assert error_of(c(profiles)) == message


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        (
            {"filter": {"enabled": [{"name": "NodeResourceFit"}]}},
            'profiles[0].plugins.filter.enabled[0].name: Invalid value: "NodeResourceFit": '
            f'unknown plugin (did you mean "NodeResourcesFit"?); {KNOWN}',
        ),
        (
            {"filter": {"disabled": [{"name": "Foo"}]}},
            f'profiles[0].plugins.filter.disabled[0].name: Invalid value: "Foo": unknown plugin; {KNOWN}',
        ),
        (
            {"score": {"enabled": [{"name": "NodeName"}]}},
            'profiles[0].plugins.score.enabled[0]: plugin "NodeName" does not extend ScorePlugin plugin',
        ),
        (
            {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": -1}]}},
            "profiles[0].plugins.score.enabled[0].weight: Invalid value: -1: must be a positive integer (0 or unset "
            "means 1)",
        ),
        (
            {"score": {"enabled": [{"name": "UnderlayIP"}, {"name": "NodeResourcesFit", "weight": 2**31}]}},
            "profiles[0].plugins.score.enabled[1].weight: Invalid value: 2147483648: must be less than or equal to "
            "2147483647",
        ),
        (
            {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": "5"}]}},
            'profiles[0].plugins.score.enabled[0].weight: Invalid value: "5": expected an integer',
        ),
        (
            {"filter": {"enabled": [{"name": "UnderlayIP"}, {"name": "UnderlayIP"}]}},
            'profiles[0].plugins.filter.enabled: plugin "UnderlayIP" already registered as "FilterPlugin"',
        ),
        (
            {"multiPoint": {"enabled": [{"name": "UnderlayIP"}, {"name": "UnderlayIP"}]}},
            'profiles[0].plugins.multiPoint.enabled: plugin "UnderlayIP" already registered as "FilterPlugin"',
        ),
        (
            {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}},
            'profiles[0]: only one queue sort plugin required for profile with scheduler name "default-scheduler", but '
            "got 0",
        ),
        # Enabling a second queue sort without disabling the default one.
        (
            {"queueSort": {"enabled": [{"name": "Coscheduling"}]}},
            'profiles[0]: only one queue sort plugin required for profile with scheduler name "default-scheduler", but '
            "got 2",
        ),
        (
            {"bind": {"disabled": [{"name": "*"}]}},
            'profiles[0]: at least one bind plugin is needed for profile with scheduler name "default-scheduler"',
        ),
        (
            {"filter": {"enabled": [{"name": "EBSLimits"}]}},
            'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in version '
            '"kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")',
        ),
        (
            {"preEnqueue": {"enabled": [{"name": "NodeName"}]}},
            'profiles[0].plugins.preEnqueue.enabled[0]: plugin "NodeName" does not extend PreEnqueuePlugin plugin',
        ),
        (
            {"score": {"enabled": [{"name": "MemRealUsage"}]}},
            "profiles[0].pluginConfig: Required value: plugin MemRealUsage needs args (args.prometheusApiAddr: "
            "Required value)",
        ),
    ],
)
def test_plugin_errors(plugins: dict[str, Any], message: str) -> None:
    assert error_of(c([{"plugins": plugins}])) == message


def test_large_weights_are_accepted_as_upstream() -> None:
    # Upstream has no upper bound below int32 (getScoreWeights only guards the int64 total).
    big = 2**31 - 1
    cfg = load_config(
        c([{"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": big}]}}}]), make_registry()
    )
    assert cfg.profiles[0].score_weights["NodeResourcesFit"] == big


@pytest.mark.parametrize(
    ("plugin_config", "message"),
    [
        (
            [
                {"name": "NodeName"},
                {"name": "NodeAffinity"},
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Foo"}}},
            ],
            'profiles[0].pluginConfig[2].args.scoringStrategy.type: Invalid value: "Foo": Input should be '
            "'LeastAllocated', 'MostAllocated' or 'RequestedToCapacityRatio'",
        ),
        (
            [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"tpye": "MostAllocated"}}}],
            'profiles[0].pluginConfig[0].args.scoringStrategy.tpye: unknown field (did you mean "type"?)',
        ),
        (
            [{"name": "NodeResourcesFit", "args": {"kind": "NodeAffinityArgs"}}],
            'profiles[0].pluginConfig[0].args.kind: Invalid value: "NodeAffinityArgs": '
            "args for plugin NodeResourcesFit were not of type NodeResourcesFitArgs, got NodeAffinityArgs",
        ),
        (
            [{"name": "NodeResourcesFit", "args": [1, 2]}],
            "profiles[0].pluginConfig[0].args: Invalid value: [1,2]: "
            "args for plugin NodeResourcesFit must be a mapping",
        ),
        (
            [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}],
            'profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"',
        ),
        (
            [{"name": "Fooo", "args": {}}],
            f'profiles[0].pluginConfig[0].name: Invalid value: "Fooo": unknown plugin; {KNOWN}',
        ),
        (
            [{"name": "GCEPDLimits"}],
            'profiles[0].pluginConfig[0]: Invalid value: "GCEPDLimits": was invalid in version '
            '"kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")',
        ),
    ],
)
def test_plugin_config_errors(plugin_config: list[dict[str, Any]], message: str) -> None:
    assert error_of(c([{"pluginConfig": plugin_config}])) == message


def test_plugin_args_with_upstream_style_messages_get_full_paths() -> None:
    # kubesched's real NodeResourcesFitArgs raises upstream field.Error messages relative to the args.
    args_mod = pytest.importorskip("kubesched.plugins.noderesources.args")

    class Fit(fakes.NodeResourcesFit):
        args_model = args_mod.NodeResourcesFitArgs

    reg = Registry([cls for cls in fakes.BUILTINS if cls.name != "NodeResourcesFit"] + [Fit])
    pc = [
        {"name": "NodeName"},
        {"name": "NodeAffinity"},
        {
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": "Foo", "resources": [{"name": "cpu", "weight": 200}]}},
        },
    ]
    assert error_of(c([{"pluginConfig": pc}]), reg) == (
        "2 errors:\n"
        '  - profiles[0].pluginConfig[2].args.scoringStrategy.type: Unsupported value: "Foo": supported values: '
        '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"\n'
        "  - profiles[0].pluginConfig[2].args.scoringStrategy.resources[0].weight: Invalid value: 200: resource "
        "weight of cpu not in valid range (0, 100]"
    )


def test_warnings_for_ignored_settings() -> None:
    prof = {
        "plugins": {"postBind": {"enabled": []}, "filter": {"enabled": [{"name": "UnderlayIP", "weight": 4}]}},
        "pluginConfig": [
            {"name": "NodeName", "args": {"x": 1}},
            {"name": "MemRealUsage", "args": {"prometheusApiAddr": "x"}},
        ],
    }
    cfg = load_config(c([prof]), make_registry())
    assert cfg.warnings == [
        "profiles[0].plugins.filter.enabled[0].weight: a weight is only used by Score plugins; ignored at filter",
        "profiles[0].pluginConfig[0].args: plugin NodeName takes no args; ignored",
        'profiles[0].pluginConfig[1]: plugin MemRealUsage is not enabled in profile "default-scheduler"; its args '
        "are unused",
    ]
    assert "MemRealUsage" not in cfg.profiles[0].plugin_args


def test_config_error_lists_errors() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(c(parallelism=0, podInitialBackoffSeconds=0), make_registry())
    assert e.value.errors == [
        "parallelism: Invalid value: 0: should be an integer value greater than zero",
        "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
    ]
    assert e.value.source is None
    assert isinstance(e.value, ValueError)
