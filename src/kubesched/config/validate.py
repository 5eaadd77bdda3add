"""Validate a ``KubeSchedulerConfiguration`` and the names and args in its profiles.

Ports ``pkg/scheduler/apis/config/validation/validation.go`` ``ValidateKubeSchedulerConfiguration``
(parallelism, percentages, backoffs, ``validateExtenders``, profile names, ``validatePluginConfig``,
``validatePluginSetForInvalidPlugins`` / ``isPluginInvalid``, ``validateCommonQueueSort``) plus
component-base's leader-election / client-connection validation, and the plugin args validation of
``validation_pluginargs.go`` (through each plugin's args model). Extended resource names are checked
with :mod:`kubesched.api.validation`.

kubesched-specific rules (documented in :mod:`kubesched.config.defaults`): upstream plugins kubesched
does not implement are dropped with a warning; any other name that is not in the registry is an error
listing the known names (upstream ignores unknown names in ``disabled`` and unknown ``pluginConfig``
entries — here they are errors, to catch typos); a negative Score weight is an error (upstream lets it
through).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from kubesched.api.validation import validate_extended_resource_name
from kubesched.config.decode import V1, field_names, pydantic_errors, split_path, suggest
from kubesched.config.defaults import REMOVED_IN_V1, UPSTREAM_NOT_IMPLEMENTED, implements
from kubesched.config.errors import duplicate, go_duration, invalid, required
from kubesched.config.features import dependency_errors, effective_gates, unknown_gate_errors
from kubesched.config.models import (
    Extender,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    PluginRef,
    Plugins,
    PluginSet,
)
from kubesched.framework.interfaces import EXTENSION_POINTS
from kubesched.framework.registry import Registry

__all__ = ["IFACE", "Validator", "check_percentage"]

#: Go interface names, as upstream prints them in errors.
IFACE: Final = {p: cls.__name__ for p, cls in EXTENSION_POINTS.items()}


# -- plugin names -----------------------------------------------------------------------------------


#: How out-of-tree plugins get into the registry: said wherever a plugin name is unknown.
LOAD_HINT = "load out-of-tree plugins with --plugins MODULE (a module name, a package directory or a .py file)"


def _known_names_text(registry: Registry) -> str:
    not_impl = sorted(UPSTREAM_NOT_IMPLEMENTED - set(registry.names()))
    return (
        f"known plugins: {', '.join(registry.names())}; "
        f"upstream plugins kubesched does not implement: {', '.join(not_impl)}; "
        f"{LOAD_HINT}"
    )


def _unknown_plugin(path: str, name: str, registry: Registry) -> str:
    hint = suggest(name, frozenset(registry.names()) | UPSTREAM_NOT_IMPLEMENTED)
    return invalid(path, name, f"unknown plugin{hint}; {_known_names_text(registry)}")


def _removed_plugin_error(path: str, name: str, api_version: str) -> str:
    if name == "SelectorSpread":
        return invalid(path, name, f"was removed in {V1}; use {REMOVED_IN_V1[name]}")
    # validation.go validatePluginSetForInvalidPlugins / isPluginInvalid.
    return invalid(path, name, f'was invalid in version "{V1}" (KubeSchedulerConfiguration is version "{api_version}")')


# -- the validator ----------------------------------------------------------------------------------


class Validator:
    """Collects the errors and warnings of one configuration (:mod:`kubesched.config.resolve` extends it)."""

    def __init__(
        self, registry: Registry, api_version: str, warnings: list[str] | None = None, *, extender: bool = False
    ) -> None:
        self.registry = registry
        self.api_version = api_version
        #: Profiles served as an extender: kube-scheduler sorts and binds, so a profile needs
        #: neither a QueueSort nor a Bind plugin (disabling "*" under multiPoint is fine).
        self.extender = extender
        self.errors: list[str] = []
        self.warnings: list[str] = list(warnings or [])
        #: Every known feature gate's value (config/features.py), set by ``validate_global``.
        self.feature_gates: dict[str, bool] = effective_gates({})

    # -- plugin sets and pluginConfig -------------------------------------------------------------

    def check_user_sets(self, path: str, plugins: Plugins) -> dict[str, PluginSet]:
        """Names in the user's plugin sets, checked against the registry; returns the sets without the
        upstream plugins kubesched drops."""
        out: dict[str, PluginSet] = {}
        for point, ps in plugins.by_point().items():
            kept: list[PluginRef] = []
            for j, ref in enumerate(ps.enabled):
                p = f"{path}.plugins.{point}.enabled[{j}]"
                if self._check_enabled(p, point, ref):
                    kept.append(ref)
            for j, ref in enumerate(ps.disabled):
                name = ref.name
                if name == "*" or name in self.registry or name in UPSTREAM_NOT_IMPLEMENTED or name in REMOVED_IN_V1:
                    continue
                self.errors.append(_unknown_plugin(f"{path}.plugins.{point}.disabled[{j}].name", name, self.registry))
            out[point] = PluginSet(enabled=kept, disabled=list(ps.disabled))
        return out

    def _check_enabled(self, path: str, point: str, ref: PluginRef) -> bool:
        name = ref.name
        cls = self.registry.get(name)
        if cls is not None:
            ok = True
            if point != "multiPoint" and not implements(cls, point):
                # framework.go updatePluginList.
                self.errors.append(f'{path}: plugin "{name}" does not extend {IFACE[point]} plugin')
                ok = False
            if ref.weight is not None:
                if point in ("score", "multiPoint"):
                    if ref.weight < 0:
                        self.errors.append(
                            invalid(f"{path}.weight", ref.weight, "must be a positive integer (0 or unset means 1)")
                        )
                        ok = False
                else:
                    self.warnings.append(f"{path}.weight: a weight is only used by Score plugins; ignored at {point}")
            return ok
        if name in REMOVED_IN_V1:
            if self.api_version == V1:
                self.errors.append(_removed_plugin_error(path, name, self.api_version))
            else:
                self.warnings.append(
                    f"{path}: plugin {name} was removed upstream in {V1} (use {REMOVED_IN_V1[name]}) and "
                    "kubesched does not implement it; ignored"
                )
            return False
        if name in UPSTREAM_NOT_IMPLEMENTED:
            self.warnings.append(
                f"{path}: plugin {name} is an upstream plugin kubesched does not implement yet; ignored"
            )
            return False
        self.errors.append(_unknown_plugin(f"{path}.name", name, self.registry))
        return False

    def check_plugin_config(self, path: str, prof: KubeSchedulerProfile) -> dict[str, tuple[int, Any]]:
        """validation.go validatePluginConfig + framework.go "repeated config": plugin name → (index, raw
        args) of each pluginConfig entry for a registered plugin."""
        configs: dict[str, tuple[int, Any]] = {}
        for j, pc in enumerate(prof.plugin_config):
            p = f"{path}.pluginConfig[{j}]"
            if pc.name in configs:
                self.errors.append(duplicate(p, pc.name))
                continue
            if pc.name in self.registry:
                configs[pc.name] = (j, pc.args)
            elif pc.name in REMOVED_IN_V1:
                if self.api_version == V1 and pc.name != "SelectorSpread":
                    self.errors.append(_removed_plugin_error(p, pc.name, self.api_version))
                else:
                    self.warnings.append(f"{p}: args for plugin {pc.name} ignored: removed upstream in {V1}")
            elif pc.name in UPSTREAM_NOT_IMPLEMENTED:
                self.warnings.append(
                    f"{p}: args for plugin {pc.name} ignored: {pc.name} is an upstream plugin kubesched does not "
                    "implement yet"
                )
            else:
                self.errors.append(_unknown_plugin(f"{p}.name", pc.name, self.registry))

        return configs

    def validate_args(self, path: str, plugin: str, model: type[BaseModel], raw: Any) -> Any:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.errors.append(invalid(path, raw, f"args for plugin {plugin} must be a mapping"))
            return None
        data = dict(raw)
        data.pop("apiVersion", None)
        kind = data.pop("kind", None)
        if kind is not None and kind != f"{plugin}Args":
            self.errors.append(
                invalid(f"{path}.kind", kind, f"args for plugin {plugin} were not of type {plugin}Args, got {kind}")
            )
            return None
        try:
            value = model.model_validate(data)
        except ValidationError as e:
            self.errors.extend(pydantic_errors(e, split_path(path), field_names=field_names(model)))
            return None
        # Args models may note deprecations (e.g. Coscheduling's deniedPGExpirationTimeSeconds).
        self.warnings.extend(f"{path}: {w}" for w in getattr(value, "config_warnings", []))
        return value

    # -- global -----------------------------------------------------------------------------------

    def validate_global(self, cfg: KubeSchedulerConfiguration) -> None:
        """validation.go ValidateKubeSchedulerConfiguration (non-profile parts) + component-base."""
        errs = self.errors
        cc = cfg.client_connection
        if cc.burst < 0:
            errs.append(invalid("clientConnection.burst", cc.burst, "must be non-negative"))
        le = cfg.leader_election
        if le.leader_elect:
            for fld, seconds in (
                ("leaseDuration", le.lease_duration),
                ("renewDeadline", le.renew_deadline),
                ("retryPeriod", le.retry_period),
            ):
                if seconds <= 0:
                    errs.append(
                        invalid(f"leaderElection.{fld}", go_duration(seconds), "must be greater than zero", raw=True)
                    )
            if le.lease_duration < le.renew_deadline:
                errs.append(
                    invalid(
                        "leaderElection.leaseDuration",
                        go_duration(le.renew_deadline),
                        "LeaseDuration must be greater than RenewDeadline",
                        raw=True,
                    )
                )
            if le.resource_lock != "leases":
                errs.append(
                    invalid("leaderElection.resourceLock", le.resource_lock, 'resourceLock value must be "leases"')
                )
        if cfg.parallelism <= 0:
            errs.append(invalid("parallelism", cfg.parallelism, "should be an integer value greater than zero"))
        check_percentage(errs, "percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
        if cfg.pod_initial_backoff_seconds <= 0:
            errs.append(invalid("podInitialBackoffSeconds", cfg.pod_initial_backoff_seconds, "must be greater than 0"))
        if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
            errs.append(
                invalid(
                    "podMaxBackoffSeconds",
                    cfg.pod_max_backoff_seconds,
                    "must be greater than or equal to PodInitialBackoffSeconds",
                )
            )
        self._validate_extenders(cfg.extenders)
        errs.extend(unknown_gate_errors(cfg.feature_gates) or dependency_errors(cfg.feature_gates))
        self.feature_gates = effective_gates(cfg.feature_gates)

    def _validate_extenders(self, extenders: list[Extender]) -> None:
        """validation.go validateExtenders."""
        binders = 0
        managed: set[str] = set()
        for i, ext in enumerate(extenders):
            path = f"extenders[{i}]"
            if ext.prioritize_verb and ext.weight <= 0:
                self.errors.append(invalid(f"{path}.weight", ext.weight, "must have a positive weight applied to it"))
            if ext.bind_verb:
                binders += 1
            for j, res in enumerate(ext.managed_resources):
                p = f"{path}.managedResources[{j}].name"
                self.errors.extend(validate_extended_resource_name(res.name, p))
                if res.name in managed:
                    self.errors.append(invalid(p, res.name, "duplicate extender managed resource name"))
                managed.add(res.name)
        if binders > 1:
            self.errors.append(
                invalid(
                    "extenders", f"found {binders} extenders implementing bind", "only one extender can implement bind"
                )
            )

    def validate_profiles(self, profiles: list[KubeSchedulerProfile]) -> None:
        """validation.go: profile names (required, unique) and percentages."""
        seen_names: dict[str, int] = {}
        for i, prof in enumerate(profiles):
            path = f"profiles[{i}]"
            if not prof.scheduler_name:
                self.errors.append(required(f"{path}.schedulerName"))
            else:
                if prof.scheduler_name in seen_names:
                    self.errors.append(
                        duplicate(
                            f"{path}.schedulerName",
                            prof.scheduler_name,
                            f"also used by profiles[{seen_names[prof.scheduler_name]}].schedulerName",
                        )
                    )
                seen_names.setdefault(prof.scheduler_name, i)
            check_percentage(self.errors, f"{path}.percentageOfNodesToScore", prof.percentage_of_nodes_to_score)

    def check_common_queue_sort(self, merged: list[dict[str, PluginSet]], profiles: list[KubeSchedulerProfile]) -> None:
        """validation.go validateCommonQueueSort: the (merged) queueSort sets must be identical."""
        canon = merged[0]["queueSort"]
        if len(canon.enabled) > 1:
            self.errors.append(
                invalid(
                    "profiles[0].plugins.queueSort.Enabled",
                    len(canon.enabled),
                    "only one queue sort plugin can be enabled",
                )
            )
        qs_name = canon.enabled[0].name if canon.enabled else ""
        qs_args = next((pc.args for pc in profiles[0].plugin_config if qs_name and pc.name == qs_name), None)
        for i in range(1, len(merged)):
            curr = merged[i]["queueSort"]
            if _set_key(curr) != _set_key(canon):
                self.errors.append(
                    invalid(f"profiles[{i}].plugins.queueSort", _set_value(curr), "must be the same for all profiles")
                )
            for pc in profiles[i].plugin_config:
                if pc.name == qs_name and pc.args != qs_args:
                    self.errors.append(
                        invalid(
                            f"profiles[{i}].pluginConfig.args", pc.args, "queueSort must be the same for all profiles"
                        )
                    )


def _set_key(ps: PluginSet) -> tuple[tuple[tuple[str, int | None], ...], tuple[str, ...]]:
    return tuple((p.name, p.weight) for p in ps.enabled), tuple(p.name for p in ps.disabled)


def _set_value(ps: PluginSet) -> dict[str, Any]:
    return ps.model_dump(by_alias=True, exclude_none=True)


def check_percentage(errs: list[str], path: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= 100:
        errs.append(invalid(path, value, "not in valid range [0-100]"))
