"""Kubernetes name rules and ``field.Error`` rendering, in one place.

Every rule here is a port of upstream (Kubernetes v1.37.1, apimachinery v0.37.1), with its regexes
and error strings copied verbatim so that a message can be matched against upstream's:

* ``staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go``: ``IsDNS1123Label``,
  ``IsDNS1123Subdomain``, ``MaxLenError`` ("must be no more than N characters"), ``RegexError``,
  ``EmptyError``; and its aliases ``IsQualifiedName`` / ``IsValidLabelValue``, which since 1.35 are
  ``staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go`` ``IsLabelKey`` /
  ``IsLabelValue`` (whose ``content.MaxLenError`` says "bytes", and whose prefix check is
  ``content/dns.go`` ``IsDNS1123Subdomain``, also in bytes). Lengths are Go ``len()``: UTF-8 bytes.
  Like upstream, every failed check adds its message (a too-long name with a bad character gets two).
* ``staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`` ``ValidateLabelName``.
* ``staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go``: the ``field.Invalid`` and
  ``field.NotSupported`` renderings (``<path>: Invalid value: <value>: <detail>``; strings as Go's
  ``%q``, numbers and booleans bare, anything else as JSON).
* ``pkg/apis/core/v1/helper/helpers.go``: ``IsNativeResource``, ``IsPrefixedNativeResource``,
  ``IsExtendedResourceName``, ``IsHugePageResourceName``, ``IsAttachableVolumeResourceName``;
  ``pkg/scheduler/util/utils.go`` ``IsScalarResourceName``; and
  ``pkg/scheduler/apis/config/validation/validation.go`` ``validateExtendedResourceName``.

The Pod and Node checks built on these rules are in :mod:`kubesched.api.object_validation`.

This is the bottom layer of kubesched: it imports nothing from kubesched but :mod:`kubesched.api.quantity`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "DEFAULT_RESOURCE_REQUESTS_PREFIX",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "RESOURCE_ATTACHABLE_VOLUMES_PREFIX",
    "RESOURCE_DEFAULT_NAMESPACE_PREFIX",
    "RESOURCE_HUGEPAGES_PREFIX",
    "empty_error",
    "field_invalid",
    "field_not_supported",
    "go_quote",
    "go_value",
    "is_attachable_volume_resource_name",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_extended_resource_name",
    "is_hugepage_resource_name",
    "is_native_resource",
    "is_prefixed_native_resource",
    "is_qualified_name",
    "is_scalar_resource_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_extended_resource_name",
    "validate_label_name",
]

# -- apimachinery pkg/util/validation and pkg/api/validate/content ---------------------------------

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
QUALIFIED_NAME_MAX_LENGTH: Final = 63  # content.labelKeyMaxLength
LABEL_VALUE_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # content.labelKeyFmt
_QUALIFIED_NAME_ERR_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT: Final = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_ERR_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)

_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE: Final = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)


def _go_len(value: str) -> int:
    """Go's ``len(string)``: UTF-8 bytes."""
    return len(value.encode("utf-8", "surrogatepass"))


def max_len_error(length: int, unit: str = "characters") -> str:
    """``MaxLenError`` (``validation`` says characters; ``content`` says bytes)."""
    return f"must be no more than {length} {unit}"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: ``msg (e.g. 'a' or 'b', regex used for validation is 'fmt')``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return f"{msg} (e.g. " + " or ".join(f"'{e}'" for e in examples) + f", regex used for validation is '{fmt}')"


def empty_error() -> str:
    """``EmptyError``."""
    return "must be non-empty"


