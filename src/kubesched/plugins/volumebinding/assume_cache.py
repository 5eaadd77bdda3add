"""PVs and PVCs as the scheduler sees them: the shell's objects plus the bindings it has assumed.

Port of volumebinding/assume_cache.go and passive_assume_cache.go. Reserve *assumes* a PV bound
to a claim (claimRef set) or a claim given a selected node, so the next pods' cycles already see it
taken, before PreBind's API update lands. An assumed object stands until the shell's copy moves
past the version it was assumed from (upstream compares resourceVersions; objects without one, as
in a hand-written simulator input, are compared by identity), or until Unreserve restores it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubesched.plugins.volumebinding.storage import resource_version

Objects = Callable[[], Mapping[str, dict[str, Any]]]


class AssumeCache:
    def __init__(self, objects: Objects) -> None:
        self._objects = objects
        #: key -> (the shell's object it was assumed from, the assumed object).
        self._assumed: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def _current(self, key: str, latest: dict[str, Any] | None) -> dict[str, Any] | None:
        entry = self._assumed.get(key)
        if entry is None:
            return latest
        base, assumed = entry
        if latest is base:
            return assumed
        rv = resource_version(base)
        if latest is not None and rv and resource_version(latest) == rv:
            return assumed  # the same version, re-delivered (a relist)
        del self._assumed[key]  # the shell has a newer version (or the object is gone)
        return latest

    def get(self, key: str) -> dict[str, Any] | None:
        """The object, assumed version first."""
        return self._current(key, self._objects().get(key))

    def get_api_obj(self, key: str) -> dict[str, Any] | None:
        """The shell's object, ignoring assumptions (upstream GetAPIObj)."""
        return self._objects().get(key)

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for key, latest in self._objects().items():
            obj = self._current(key, latest) if self._assumed else latest
            if obj is not None:
                yield key, obj

    def assume(self, key: str, obj: dict[str, Any]) -> None:
        latest = self._objects().get(key)
        if latest is None:
            raise KeyError(key)
        prior = self._assumed.get(key)
        base = prior[0] if prior is not None and self._current(key, latest) is prior[1] else latest
        self._assumed[key] = (base, obj)

    def restore(self, key: str) -> None:
        self._assumed.pop(key, None)
