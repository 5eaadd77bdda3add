"""Every command README.md and docs/*.md show runs as written.

The shell blocks (```sh, ```bash, ```console) of the docs are read line by line (continuations
joined, ``$ `` prompts dropped). Each command is then either

- run, with bash, from a scratch directory holding a copy of the repository's ``examples/`` and
  the YAML files the same page defines (a ```yaml block whose first line is ``# NAME.yaml``), with
  ``kubesched`` and ``.venv/bin/kubesched`` being the kubesched under test; it must exit 0 without
  a traceback. ``make TARGET`` runs the Makefile's recipe with that kubesched (no install step);
- or not run, because it needs a cluster, serves until stopped, or is a check/benchmark itself:
  each such case is in NOT_RUN or CLUSTER_SUBCOMMANDS below with its reason and where it is tested
  (the lines of ``run``, ``explain``, ``dump`` and a serving ``extender`` run against the real
  control plane in tests/integration/test_docs_cluster_commands.py);
- or it is another program's command (kubectl, helm, ...): OTHER_PROGRAMS names where its use is
  tested.

A command that fits none of these fails the test, so a new doc line is never skipped silently.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import kubesched

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCKS = {"sh", "bash", "shell", "console"}

#: The test that runs, against the real control plane, every doc line skipped here with a reason
#: naming it (it selects them by that name).
CLUSTER_TEST = "tests/integration/test_docs_cluster_commands.py"
#: kubesched subcommands that talk to a live cluster: never run here.
CLUSTER_SUBCOMMANDS = {
    "run": f"the live scheduler needs a cluster and runs until stopped: {CLUSTER_TEST} runs it",
    "explain": f"asks a live cluster: {CLUSTER_TEST} runs it",
    "dump": f"reads a live cluster: {CLUSTER_TEST} runs it",
}
#: Other doc lines that cannot run here: (pattern searched in the command, reason). Each must still
#: match a line of the docs (test_every_exception_is_still_needed), so the list stays small.
NOT_RUN: list[tuple[str, str]] = [
    (r"^kubesched extender (?!.*--print-(config|rbac))",
     f"serves until stopped (with --kubeconfig: a cluster too): {CLUSTER_TEST} runs it"),
    (r"^kubesched sweep --engine dask",
     "needs a Dask cluster: tests/integration/test_sweep_dask.py starts one and runs this sweep"),
    (r"^make (test|lint|typecheck|unit|integration)\b", "the checks themselves: they run this test"),
    (r"^make cluster\b", "a control plane in the foreground until Ctrl-C (the harness every integration test uses)"),
    (r"^make bench\b", "full-size benchmarks for BENCHMARKS.md (tests/unit/test_bench_smoke.py runs them small)"),
]
#: Programs other than kubesched, make and python that the docs show, and where their use is tested.
OTHER_PROGRAMS = {
    "kubectl": "deploy steps on a cluster: tests/integration/test_deploy_*.py",
    "helm": "the chart: tests/integration/test_deploy_chart*.py",
    "ctr": "image import on a real node: tests/integration/test_deploy_node.py",
    "docker": "no Docker here: deploy/image/build.sh builds the same image (tests/integration/test_deploy_image.py)",
    "deploy/image/build.sh": "needs root and umoci: tests/integration/test_deploy_image.py",
    "pip": "installs from the registry: tests/install/test_install.py installs the wheel",
    "dask": "a Dask cluster: tests/integration/test_sweep_dask.py starts one",
}


@dataclass(frozen=True)
class DocCommand:
    path: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def doc_commands(path: Path) -> list[DocCommand]:
    """The commands of ``path``'s shell blocks, continuation lines joined."""
    commands: list[DocCommand] = []
    block: str | None = None
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = re.match(r"\s*```(\S*)", raw)
        if fence:
            block = fence.group(1) if block is None else None
            continue
        if block not in SHELL_BLOCKS:
            continue
        line = raw.strip()
        if pending is not None:
            start, text = pending
            line, pending = f"{text} {line}", None
            number = start
        if line.endswith("\\"):
            pending = (number, line[:-1].rstrip())
            continue
        line = line.removeprefix("$ ")
        if line and not line.startswith("#"):
            commands.append(DocCommand(path, number, line))
    return commands


