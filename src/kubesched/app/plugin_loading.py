"""Out-of-tree plugins: from ``--plugins MODULE`` (a module name, a package directory or a .py
file) and from installed packages' ``kubesched.plugins`` entry points, so a plugin can be a
pip-installable package::

    [project.entry-points."kubesched.plugins"]
    rackcap = "rackcap:PLUGINS"        # a list of Plugin classes, one class, or a module with PLUGINS
"""

from __future__ import annotations

import importlib
import inspect
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from kubesched.framework.interfaces import Plugin

ENTRY_POINT_GROUP = "kubesched.plugins"


def load_plugin_module(spec: str) -> list[type[Plugin]]:
    """Out-of-tree plugins: import ``spec`` (a module name, or a path to a .py file or package
    directory) and return its ``PLUGINS`` list, else every named Plugin subclass it defines."""
    path = Path(spec)
    if spec.endswith(".py") or path.is_dir():
        if not path.exists():
            raise ImportError(f"no such file or directory: {spec}")
        sys.path.insert(0, str(path.resolve().parent))
        spec = path.stem if path.suffix == ".py" else path.name
    elif "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # let `--plugins my_plugins` find a module in the working directory
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name != spec.split(".")[0]:
            raise  # the module exists; something it imports does not
        raise ImportError(
            f"No module named {spec!r} on the Python path; give a path instead (a .py file or a package "
            "directory), or install the plugin package"
        ) from None
    return plugins_of(module, f"module {spec!r}")


def plugins_of(obj: Any, what: str) -> list[type[Plugin]]:
    """The Plugin classes ``obj`` stands for: a class, a list of classes, or a module with a
    ``PLUGINS`` list (else every named Plugin subclass the module defines)."""
    if inspect.isclass(obj):
        found: Any = [obj]
    elif isinstance(obj, ModuleType):
        found = getattr(obj, "PLUGINS", None)
        if found is None:
            found = [
                c for _, c in inspect.getmembers(obj, inspect.isclass)
                if issubclass(c, Plugin) and c.name and c.__module__ == obj.__name__
            ]
    else:
        found = obj
    try:
        plugins = list(found)
    except TypeError:
        raise ValueError(f"{what}: expected a Plugin class, a list of them or a module, got {obj!r}") from None
    bad = [p for p in plugins if not (inspect.isclass(p) and issubclass(p, Plugin))]
    if bad:
        raise ValueError(f"{what}: PLUGINS must list Plugin subclasses, got {bad!r}")
    if not plugins:
        raise ValueError(f"{what} defines no plugins (add a PLUGINS list)")
    return plugins


def entry_point_plugins() -> list[tuple[str, list[type[Plugin]]]]:
    """(origin, plugin classes) of every installed ``kubesched.plugins`` entry point, by name."""
    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        out.append((_origin(ep), plugins_of(ep.load(), f"entry point {ep.name!r} ({ep.value})")))
    return out


def _origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    package = f"{dist.name} {dist.version}" if dist is not None else ep.value
    return f"entry point {ep.name} ({package})"

