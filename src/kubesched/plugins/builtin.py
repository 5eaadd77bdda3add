"""The built-in plugin registry: the default-equivalent plugins plus kubesched's own."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

from kubesched.framework.interfaces import Plugin
from kubesched.framework.registry import Registry


def builtin_registry() -> Registry:
    from kubesched.plugins.coscheduling import Coscheduling
    from kubesched.plugins.default_binder import DefaultBinder
    from kubesched.plugins.interpodaffinity import InterPodAffinity
    from kubesched.plugins.node_affinity import NodeAffinity
    from kubesched.plugins.node_name import NodeName
    from kubesched.plugins.node_ports import NodePorts
    from kubesched.plugins.node_unschedulable import NodeUnschedulable
    from kubesched.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
    from kubesched.plugins.podtopologyspread import PodTopologySpread
    from kubesched.plugins.priority_sort import PrioritySort
    from kubesched.plugins.real_usage import MemRealUsage, RealUsage
    from kubesched.plugins.taint_toleration import TaintToleration
    from kubesched.plugins.underlay_ip import UnderlayIP

    return Registry(
        [
            PrioritySort,
            NodeUnschedulable,
            NodeName,
            TaintToleration,
            NodeAffinity,
            NodePorts,
            NodeResourcesFit,
            PodTopologySpread,
            InterPodAffinity,
            NodeResourcesBalancedAllocation,
            DefaultBinder,
            UnderlayIP,
            Coscheduling,
            RealUsage,
            MemRealUsage,
        ]
    )


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
    module = importlib.import_module(spec)
    found = getattr(module, "PLUGINS", None)
    if found is None:
        found = [
            obj
            for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, Plugin) and obj.name and obj.__module__ == module.__name__
        ]
    plugins = list(found)
    bad = [p for p in plugins if not (inspect.isclass(p) and issubclass(p, Plugin))]
    if bad:
        raise ValueError(f"PLUGINS must list Plugin subclasses, got {bad!r}")
    if not plugins:
        raise ValueError(f"module {spec!r} defines no plugins (add a PLUGINS list)")
    return plugins
