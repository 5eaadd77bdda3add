"""What kubectl users expect of a command-line tool: a version naming the Kubernetes release,
shell completion (kubectl's plugin protocol included), KUBECONFIG lists, --context and the
context's namespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubesched.app.completion import kubectl_plugin_completions
from kubesched.app.version import KUBERNETES_RELEASE
from kubesched.cli import main
from kubesched.kube.api import ConnectionConfigError, load_connection

REPO = Path(__file__).resolve().parents[2]


def test_the_mirrored_release_is_the_one_the_control_plane_is_built_from() -> None:
    pins = dict(
        line.split("=", 1) for line in (REPO / "hack/cluster/versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["K8S_VERSION"] == KUBERNETES_RELEASE


def test_version_names_kubesched_and_the_kubernetes_release() -> None:
    import kubesched

    out = CliRunner().invoke(main, ["version"]).output
    assert out.splitlines()[:2] == [
        f"kubesched {kubesched.__version__}",
        f"Kubernetes {KUBERNETES_RELEASE} (the kube-scheduler release kubesched follows)",
    ]
    info = json.loads(CliRunner().invoke(main, ["version", "-o", "json"]).output)
    assert info["kubeschedVersion"] == kubesched.__version__ and info["kubernetesRelease"] == KUBERNETES_RELEASE
    assert KUBERNETES_RELEASE in CliRunner().invoke(main, ["--version"]).output


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_calls_kubesched_back(shell: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0
    assert f"_KUBESCHED_COMPLETE={shell}_complete" in result.output or f"{shell}_complete" in result.output


def test_completion_refuses_an_unknown_shell() -> None:
    result = CliRunner().invoke(main, ["completion", "tcsh"])
    assert result.exit_code == 2 and "'tcsh' is not one of" in result.output


def test_kubectl_plugin_completion_protocol() -> None:
    assert kubectl_plugin_completions(main, ["ex"]) == ["explain", "extender", ":4"]
    flags = kubectl_plugin_completions(main, ["explain", "--con"])
    assert flags == ["--config", "--context", ":4"]
    # a path parameter lets the shell complete file names (cobra's default directive)
    assert kubectl_plugin_completions(main, ["explain", "--config", ""])[-1] == ":0"


def _kubeconfig(path: Path, contexts: dict[str, tuple[str, str | None]], current: str | None) -> Path:
    """contexts: name → (server, namespace); a cluster per context, token auth."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, (s, _) in contexts.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": "u", **({"namespace": ns} if ns else {})}}
            for n, (_, ns) in contexts.items()
        ],
    }
    if current:
        doc["current-context"] = current
    path.write_text(json.dumps(doc))
    return path


async def test_kubeconfig_list_is_merged_as_kubectl_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _kubeconfig(tmp_path / "a", {"dev": ("http://10.0.0.1:8080", "team-a")}, "dev")
    b = _kubeconfig(tmp_path / "b", {"prod": ("http://10.0.0.2:8080", None)}, None)
    monkeypatch.setenv("KUBECONFIG", f"{a}:{tmp_path / 'missing'}:{b}")
    dev = await load_connection()
    assert (dev.host, dev.namespace) == ("http://10.0.0.1:8080", "team-a")
    prod = await load_connection(context="prod")  # defined in the second file only
    assert (prod.host, prod.namespace) == ("http://10.0.0.2:8080", None)


async def test_kubeconfig_list_of_missing_files_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'x'}:{tmp_path / 'y'}")
    with pytest.raises(ConnectionConfigError, match=r"KUBECONFIG .*/x:.*/y: no such file"):
        await load_connection()


async def test_unknown_context_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _kubeconfig(tmp_path / "a", {"dev": ("http://10.0.0.1:8080", None)}, "dev")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(ConnectionConfigError, match="nope"):
        await load_connection(str(a), context="nope")


def test_live_commands_take_kubectl_connection_flags() -> None:
    for command in ("run", "explain"):
        help_text = CliRunner().invoke(main, [command, "--help"]).output
        assert "--kubeconfig" in help_text and "--context" in help_text
    assert "-n, --namespace" in CliRunner().invoke(main, ["explain", "--help"]).output
