"""Decode a ``KubeSchedulerConfiguration``: YAML/JSON text → the versioned model, strictly.

Ports ``pkg/scheduler/apis/config/scheme`` (the codecs: strict decoding, where unknown and duplicate
fields are errors) with the types of ``staging/src/k8s.io/kube-scheduler/config/v1/types.go``, and the
version handling of ``pkg/scheduler/apis/config/{v1beta2,v1beta3}`` conversion: ``v1beta3`` loads as
v1 with a warning (no field changes); ``v1beta2`` loads with a warning and keeps its own default plugin
set (see :mod:`kubesched.config.defaults`); ``v1beta1``/``v1alpha*`` and the ``Policy`` API are rejected
with the replacement named.

Also here: the translation of pydantic's errors into upstream-style ``field.Error`` messages, shared
with plugin args validation (:mod:`kubesched.config.validate`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any, Final, get_args

import yaml
from pydantic import BaseModel, ValidationError

from kubesched.config.errors import ConfigError, go_value, invalid, required
from kubesched.config.models import CURRENT_API_VERSION, KubeSchedulerConfiguration

__all__ = [
    "GROUP",
    "KIND",
    "V1",
    "V1BETA2",
    "V1BETA3",
    "decode",
    "field_names",
    "parse_yaml",
    "pydantic_errors",
    "split_path",
    "suggest",
]

GROUP: Final = "kubescheduler.config.k8s.io"
V1: Final = CURRENT_API_VERSION
V1BETA3: Final = f"{GROUP}/v1beta3"
V1BETA2: Final = f"{GROUP}/v1beta2"
KIND: Final = "KubeSchedulerConfiguration"

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
    "policy": "the Policy API was removed in Kubernetes 1.23",
    "algorithmSource": f"algorithmSource was removed in {GROUP}/v1beta1; use profiles",
}


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


def parse_yaml(text: str, source: str | None) -> dict[str, Any]:
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


def field_names(model: type[BaseModel]) -> frozenset[str]:
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


_ALL_FIELD_NAMES: Final = field_names(KubeSchedulerConfiguration)


def suggest(word: str, candidates: Sequence[str] | frozenset[str]) -> str:
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f' (did you mean "{close[0]}"?)' if close else ""


def pydantic_errors(
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
            out.append(f"{path}: unknown field" + (f"; {hint}" if hint else suggest(key, field_names)))
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


def split_path(path: str) -> tuple[int | str, ...]:
    out: list[int | str] = []
    for part in path.split("."):
        m = re.fullmatch(r"([^\[]*)((?:\[\d+\])*)", part)
        assert m is not None
        if m.group(1):
            out.append(m.group(1))
        out.extend(int(x) for x in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(out)


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


def decode(data: dict[str, Any], source: str | None) -> tuple[KubeSchedulerConfiguration, str, list[str]]:
    """The versioned model of an already-parsed document: (configuration, apiVersion, warnings).

    Raises :class:`ConfigError` for an unsupported apiVersion/kind or fields that do not decode.
    """
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
        raise ConfigError(pre_errors + pydantic_errors(e), source) from None
    if pre_errors:
        raise ConfigError(pre_errors, source)
    return cfg, api_version, warnings
