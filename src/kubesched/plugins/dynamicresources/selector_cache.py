"""Selector results kept across scheduling cycles and pods.

cel-python costs ~200 µs per evaluation, and a Filter over many nodes asks the same selectors of
the same devices for every pod. A device's attributes and capacity change only with its
ResourceSlice, so the answer of one expression for one device is kept per slice version (uid,
``resourceVersion``, ``metadata.generation`` and the pool's generation): a new version of a slice
drops its entries, a deleted slice's are dropped when the cache is pruned. Runtime errors are kept
too, so a broken selector says the same thing on every node without being evaluated again.

Upstream keeps no such cache (cel-go is ~100× faster); the answer is the same either way, as an
expression's value depends on nothing but the device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubesched.plugins.dynamicresources.cel import CelError, CompiledSelector

if TYPE_CHECKING:  # celpy is imported by the first selector (cel.py says why)
    from celpy import celtypes

#: Slices whose entries are kept before the cache drops the ones of slices no longer seen.
_PRUNE_ABOVE = 100_000

_SliceVersion = tuple[str, str, str, int]
#: (expression, device name) -> the result, or the runtime error's message.
_Results = dict[tuple[str, str], bool | str]


def _slice_identity(s: Mapping[str, Any]) -> tuple[str, _SliceVersion]:
    meta = s.get("metadata") or {}
    spec = s.get("spec") or {}
    pool = spec.get("pool") or {}
    version = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")), str(meta.get("generation", "")),
               int(pool.get("generation") or 0))
    return str(meta.get("name", "")), version


class SelectorCache:
    """(expression, device of a slice version) -> whether the device matches."""

    def __init__(self) -> None:
        self._slices: dict[str, tuple[_SliceVersion, _Results]] = {}
        #: Evaluations run and answers reused (for tests and the benchmark; quick_filter.py counts
        #: a node's selector results it reuses as one hit).
        self.evaluations = 0
        self.hits = 0

    def matches(self, compiled: CompiledSelector, slice_: Mapping[str, Any], device_name: str,
                device: Callable[[], celtypes.MapType]) -> bool:
        """``compiled.matches(device())`` for a device of ``slice_``, evaluated once per slice
        version; CelError as it."""
        name, version = _slice_identity(slice_)
        entry = self._slices.get(name)
        if entry is None or entry[0] != version:
            if len(self._slices) >= _PRUNE_ABOVE:
                self._slices.clear()
            entry = self._slices[name] = (version, {})
        results = entry[1]
        key = (compiled.expression, device_name)
        hit = results.get(key)
        if hit is None:
            self.evaluations += 1
            try:
                hit = compiled.matches_device(str((slice_.get("spec") or {}).get("driver", "")), device)
            except CelError as e:
                hit = str(e)
            results[key] = hit
        else:
            self.hits += 1
        if isinstance(hit, str):
            raise CelError(hit)
        return hit
