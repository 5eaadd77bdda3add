"""Loading valid files: upstream documentation examples, the reference designs, globals and warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.config import ConfigError, load_config, load_config_text, parse_go_duration
from unit.config.config_fakes import CoschedulingArgs, MemRealUsageArgs, NodeResourcesFitArgs, make_registry

DATA = Path(__file__).parent / "data"
V1 = "kubescheduler.config.k8s.io/v1"


def test_docs_minimal_and_global_defaults() -> None:
    c = load_config(DATA / "docs_minimal.yaml", make_registry())
    assert c.source == str(DATA / "docs_minimal.yaml")
    assert c.client_connection.kubeconfig == "/etc/srv/kubernetes/kube-scheduler/kubeconfig"
    assert c.client_connection.qps == 50.0 and c.client_connection.burst == 100
    assert c.client_connection.content_type == "application/vnd.kubernetes.protobuf"
    assert c.parallelism == 16
    assert c.percentage_of_nodes_to_score is None
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    le = c.leader_election
    assert le.leader_elect is True
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == ("leases", "kube-scheduler", "kube-system")
    assert c.enable_profiling is True and c.enable_contention_profiling is True
    assert c.delay_cache_until_active is False
    assert c.extenders == []
    assert c.warnings == []


def test_docs_multiple_profiles() -> None:
    c = load_config(DATA / "docs_multiple_profiles.yaml", make_registry())
    assert c.scheduler_names == ["default-scheduler", "no-scoring-scheduler"]
    a, b = c.profiles
    assert a.plugins["score"] == [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
    ]
    assert b.plugins["score"] == [] and b.plugins["preScore"] == [] and b.score_weights == {}
    assert b.plugins["filter"] == a.plugins["filter"]
    assert c.profile("no-scoring-scheduler") is b


def test_docs_most_allocated() -> None:
    p = load_config(DATA / "docs_most_allocated.yaml", make_registry()).profiles[0]
    args = p.plugin_args["NodeResourcesFit"]
    assert isinstance(args, NodeResourcesFitArgs)
    assert args.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [
        ("cpu", 1),
        ("memory", 1),
        ("intel.com/foo", 3),
        ("intel.com/bar", 3),
    ]


def test_docs_requested_to_capacity_ratio() -> None:
    args = (
        load_config(DATA / "docs_requested_to_capacity_ratio.yaml", make_registry())
        .profiles[0]
        .plugin_args["NodeResourcesFit"]
    )
    assert args.scoring_strategy.type == "RequestedToCapacityRatio"
    rtc = args.scoring_strategy.requested_to_capacity_ratio
    assert [(s.utilization, s.score) for s in rtc.shape] == [(0, 0), (100, 10)]


def test_docs_multipoint_with_score_disabled() -> None:
    p = load_config(DATA / "docs_multipoint_disable_score.yaml", make_registry()).profiles[0]
    assert p.scheduler_name == "non-multipoint-scheduler"
    assert p.plugins["score"] == [] and p.plugins["preScore"] == []
    assert p.plugins["filter"][-1] == "UnderlayIP"
    assert p.plugins["reserve"] == ["UnderlayIP"]


def test_docs_disable_all_score_plugins_and_enable_one() -> None:
    p = load_config(DATA / "docs_score_disabled_enable_one.yaml", make_registry()).profiles[0]
    assert p.plugins["score"] == ["NodeResourcesFit"]
    assert p.score_weights == {"NodeResourcesFit": 5}
    assert p.plugin_args["NodeResourcesFit"].scoring_strategy.type == "MostAllocated"
    # preScore was not disabled: the defaults still run there.
    assert p.plugins["preScore"] == [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
    ]


def test_docs_score_example_disabling_an_unimplemented_plugin() -> None:
    c = load_config(DATA / "docs_score_custom.yaml", make_registry())
    assert c.warnings == []  # disabling an upstream plugin kubesched lacks is silently fine
    p = c.profiles[0]
    assert p.plugins["score"][-2:] == ["MemRealUsage", "UnderlayIP"]
    assert p.score_weights["MemRealUsage"] == 2 and p.score_weights["UnderlayIP"] == 1
    assert p.plugin_args["MemRealUsage"] == MemRealUsageArgs(prometheusApiAddr="http://prometheus:9090")


def test_reference_coscheduling_v1beta2() -> None:
    c = load_config(DATA / "ref_coscheduling_v1beta2.yaml", make_registry())
    assert c.warnings == [
        "apiVersion kubescheduler.config.k8s.io/v1beta2 was removed in Kubernetes 1.28; loaded with the v1beta2 "
        "defaults: the default plugins are configured per extension point (v1beta2 has no multiPoint) with "
        "default Score weights TaintToleration 1, NodeAffinity 1, InterPodAffinity 1 (v1beta3 and v1 use 3, 2 "
        "and 2); migrate to kubescheduler.config.k8s.io/v1 to get the current defaults"
    ]
    assert c.leader_election.leader_elect is True
    assert c.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    p = c.profiles[0]
    assert p.scheduler_name == "default-scheduler"
    assert p.plugins["queueSort"] == ["Coscheduling"]
    assert p.plugins["preFilter"] == ["NodeResourcesFit", "NodePorts", "NodeAffinity", "Coscheduling"]
    assert p.plugins["postFilter"] == ["Coscheduling"]
    assert p.plugins["permit"] == ["Coscheduling"] and p.plugins["reserve"] == ["Coscheduling"]
    assert p.score_weights == {
        "NodeResourcesBalancedAllocation": 1,
        "NodeResourcesFit": 1,
        "NodeAffinity": 1,
        "TaintToleration": 1,
    }
    assert p.plugin_args["Coscheduling"] == CoschedulingArgs(
        permitWaitingTimeSeconds=10, deniedPGExpirationTimeSeconds=3
    )
    assert "PrioritySort" not in p.plugin_args


def test_reference_coscheduling_v1beta3() -> None:
    c = load_config(DATA / "ref_coscheduling_v1beta3.yaml", make_registry())
    assert c.warnings == [
        "apiVersion kubescheduler.config.k8s.io/v1beta3 was removed in Kubernetes 1.29; loaded as "
        "kubescheduler.config.k8s.io/v1 (no field changes needed: the default plugins and Score weights are the "
        "same; SelectorSpread no longer exists)"
    ]
    p = c.profiles[0]
    assert p.plugins["queueSort"] == ["Coscheduling"]
    # Enabled at preFilter explicitly: the multiPoint defaults run first, Coscheduling after them.
    assert p.plugins["preFilter"] == ["NodeAffinity", "NodePorts", "NodeResourcesFit", "Coscheduling"]
    assert p.score_weights["TaintToleration"] == 3


def test_reference_memrealusage_v1() -> None:
    c = load_config(DATA / "ref_memrealusage_v1.yaml", make_registry())
    assert c.warnings == []
    assert c.leader_election.leader_elect is False
    p = c.profiles[0]
    assert p.scheduler_name == "mem-real-usage-scheduler"
    assert p.plugins["score"] == ["MemRealUsage"]
    assert p.score_weights == {"MemRealUsage": 1}
    assert p.plugin_args["MemRealUsage"] == MemRealUsageArgs(
        prometheusApiAddr="http://10.96.0.102:9090", queryMetricTimeSeconds=10, queryMetricIntervalSeconds=10
    )


def test_upstream_plugins_not_implemented_are_dropped_with_a_warning() -> None:
    text = f"""
