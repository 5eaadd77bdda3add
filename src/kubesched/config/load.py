"""Load, default, validate and resolve a ``KubeSchedulerConfiguration``.

The steps and their upstream counterparts:

1. decode (strict: unknown fields are errors) — ``pkg/scheduler/apis/config/scheme`` with
   ``staging/src/k8s.io/kube-scheduler/config/v1/types.go``;
2. defaults — ``pkg/scheduler/apis/config/v1/defaults.go`` ``SetDefaults_KubeSchedulerConfiguration``:
   one profile when none is given, ``schedulerName: default-scheduler`` only when there is a single
   profile, the default plugins merged into each profile (``default_plugins.go`` ``mergePlugins`` /
   ``mergePluginSet``);
3. validation — ``pkg/scheduler/apis/config/validation/validation.go``
   ``ValidateKubeSchedulerConfiguration`` (plus component-base's leader-election / client-connection
   validation);
4. the framework's view of each profile — ``pkg/scheduler/framework/runtime/framework.go``
   ``NewFramework``: ``updatePluginList`` (a plugin must implement the point it is enabled at, and be
   enabled there once), ``expandMultiPointPlugins`` (ordering and override rules), the queueSort /
   bind counts and ``getScoreWeights``; and ``pkg/scheduler/profile/profile.go`` (all profiles must
   resolve to the same queueSort plugin with the same args).

kubesched-specific rules (documented in :mod:`kubesched.config.defaults`): upstream plugins kubesched
does not implement are dropped with a warning; any other name that is not in the registry is an error
listing the known names (upstream ignores unknown names in ``disabled`` and unknown ``pluginConfig``
entries — here they are errors, to catch typos); a negative Score weight is an error (upstream lets it
through). Older API versions load with a warning (``v1beta3`` as v1; ``v1beta2`` with its own default
plugin set), ``v1beta1``/``v1alpha*``/``Policy`` are rejected with the replacement named.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, get_args

import yaml
from pydantic import BaseModel, ValidationError

from kubesched.config.defaults import (
    DEFAULT_MULTI_POINT,
    REMOVED_IN_V1,
    UPSTREAM_NOT_IMPLEMENTED,
    V1BETA2_DEFAULT_PLUGINS,
)
from kubesched.config.errors import ConfigError, duplicate, go_duration, go_value, invalid, required
from kubesched.config.models import (
    CURRENT_API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    ClientConnection,
    Extender,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElection,
    PluginRef,
    Plugins,
    PluginSet,
)
from kubesched.framework.interfaces import EXTENSION_POINTS, Plugin, ScorePlugin
from kubesched.framework.registry import Registry

__all__ = ["ConfigError", "ResolvedProfile", "SchedulerConfig", "load_config", "load_config_text"]

GROUP: Final = "kubescheduler.config.k8s.io"
V1: Final = CURRENT_API_VERSION
V1BETA3: Final = f"{GROUP}/v1beta3"
V1BETA2: Final = f"{GROUP}/v1beta2"
KIND: Final = "KubeSchedulerConfiguration"

#: framework.MaxNodeScore and MaxTotalScore (math.MaxInt64), for getScoreWeights' overflow check.
_MAX_NODE_SCORE: Final = 100
_MAX_TOTAL_SCORE: Final = 2**63 - 1
#: pkg/scheduler/extender.go DefaultExtenderTimeout.
DEFAULT_EXTENDER_TIMEOUT_SECONDS: Final = 5.0

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
    "queueSort",
)
#: Go interface names, as upstream prints them in errors.
_IFACE: Final = {p: cls.__name__ for p, cls in EXTENSION_POINTS.items()} | {"preEnqueue": "PreEnqueuePlugin"}

_V1BETA3_WARNING: Final = (
    f"apiVersion {V1BETA3} was removed in Kubernetes 1.29; loaded as {V1} (no field changes needed: "
    "the default plugins and Score weights are the same; SelectorSpread no longer exists)"
)
_V1BETA2_WARNING: Final = (
    f"apiVersion {V1BETA2} was removed in Kubernetes 1.28; loaded with the v1beta2 defaults: the default "
    "plugins are configured per extension point (v1beta2 has no multiPoint) with default Score weights "
    "TaintToleration 1, NodeAffinity 1, InterPodAffinity 1 (v1beta3 and v1 use 3, 2 and 2); "
    f"migrate to {V1} to get the current defaults"
)
_REMOVED_VERSIONS: Final = {
    f"{GROUP}/v1beta1": f"apiVersion {GROUP}/v1beta1 was removed in Kubernetes 1.23",
    f"{GROUP}/v1alpha2": f"apiVersion {GROUP}/v1alpha2 was removed in Kubernetes 1.19",
    f"{GROUP}/v1alpha1": f"apiVersion {GROUP}/v1alpha1 was removed in Kubernetes 1.19",
}
_POLICY_ERROR: Final = (
    'kind: Invalid value: "Policy": the scheduler Policy API (predicates, priorities, extenders; '
    "--policy-config-file) was removed in Kubernetes 1.23; write a KubeSchedulerConfiguration "
    f"(apiVersion {V1}) instead: predicates and priorities become plugins enabled or disabled per "
    "extension point in profiles[].plugins (filter, score with weights), and extenders move to the "
    "top-level extenders list"
)
_DEPRECATED_TOP_LEVEL: Final = ("healthzBindAddress", "metricsBindAddress")
#: Keys people put in the file that are not fields of it.
_MISPLACED_HINTS: Final = {
    "featureGates": "feature gates are set with kube-scheduler's --feature-gates flag, not in this file",
    "policy": "the Policy API was removed in Kubernetes 1.23",
    "algorithmSource": f"algorithmSource was removed in {GROUP}/v1beta1; use profiles",
}


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
    source: str | None = None

    def profile(self, scheduler_name: str) -> ResolvedProfile:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise KeyError(scheduler_name)

    @property
    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles]


# -- entry points -----------------------------------------------------------------------------------


def load_config(source: str | Path | Mapping[str, Any] | None, registry: Registry) -> SchedulerConfig:
    """Load a configuration from a YAML/JSON file path, an already-parsed mapping, or None (the defaults).

    Raises :class:`ConfigError` naming the file, the field path and what was expected.
    """
    if source is None:
        return _load({"apiVersion": V1, "kind": KIND}, registry, None)
    if isinstance(source, Mapping):
        return _load(dict(source), registry, None)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([f"cannot read the configuration file: {e.strerror or e}"], str(path)) from None
    return load_config_text(text, registry, source_name=str(path))


def load_config_text(text: str, registry: Registry, *, source_name: str | None = None) -> SchedulerConfig:
    """Load a configuration from YAML (or JSON) text."""
    return _load(_parse_yaml(text, source_name), registry, source_name)


# -- YAML -------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (upstream's strict decoding does too)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {go_value(key)}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str, source: str | None) -> dict[str, Any]:
    try:
        docs = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError([f"invalid YAML: {where}{problem}"], source) from None
    if not docs:
        raise ConfigError([f"the configuration is empty; expected a {KIND}"], source)
    if len(docs) > 1:
        kinds = ", ".join(str(d.get("kind", "?")) if isinstance(d, dict) else type(d).__name__ for d in docs)
        raise ConfigError([f"expected exactly one YAML document (a {KIND}), found {len(docs)} ({kinds})"], source)
    doc = docs[0]
    if not isinstance(doc, dict):
        raise ConfigError([f"expected a mapping (a {KIND}), found a {_yaml_type(doc)}"], source)
    return doc


def _yaml_type(v: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(v), type(v).__name__)


# -- pydantic errors --------------------------------------------------------------------------------

_SIMPLE_MESSAGES: Final = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "bool_type": "expected a boolean (true or false)",
    "bool_parsing": "expected a boolean (true or false)",
    "string_type": "expected a string",
    "float_type": "expected a number",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "dict_type": "expected a mapping",
    "bytes_type": "expected base64-encoded data",
}
_FIELD_ERROR_KINDS: Final = "|".join(
    [
        "Invalid value",
        "Unsupported value",
        "Required value",
        "Duplicate value",
        "Forbidden",
        "Too long",
        "Too many",
        "Not found",
        "Internal error",
    ]
)
_REL_PATH: Final = r"[A-Za-z_]\w*(?:\[\d+\])*(?:\.[A-Za-z_]\w*(?:\[\d+\])*)*"
_REL_FIELD_ERROR: Final = re.compile(rf"(^|(?<=\[)|(?<=, ))({_REL_PATH})(?=: (?:{_FIELD_ERROR_KINDS}))")


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """The wire names of every field of ``model`` and of the models nested in it (for suggestions)."""
    acc: set[str] = set()
    todo: list[Any] = [model]
    seen: set[Any] = set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            for name, info in t.model_fields.items():
                acc.add(info.alias or name)
                todo.append(info.annotation)
        else:
            todo.extend(get_args(t))
    return frozenset(acc)


_ALL_FIELD_NAMES: Final = _field_names(KubeSchedulerConfiguration)


def _suggest(word: str, candidates: Sequence[str] | frozenset[str]) -> str:
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _pydantic_errors(
    exc: ValidationError, prefix: Sequence[int | str] = (), *, field_names: frozenset[str] = _ALL_FIELD_NAMES
) -> list[str]:
    out: list[str] = []
    base = _path(prefix)
    for e in exc.errors(include_url=False):
        loc = tuple(prefix) + tuple(e["loc"])
        path = _path(loc) or "(root)"
        kind = e["type"]
        if kind == "extra_forbidden":
            key = str(loc[-1])
            hint = _MISPLACED_HINTS.get(key) if len(loc) == 1 else None
            out.append(f"{path}: unknown field" + (f"; {hint}" if hint else _suggest(key, field_names)))
        elif kind == "missing":
            out.append(required(path))
        elif kind in ("value_error", "assertion_error"):
            err = e.get("ctx", {}).get("error")
            msg = str(err) if err is not None else e["msg"]
            out.extend(_prefix_field_errors(msg, path, base, bool(e["loc"]), e.get("input")))
        elif kind in _SIMPLE_MESSAGES:
            out.append(invalid(path, e.get("input"), _SIMPLE_MESSAGES[kind]))
        elif kind == "greater_than_equal":
            out.append(invalid(path, e.get("input"), f"must be greater than or equal to {e.get('ctx', {}).get('ge')}"))
        elif kind == "less_than_equal":
            out.append(invalid(path, e.get("input"), f"must be less than or equal to {e.get('ctx', {}).get('le')}"))
        else:
            out.append(invalid(path, e.get("input"), e["msg"]))
    return out


def _prefix_field_errors(msg: str, path: str, base: str, has_loc: bool, value: Any) -> list[str]:
    """A ValueError raised by a validator: prefix the relative field paths it names with ``base``.

    Plugin args models raise upstream-style messages whose paths are relative to the args
    (``scoringStrategy.type: Unsupported value: ...``), several joined as ``[e1, e2]``.
    """
    anchor = path if has_loc else base
    if _REL_FIELD_ERROR.search(msg):
        inner = msg[1:-1] if msg.startswith("[") and msg.endswith("]") else msg
        prefixed = _REL_FIELD_ERROR.sub(lambda m: f"{m.group(1)}{anchor}.{m.group(2)}", inner)
        return re.split(rf", (?={re.escape(anchor)}\.)", prefixed) if anchor else [prefixed]
    if has_loc:
        return [invalid(path, value, msg)]
    return [f"{anchor}: {msg}" if anchor else msg]


# -- plugin names -----------------------------------------------------------------------------------


def _implements(cls: type[Plugin], point: str) -> bool:
    base = EXTENSION_POINTS.get(point)
    return base is not None and issubclass(cls, base)


def _known_names_text(registry: Registry) -> str:
    not_impl = sorted(UPSTREAM_NOT_IMPLEMENTED - set(registry.names()))
    return (
        f"known plugins: {', '.join(registry.names())}; "
        f"upstream plugins kubesched does not implement: {', '.join(not_impl)}"
    )


def _unknown_plugin(path: str, name: str, registry: Registry) -> str:
    hint = _suggest(name, frozenset(registry.names()) | UPSTREAM_NOT_IMPLEMENTED)
    return invalid(path, name, f"unknown plugin{hint}; {_known_names_text(registry)}")


def _removed_plugin_error(path: str, name: str, api_version: str) -> str:
    if name == "SelectorSpread":
        return invalid(path, name, f"was removed in {V1}; use {REMOVED_IN_V1[name]}")
    # validation.go validatePluginSetForInvalidPlugins / isPluginInvalid.
    return invalid(path, name, f'was invalid in version "{V1}" (KubeSchedulerConfiguration is version "{api_version}")')


# -- merging (default_plugins.go) ----------------------------------------------------------------


def _merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
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


# -- loading ----------------------------------------------------------------------------------------


class _Loader:
    def __init__(self, registry: Registry, source: str | None, api_version: str) -> None:
        self.registry = registry
        self.source = source
        self.api_version = api_version
        self.errors: list[str] = []
        self.warnings: list[str] = []

    # -- per-profile ------------------------------------------------------------------------------

    def _check_user_sets(self, path: str, plugins: Plugins) -> dict[str, PluginSet]:
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
            if point == "preEnqueue":
                self.errors.append(invalid(f"{path}.name", name, "kubesched has no preEnqueue extension point"))
                ok = False
            elif point != "multiPoint" and not _implements(cls, point):
                # framework.go updatePluginList.
                self.errors.append(f'{path}: plugin "{name}" does not extend {_IFACE[point]} plugin')
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

    def _defaults(self) -> dict[str, PluginSet]:
        reg = self.registry
        sets = {point: PluginSet() for point in Plugins().by_point()}
        if self.api_version == V1BETA2:
            for point, entries in V1BETA2_DEFAULT_PLUGINS.items():
                refs = []
                for name, weight in entries:
                    cls = reg.get(name)
                    if cls is not None and _implements(cls, point):
                        refs.append(PluginRef(name=name, weight=weight))
                sets[point] = PluginSet(enabled=refs)
        else:
            sets["multiPoint"] = PluginSet(
                enabled=[PluginRef(name=n, weight=w) for n, w in DEFAULT_MULTI_POINT if n in reg]
            )
        return sets

    def _framework_lists(self, path: str, name: str, merged: dict[str, PluginSet]) -> dict[str, list[str]] | None:
        """framework.go NewFramework: updatePluginList per point, then expandMultiPointPlugins."""
        reg = self.registry
        lists: dict[str, list[str]] = {}
        for point in _UPSTREAM_POINT_ORDER:
            names: list[str] = []
            for ref in merged[point].enabled:
                cls = reg.get(ref.name)
                if cls is None or not _implements(cls, point):
                    continue  # already reported by _check_user_sets
                if ref.name in names:
                    self.errors.append(
                        f'{path}.plugins.{point}.enabled: plugin "{ref.name}" already registered as "{_IFACE[point]}"'
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
                    if cls is None or not _implements(cls, point) or ref.name in disabled:
                        continue
                    if ref.name in enabled_set:
                        # Enabled at the specific point too: the specific setting wins (PR #99582).
                        if ref.name not in overrides:
                            overrides.append(ref.name)
                        continue
                    if ref.name in multi_enabled:
                        self.errors.append(
                            f'{path}.plugins.multiPoint.enabled: plugin "{ref.name}" already registered as '
                            f'"{_IFACE[point]}"'
                        )
                        return None
                    multi_enabled.append(ref.name)
                # part 1: overrides in their specific-point order; part 2: multiPoint; part 3: the rest.
                lists[point] = (
                    [n for n in enabled_set if n in overrides]
                    + multi_enabled
                    + [n for n in enabled_set if n not in overrides]
                )

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

    def _validate_args(self, path: str, plugin: str, model: type[BaseModel], raw: Any) -> Any:
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
            self.errors.extend(_pydantic_errors(e, _split_path(path), field_names=_field_names(model)))
            return None
        # Args models may note deprecations (e.g. Coscheduling's deniedPGExpirationTimeSeconds).
        self.warnings.extend(f"{path}: {w}" for w in getattr(value, "config_warnings", []))
        return value

    def resolve_profile(
        self, i: int, prof: KubeSchedulerProfile, global_pct: int | None
    ) -> tuple[ResolvedProfile | None, dict[str, PluginSet]]:
        path = f"profiles[{i}]"
        name = prof.scheduler_name or ""
        n_errors = len(self.errors)
        user = self._check_user_sets(path, prof.plugins or Plugins())
        sets_ok = len(self.errors) == n_errors
        defaults = self._defaults()
        merged = {point: _merge_plugin_set(defaults[point], user[point]) for point in defaults}

        # pluginConfig (validation.go validatePluginConfig + framework.go "repeated config").
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
            value = self._validate_args(p, plugin, cls.args_model, raw)
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
                    details = "; ".join(_pydantic_errors(e, ("args",)))
                    self.errors.append(required(f"{path}.pluginConfig", f"plugin {plugin} needs args ({details})"))
        weights = self._score_weights(path, merged, lists["score"])
        pct = prof.percentage_of_nodes_to_score if prof.percentage_of_nodes_to_score is not None else global_pct
        return ResolvedProfile(name, lists, weights, plugin_args, pct), merged

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
        _check_percentage(errs, "percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
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
                self.errors.extend(invalid(p, res.name, d) for d in _extended_resource_name_errors(res.name))
                if res.name in managed:
                    self.errors.append(invalid(p, res.name, "duplicate extender managed resource name"))
                managed.add(res.name)
        if binders > 1:
            self.errors.append(
                invalid(
                    "extenders", f"found {binders} extenders implementing bind", "only one extender can implement bind"
                )
            )

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


def _split_path(path: str) -> tuple[int | str, ...]:
    out: list[int | str] = []
    for part in path.split("."):
        m = re.fullmatch(r"([^\[]*)((?:\[\d+\])*)", part)
        assert m is not None
        if m.group(1):
            out.append(m.group(1))
        out.extend(int(x) for x in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(out)


def _set_key(ps: PluginSet) -> tuple[tuple[tuple[str, int | None], ...], tuple[str, ...]]:
    return tuple((p.name, p.weight) for p in ps.enabled), tuple(p.name for p in ps.disabled)


def _set_value(ps: PluginSet) -> dict[str, Any]:
    return ps.model_dump(by_alias=True, exclude_none=True)


def _check_percentage(errs: list[str], path: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= 100:
        errs.append(invalid(path, value, "not in valid range [0-100]"))


_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _qualified_name_errors(value: str) -> list[str]:
    """apimachinery validation.IsQualifiedName (messages shortened)."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS "
            "subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253 or _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
            return ["prefix part must be a lowercase RFC 1123 subdomain"]
    else:
        name = parts[0]
    if not name:
        return ["name part must be non-empty"]
    if len(name) > 63:
        return ["name part must be no more than 63 characters"]
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        return [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character"
        ]
    return []


