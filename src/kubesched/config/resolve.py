"""Resolve each profile into what the framework runs: the plugins per extension point, Score weights
and validated plugin args.

Ports ``pkg/scheduler/framework/runtime/framework.go`` ``NewFramework``: ``updatePluginList`` (a plugin
must implement the point it is enabled at, and be enabled there once), ``expandMultiPointPlugins``
(ordering and override rules: a plugin enabled at a specific point wins over multiPoint), the queueSort
/ bind counts and ``getScoreWeights``; and ``pkg/scheduler/profile/profile.go`` (all profiles must
resolve to the same queueSort plugin with the same args). The results are :class:`ResolvedProfile` and
:class:`SchedulerConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from kubesched.config.decode import pydantic_errors
from kubesched.config.defaults import default_plugin_sets, implements, merge_plugin_set
from kubesched.config.errors import ConfigError, required
from kubesched.config.models import (
    ClientConnection,
    Extender,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElection,
    Plugins,
    PluginSet,
)
from kubesched.config.validate import IFACE, Validator
from kubesched.framework.interfaces import EXTENSION_POINTS, ScorePlugin

__all__ = ["ResolvedProfile", "Resolver", "SchedulerConfig"]


#: framework.MaxNodeScore and MaxTotalScore (math.MaxInt64), for getScoreWeights' overflow check.
_MAX_NODE_SCORE: Final = 100
_MAX_TOTAL_SCORE: Final = 2**63 - 1

#: framework.go getExtensionPoints order (errors are reported in this order, as upstream).
_UPSTREAM_POINT_ORDER: Final = (
    "preFilter",
    "filter",
    "postFilter",
    "reserve",
    "preScore",
    "score",
    "preBind",
    "bind",
    "postBind",
    "permit",
    "preEnqueue",
    "queueSort",
    "placementGenerate",
    "placementScore",
    "podGroupPostFilter",
)


# -- results ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """One profile after default merging and multiPoint expansion.

    ``plugins`` maps every kubesched extension point (``EXTENSION_POINTS`` order) to the plugin
    names run there, in order. ``score_weights`` has one entry per Score plugin. ``plugin_args``
    has one entry per enabled plugin: the validated args model, or None for a plugin without one.
    ``percentage_of_nodes_to_score`` is the effective value (the profile's, else the global one);
    None or 0 means adaptive.
    """

    scheduler_name: str
    plugins: dict[str, list[str]]
    score_weights: dict[str, int]
    plugin_args: dict[str, Any]
    percentage_of_nodes_to_score: int | None


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A loaded configuration: global settings, resolved profiles and load-time warnings."""

    api_version: str
    parallelism: int
    percentage_of_nodes_to_score: int | None
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    leader_election: LeaderElection
    client_connection: ClientConnection
    extenders: list[Extender]
    enable_profiling: bool
    enable_contention_profiling: bool
    delay_cache_until_active: bool
    profiles: list[ResolvedProfile]
    warnings: list[str] = field(default_factory=list)
    #: Every known feature gate's value (config/features.py).
    feature_gates: dict[str, bool] = field(default_factory=dict)
    source: str | None = None

    def profile(self, scheduler_name: str) -> ResolvedProfile:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise KeyError(scheduler_name)

    @property
    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles]


