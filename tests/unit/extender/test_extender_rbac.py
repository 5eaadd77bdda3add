"""`kubesched extender --print-rbac`: the ClusterRole an extender with a cluster connection needs,
from the profile it serves (after --only), validated as the server validates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kubesched.cli import main

#: A filter plugin reading Widgets, whose status it owns (writes_status): in `kubesched run` the
#: leader patches that status; the extender never does.
WIDGETS = """
from kubesched.framework import FilterPlugin, ObjectKind, Status

class Widgets(FilterPlugin):
    name = "Widgets"
    object_kinds = (ObjectKind("Widget", "example.com", "v1", "widgets", writes_status=True, writes=("update",)),)

    def filter(self, state, pod, node):
        return Status()

PLUGINS = [Widgets]
"""

#: Widgets and UnderlayIP, nothing else (kube-scheduler runs the default plugins itself).
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: mine
    plugins:
      multiPoint:
        disabled: [{name: "*"}]
        enabled: [{name: Widgets}, {name: UnderlayIP}]
"""

WATCH_NODES_AND_PODS = {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}
WATCH_WIDGETS = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list", "watch"]}
WATCH_UNDERLAY = {"apiGroups": ["underlay.kubesched.io"], "resources": ["underlayipclaims", "underlayippools"],
                  "verbs": ["list", "watch"]}
BIND = {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}


def _print_rbac(tmp_path: Path, *args: str) -> tuple[int, str]:
    (tmp_path / "widgets_plugin.py").write_text(WIDGETS)
    (tmp_path / "config.yaml").write_text(CONFIG)
    argv = ["extender", "--print-rbac", "--plugins", str(tmp_path / "widgets_plugin.py"),
            "--config", str(tmp_path / "config.yaml"), *args]
    result = CliRunner().invoke(main, argv)
    return result.exit_code, result.output


def _rules(output: str) -> list[dict[str, Any]]:
    (role,) = list(yaml.safe_load_all(output))
    assert role["kind"] == "ClusterRole"
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_the_served_plugins_objects_are_watched_and_never_written(tmp_path: Path) -> None:
    code, out = _print_rbac(tmp_path)
    assert code == 0, out
    # No status patch, no update: only `kubesched run`'s leader writes what plugins report, and
    # the extender's plugins get no client to write with.
    assert _rules(out) == [WATCH_NODES_AND_PODS, WATCH_WIDGETS, WATCH_UNDERLAY]
    assert yaml.safe_load(out)["metadata"]["name"] == "kubesched-extender"


def test_bind_adds_pods_binding(tmp_path: Path) -> None:
    code, out = _print_rbac(tmp_path, "--bind", "--rbac-name", "team-a-extender")
    assert code == 0, out
    assert _rules(out) == [WATCH_NODES_AND_PODS, BIND, WATCH_WIDGETS, WATCH_UNDERLAY]
    assert yaml.safe_load(out)["metadata"]["name"] == "team-a-extender"


def test_only_leaves_out_the_objects_of_the_plugins_not_served(tmp_path: Path) -> None:
    code, out = _print_rbac(tmp_path, "--only", "UnderlayIP")
    assert code == 0, out
    assert _rules(out) == [WATCH_NODES_AND_PODS, WATCH_UNDERLAY]


def test_print_rbac_refuses_what_the_server_refuses(tmp_path: Path) -> None:
    code, out = _print_rbac(tmp_path, "--only", "NoSuch")
    assert code == 2
    assert "--only NoSuch: not a filter or score plugin" in out
    code, out = _print_rbac(tmp_path, "--profile", "other")
    assert code == 2
    assert "--profile other: no such profile" in out
    code, out = _print_rbac(tmp_path, "--print-config")
    assert code == 2
    assert "--print-config and --print-rbac: pick one" in out


# -- the shipped extender deployment ---------------------------------------------------------------
MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "extender" / "kube-scheduler-with-extender.yaml"


def test_the_extender_manifest_grants_what_print_rbac_prints_for_its_profile(tmp_path: Path) -> None:
    """The manifest's extender ClusterRole is exactly `--print-rbac` for the profile its extender
    container serves (its --config, --profile, --only; --bind when kube-scheduler's extenders entry
    has a bindVerb), and it is bound to the pod's service account. The chart in extender mode
    renders the same objects (tests/integration/test_deploy_chart.py)."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}
    config_map = docs[("ConfigMap", "kubesched-underlay")]["data"]
    pod = docs[("Deployment", "kubesched-underlay")]["spec"]["template"]["spec"]
    (container,) = (c for c in pod["containers"] if c["name"] == "kubesched-extender")
    args: list[str] = container["args"]
    assert args[0] == "extender"
    options = dict(a.removeprefix("--").partition("=")[::2] for a in args[1:])
    assert "plugins" not in options  # built-in plugins only: nothing to load here
    config = tmp_path / "kubesched-profile.yaml"
    config.write_text(config_map[Path(options["config"]).name])
    argv = ["extender", "--print-rbac", "--config", str(config)]
    argv += [f"--{k}={v}" for k, v in options.items() if k in ("profile", "only")]
    (stanza,) = yaml.safe_load(config_map["kube-scheduler.yaml"])["extenders"]
    if "bindVerb" in stanza:
        argv.append("--bind")
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    want = yaml.safe_load(result.output)
    have = docs[("ClusterRole", want["metadata"]["name"])]
    assert have["rules"] == want["rules"]
    binding = docs[("ClusterRoleBinding", want["metadata"]["name"])]
    assert binding["roleRef"]["name"] == want["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [pod["serviceAccountName"]]
