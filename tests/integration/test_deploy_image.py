"""The image users run, built without Docker (deploy/image/build.sh): reproducible, in step with
deploy/Dockerfile, and running as a real container (Debian's runc) as user 65532 on a read-only
root filesystem."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kubesched
from kubesched.app.version import KUBERNETES_RELEASE

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "deploy/image/build.sh"
IN_CI = os.environ.get("CI") == "true"


def _require_tools() -> None:
    missing = [t for t in ("umoci", "runc", "apt-get") if shutil.which(t) is None]
    problem = f"missing {', '.join(missing)} (apt-get install umoci runc)" if missing else ""
    if os.geteuid() != 0:
        problem = "deploy/image/build.sh needs root"
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)


def _run(*argv: str | Path, timeout: float = 900, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The image built twice from one wheel and one SOURCE_DATE_EPOCH (the commit's time; the tree,
    and HEAD, may move while a long test run goes on)."""
    _require_tools()
    root = tmp_path_factory.mktemp("image")
    _run(sys.executable, "-m", "build", "--wheel", "--outdir", root / "dist", REPO)
    (wheel,) = (root / "dist").glob("kubesched-*.whl")
    epoch = _run("git", "-C", REPO, "log", "-1", "--format=%ct").strip()
    for name in ("a", "b"):
        _run("bash", BUILD, "--wheel", wheel, "--out", root / name, env={**os.environ, "SOURCE_DATE_EPOCH": epoch})
    return root / "a", root / "b"


def _blob(layout: Path, digest: str) -> Any:
    return json.loads((layout / "blobs/sha256" / digest.removeprefix("sha256:")).read_text())


def _image_config(out: Path) -> dict[str, Any]:
    index = json.loads((out / "oci/index.json").read_text())
    manifest = _blob(out / "oci", index["manifests"][0]["digest"])
    config: dict[str, Any] = _blob(out / "oci", manifest["config"]["digest"])
    return config


def test_the_same_wheel_gives_the_same_image_digest(images: tuple[Path, Path]) -> None:
    a, b = images
    assert (a / "digest").read_text() == (b / "digest").read_text()
    assert (a / "kubesched-image.tar").read_bytes() == (b / "kubesched-image.tar").read_bytes()


def _dockerfile_final_stage() -> dict[str, list[str]]:
    """Instruction → arguments of the last stage (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (REPO / "deploy/Dockerfile").read_text())
    stages = [s for s in re.split(r"^(?=FROM )", text, flags=re.M) if s.startswith("FROM ")]
    out: dict[str, list[str]] = {}
    for line in stages[-1].splitlines():
        if line.strip() and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.setdefault(op, []).append(rest.strip())
    return out


def test_dockerfile_is_the_same_recipe(images: tuple[Path, Path]) -> None:
    config = _image_config(images[0])["config"]
    final = _dockerfile_final_stage()
    # same base: Debian bookworm, with the packages of the lock build.sh extracts
    assert final["FROM"][0].startswith("debian:bookworm")
    assert "deploy/image/debian-packages.lock" in final["COPY"][0]
    assert json.loads(final["ENTRYPOINT"][0]) == config["Entrypoint"] == ["kubesched"]
    assert json.loads(final["CMD"][0]) == config["Cmd"]
    assert final["USER"] == [config["User"]] == ["65532:65532"]
    assert final["EXPOSE"] == [p.split("/")[0] for p in config["ExposedPorts"]]


def _run_container(out: Path, tmp: Path, args: list[str], program: str = "kubesched") -> str:
    """Run the image with runc: its own user, a read-only root filesystem, no network."""
    bundle = tmp / "bundle"
    _run("umoci", "unpack", "--image", f"{out / 'oci'}:{kubesched.__version__}", bundle)
    spec = json.loads((bundle / "config.json").read_text())
    spec["root"]["readonly"] = True
    spec["process"]["terminal"] = False
    spec["process"]["args"] = [program, *args]
    (bundle / "config.json").write_text(json.dumps(spec))
    name = f"kubesched-test-{os.getpid()}-{tmp.name}"
    try:
        return _run("runc", "run", "--bundle", bundle, name, timeout=120)
    finally:
        subprocess.run(["runc", "delete", "--force", name], capture_output=True)


def test_the_image_runs_as_nonroot_on_a_readonly_root(images: tuple[Path, Path], tmp_path: Path) -> None:
    config = _image_config(images[0])["config"]
    assert config["User"] == "65532:65532"
    out = _run_container(images[0], tmp_path, ["version"])
    assert out.startswith(f"kubesched {kubesched.__version__}\nKubernetes {KUBERNETES_RELEASE} ")
    result = json.loads(_run_container(images[0], tmp_path / "sim", ["simulate", "--nodes", "4", "--pods", "10",
                                                                     "-q", "--output", "json"]))
    assert result["summary"]["pods"] == 10 and result["summary"]["unschedulable"] == 0


#: Run in the image: the modules each shell imports at start whose bytecode is not in the image
#: (the image runs with PYTHONDONTWRITEBYTECODE on a read-only root: each of them would be compiled
#: again at every start, ~1.1 CPU s of `kubesched run`'s before the bytecode was shipped).
_NOT_COMPILED = """
import gc, importlib.util, json, os, sys, types
import kubesched.cli, kubesched.live.runner, kubesched.live.early, kubesched.extender.command
import kubesched.simulate.command, kubesched.plugins
from kubesched.kube.kubeconfig_loaders import kubeconfig_loaders
kubeconfig_loaders()
# Every module object alive, not only sys.modules': the kubeconfig loaders take kubernetes_asyncio's
# modules out of sys.modules again (kubesched/kube/kubeconfig_loaders.py) and keep them alive.
modules = [m for m in gc.get_objects() if isinstance(m, types.ModuleType)] + list(sys.modules.values())
files = sorted({m.__file__ for m in modules if (getattr(m, "__file__", None) or "").endswith(".py")})
print(json.dumps({"imported": len(files), "kubernetes_asyncio": sum("kubernetes_asyncio" in f for f in files),
                  "missing": [f for f in files if not os.path.exists(importlib.util.cache_from_source(f))]}))
"""


def test_the_image_ships_the_bytecode_of_what_a_start_imports(images: tuple[Path, Path], tmp_path: Path) -> None:
    result = json.loads(_run_container(images[0], tmp_path, ["-c", _NOT_COMPILED], program="python3.11"))
    assert result["imported"] > 300  # the standard library's, the dependencies' and kubesched's
    assert result["kubernetes_asyncio"] >= 5  # the kubeconfig loaders', outside sys.modules
    assert result["missing"] == []
