"""The plugin author's path end to end: `kubesched new-plugin` writes a package; installed (pip, no
--plugins) its entry point makes every command find it; its own tests pass with kubesched.testing;
the simulator runs it from its example configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KUBESCHED = [sys.executable, "-m", "kubesched.cli"]


def _run(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("plugin")
    made = _run(*KUBESCHED, "new-plugin", "RackCap", "--dir", str(root / "rackcap"))
    assert made.returncode == 0, made.stderr
    site = root / "site"
    pip = _run(sys.executable, "-m", "pip", "install", "-q", "--no-deps",
               "--target", str(site), str(root / "rackcap"))
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return root / "rackcap", env


def test_the_entry_point_registers_the_plugin_for_every_command(installed: tuple[Path, dict[str, str]]) -> None:
    _, env = installed
    listed = _run(*KUBESCHED, "plugins", env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if "RackCap" in ln)
    assert "filter, score" in line and "entry point rack_cap (kubesched-rack-cap 0.1.0)" in line


def test_the_packages_own_tests_pass(installed: tuple[Path, dict[str, str]]) -> None:
    package, env = installed
    tests = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", env=env, cwd=package)
    assert tests.returncode == 0, tests.stdout + tests.stderr


def test_the_simulator_runs_the_example_configuration(installed: tuple[Path, dict[str, str]]) -> None:
    package, env = installed
    sim = _run(*KUBESCHED, "simulate", "--config", str(package / "config.yaml"), "--nodes", "20", "--pods", "40",
               "--output", "json", env=env)
    assert sim.returncode == 0, sim.stderr
    assert '"rack-cap-scheduler"' in sim.stdout


def test_new_plugin_refuses_bad_names_and_existing_directories(tmp_path: Path) -> None:
    bad = _run(*KUBESCHED, "new-plugin", "rack-cap", "--dir", str(tmp_path / "x"))
    assert bad.returncode == 2 and "CamelCase" in bad.stderr
    (tmp_path / "taken").mkdir()
    taken = _run(*KUBESCHED, "new-plugin", "RackCap", "--dir", str(tmp_path / "taken"))
    assert taken.returncode == 2 and "already exists" in taken.stderr


def test_next_steps_use_kubescheds_own_interpreter(tmp_path: Path) -> None:
    """The printed install command works whether or not kubesched's venv is active: it names the
    interpreter running kubesched, not whatever `pip` comes first on PATH."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no venv on PATH, as in a fresh shell
    made = _run(*KUBESCHED, "new-plugin", "RackCap", "--dir", str(tmp_path / "rackcap"), env=env)
    assert made.returncode == 0, made.stderr
    next_line = made.stdout.splitlines()[-1]
    assert next_line.startswith(f"next: cd {tmp_path / 'rackcap'} && {sys.executable} -m pip install -e '.[test]' && ")
    assert f"{sys.executable} -m pytest tests" in next_line