def _extended_resource_name_errors(name: str) -> list[str]:
    """validation.go validateExtendedResourceName (v1helper.IsExtendedResourceName)."""
    errs = _qualified_name_errors(name)
    if errs:
        return errs
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith("requests.") or _qualified_name_errors("requests." + name):
        return ["is an invalid extended resource name"]
    return []


def _api_version(data: dict[str, Any], source: str | None) -> tuple[str, list[str]]:
    kind = data.get("kind")
    api_version = data.get("apiVersion")
    if kind == "Policy":
        raise ConfigError([_POLICY_ERROR], source)
    errs: list[str] = []
    if api_version is None:
        errs.append(required("apiVersion", f"expected {V1}"))
    elif not isinstance(api_version, str):
        errs.append(invalid("apiVersion", api_version, f"expected {V1}"))
    elif api_version in _REMOVED_VERSIONS:
        errs.append(invalid("apiVersion", api_version, f"{_REMOVED_VERSIONS[api_version]}; migrate the file to {V1}"))
    elif api_version not in (V1, V1BETA3, V1BETA2):
        errs.append(
            invalid(
                "apiVersion", api_version, f"supported versions: {V1} (also {V1BETA3} and {V1BETA2}, with a warning)"
            )
        )
    if kind is None:
        errs.append(required("kind", f"expected {KIND}"))
    elif kind != KIND:
        errs.append(invalid("kind", kind, f"expected {KIND}"))
    if errs:
        raise ConfigError(errs, source)
    assert isinstance(api_version, str)
    warnings = {V1BETA3: [_V1BETA3_WARNING], V1BETA2: [_V1BETA2_WARNING]}.get(api_version, [])
    return api_version, list(warnings)