apiVersion: {V1}
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: VolumeBinding
    filter:
      disabled:
      - name: VolumeZone
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
"""
    c = load_config_text(text, make_registry())
    assert c.warnings == [
        "profiles[0].plugins.multiPoint.enabled[0]: plugin VolumeBinding is an upstream plugin kubesched does not "
        "implement yet; ignored",
        "profiles[0].pluginConfig[0]: args for plugin PodTopologySpread ignored: PodTopologySpread is an upstream "
        "plugin kubesched does not implement yet",
    ]
    assert all("VolumeBinding" not in names for names in c.profiles[0].plugins.values())


def test_removed_plugins_are_warnings_in_old_versions() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1beta3
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    filter:
      enabled:
      - name: EBSLimits
"""
    c = load_config_text(text, make_registry())
    assert c.warnings[1] == (
        "profiles[0].plugins.filter.enabled[0]: plugin EBSLimits was removed upstream in "
        "kubescheduler.config.k8s.io/v1 (use NodeVolumeLimits (CSI)) and kubesched does not implement it; ignored"
    )


def test_deprecated_bind_addresses_are_accepted() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1beta2
kind: KubeSchedulerConfiguration
healthzBindAddress: 0.0.0.0:0
metricsBindAddress: 0.0.0.0:0
"""
    c = load_config_text(text, make_registry())
    assert c.warnings[1:] == [
        "healthzBindAddress is deprecated (removed in kubescheduler.config.k8s.io/v1beta3); kubesched ignores it",
        "metricsBindAddress is deprecated (removed in kubescheduler.config.k8s.io/v1beta3); kubesched ignores it",
    ]
    c = load_config(
        {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", "healthzBindAddress": ":10251"}, make_registry()
    )
    assert c.warnings == [
        "healthzBindAddress is not a field of kubescheduler.config.k8s.io/v1 (it was removed in "
        "kubescheduler.config.k8s.io/v1beta3); ignored"
    ]


def test_globals_and_percentages() -> None:
    text = f"""
