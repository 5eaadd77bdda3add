"""The plugin registry: configuration name → plugin class (upstream framework/runtime/registry.go)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kubesched.framework.interfaces import FilterPlugin, Plugin, ScorePlugin, extension_points_of
from kubesched.framework.objects import ObjectKind, gated_kinds, kinds_of_plugins


class RegistryError(ValueError):
    pass


def _overrides(cls: type, base: type, method: str) -> bool:
    return getattr(cls, method) is not getattr(base, method)


class Registry:
    def __init__(
        self, plugins: Iterable[type[Plugin]] = (), origin: str = "", lazy: Mapping[str, str] | None = None
    ) -> None:
        """``lazy``: plugin name → ``"module:attribute"`` of its class, imported when the plugin is
        first looked up (:meth:`register_lazy`)."""
        self._plugins: dict[str, type[Plugin]] = {}
        self._lazy: dict[str, str] = {}
        self._origins: dict[str, str] = {}
        for p in plugins:
            self.register(p, origin=origin)
        for name, target in (lazy or {}).items():
            self.register_lazy(name, target, origin=origin)

    def _refuse_duplicate(self, name: str) -> None:
        if name in self._plugins or name in self._lazy:
            first = self._origins.get(name) or "an earlier registration"
            raise RegistryError(f"a plugin named {name!r} already exists (from {first})")

    def register_lazy(self, name: str, target: str, *, origin: str = "") -> None:
        """Add the plugin ``name`` whose class is ``target`` (``"module:attribute"``), imported and
        checked as :meth:`register` checks a class when it is first looked up: a command pays only
        for the plugins its configuration names (``kubesched run`` with the default profile does not
        import kubesched's own GPU, gang or network plugins)."""
        self._refuse_duplicate(name)
        self._lazy[name] = target
        self._origins[name] = origin

    def register(self, cls: type[Plugin], name: str | None = None, *, origin: str = "") -> None:
        """Add a plugin class; ``origin`` says where it came from (``built-in``, ``entry point
        mypkg``, ``--plugins rackcap.py``) for listings and errors. A name already registered is an
        error, as upstream, and the message names both origins."""
        name = name or cls.name
        if not name:
            raise RegistryError(f"plugin class {cls.__qualname__} has no name")
        self._refuse_duplicate(name)
        self._check(cls, name)
        self._plugins[name] = cls
        self._origins[name] = origin

    @staticmethod
    def _check(cls: type[Plugin], name: str) -> None:
        if not extension_points_of(cls):
            raise RegistryError(f"plugin {name!r} implements no extension point")
        if issubclass(cls, FilterPlugin) and not (
            _overrides(cls, FilterPlugin, "filter") or _overrides(cls, FilterPlugin, "filter_batch")
        ):
            raise RegistryError(f"filter plugin {name!r} must implement filter() or filter_batch()")
        if issubclass(cls, ScorePlugin) and not (
            _overrides(cls, ScorePlugin, "score") or _overrides(cls, ScorePlugin, "score_batch")
        ):
            raise RegistryError(f"score plugin {name!r} must implement score() or score_batch()")

    def _load(self, name: str) -> type[Plugin]:
        module, _, attr = self._lazy[name].partition(":")
        cls: type[Plugin] = getattr(importlib.import_module(module), attr)
        if cls.name != name:
            raise RegistryError(f"plugin {name!r} ({self._lazy[name]}) is named {cls.name!r}")
        self._check(cls, name)
        del self._lazy[name]
        self._plugins[name] = cls
        return cls

    def origin(self, name: str) -> str:
        """Where the plugin ``name`` was registered from ("" when not said)."""
        return self._origins.get(name, "")

    def merge(self, other: Registry) -> None:
        for name, cls in other._plugins.items():
            self.register(cls, name, origin=other.origin(name))
        for name, target in other._lazy.items():
            self.register_lazy(name, target, origin=other.origin(name))

    def get(self, name: str) -> type[Plugin] | None:
        cls = self._plugins.get(name)
        if cls is None and name in self._lazy:
            return self._load(name)
        return cls

    def __contains__(self, name: str) -> bool:
        return name in self._plugins or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        return sorted([*self._plugins, *self._lazy])

    def object_kinds(self, plugin_names: Iterable[str]) -> list[ObjectKind]:
        """The objects the named plugins declare (framework/objects.py), merged; unknown names are
        ignored (configuration validation reports them)."""
        classes = [cls for cls in (self._plugins.get(n) for n in plugin_names) if cls is not None]
        return kinds_of_plugins(classes)


def profiles_object_kinds(
    registry: Registry, profiles: Iterable[Any], feature_gates: Mapping[str, bool] | None = None
) -> list[ObjectKind]:
    """The objects every plugin enabled in these profiles (``profile.plugins``: point → names) reads,
    leaving out kinds served only under a feature gate that is off (``ObjectKind.feature_gate``)."""
    names = [n for p in profiles for point_names in p.plugins.values() for n in point_names]
    return gated_kinds(registry.object_kinds(dict.fromkeys(names)), feature_gates or {})
