"""Load a ``KubeSchedulerConfiguration``: the entry points, and the pipeline they run.

The steps, each in its own module, as upstream splits its config handling:

1. decode (:mod:`kubesched.config.decode`) — strict YAML/JSON decoding into the versioned model, the
   apiVersion checks and the v1beta2/v1beta3 warnings (``pkg/scheduler/apis/config/scheme``);
2. defaults (:mod:`kubesched.config.defaults`) — ``pkg/scheduler/apis/config/v1/defaults.go``
   ``SetDefaults_KubeSchedulerConfiguration`` and ``default_plugins.go``;
3. validation (:mod:`kubesched.config.validate`) — ``pkg/scheduler/apis/config/validation/validation.go``
   ``ValidateKubeSchedulerConfiguration`` plus component-base's validation;
4. resolution (:mod:`kubesched.config.resolve`) — the framework's view of each profile
   (``pkg/scheduler/framework/runtime/framework.go`` ``NewFramework``: multiPoint expansion, Score
   weights, plugin args) and ``pkg/scheduler/profile/profile.go``.

Every problem found by steps 3 and 4 is reported together in one :class:`ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubesched.config.decode import KIND, V1, decode, parse_yaml
from kubesched.config.defaults import merge_plugin_set, set_defaults
from kubesched.config.errors import ConfigError
from kubesched.config.resolve import ResolvedProfile, Resolver, SchedulerConfig
from kubesched.framework.registry import Registry

__all__ = ["ConfigError", "ResolvedProfile", "SchedulerConfig", "load_config", "load_config_text"]

#: The former name of :func:`kubesched.config.defaults.merge_plugin_set`.
_merge_plugin_set = merge_plugin_set


def load_config(
    source: str | Path | Mapping[str, Any] | None, registry: Registry, *, extender: bool = False
) -> SchedulerConfig:
    """Load a configuration from a YAML/JSON file path, an already-parsed mapping, or None (the defaults).
    ``extender``: its profiles are served to kube-scheduler, which sorts and binds itself, so they
    need no QueueSort and no Bind plugin.

    Raises :class:`ConfigError` naming the file, the field path and what was expected.
    """
    if source is None:
        return _load({"apiVersion": V1, "kind": KIND}, registry, None, extender)
    if isinstance(source, Mapping):
        return _load(dict(source), registry, None, extender)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([f"cannot read the configuration file: {e.strerror or e}"], str(path)) from None
    except UnicodeDecodeError as e:
        raise ConfigError([f"not UTF-8 text: byte {e.object[e.start]:#04x} at offset {e.start}"], str(path)) from None
    return load_config_text(text, registry, source_name=str(path), extender=extender)


def load_config_text(
    text: str, registry: Registry, *, source_name: str | None = None, extender: bool = False
) -> SchedulerConfig:
    """Load a configuration from YAML (or JSON) text (``extender``: see :func:`load_config`)."""
    return _load(parse_yaml(text, source_name), registry, source_name, extender)


def _load(data: dict[str, Any], registry: Registry, source: str | None, extender: bool = False) -> SchedulerConfig:
    cfg, api_version, warnings = decode(data, source)
    cfg, profiles = set_defaults(cfg)
    resolver = Resolver(registry, api_version, warnings, extender=extender)
    resolver.validate_global(cfg)
    # validation.go: profiles (names, percentages, duplicates), then each profile, then the common queueSort.
    resolver.validate_profiles(profiles)
    return resolver.resolve(cfg, profiles, source)