def is_dns1123_label(value: str) -> list[str]:
    """``validation.IsDNS1123Label``: a lowercase RFC 1123 label of at most 63 characters."""
    errs: list[str] = []
    if _go_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None:
            # A valid subdomain but not a valid label: the length was checked, so it must be dots.
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_ERR_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def _dns1123_subdomain_errors(value: str, unit: str) -> list[str]:
    errs: list[str] = []
    if _go_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH, unit))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``: a lowercase RFC 1123 subdomain of at most 253 characters."""
    return _dns1123_subdomain_errors(value, "characters")


def is_qualified_name(value: str) -> list[str]:
    """``validation.IsQualifiedName`` (= ``content.IsLabelKey``): ``[prefix/]name`` with a DNS-1123
    subdomain prefix and a name of at most 63 alphanumerics, ``-``, ``_``, ``.``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain_errors(prefix, "bytes"))
    else:
        return [
            "a valid label key "
            + regex_error(_QUALIFIED_NAME_ERR_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif _go_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH, "bytes"))
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(
            "name part " + regex_error(_QUALIFIED_NAME_ERR_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """``validation.IsValidLabelValue`` (= ``content.IsLabelValue``): empty, or at most 63
    alphanumerics, ``-``, ``_``, ``.`` starting and ending with an alphanumeric."""
    errs: list[str] = []
    if _go_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH, "bytes"))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(regex_error(_LABEL_VALUE_ERR_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# -- field.Error rendering ---------------------------------------------------------------------------

_GO_ESCAPES: Final = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q`` of a string): printable runes kept, others escaped."""
    out = ['"']
    for ch in s:
        cp = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():  # unicode.IsPrint: L, M, N, P, S and ASCII space
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\ufffd")  # not a rune in Go; its JSON decoder yields U+FFFD
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def go_value(v: Any) -> str:
    """A ``field.Error`` bad value: strings as ``%q``, numbers and booleans bare, others as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, str):
        return go_quote(v)
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(v)


def field_invalid(path: str, value: Any, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``: ``<path>: Invalid value: <value>: <detail>``."""
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def field_not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    """``field.NotSupported(path, value, supported).Error()``."""
    return f"{path}: Unsupported value: {go_value(value)}: supported values: " + ", ".join(map(go_quote, supported))


def validate_label_name(name: str, path: str) -> list[str]:
    """metav1validation ``ValidateLabelName``: one ``field.Invalid`` per ``IsQualifiedName`` message."""
    return [field_invalid(path, name, msg) for msg in is_qualified_name(name)]


# -- resource names (pkg/apis/core/v1/helper, pkg/scheduler/util) -----------------------------------

#: v1.ResourceDefaultNamespacePrefix, v1.DefaultResourceRequestsPrefix, v1.ResourceHugePagesPrefix,
#: v1.ResourceAttachableVolumesPrefix.
RESOURCE_DEFAULT_NAMESPACE_PREFIX: Final = "kubernetes.io/"
DEFAULT_RESOURCE_REQUESTS_PREFIX: Final = "requests."
RESOURCE_HUGEPAGES_PREFIX: Final = "hugepages-"
RESOURCE_ATTACHABLE_VOLUMES_PREFIX: Final = "attachable-volumes-"


def is_prefixed_native_resource(name: str) -> bool:
    """``IsPrefixedNativeResource``: the name contains ``kubernetes.io/``."""
    return RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    """``IsNativeResource``: unprefixed, or in the ``*kubernetes.io/`` namespace."""
    return "/" not in name or is_prefixed_native_resource(name)


def is_hugepage_resource_name(name: str) -> bool:
    """``IsHugePageResourceName``."""
    return name.startswith(RESOURCE_HUGEPAGES_PREFIX)


def is_attachable_volume_resource_name(name: str) -> bool:
    """``IsAttachableVolumeResourceName``."""
    return name.startswith(RESOURCE_ATTACHABLE_VOLUMES_PREFIX)


def is_extended_resource_name(name: str) -> bool:
    """``IsExtendedResourceName``: not native, not ``requests.``-prefixed, and ``requests.<name>`` is a
    qualified name (so that it can be used in a quota)."""
    if is_native_resource(name) or name.startswith(DEFAULT_RESOURCE_REQUESTS_PREFIX):
        return False
    return not is_qualified_name(DEFAULT_RESOURCE_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """schedutil ``IsScalarResourceName``: extended, hugepages, prefixed-native, attachable volumes."""
    return (
        is_extended_resource_name(name)
        or is_hugepage_resource_name(name)
        or is_prefixed_native_resource(name)
        or is_attachable_volume_resource_name(name)
    )


def validate_extended_resource_name(name: str, path: str) -> list[str]:
    """scheduler config validation ``validateExtendedResourceName``: a qualified name that is an
    extended resource name."""
    errs = validate_label_name(name, path)
    if not errs and not is_extended_resource_name(name):
        errs.append(field_invalid(path, name, "is an invalid extended resource name"))
    return errs
