"""RBAC comes from the configuration: the live shell's own needs plus what its plugins declare.
deploy/scheduler/rbac.yaml is held to what `kubesched run --print-rbac` prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.config.load import load_config, load_config_text
from kubesched.framework.interfaces import FilterPlugin
from kubesched.framework.objects import ObjectKind
from kubesched.framework.registry import profiles_object_kinds
from kubesched.live.rbac import cluster_role, leader_election_role
from kubesched.live.settings import lease_name_for
from kubesched.plugins.builtin import builtin_registry

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "scheduler"
#: The example configurations (examples/ also holds a dump, a workload and a node template).
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if "kind: KubeSchedulerConfiguration" in p.read_text())


def _deploy_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()) if d]


def _deploy_config() -> Any:
    cm = yaml.safe_load((DEPLOY / "configmap.yaml").read_text())
    return load_config_text(cm["data"]["config.yaml"], builtin_registry())


def test_deploy_cluster_role_is_what_its_configuration_and_the_examples_need() -> None:
    """The manifest grants exactly what --print-rbac gives for the deployed configuration and for
    each example configuration (so every example runs with it), nothing more."""
    registry = builtin_registry()
    configs = [_deploy_config(), *(load_config(p, registry) for p in EXAMPLES)]
    kinds = [k for c in configs for k in profiles_object_kinds(registry, c.profiles)]
    from kubesched.framework.objects import merge_object_kinds

    want = cluster_role("kubesched", merge_object_kinds(kinds))
    have = next(d for d in _deploy_docs() if d["kind"] == "ClusterRole")
    assert have["rules"] == want["rules"]


def test_deploy_lease_role_matches_the_deployed_leader_election() -> None:
    config = _deploy_config()
    le = config.leader_election
    want = leader_election_role("kubesched-leader-election", le.resource_namespace, lease_name_for(le.resource_name))
    have = next(d for d in _deploy_docs() if d["kind"] == "Role")
    assert have["metadata"] == want["metadata"]
    assert have["rules"] == want["rules"]


def test_print_rbac_adds_the_objects_a_plugin_declares(tmp_path: Path) -> None:
    plugin = tmp_path / "quota_plugin.py"
    plugin.write_text(
        "from kubesched.framework import FilterPlugin, ObjectKind, Status\n"
        "class Quota(FilterPlugin):\n"
        "    name = 'Quota'\n"
        "    object_kinds = (ObjectKind('ConfigMap', '', 'v1', 'configmaps'),)\n"
        "    def filter(self, state, pod, node):\n"
        "        return Status()\n"
        "PLUGINS = [Quota]\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: quota\n  plugins:\n    filter:\n      enabled: [{name: Quota}]\n"
    )
    result = CliRunner().invoke(
        main, ["run", "--print-rbac", "--config", str(config), "--plugins", str(plugin)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    def readable(output: str) -> set[str]:
        role = next(d for d in yaml.safe_load_all(output) if d["kind"] == "ClusterRole")
        return {
            f"{g}/{r}" for rule in role["rules"] if rule["verbs"] == ["list", "watch"]
            for g in rule["apiGroups"] for r in rule["resources"]
        }

    assert "/configmaps" in readable(result.output)
    # Without the plugin, no ConfigMap access.
    plain = CliRunner().invoke(main, ["run", "--print-rbac"], catch_exceptions=False)
    assert "/configmaps" not in readable(plain.output)


class _Writes(FilterPlugin):
    name = "Writes"
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = (
        ObjectKind("Widget", "example.com", "v1", "widgets", writes_status=True),
    )


def test_status_writers_get_patch_on_the_status_subresource() -> None:
    rules = cluster_role("x", list(_Writes.object_kinds))["rules"]
    assert {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list", "watch"]} in rules
    assert {"apiGroups": ["example.com"], "resources": ["widgets/status"], "verbs": ["patch"]} in rules
