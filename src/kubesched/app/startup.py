"""Loading a command's plugins and configuration, and the one error type a command shows a user."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from kubesched.app.plugin_loading import ENTRY_POINT_GROUP, entry_point_plugins, load_plugin_module
from kubesched.config.errors import ConfigError
from kubesched.config.load import SchedulerConfig, load_config
from kubesched.framework.registry import Registry, RegistryError
from kubesched.plugins.builtin import builtin_registry


class UserError(click.ClickException):
    """A clear one-line error for bad input (exit code 2), never a traceback."""

    exit_code = 2


def load_registry(plugin_modules: Iterable[str] = ()) -> Registry:
    """The built-in plugins, those of installed packages' ``kubesched.plugins`` entry points, and
    those of each ``--plugins`` module."""
    registry = builtin_registry()
    try:
        for origin, classes in entry_point_plugins():
            for cls in classes:
                registry.register(cls, origin=origin)
    except (ImportError, RegistryError, ValueError, AttributeError) as e:
        raise UserError(f"plugins from entry points ({ENTRY_POINT_GROUP}): {e}") from None
    for module in plugin_modules:
        try:
            for cls in load_plugin_module(module):
                registry.register(cls, origin=f"--plugins {module}")
        except (ImportError, RegistryError, ValueError) as e:
            raise UserError(f"--plugins {module}: {e}") from None
    return registry


def load_scheduler_config(
    path: Path | Mapping[str, Any] | None, plugin_modules: Iterable[str] = (), *, extender: bool = False
) -> tuple[SchedulerConfig, Registry]:
    """The configuration at ``path`` (a mapping: that configuration; None: the default profile)
    resolved against the built-in and ``--plugins`` plugins; warnings go to stderr, errors become a
    UserError. ``extender``: profiles served to kube-scheduler need no QueueSort and no Bind plugin."""
    registry = load_registry(plugin_modules)
    try:
        config = load_config(path, registry, extender=extender)
    except ConfigError as e:
        raise UserError(str(e)) from None
    for w in config.warnings:
        click.echo(f"warning: {w}", err=True)
    return config, registry
