"""app/fast_exit.py: ``kubesched simulate`` run by the console script ends without interpreter
teardown once its output is written (flushed, same exit code); click's test runner is never ended."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from kubesched.app import fast_exit
from kubesched.cli import main

_SCRIPT = """
import atexit, sys
atexit.register(lambda: print("teardown ran", file=sys.stderr))
sys.argv = ["kubesched", *sys.argv[1:]]
from kubesched.cli import main
main()
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, *args], capture_output=True, text=True, check=False,
                          timeout=120)


def test_simulate_output_is_flushed_and_teardown_skipped() -> None:
    proc = _run("simulate", "--nodes", "3", "--pods", "4", "-q", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["nodes"] == 3
    assert "teardown ran" not in proc.stderr


def test_other_exits_tear_down_as_usual() -> None:
    proc = _run("simulate", "--pods", "4")  # a UserError before any output: exit 2, normal exit
    assert proc.returncode == 2
    assert "--pods needs --nodes" in proc.stderr and "teardown ran" in proc.stderr
    proc = _run("version")
    assert proc.returncode == 0 and "teardown ran" in proc.stderr


def test_the_test_runner_is_never_ended() -> None:
    result = CliRunner().invoke(main, ["simulate", "--nodes", "3", "--pods", "4", "-q", "--output", "json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["summary"]["nodes"] == 3
    fast_exit.reset()
