"""kubesched's default profile is kube-scheduler's, plugin for plugin and weight for weight.

The oracle is the real kube-scheduler of the release hack/cluster builds: ``--write-config-to``
writes its defaulted configuration (the default profile's multiPoint list with the weights, every
other extension point empty, the default plugin args) and exits. The only plugins kubesched may
lack are named in NOT_IMPLEMENTED, each with its reason.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.config import DEFAULT_MULTI_POINT, UPSTREAM_NOT_IMPLEMENTED, load_config
from kubesched.config.defaults import implements
from kubesched.plugins.builtin import builtin_registry

pytestmark = pytest.mark.integration

#: Upstream default plugins kubesched does not implement (yet). Shrink it as they land; a name
#: listed here that kubesched registers, or one missing here that it lacks, fails the test.
NOT_IMPLEMENTED: set[str] = set()


@pytest.fixture(scope="module")
def upstream(control_plane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """kube-scheduler's defaulted configuration. It needs a server address to build its client
    configuration, but writes the file and exits before connecting to it."""
    out = tmp_path_factory.mktemp("upstream") / "kube-scheduler-defaults.yaml"
    proc = subprocess.run(
        [str(control_plane_bin_dir / "kube-scheduler"), "--master=https://127.0.0.1:1", f"--write-config-to={out}"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    cfg = yaml.safe_load(out.read_text())
    assert cfg["kind"] == "KubeSchedulerConfiguration" and len(cfg["profiles"]) == 1
    return dict(cfg)


def multi_point(cfg: dict[str, Any]) -> list[tuple[str, int | None]]:
    """The default profile's multiPoint list; upstream prints weight 0 for "no weight"."""
    enabled = cfg["profiles"][0]["plugins"]["multiPoint"]["enabled"]
    return [(p["name"], p.get("weight") or None) for p in enabled]


def test_the_default_multi_point_list_is_upstreams(upstream: dict[str, Any]) -> None:
    assert list(DEFAULT_MULTI_POINT) == multi_point(upstream)


def test_upstream_sets_no_plugin_outside_multi_point(upstream: dict[str, Any]) -> None:
    plugins = upstream["profiles"][0]["plugins"]
    assert {point: s for point, s in plugins.items() if point != "multiPoint" and s} == {}


def test_kubesched_lacks_exactly_the_named_plugins(upstream: dict[str, Any]) -> None:
    registry = builtin_registry()
    missing = {name for name, _ in multi_point(upstream) if name not in registry}
    assert missing == NOT_IMPLEMENTED
    assert NOT_IMPLEMENTED <= UPSTREAM_NOT_IMPLEMENTED  # so a config naming one is accepted with a warning


def test_the_resolved_default_profile_runs_upstreams_plugins_in_order_with_its_weights(
    upstream: dict[str, Any],
) -> None:
    registry = builtin_registry()
    resolved = load_config(None, registry).profiles[0]
    assert resolved.scheduler_name == upstream["profiles"][0]["schedulerName"] == "default-scheduler"
    listed = multi_point(upstream)
    for point, names in resolved.plugins.items():
        want = [n for n, _ in listed if (cls := registry.get(n)) is not None and implements(cls, point)]
        assert names == want, point
    weights = {n: w or 1 for n, w in listed if n in resolved.score_weights}
    assert resolved.score_weights == weights


def test_default_plugin_args_are_upstreams(upstream: dict[str, Any]) -> None:
    """Every default args kubesched has for an implemented plugin equals kube-scheduler's (fields
    left unset upstream — omitted or null — compared as absent)."""
    resolved = load_config(None, builtin_registry()).profiles[0]
    upstream_args = {c["name"]: c["args"] for c in upstream["profiles"][0]["pluginConfig"]}
    compared = 0
    for name, args in upstream_args.items():
        if name in NOT_IMPLEMENTED:
            continue
        model = resolved.plugin_args.get(name)
        assert model is not None, f"{name}: upstream has default args, kubesched has none"
        ours = _set_fields(model.model_dump(by_alias=True, mode="json"))
        theirs = _set_fields({k: v for k, v in args.items() if k not in ("apiVersion", "kind")})
        assert ours == theirs, name
        compared += 1
    assert compared >= 6


def _set_fields(v: Any) -> Any:
    """``v`` without unset fields (None, empty lists and objects), at every depth."""
    if isinstance(v, dict):
        return {k: _set_fields(x) for k, x in v.items() if x not in (None, [], {})}
    if isinstance(v, list):
        return [_set_fields(x) for x in v]
    return v