class Resolver(Validator):
    """Validates and resolves one configuration's profiles (errors and warnings collected)."""

    def _framework_lists(self, path: str, name: str, merged: dict[str, PluginSet]) -> dict[str, list[str]] | None:
        """framework.go NewFramework: updatePluginList per point, then expandMultiPointPlugins."""
        reg = self.registry
        lists: dict[str, list[str]] = {}
        for point in _UPSTREAM_POINT_ORDER:
            names: list[str] = []
            for ref in merged[point].enabled:
                cls = reg.get(ref.name)
                if cls is None or not implements(cls, point):
                    continue  # already reported by _check_user_sets
                if ref.name in names:
                    self.errors.append(
                        f'{path}.plugins.{point}.enabled: plugin "{ref.name}" already registered as "{IFACE[point]}"'
                    )
                    return None
                names.append(ref.name)
            lists[point] = names

        multi = merged["multiPoint"].enabled
        if multi:
            for point in _UPSTREAM_POINT_ORDER:
                disabled = {p.name for p in merged[point].disabled}
                if "*" in disabled:
                    continue
                enabled_set = lists[point]
                multi_enabled: list[str] = []
                overrides: list[str] = []
                for ref in multi:
                    cls = reg.get(ref.name)
                    if cls is None or not implements(cls, point) or ref.name in disabled:
                        continue
                    if ref.name in enabled_set:
                        # Enabled at the specific point too: the specific setting wins (PR #99582).
                        if ref.name not in overrides:
                            overrides.append(ref.name)
                        continue
                    if ref.name in multi_enabled:
                        self.errors.append(
                            f'{path}.plugins.multiPoint.enabled: plugin "{ref.name}" already registered as '
                            f'"{IFACE[point]}"'
                        )
                        return None
                    multi_enabled.append(ref.name)
                # part 1: overrides in their specific-point order; part 2: multiPoint; part 3: the rest.
                lists[point] = (
                    [n for n in enabled_set if n in overrides]
                    + multi_enabled
                    + [n for n in enabled_set if n not in overrides]
                )

        if self.extender:
            return {point: lists[point] for point in EXTENSION_POINTS}
        if len(lists["queueSort"]) != 1:
            self.errors.append(
                f"{path}: only one queue sort plugin required for profile with scheduler name "
                f'"{name}", but got {len(lists["queueSort"])}'
            )
            return None
        if not lists["bind"]:
            self.errors.append(f'{path}: at least one bind plugin is needed for profile with scheduler name "{name}"')
            return None
        return {point: lists[point] for point in EXTENSION_POINTS}

    def _score_weights(self, path: str, merged: dict[str, PluginSet], score: list[str]) -> dict[str, int]:
        """framework.go getScoreWeights: a Score-point weight wins over the multiPoint one; 0/unset is 1."""
        weights: dict[str, int] = {}
        total = 0
        for ref in (*merged["score"].enabled, *merged["multiPoint"].enabled):
            cls = self.registry.get(ref.name)
            if cls is None or not issubclass(cls, ScorePlugin) or ref.name in weights:
                continue
            w = ref.weight or 1
            weights[ref.name] = w
            if w > 0 and w * _MAX_NODE_SCORE > _MAX_TOTAL_SCORE - total:
                self.errors.append(f"{path}.plugins: total score of Score plugins could overflow")
                break
            total += max(w, 0) * _MAX_NODE_SCORE
        return {n: weights.get(n, 1) for n in score}

    def resolve_profile(
        self, i: int, prof: KubeSchedulerProfile, global_pct: int | None
    ) -> tuple[ResolvedProfile | None, dict[str, PluginSet]]:
        path = f"profiles[{i}]"
        name = prof.scheduler_name or ""
        n_errors = len(self.errors)
        user = self.check_user_sets(path, prof.plugins or Plugins())
        sets_ok = len(self.errors) == n_errors
        defaults = default_plugin_sets(self.registry, self.api_version, self.feature_gates)
        merged = {point: merge_plugin_set(defaults[point], user[point]) for point in defaults}
        configs = self.check_plugin_config(path, prof)

        lists = self._framework_lists(path, name, merged) if sets_ok else None

        enabled = list(dict.fromkeys(n for names in (lists or {}).values() for n in names))
        args: dict[str, Any] = {}
        for plugin, (j, raw) in configs.items():
            cls = self.registry.get(plugin)
            assert cls is not None
            p = f"{path}.pluginConfig[{j}].args"
            if cls.args_model is None:
                if raw not in (None, {}):
                    self.warnings.append(f"{p}: plugin {plugin} takes no args; ignored")
                continue
            value = self.validate_args(p, plugin, cls.args_model, raw)
            if lists is not None and plugin not in enabled:
                self.warnings.append(
                    f'{path}.pluginConfig[{j}]: plugin {plugin} is not enabled in profile "{name}"; its args are unused'
                )
            args[plugin] = value
        if lists is None:
            return None, merged

        plugin_args: dict[str, Any] = {}
        for plugin in enabled:
            cls = self.registry.get(plugin)
            assert cls is not None
            model = cls.args_model
            if model is None:
                plugin_args[plugin] = None
            elif plugin in configs:
                plugin_args[plugin] = args.get(plugin)
            else:
                try:
                    plugin_args[plugin] = model.model_validate({})
                except ValidationError as e:
                    details = "; ".join(pydantic_errors(e, ("args",)))
                    self.errors.append(required(f"{path}.pluginConfig", f"plugin {plugin} needs args ({details})"))
        weights = self._score_weights(path, merged, lists["score"])
        pct = prof.percentage_of_nodes_to_score if prof.percentage_of_nodes_to_score is not None else global_pct
        return ResolvedProfile(name, lists, weights, plugin_args, pct), merged

    # -- all profiles -----------------------------------------------------------------------------

    def resolve(
        self, cfg: KubeSchedulerConfiguration, profiles: list[KubeSchedulerProfile], source: str | None
    ) -> SchedulerConfig:
        """Resolve every profile, check the queueSort plugin is common to all, and build the result.

        Raises :class:`ConfigError` with every error collected so far (validation's included).
        """
        resolved: list[ResolvedProfile | None] = []
        merged_sets: list[dict[str, PluginSet]] = []
        for i, prof in enumerate(profiles):
            rp, merged = self.resolve_profile(i, prof, cfg.percentage_of_nodes_to_score)
            resolved.append(rp)
            merged_sets.append(merged)
        if not self.extender:
            self.check_common_queue_sort(merged_sets, profiles)

        # profile.go cfgValidator: all profiles resolve to the same queueSort plugin and args.
        if not self.errors and not self.extender:
            first: ResolvedProfile | None = None
            for rp in resolved:
                assert rp is not None
                if first is None:
                    first = rp
                    continue
                qs, first_qs = rp.plugins["queueSort"][0], first.plugins["queueSort"][0]
                if qs != first_qs:
                    self.errors.append(
                        f'different queue sort plugins for profile "{rp.scheduler_name}": "{qs}", first: "{first_qs}"'
                    )
                elif rp.plugin_args.get(qs) != first.plugin_args.get(qs):
                    self.errors.append(f'different queue sort plugin args for profile "{rp.scheduler_name}"')

        if self.errors:
            raise ConfigError(self.errors, source)
        final = [rp for rp in resolved if rp is not None]
        return SchedulerConfig(
            api_version=self.api_version,
            parallelism=cfg.parallelism,
            percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score,
            pod_initial_backoff_seconds=cfg.pod_initial_backoff_seconds,
            pod_max_backoff_seconds=cfg.pod_max_backoff_seconds,
            leader_election=cfg.leader_election,
            client_connection=cfg.client_connection,
            extenders=list(cfg.extenders),
            enable_profiling=cfg.enable_profiling,
            enable_contention_profiling=(
                cfg.enable_contention_profiling if cfg.enable_contention_profiling is not None else cfg.enable_profiling
            ),
            delay_cache_until_active=cfg.delay_cache_until_active,
            profiles=final,
            warnings=self.warnings,
            feature_gates=dict(self.feature_gates),
            source=source,
        )
