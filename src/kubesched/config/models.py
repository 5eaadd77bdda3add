"""Pydantic models of ``kubescheduler.config.k8s.io/v1`` ``KubeSchedulerConfiguration``.

Field names and JSON tags follow upstream
``staging/src/k8s.io/kube-scheduler/config/v1/types.go`` (``KubeSchedulerConfiguration``,
``KubeSchedulerProfile``, ``Plugins``, ``PluginSet``, ``Plugin``, ``PluginConfig``, ``Extender``,
``ExtenderTLSConfig``, ``ExtenderManagedResource``) and the embedded component-base types
``k8s.io/component-base/config/v1alpha1`` (``LeaderElectionConfiguration``,
``ClientConnectionConfiguration``, ``DebuggingConfiguration``).

Defaults are those of ``pkg/scheduler/apis/config/v1/defaults.go``
(``SetDefaults_KubeSchedulerConfiguration``) and component-base's
``RecommendedDefaultLeaderElectionConfiguration``. Defaults that depend on other fields
(the scheduler name of a lone profile, the default plugin set, contention profiling) are applied
by :mod:`kubesched.config.defaults`, like upstream applies them after decoding.

Every model forbids unknown keys, so a misspelt field is an error (upstream decodes strictly too).
Values are validated strictly: ``parallelism: "16"`` is an error, as in upstream's JSON decoding.
Durations are Go duration strings (``"15s"``, ``"1m30s"``, ``"100ms"``) and are held in seconds.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from kubesched.api.duration import GoDuration, parse_go_duration

__all__ = [
    "CURRENT_API_VERSION",
    "DEFAULT_SCHEDULER_NAME",
    "INT32_MAX",
    "INT32_MIN",
    "ClientConnection",
    "Extender",
    "ExtenderManagedResource",
    "ExtenderTLSConfig",
    "GoDuration",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LeaderElection",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "parse_go_duration",
]

CURRENT_API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
#: k8s.io/api/core/v1 DefaultSchedulerName.
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
Int64 = Annotated[int, Field(ge=_INT64_MIN, le=_INT64_MAX)]



def _base64_bytes(v: Any) -> Any:
    # Go encodes []byte as base64 in JSON/YAML.
    if isinstance(v, bytes):
        return v
    if not isinstance(v, str):
        raise ValueError(f"expected base64-encoded data, got {type(v).__name__}")
    try:
        return base64.b64decode(v, validate=True)
    except binascii.Error:
        raise ValueError("expected base64-encoded data (Go encodes []byte fields as base64)") from None


Base64Data = Annotated[bytes, BeforeValidator(_base64_bytes)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=False)


# -- component-base ---------------------------------------------------------------------------------


class LeaderElection(_Model):
    """component-base ``LeaderElectionConfiguration`` (durations in seconds)."""

    leader_elect: bool = Field(True, alias="leaderElect")
    lease_duration: GoDuration = Field(15.0, alias="leaseDuration")
    renew_deadline: GoDuration = Field(10.0, alias="renewDeadline")
    retry_period: GoDuration = Field(2.0, alias="retryPeriod")
    resource_lock: str = Field("leases", alias="resourceLock")
    resource_name: str = Field("kube-scheduler", alias="resourceName")
    resource_namespace: str = Field("kube-system", alias="resourceNamespace")


class ClientConnection(_Model):
    """component-base ``ClientConnectionConfiguration``; the scheduler's own QPS/burst defaults."""

    kubeconfig: str = ""
    accept_content_types: str = Field("", alias="acceptContentTypes")
    content_type: str = Field("application/vnd.kubernetes.protobuf", alias="contentType")
    qps: float = 50.0
    burst: Int32 = 100


# -- profiles ---------------------------------------------------------------------------------------


class PluginRef(_Model):
    """``Plugin``: a name and, for Score plugins, a weight (None = not set)."""

    name: str
    weight: Int32 | None = None


class PluginSet(_Model):
    enabled: list[PluginRef] = Field(default_factory=list)
    disabled: list[PluginRef] = Field(default_factory=list)


