"""PodGroup specs shared by the gang plugins: one error type, one validator, one parse cache.

Coscheduling (scheduler-plugins' ``scheduling.x-k8s.io`` PodGroup) and GangScheduling (the
Workload API's ``scheduling.k8s.io`` PodGroup) read different specs, but handle them the same way:
a spec that cannot be used is a ``PodGroupSpecError`` whose message names the object and field;
the shells' validation wants the field part only; each plugin parses an object once per version
(the shells replace the dict on every update, so identity is the version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kubesched.framework.handle import Handle

#: A plugin's parsed PodGroup.
GroupT = TypeVar("GroupT")


class PodGroupSpecError(ValueError):
    """A PodGroup whose spec cannot be used; the message names the object and field."""


def validate_pod_group_with(parse: Callable[[dict[str, Any]], object], raw: dict[str, Any]) -> None:
    """Parse ``raw`` as the plugin will; the error names the field, not the object (the caller does)."""
    try:
        parse(raw)
    except PodGroupSpecError as e:
        message = str(e)
        raise PodGroupSpecError(message.split(": ", 1)[1] if ": " in message else message) from None


class ParsedPodGroups(Generic[GroupT]):
    """The PodGroups of one kind as the shell tracks them, parsed once per object version."""

    def __init__(self, handle: Handle, kind: str, parse: Callable[[dict[str, Any]], GroupT]) -> None:
        self._handle = handle
        self._kind = kind
        self._parse = parse
        self._parsed: dict[str, tuple[dict[str, Any], GroupT | PodGroupSpecError]] = {}

    def get(self, key: str) -> GroupT | PodGroupSpecError | None:
        """The parsed PodGroup ``namespace/name``, its spec error, or None if absent."""
        raw = self._handle.objects(self._kind).get(key)
        if raw is None:
            self._parsed.pop(key, None)
            return None
        cached = self._parsed.get(key)
        if cached is not None and cached[0] is raw:
            return cached[1]
        parsed: GroupT | PodGroupSpecError
        try:
            parsed = self._parse(raw)
        except PodGroupSpecError as e:
            parsed = e
        self._parsed[key] = (raw, parsed)
        return parsed
