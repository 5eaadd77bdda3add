"""DynamicResourcesArgs: upstream's defaults with v1.37's gates, its validation messages through
the configuration loader (validation_pluginargs_test.go TestValidateDynamicResourcesArgs, within
v1.37's default gates)."""

from __future__ import annotations

import pytest

from kubesched.config import ConfigError, load_config, load_config_text
from kubesched.plugins.builtin import builtin_registry

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: DynamicResources
    args: {ARGS}
"""


def test_default_profile_has_upstreams_default_args() -> None:
    args = load_config(None, builtin_registry()).profiles[0].plugin_args["DynamicResources"]
    assert args.model_dump(by_alias=True, mode="json") == {"filterTimeout": "10s", "bindingTimeout": "10m0s"}


def test_args_are_read_as_go_durations() -> None:
    text = CONFIG.replace("{ARGS}", "{filterTimeout: 0s, bindingTimeout: 1m30s}")
    config = load_config_text(text, builtin_registry())
    args = config.profiles[0].plugin_args["DynamicResources"]
    assert (args.filter_timeout, args.binding_timeout) == (0.0, 90.0)


@pytest.mark.parametrize(("args", "message"), [
    ("{filterTimeout: -1s}", "profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: -1s: must be zero or "
                             "positive"),
    ("{bindingTimeout: 500ms}", "profiles[0].pluginConfig[0].args.bindingTimeout: Invalid value: 500ms: must be at "
                                "least 1 second"),
    ("{filterTimeout: 10}", "filterTimeout"),  # a number, not a Go duration string
])
def test_invalid_args_are_refused_naming_the_field(args: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config_text(CONFIG.replace("{ARGS}", args), builtin_registry())
    assert message in str(e.value)
