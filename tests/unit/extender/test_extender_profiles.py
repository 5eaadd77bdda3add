"""Serving only your plugins as an extender: a profile without QueueSort/Bind is valid there (the
kube-scheduler sorts and binds), `--only` narrows the profile, and `--print-config` validates the
configuration exactly as the server does."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kubesched.cli import main
from kubesched.config.load import load_config
from kubesched.extender.command import only_plugins
from kubesched.plugins.builtin import builtin_registry

QUOTA = Path(__file__).resolve().parents[3] / "examples" / "plugins" / "node_quota"
ONLY_MINE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: mine
    plugins:
      multiPoint:
        disabled: [{name: "*"}]
        enabled: [{name: NodeQuota}]
"""


def _cli(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(argv))
    return result.exit_code, result.output


def test_a_profile_with_only_your_plugin_serves_as_an_extender_but_cannot_schedule(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(ONLY_MINE)
    code, out = _cli("extender", "--plugins", str(QUOTA), "--config", str(cfg), "--print-config")
    assert code == 0, out
    assert "filterVerb: filter" in out
    code, out = _cli("run", "--plugins", str(QUOTA), "--config", str(cfg), "--print-rbac")
    assert code == 2
    assert "only one queue sort plugin required" in out


def test_print_config_refuses_what_the_server_refuses(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(ONLY_MINE)
    code, out = _cli("extender", "--config", str(cfg), "--print-config")  # NodeQuota not loaded
    assert code == 2
    assert '"NodeQuota": unknown plugin' in out


def test_only_keeps_just_the_named_plugins_at_the_served_points(tmp_path: Path) -> None:
    config = load_config(None, builtin_registry(), extender=True)
    profile = only_plugins(config.profiles[0], ("NodeAffinity",))
    assert profile.plugins["filter"] == ["NodeAffinity"]
    assert profile.plugins["score"] == ["NodeAffinity"]
    assert profile.plugins["preFilter"] == ["NodeAffinity"]
    assert profile.plugins["reserve"] == []  # no other plugin's Reserve without its PreFilter
    assert profile.plugins["preBind"] == []  # nor its PreBind
    assert set(profile.score_weights) == {"NodeAffinity"}
    code, out = _cli("extender", "--only", "NoSuch", "--print-config")
    assert code == 2 and "--only NoSuch: not a filter or score plugin" in out
