"""``kubesched new-plugin NAME``: a pip-installable plugin package to start from.

The package registers its plugin under the ``kubesched.plugins`` entry point, so once installed
(``pip install -e .``) every kubesched command finds it without ``--plugins``; it has an args
model, a README, a configuration example and tests that use ``kubesched.testing``.
"""

from __future__ import annotations

import keyword
import re
import shlex
import sys
from pathlib import Path

_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be a plugin name, or None. Plugin names are CamelCase, as upstream's."""
    if not _NAME.fullmatch(name):
        return f"{name!r}: a plugin name is CamelCase letters and digits, starting with a capital (e.g. RackCap)"
    if keyword.iskeyword(snake(name)):
        return f"{name!r}: its package name {snake(name)!r} is a Python keyword"
    return None


def files(name: str) -> dict[str, str]:
    """Relative path → content of the package for plugin ``name``."""
    pkg = snake(name)
    dist = pkg.replace("_", "-")
    return {
        "pyproject.toml": f'''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "kubesched-{dist}"
version = "0.1.0"
description = "{name}: a kubesched scheduler plugin"
requires-python = ">=3.11"
dependencies = ["kubesched"]

[project.optional-dependencies]
test = ["pytest>=8"]

# kubesched finds the plugin here once the package is installed: no --plugins needed.
[project.entry-points."kubesched.plugins"]
{pkg} = "{pkg}:PLUGINS"

[tool.setuptools.packages.find]
where = ["src"]
''',
        f"src/{pkg}/__init__.py": f'''"""{name}: a kubesched plugin (see README.md)."""

from {pkg}.plugin import {name}, {name}Args

PLUGINS = [{name}]

__all__ = ["PLUGINS", "{name}", "{name}Args"]
''',
        f"src/{pkg}/plugin.py": f'''"""{name}: rejects nodes whose label ``args.labelKey`` is in
``args.forbiddenValues`` and prefers nodes with fewer pods. Replace the logic with yours; keep the
imports to ``kubesched.framework``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kubesched.framework import (
    MAX_NODE_SCORE,
    CycleState,
    FilterPlugin,
    NodeInfo,
    PodInfo,
    ScorePlugin,
    Status,
)


class {name}Args(BaseModel):
    """pluginConfig args (camelCase in the configuration; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    label_key: str = Field("example.com/pool", alias="labelKey")
    forbidden_values: list[str] = Field(default_factory=list, alias="forbiddenValues")


class {name}(FilterPlugin, ScorePlugin):
    name: ClassVar[str] = "{name}"
    args_model: ClassVar[type[Any] | None] = {name}Args

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        args: {name}Args = self.args or {name}Args()
        if node.labels.get(args.label_key) in args.forbidden_values:
            return Status.unschedulable(f"node(s) had a forbidden {{args.label_key}}")
        return Status()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return max(0, MAX_NODE_SCORE - len(node.pods)), Status()
''',
        "tests/test_plugin.py": f'''"""Unit tests of {name} with kubesched's test builders."""

from kubesched.framework import CycleState
from kubesched.testing import new_plugin, node, pod_info, table_of

from {pkg} import {name}


def test_forbidden_nodes_are_rejected() -> None:
    table = table_of(node("a", labels={{"example.com/pool": "spot"}}), node("b"))
    plugin = new_plugin({name}, {{"forbiddenValues": ["spot"]}}, table=table)
    state, pod = CycleState(), pod_info("web")
    assert not plugin.filter(state, pod, table.node_info(table.index["a"])).is_success
    assert plugin.filter(state, pod, table.node_info(table.index["b"])).is_success


def test_emptier_nodes_score_higher() -> None:
    busy = pod_info("x").raw
    busy["spec"] = {{**busy["spec"], "nodeName": "a"}}
    table = table_of(node("a"), node("b"), pods=[busy])
    plugin = new_plugin({name}, {{}}, table=table)
    score_a, _ = plugin.score(CycleState(), pod_info("web"), table.node_info(table.index["a"]))
    score_b, _ = plugin.score(CycleState(), pod_info("web"), table.node_info(table.index["b"]))
    assert score_b > score_a
''',
        "config.yaml": f'''apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: {dist}-scheduler   # pods opt in with spec.schedulerName
    plugins:
      multiPoint:
        enabled:
          - name: {name}
    pluginConfig:
      - name: {name}
        args:
          forbiddenValues: [spot]
''',
        "README.md": f'''# {name}

A kubesched plugin. Install it next to kubesched and every command finds it (entry point
`kubesched.plugins`):

```sh
pip install -e .                      # or: pip install kubesched-{dist}
kubesched plugins                     # {name} is listed, with where it came from
kubesched simulate --config config.yaml --nodes 50 --pods 200
kubesched run --config config.yaml    # a second scheduler: pods with schedulerName {dist}-scheduler
pytest tests                          # unit tests with kubesched.testing
```
''',
    }


def write(name: str, target: Path) -> list[Path]:
    """Write the package for ``name`` under ``target`` (which must not exist yet); the paths written."""
    target.mkdir(parents=True)
    written = []
    for rel, content in files(name).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def next_steps(target: Path) -> str:
    """What to run after writing the package, with this kubesched's own interpreter: a bare ``pip``
    installs into whatever environment is first on PATH (often not kubesched's: ``.venv`` is
    rarely activated), and then no command finds the plugin. ``sys.executable`` is the venv's
    interpreter as invoked (not resolved, which would escape the venv); the ``kubesched`` script
    next to it is the one that will see the entry point."""
    python = shlex.quote(sys.executable)
    script = Path(sys.executable).with_name("kubesched")
    kubesched = shlex.quote(str(script)) if script.is_file() else "kubesched"
    return (f"next: cd {shlex.quote(str(target))} && {python} -m pip install -e '.[test]' && "
            f"{python} -m pytest tests && {kubesched} plugins")
