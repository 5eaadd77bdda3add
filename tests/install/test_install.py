"""What a user installs: the sdist and the wheel `python -m build` makes (the wheel built from the
unpacked sdist, so a file missing from the sdist fails here), installed with pip into a fresh venv
outside the source tree (what `pipx install kubesched` does), then run: `kubesched version`, a small
`kubesched simulate`, and `kubectl kubesched` found by the real kubectl on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import kubesched
from kubesched.app.version import KUBERNETES_RELEASE

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI") == "true"


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, REPO, cwd=out)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages) with the wheel and its dependencies from the index."""
    root = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", root / "venv", cwd=root)
    (wheel,) = dist.glob("kubesched-*.whl")
    _run(root / "venv/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel, cwd=root)
    return root / "venv"


def test_sdist_and_wheel_carry_the_package_and_its_data(dist: Path) -> None:
    version = kubesched.__version__
    (sdist,) = dist.glob(f"kubesched-{version}.tar.gz")
    (wheel,) = dist.glob(f"kubesched-{version}-py3-none-any.whl")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "src/kubesched/cli.py"} <= names
    with zipfile.ZipFile(wheel) as z:
        files = set(z.namelist())
        entry_points = z.read(f"kubesched-{version}.dist-info/entry_points.txt").decode()
    assert "kubesched/py.typed" in files
    assert any(f.endswith(".yaml") for f in files)  # the demo cluster and configurations
    for script in ("kubesched = kubesched.cli:main", "kubectl-kubesched = kubesched.cli:kubectl_plugin",
                   "kubectl_complete-kubesched = kubesched.cli:kubectl_plugin_complete"):
        assert script in entry_points


def test_version_from_a_clean_install(venv: Path, tmp_path: Path) -> None:
    out = _run(venv / "bin/kubesched", "version", cwd=tmp_path).stdout
    assert out.startswith(f"kubesched {kubesched.__version__}\nKubernetes {KUBERNETES_RELEASE} ")


def test_simulate_from_a_clean_install(venv: Path, tmp_path: Path) -> None:
    out = _run(venv / "bin/kubesched", "simulate", "--nodes", "5", "--pods", "20", "-q", "--output", "json",
               cwd=tmp_path).stdout
    summary = json.loads(out)["summary"]
    assert summary["pods"] == 20 and summary["scheduled"] + summary["preBound"] == 20
    # the demo cluster ships inside the package (its data files, not the source tree)
    demo = _run(venv / "bin/kubesched", "simulate", "-q", cwd=tmp_path).stdout
    assert "scheduled" in demo


def test_kubectl_runs_the_plugin(venv: Path, tmp_path: Path) -> None:
    from kubesched.testing.controlplane import default_bin_dir

    kubectl = default_bin_dir() / "kubectl"
    if not os.access(kubectl, os.X_OK):
        if IN_CI:
            pytest.fail(f"{kubectl} missing: hack/cluster/build.sh builds it (extras/kubectl.sh)")
        pytest.skip(f"{kubectl} not built (hack/cluster/build.sh)")
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    plugins = _run(kubectl, "plugin", "list", "--name-only", cwd=tmp_path, env=env).stdout.split()
    assert "kubectl-kubesched" in plugins
    out = _run(kubectl, "kubesched", "version", cwd=tmp_path, env=env).stdout
    assert out.startswith(f"kubesched {kubesched.__version__}\n")
    usage = _run(kubectl, "kubesched", "explain", "--help", cwd=tmp_path, env=env).stdout
    assert usage.startswith("Usage: kubectl kubesched explain [OPTIONS] POD")
    # kubectl completes `kubectl kubesched ...` through kubectl_complete-kubesched
    completions = _run(kubectl, "__complete", "kubesched", "ex", cwd=tmp_path, env=env).stdout.splitlines()
    assert completions == ["explain", "extender", ":4"]
