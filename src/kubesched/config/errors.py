"""``ConfigError`` and the upstream ``field.Error`` rendering used in its messages.

Messages follow apimachinery ``validation/field`` (``<path>: Invalid value: <value>: <detail>``,
``<path>: Required value``, ``<path>: Duplicate value: <value>``, ``<path>: Unsupported value: ...``)
with paths in upstream notation (``profiles[0].plugins.score.enabled[1].weight``), so a message can be
matched against upstream documentation and issues. Values are rendered by
:func:`kubesched.api.validation.go_value` (``field.Error``'s printing: strings as Go's ``%q``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.api.duration import go_duration
from kubesched.api.validation import field_invalid, go_value

__all__ = ["ConfigError", "duplicate", "go_duration", "go_value", "invalid", "required"]


class ConfigError(ValueError):
    """An invalid scheduler configuration.

    ``errors`` holds one message per problem (``<field path>: <what is wrong>``); ``source`` is the
    file the configuration came from, when there is one. ``str()`` names the file and lists every
    problem.
    """

    def __init__(self, errors: Sequence[str], source: str | None = None) -> None:
        self.errors: list[str] = list(errors)
        self.source = source
        prefix = f"{source}: " if source else ""
        if len(self.errors) == 1:
            message = prefix + self.errors[0]
        else:
            shown, note = _shared_note(self.errors)
            message = f"{prefix}{len(self.errors)} errors:\n" + "\n".join(f"  - {e}" for e in shown) + note
        super().__init__(message)


#: The part of an unknown-plugin message that lists the known plugins (validate.py): said once
#: under a list of errors instead of after each.
_KNOWN_NOTE = "; known plugins: "


def _shared_note(errors: Sequence[str]) -> tuple[list[str], str]:
    """Errors with a trailing known-plugins list stripped when several end with the same one, and
    that list as one closing line."""
    tails = {e[e.index(_KNOWN_NOTE):] for e in errors if _KNOWN_NOTE in e}
    if len(tails) != 1 or sum(_KNOWN_NOTE in e for e in errors) < 2:
        return list(errors), ""
    (tail,) = tails
    return [e.removesuffix(tail) for e in errors], "\n" + tail.removeprefix("; ")


def invalid(path: str, value: Any, detail: str, *, raw: bool = False) -> str:
    """``field.Invalid``. ``raw`` prints ``value`` as is (for Stringer-like values such as durations)."""
    if raw:
        return f"{path}: Invalid value: {value}: {detail}"
    return field_invalid(path, value, detail)


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def duplicate(path: str, value: Any, detail: str = "") -> str:
    return f"{path}: Duplicate value: {go_value(value)}" + (f" ({detail})" if detail else "")
