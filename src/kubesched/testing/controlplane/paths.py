"""Where the control plane comes from: the pin in ``hack/cluster/versions.env`` and the binaries
``hack/cluster/build.sh`` builds into ``${KUBESCHED_CACHE:-~/.cache/kubesched}/k8s-<version>/``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = [
    "BINARIES",
    "BinariesUnavailable",
    "binaries_up_to_date",
    "cluster_dir",
    "default_bin_dir",
    "ensure_binaries",
    "missing_binaries",
    "read_versions",
]

BINARIES = ("kube-apiserver", "kube-scheduler", "etcd", "kwok", "kube-controller-manager")
_MARKER = Path("hack") / "cluster" / "versions.env"


class BinariesUnavailable(RuntimeError):
    """The control plane binaries are missing and could not be built (e.g. no Go toolchain)."""


def cluster_dir() -> Path:
    """The ``hack/cluster`` directory of a kubesched source tree (pin, build.sh, KWOK stages).

    ``$KUBESCHED_CLUSTER_DIR`` when set; else found above this package (a source checkout or an
    editable install), else above the working directory."""
    env = os.environ.get("KUBESCHED_CLUSTER_DIR")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for d in (start, *start.parents):
            if (d / _MARKER).is_file():
                return d / _MARKER.parent
    raise BinariesUnavailable(
        "cannot find hack/cluster/versions.env: run from a kubesched source tree or set KUBESCHED_CLUSTER_DIR"
    )


def read_versions() -> dict[str, str]:
    """The pin from hack/cluster/versions.env: K8S_VERSION, ETCD_VERSION, KWOK_VERSION."""
    out: dict[str, str] = {}
    for line in (cluster_dir() / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip("'\"")
    return out


def default_bin_dir() -> Path:
    root = os.environ.get("KUBESCHED_CACHE") or str(Path.home() / ".cache" / "kubesched")
    return Path(root) / f"k8s-{read_versions()['K8S_VERSION']}"


def missing_binaries(bin_dir: Path | None = None) -> list[str]:
    d = bin_dir or default_bin_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def binaries_up_to_date() -> bool:
    """True when build.sh's stamp matches the current pin (no rebuild needed)."""
    return subprocess.run([str(cluster_dir() / "build.sh"), "--check"], capture_output=True).returncode == 0


def ensure_binaries(*, build: bool = True, quiet: bool = False) -> Path:
    """Return the binary directory, running hack/cluster/build.sh first (a no-op when up to date)."""
    d = default_bin_dir()
    if binaries_up_to_date():
        return d
    if not build:
        raise BinariesUnavailable(f"control plane binaries are missing or stale in {d}; run hack/cluster/build.sh")
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        raise BinariesUnavailable(
            f"control plane binaries are missing in {d} and no Go toolchain is installed to build them "
            "(install go >= 1.26, then run hack/cluster/build.sh)"
        )
    env = dict(os.environ)
    env.setdefault("GO", go)
    proc = subprocess.run(
        [str(cluster_dir() / "build.sh")],
        env=env,
        stdout=None if not quiet else subprocess.PIPE,
        stderr=subprocess.STDOUT if quiet else None,
        text=True,
    )
    if proc.returncode != 0 or missing_binaries(d):
        tail = (proc.stdout or "")[-4000:] if quiet else ""
        raise BinariesUnavailable(f"hack/cluster/build.sh failed (exit {proc.returncode})\n{tail}")
    return d
