"""The built-in plugins are registered by name and imported when a configuration names them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubesched.framework.registry import Registry, RegistryError
from kubesched.plugins.builtin import BUILTIN_PLUGINS, builtin_registry


def test_every_builtin_name_loads_the_plugin_of_that_name() -> None:
    registry = builtin_registry()
    assert registry.names() == sorted(BUILTIN_PLUGINS)
    for name in BUILTIN_PLUGINS:
        cls = registry.get(name)
        assert cls is not None and cls.name == name
        assert registry.origin(name) == "built-in"


def test_a_lazy_entry_is_checked_when_loaded_and_names_collide_before() -> None:
    registry = Registry(lazy={"Wrong": "kubesched.plugins.node_name:NodeName"})
    assert "Wrong" in registry
    with pytest.raises(RegistryError, match=r"'Wrong' .* is named 'NodeName'"):
        registry.get("Wrong")
    cls = builtin_registry().get("NodeName")
    assert cls is not None
    with pytest.raises(RegistryError, match=r"'NodeName' already exists \(from built-in\)"):
        builtin_registry().register(cls, origin="entry point x")


def test_the_default_profile_imports_only_the_plugins_it_enables() -> None:
    """What `kubesched run` with no configuration imports (a fresh process): none of kubesched's own
    GPU, gang, network or usage plugins."""
    script = """
import sys
from kubesched.app.startup import load_scheduler_config
load_scheduler_config(None)
print(" ".join(sorted({m.split(".")[2] for m in sys.modules if m.startswith("kubesched.plugins.")})))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    for own in ("gpu_policies", "gpushare", "coscheduling", "underlay_ip", "real_usage", "gangscheduling"):
        assert own not in out
    assert "noderesources" in out and "dynamicresources" in out