class Plugins(_Model):
    """``Plugins``: one plugin set per extension point, plus ``multiPoint``."""

    pre_enqueue: PluginSet = Field(default_factory=PluginSet, alias="preEnqueue")
    queue_sort: PluginSet = Field(default_factory=PluginSet, alias="queueSort")
    pre_filter: PluginSet = Field(default_factory=PluginSet, alias="preFilter")
    filter: PluginSet = Field(default_factory=PluginSet)
    post_filter: PluginSet = Field(default_factory=PluginSet, alias="postFilter")
    pre_score: PluginSet = Field(default_factory=PluginSet, alias="preScore")
    score: PluginSet = Field(default_factory=PluginSet)
    reserve: PluginSet = Field(default_factory=PluginSet)
    permit: PluginSet = Field(default_factory=PluginSet)
    pre_bind: PluginSet = Field(default_factory=PluginSet, alias="preBind")
    bind: PluginSet = Field(default_factory=PluginSet)
    post_bind: PluginSet = Field(default_factory=PluginSet, alias="postBind")
    #: TopologyAwareWorkloadScheduling: the placements a PodGroup is tried on, and their scores.
    placement_generate: PluginSet = Field(default_factory=PluginSet, alias="placementGenerate")
    placement_score: PluginSet = Field(default_factory=PluginSet, alias="placementScore")
    #: GenericWorkload: plugins run when a PodGroup's group cycle fails (e.g. group preemption).
    pod_group_post_filter: PluginSet = Field(default_factory=PluginSet, alias="podGroupPostFilter")
    multi_point: PluginSet = Field(default_factory=PluginSet, alias="multiPoint")

    def by_point(self) -> dict[str, PluginSet]:
        """Plugin sets keyed by their configuration (JSON) name."""
        return {(info.alias or name): getattr(self, name) for name, info in type(self).model_fields.items()}


class PluginConfig(_Model):
    """``PluginConfig``: arguments for one plugin (any JSON value; validated per plugin later)."""

    name: str
    args: Any = None


class KubeSchedulerProfile(_Model):
    scheduler_name: str | None = Field(None, alias="schedulerName")
    percentage_of_nodes_to_score: Int32 | None = Field(None, alias="percentageOfNodesToScore")
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = Field(default_factory=list, alias="pluginConfig")


# -- extenders --------------------------------------------------------------------------------------


class ExtenderTLSConfig(_Model):
    insecure: bool = False
    server_name: str = Field("", alias="serverName")
    cert_file: str = Field("", alias="certFile")
    key_file: str = Field("", alias="keyFile")
    ca_file: str = Field("", alias="caFile")
    cert_data: Base64Data = Field(b"", alias="certData")
    key_data: Base64Data = Field(b"", alias="keyData")
    ca_data: Base64Data = Field(b"", alias="caData")


class ExtenderManagedResource(_Model):
    name: str
    ignored_by_scheduler: bool = Field(False, alias="ignoredByScheduler")


class Extender(_Model):
    """``Extender``. ``httpTimeout`` 0 means upstream's DefaultExtenderTimeout (5s), applied by the loader."""

    url_prefix: str = Field(alias="urlPrefix")
    filter_verb: str = Field("", alias="filterVerb")
    preempt_verb: str = Field("", alias="preemptVerb")
    prioritize_verb: str = Field("", alias="prioritizeVerb")
    weight: Int64 = 0
    bind_verb: str = Field("", alias="bindVerb")
    enable_https: bool = Field(False, alias="enableHTTPS")
    tls_config: ExtenderTLSConfig | None = Field(None, alias="tlsConfig")
    http_timeout: GoDuration = Field(0.0, alias="httpTimeout")
    node_cache_capable: bool = Field(False, alias="nodeCacheCapable")
    managed_resources: list[ExtenderManagedResource] = Field(default_factory=list, alias="managedResources")
    ignorable: bool = False


# -- the configuration ------------------------------------------------------------------------------


class KubeSchedulerConfiguration(_Model):
    api_version: str = Field(CURRENT_API_VERSION, alias="apiVersion")
    kind: str = "KubeSchedulerConfiguration"
    parallelism: Int32 = 16
    leader_election: LeaderElection = Field(default_factory=LeaderElection, alias="leaderElection")
    client_connection: ClientConnection = Field(default_factory=ClientConnection, alias="clientConnection")
    # DebuggingConfiguration (inlined). enableContentionProfiling defaults to enableProfiling.
    enable_profiling: bool = Field(True, alias="enableProfiling")
    enable_contention_profiling: bool | None = Field(None, alias="enableContentionProfiling")
    percentage_of_nodes_to_score: Int32 | None = Field(None, alias="percentageOfNodesToScore")
    pod_initial_backoff_seconds: Int64 = Field(1, alias="podInitialBackoffSeconds")
    pod_max_backoff_seconds: Int64 = Field(10, alias="podMaxBackoffSeconds")
    profiles: list[KubeSchedulerProfile] = Field(default_factory=list)
    extenders: list[Extender] = Field(default_factory=list)
    delay_cache_until_active: bool = Field(False, alias="delayCacheUntilActive")
    #: kubesched's: feature gates by upstream's names (config/features.py); kube-scheduler takes
    #: them as ``--feature-gates``.
    feature_gates: dict[str, bool] = Field(default_factory=dict, alias="featureGates")
