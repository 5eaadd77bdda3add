"""An unknown plugin name says how to load one, and a list of errors names the known plugins once."""

from __future__ import annotations

import pytest

from kubesched.config.errors import ConfigError
from kubesched.config.load import load_config_text
from kubesched.plugins.builtin import builtin_registry

TEXT = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    filter:
      enabled: [{name: RackCap}]
  pluginConfig:
  - name: RackCap
    args: {}
"""


def test_two_unknown_plugin_errors_list_the_known_plugins_once() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text(TEXT, builtin_registry())
    text = str(exc.value)
    assert text.count("known plugins:") == 1
    assert text.count('Invalid value: "RackCap": unknown plugin') == 2
    assert text.endswith("load out-of-tree plugins with --plugins MODULE (a module name, a package directory or a "
                         ".py file)")
    assert len(exc.value.errors) == 2 and all("known plugins:" in e for e in exc.value.errors)
