"""Run plugins the way the scheduler does, in process: a Handle on a node table, and a real
:class:`~kubesched.framework.runtime.Framework` built from a profile through the same
configuration loader as every shell (defaults merged, args validated by the plugin's args model).

For "every plugin's verdict and score on every node" use
:func:`kubesched.framework.explain.explain` on the framework :func:`framework_for` returns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from kubesched.config.load import load_config
from kubesched.framework.clock import Clock, FakeClock
from kubesched.framework.handle import ClusterClient, Handle
from kubesched.framework.interfaces import BindPlugin, Plugin, QueueSortPlugin
from kubesched.framework.runtime import Framework
from kubesched.framework.waiting import WaitingPods
from kubesched.plugins.builtin import builtin_registry
from kubesched.snapshot.table import NodeTable

__all__ = ["StaticProfile", "framework_for", "handle", "new_plugin"]

P = TypeVar("P", bound=Plugin)
Objects = Callable[[str], Mapping[str, dict[str, Any]]]


@dataclass
class StaticProfile:
    """A profile given as plain per-extension-point plugin lists, with no defaults merged and no
    configuration loaded: ``Scheduler.build([StaticProfile({...})], registry, clock)`` runs exactly
    the plugins named. It satisfies :class:`~kubesched.framework.runtime.ProfileSpec`; use
    :func:`framework_for` instead to get upstream's defaults merged and args validated."""

    plugins: dict[str, list[str]]
    scheduler_name: str = "default-scheduler"
    score_weights: dict[str, int] = field(default_factory=dict)
    plugin_args: dict[str, Any] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


def handle(
    table: NodeTable | None = None,
    *,
    clock: Clock | None = None,
    client: ClusterClient | None = None,
    profile_name: str = "",
    objects: Objects | None = None,
) -> Handle:
    """A Handle on ``table`` (default: an empty one) with a ``FakeClock`` at 0 and no waiting pods."""
    return Handle(
        table if table is not None else NodeTable(),
        clock if clock is not None else FakeClock(),
        WaitingPods(),
        client=client,
        profile_name=profile_name,
        objects=objects,
    )


def new_plugin(
    cls: type[P],
    args: Mapping[str, Any] | BaseModel | None = None,
    *,
    table: NodeTable | None = None,
    profile_name: str = "",
    clock: Clock | None = None,
    client: ClusterClient | None = None,
    objects: Objects | None = None,
) -> P:
    """``cls(args, handle(...))``, with raw ``args`` (the camelCase ``pluginConfig`` mapping)
    validated by ``cls.args_model`` first. No defaulting happens for ``args=None``: pass ``{}``
    to get the args model's defaults."""
    if isinstance(args, Mapping):
        if cls.args_model is None:
            raise TypeError(f"plugin {cls.name!r} takes no args")
        args = cls.args_model.model_validate(dict(args))
    h = handle(table, clock=clock, client=client, profile_name=profile_name, objects=objects)
    return cls(args, h)


def framework_for(
    plugins: Iterable[type[Plugin]] = (),
    *,
    profile_plugins: Mapping[str, Any] | None = None,
    args: Mapping[str, Any] | None = None,
    table: NodeTable | None = None,
    default_plugins: bool = False,
    scheduler_name: str = "test-scheduler",
    percentage_of_nodes_to_score: int | None = None,
    clock: Clock | None = None,
    client: ClusterClient | None = None,
    objects: Objects | None = None,
) -> Framework:
    """A Framework for one profile, built like the shells build theirs.

    ``plugins`` are registered next to the built-in plugins. ``profile_plugins`` is the profile's
    ``plugins:`` stanza of a KubeSchedulerConfiguration (merged with the defaults as upstream);
    without it, ``plugins`` are enabled through ``multiPoint`` and, unless ``default_plugins``,
    every default plugin is disabled except PrioritySort and DefaultBinder (only where none of
    ``plugins`` is a QueueSort / Bind plugin). ``args`` maps plugin names to their raw args
    (``pluginConfig``). Configuration errors raise ``kubesched.config.errors.ConfigError``."""
    plugins = list(plugins)
    registry = builtin_registry()
    for cls in plugins:
        if registry.get(cls.name) is not cls:
            registry.register(cls)
    stanza: dict[str, Any]
    if profile_plugins is not None:
        stanza = dict(profile_plugins)
    else:
        multi: dict[str, Any] = {"enabled": [{"name": cls.name} for cls in plugins]}
        stanza = {"multiPoint": multi}
        if not default_plugins:
            multi["disabled"] = [{"name": "*"}]
            if not any(issubclass(cls, QueueSortPlugin) for cls in plugins):
                stanza["queueSort"] = {"enabled": [{"name": "PrioritySort"}]}
            if not any(issubclass(cls, BindPlugin) for cls in plugins):
                stanza["bind"] = {"enabled": [{"name": "DefaultBinder"}]}
    profile: dict[str, Any] = {"schedulerName": scheduler_name, "plugins": stanza}
    if args:
        profile["pluginConfig"] = [{"name": name, "args": a} for name, a in args.items()]
    if percentage_of_nodes_to_score is not None:
        profile["percentageOfNodesToScore"] = percentage_of_nodes_to_score
    config = load_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]},
        registry,
    )
    h = handle(table, clock=clock, client=client, profile_name=scheduler_name, objects=objects)
    return Framework.build(config.profiles[0], registry, h)
