"""Scheduler configuration: ``kubescheduler.config.k8s.io/v1`` ``KubeSchedulerConfiguration``.

``load_config(path_or_mapping_or_None, registry)`` returns a :class:`SchedulerConfig` whose
profiles are resolved exactly as upstream resolves them (default plugins, multiPoint expansion,
Score weights, validated plugin args); invalid input raises :class:`ConfigError`.
"""

from kubesched.config.defaults import DEFAULT_MULTI_POINT, REMOVED_IN_V1, UPSTREAM_NOT_IMPLEMENTED
from kubesched.config.errors import ConfigError
from kubesched.config.load import ResolvedProfile, SchedulerConfig, load_config, load_config_text
from kubesched.config.models import KubeSchedulerConfiguration, parse_go_duration

__all__ = [
    "DEFAULT_MULTI_POINT",
    "REMOVED_IN_V1",
    "UPSTREAM_NOT_IMPLEMENTED",
    "ConfigError",
    "KubeSchedulerConfiguration",
    "ResolvedProfile",
    "SchedulerConfig",
    "load_config",
    "load_config_text",
    "parse_go_duration",
]