def doc_files(path: Path) -> dict[str, str]:
    """Files a page defines: ```yaml blocks whose first line is ``# NAME.yaml...``."""
    files: dict[str, str] = {}
    for match in re.finditer(r"```ya?ml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        name = re.match(r"#\s*([\w.-]+\.ya?ml)\b", match.group(1))
        if name:
            files[name.group(1)] = match.group(1)
    return files


ALL = [c for doc in DOCS for c in doc_commands(doc)]


def command_words(command: DocCommand) -> list[str]:
    words = shlex.split(command.text, comments=True)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value prefixes
        words.pop(0)
    return words


def why_not_run(command: DocCommand) -> str | None:
    """Why this command is not run here, or None (it runs)."""
    words = command_words(command)
    program = words[0].removeprefix(".venv/bin/")
    normalized = " ".join([program, *words[1:]])
    if program == "kubesched":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        if sub in CLUSTER_SUBCOMMANDS:
            return CLUSTER_SUBCOMMANDS[sub]
    for pattern, reason in NOT_RUN:
        if re.search(pattern, normalized):
            return reason
    if program in ("kubesched", "make", "python", "python3"):
        return None
    if program in OTHER_PROGRAMS:
        return OTHER_PROGRAMS[program]
    raise AssertionError(f"{command.where}: `{command.text}`: {program!r} is not a command this test knows; make it "
                         "runnable or add it to NOT_RUN / OTHER_PROGRAMS with the reason")


RUN = [c for c in ALL if why_not_run(c) is None]


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_workspace(doc: Path, root: Path) -> Path:
    """``root`` as the scratch directory of ``doc``'s commands: a copy of examples/, the page's own
    files, and the kubesched under test as ``.venv/bin/kubesched`` (put that directory on PATH).
    The shim ``exec``s python, so a signal sent to the command reaches kubesched itself."""
    src = Path(kubesched.__file__).resolve().parents[1]
    python = shlex.quote(sys.executable)
    shim = f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{src}" exec {python} -m kubesched.cli "$@"\n'
    shutil.copytree(REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    for name, content in doc_files(doc).items():
        (root / name).write_text(content, encoding="utf-8")
    _executable(root / ".venv/bin/kubesched", shim)
    return root


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """Per page, its scratch directory (:func:`make_workspace`)."""
    return {doc: make_workspace(doc, tmp_path_factory.mktemp(doc.stem)) for doc in DOCS}


def test_the_docs_show_commands() -> None:
    assert len(ALL) > 30 and len(RUN) > 15  # the extractor still finds the docs' blocks


def test_every_exception_is_still_needed() -> None:
    for pattern, reason in NOT_RUN:
        assert any(re.search(pattern, " ".join([command_words(c)[0].removeprefix(".venv/bin/"), *command_words(c)[1:]]))
                   for c in ALL), f"NOT_RUN entry {pattern!r} ({reason}) matches no doc command any more: remove it"


@pytest.mark.parametrize("command", RUN, ids=[c.where for c in RUN])
def test_doc_command_runs_as_written(command: DocCommand, workspaces: dict[Path, Path]) -> None:
    root = workspaces[command.path]
    env = {**os.environ, "PATH": f"{root / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "120"}
    words = command_words(command)
    if words[0] == "make":
        # The Makefile's recipe as written, with the kubesched under test and no install step.
        overrides = ["STAMP=", "DEV_STAMP=", f"VENV={root / '.venv'}"]
        argv = ["make", "-s", "-f", str(REPO / "Makefile"), *words[1:], *overrides]
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    else:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command.text], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"{command.where}: `{command.text}` exited {proc.returncode}\n{output}"
    assert "Traceback" not in proc.stderr, f"{command.where}: `{command.text}`\n{output}"


def test_extractor_joins_continuations_and_reads_page_files(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n```sh\n$ kubesched a \\\n    --b c   # note\n\n# comment\nmake run\n```\n"
                    "```yaml\n# mine.yaml: a file\nkind: X\n```\n```python\nkubesched = 1\n```\n", encoding="utf-8")
    assert [(c.line, c.text) for c in doc_commands(page)] == [(3, "kubesched a --b c   # note"), (7, "make run")]
    assert doc_files(page) == {"mine.yaml": "# mine.yaml: a file\nkind: X\n"}


def test_plugin_examples_import_the_public_api_only() -> None:
    """The worked examples (examples/plugins) and docs/plugins.md import plugin names from
    ``kubesched.framework`` itself, never from the modules behind it."""
    deep = re.compile(r"^\s*from kubesched\.(framework\.(?!explain\b)\w+|snapshot|plugins\.helpers)\S* import", re.M)
    for path in [*(REPO / "examples/plugins").rglob("*.py"), REPO / "docs/plugins.md"]:
        found = deep.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(REPO)} imports kubesched.{found}: use `from kubesched.framework import`"