apiVersion: {V1}
kind: KubeSchedulerConfiguration
parallelism: 4
percentageOfNodesToScore: 30
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 2
enableProfiling: false
delayCacheUntilActive: true
leaderElection:
  leaseDuration: 1m30s
  renewDeadline: 45s
  retryPeriod: 500ms
  resourceName: my-scheduler
clientConnection:
  qps: 12.5
  burst: 20
profiles:
- schedulerName: a
- schedulerName: b
  percentageOfNodesToScore: 0
extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  bindVerb: bind
  nodeCacheCapable: true
  managedResources:
  - name: example.com/foo
    ignoredByScheduler: true
  tlsConfig:
    insecure: true
    caData: aGVsbG8=
"""
    c = load_config_text(text, make_registry())
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (4, 30)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (2, 2)
    assert c.enable_profiling is False and c.enable_contention_profiling is False
    assert c.delay_cache_until_active is True
    assert (c.leader_election.lease_duration, c.leader_election.renew_deadline) == (90.0, 45.0)
    assert c.leader_election.retry_period == pytest.approx(0.5)
    assert c.leader_election.resource_name == "my-scheduler"
    assert (c.client_connection.qps, c.client_connection.burst) == (12.5, 20)
    # A profile's percentage overrides the global one (0 = adaptive); unset inherits it.
    assert [p.percentage_of_nodes_to_score for p in c.profiles] == [30, 0]
    (ext,) = c.extenders
    assert ext.url_prefix == "http://127.0.0.1:8888/" and ext.weight == 5 and ext.bind_verb == "bind"
    assert ext.http_timeout == 5.0  # pkg/scheduler/extender.go DefaultExtenderTimeout
    assert ext.managed_resources[0].ignored_by_scheduler is True
    assert ext.tls_config is not None and ext.tls_config.ca_data == b"hello"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("100ms", 0.1),
        ("1h", 3600.0),
        ("0", 0.0),
        ("1.5s", 1.5),
        ("2h45m", 9900.0),
        ("300us", 0.0003),
        ("-1m", -60.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["15", "s", "1.5", "1d", "", "1m 30s", "15 s"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


def test_json_is_yaml() -> None:
    c = load_config_text(
        f'{{"apiVersion": "{V1}", "kind": "KubeSchedulerConfiguration", "parallelism": 8}}', make_registry()
    )
    assert c.parallelism == 8


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(DATA / "does-not-exist.yaml", make_registry())
    missing = DATA / "does-not-exist.yaml"
    assert str(e.value) == f"{missing}: cannot read the configuration file: No such file or directory"