def _load(data: dict[str, Any], registry: Registry, source: str | None) -> SchedulerConfig:
    api_version, warnings = _api_version(data, source)
    data = dict(data)
    for key in _DEPRECATED_TOP_LEVEL:
        if key in data:
            data.pop(key)
            if api_version == V1BETA2:
                warnings.append(f"{key} is deprecated (removed in {V1BETA3}); kubesched ignores it")
            else:
                warnings.append(f"{key} is not a field of {api_version} (it was removed in {V1BETA3}); ignored")
    pre_errors: list[str] = []
    if api_version == V1BETA2:
        for i, prof in enumerate(data.get("profiles") or []):
            if isinstance(prof, dict) and isinstance(prof.get("plugins"), dict) and "multiPoint" in prof["plugins"]:
                pre_errors.append(
                    f"profiles[{i}].plugins.multiPoint: unknown field (multiPoint was added in {V1BETA3})"
                )
    try:
        cfg = KubeSchedulerConfiguration.model_validate(data)
    except ValidationError as e:
        raise ConfigError(pre_errors + _pydantic_errors(e), source) from None
    if pre_errors:
        raise ConfigError(pre_errors, source)

    # defaults.go SetDefaults_KubeSchedulerConfiguration.
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

    loader = _Loader(registry, source, api_version)
    loader.warnings.extend(warnings)
    loader.validate_global(cfg)

    # validation.go: profiles (names, percentages, duplicates) then the common queueSort.
    seen_names: dict[str, int] = {}
    for i, prof in enumerate(profiles):
        path = f"profiles[{i}]"
        if not prof.scheduler_name:
            loader.errors.append(required(f"{path}.schedulerName"))
        else:
            if prof.scheduler_name in seen_names:
                loader.errors.append(
                    duplicate(
                        f"{path}.schedulerName",
                        prof.scheduler_name,
                        f"also used by profiles[{seen_names[prof.scheduler_name]}].schedulerName",
                    )
                )
            seen_names.setdefault(prof.scheduler_name, i)
        _check_percentage(loader.errors, f"{path}.percentageOfNodesToScore", prof.percentage_of_nodes_to_score)

    resolved: list[ResolvedProfile | None] = []
    merged_sets: list[dict[str, PluginSet]] = []
    for i, prof in enumerate(profiles):
        rp, merged = loader.resolve_profile(i, prof, cfg.percentage_of_nodes_to_score)
        resolved.append(rp)
        merged_sets.append(merged)
    loader.check_common_queue_sort(merged_sets, profiles)

    # profile.go cfgValidator: all profiles resolve to the same queueSort plugin and args.
    if not loader.errors:
        first: ResolvedProfile | None = None
        for rp in resolved:
            assert rp is not None
            if first is None:
                first = rp
                continue
            qs, first_qs = rp.plugins["queueSort"][0], first.plugins["queueSort"][0]
            if qs != first_qs:
                loader.errors.append(
                    f'different queue sort plugins for profile "{rp.scheduler_name}": "{qs}", first: "{first_qs}"'
                )
            elif rp.plugin_args.get(qs) != first.plugin_args.get(qs):
                loader.errors.append(f'different queue sort plugin args for profile "{rp.scheduler_name}"')

    if loader.errors:
        raise ConfigError(loader.errors, source)
    final = [rp for rp in resolved if rp is not None]
    return SchedulerConfig(
        api_version=api_version,
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
        warnings=loader.warnings,
        source=source,
    )
