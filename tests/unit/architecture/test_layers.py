"""The package's import structure, held: lower layers never import higher ones, shells never import
each other, and no shell names a plugin (plugins declare what they need; shells read declarations).

Layers, bottom up (a module may import its own package and any lower layer):

    0  api  traces              Kubernetes API machinery: quantities, validation; public trace formats
    1  snapshot                 the node table and parsed pods
    2  framework                the plugin API and the runtime that runs a profile
    3  backend  plugins  config cache+queue; plugins; KubeSchedulerConfiguration
    4  scheduler                the scheduling cycle (scheduler_podgroup: the PodGroup cycle;
                                scheduler_composite: the CompositePodGroup cycle;
                                scheduler_preemption: preemption actuated)
    5  kube  app                Kubernetes I/O shared by shells; command setup shared by shells
    6  simulate  live  extender the three shells
       testing                  builders and the local control plane (imports no shell)
    7  cli                      assembles the commands
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kubesched.plugins.builtin import builtin_registry

SRC = Path(__file__).resolve().parents[3] / "src" / "kubesched"

LAYER = {
    "__init__": 0,
    "api": 0,
    "traces": 0,
    "snapshot": 1,
    "framework": 2,
    "backend": 3,
    "plugins": 3,
    "config": 3,
    "scheduler": 4,
    "scheduler_podgroup": 4,
    "scheduler_composite": 4,
    "scheduler_preemption": 4,
    "kube": 5,
    "app": 5,
    "simulate": 6,
    "live": 6,
    "extender": 6,
    "testing": 6,
    "cli": 7,
}
SHELLS = {"simulate", "live", "extender"}
#: Same-layer imports that are part of the design: config resolves plugin args through the
#: registry's classes only, so neither direction is allowed except these.
#: scheduler_podgroup and scheduler_composite are the scheduler's PodGroup cycle, one layer split
#: in three modules; scheduler_preemption is its preemption executor.
ALLOWED_SIDEWAYS: set[tuple[str, str]] = {
    ("scheduler", "scheduler_podgroup"), ("scheduler_podgroup", "scheduler"),
    ("scheduler_podgroup", "scheduler_composite"), ("scheduler_composite", "scheduler_podgroup"),
    ("scheduler_composite", "scheduler"),
    ("scheduler", "scheduler_preemption"), ("scheduler_preemption", "scheduler"),
}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return [(line, m) for line, m in out if m == "kubesched" or m.startswith("kubesched.")]


def test_every_top_level_package_has_a_layer() -> None:
    assert {_package(p) for p in _modules()} <= set(LAYER), "add the new package to LAYER (and the docstring)"


def test_no_import_points_up_or_sideways() -> None:
    bad = []
    for path in _modules():
        here = _package(path)
        for line, module in _imports(path):
            parts = module.split(".")
            there = parts[1] if len(parts) > 1 else "__init__"
            if there == here or (here, there) in ALLOWED_SIDEWAYS:
                continue
            if LAYER[there] >= LAYER[here]:
                bad.append(f"{path.relative_to(SRC)}:{line} ({here}, layer {LAYER[here]}) imports {module} "
                           f"(layer {LAYER[there]})")
    assert not bad, "\n".join(bad)


def test_testing_imports_no_shell_and_nothing_imports_testing() -> None:
    bad = []
    for path in _modules():
        here = _package(path)
        for line, module in _imports(path):
            there = module.split(".")[1] if "." in module else ""
            if here == "testing" and there in SHELLS | {"cli"}:
                bad.append(f"{path.relative_to(SRC)}:{line} imports {module}")
            if here != "testing" and there == "testing":
                bad.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("shell", sorted(SHELLS | {"kube", "app"}))
def test_shells_name_no_plugin(shell: str) -> None:
    """Neither an import of a plugin package nor a plugin's name in the code (docstrings and
    comments may mention one as an example)."""
    names = builtin_registry().names()
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    bad = []
    for path in sorted((SRC / shell).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kubesched.plugins"):
                if shell == "app" and node.module == "kubesched.plugins.builtin":
                    continue  # the registry of built-in plugins, which commands load
                bad.append(f"{path.relative_to(SRC)}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found = pattern.search(node.value)
                if found:
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno} names plugin {found.group(1)!r}")
    assert not bad, "\n".join(bad)


#: The simulator's floors, bottom up: inputs, the engine that runs them, and beside each other the
#: what-if questions and the reports; the click commands on top (modules directly in ``simulate/``).
SIMULATE_FLOOR = {"inputs": 0, "engine": 1, "whatif": 2, "report": 2, "demo": 3}
SIMULATE = SRC / "simulate"


def test_simulate_floors_import_one_way() -> None:
    """``simulate/`` shows its design: a floor imports only itself and floors below it, and no floor
    imports the commands (the modules directly in ``simulate/``)."""
    bad = []
    for path in sorted(SIMULATE.rglob("*.py")):
        rel = path.relative_to(SIMULATE)
        if len(rel.parts) == 1:
            continue  # the commands, which may import every floor
        here = rel.parts[0]
        for line, module in _imports(path):
            if not module.startswith("kubesched.simulate"):
                continue
            parts = module.split(".")
            there = parts[2] if len(parts) > 2 else ""
            if there == here:
                continue
            if there not in SIMULATE_FLOOR or SIMULATE_FLOOR[there] >= SIMULATE_FLOOR[here]:
                bad.append(f"simulate/{rel}:{line} ({here}) imports {module}")
    assert not bad, "\n".join(bad)


def test_simulate_floors_are_known() -> None:
    floors = {p.name for p in SIMULATE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert floors <= set(SIMULATE_FLOOR), "add the new folder to SIMULATE_FLOOR (and the docstring above it)"
