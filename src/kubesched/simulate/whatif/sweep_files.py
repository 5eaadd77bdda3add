"""What a sweep sends to workers that need not share this machine's files (``kubesched sweep
--engine dask``).

Every input a job names by path — its configuration, its cluster file or directory (or the scenario
file or trace it replays), each ``--plugins``
``.py`` file or package directory — is read here, once, and sent with the jobs. On the worker's
machine it is written back under a directory of its own for this sweep (``<tmp>/kubesched-sweep-<id>/
<digest>/<original name>``) and ``run_job`` runs on those copies; the result names the original paths
and an error message names them too. ``--plugins`` given as a module name is not a file: that module
must be installed where the workers run, like kubesched itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kubesched.simulate.whatif.sweep import SweepJob, run_job

__all__ = ["ShippedInput", "SweepJobError", "input_paths", "read_input", "remove_sweep_dir", "run_shipped_job",
           "shipped_input"]


class SweepJobError(Exception):
    """A simulation failed on a worker; the message names the inputs as the user gave them."""


@dataclass(frozen=True)
class ShippedInput:
    """A file or directory read on the client."""

    #: As the job names it.
    path: str
    is_dir: bool
    #: (path relative to ``path``, contents); for a file, one entry named "".
    files: tuple[tuple[str, bytes], ...]
    #: sha256 of the names and contents: where the copy goes, so changed contents never reuse a copy.
    digest: str


def shipped_input(item: ShippedInput) -> ShippedInput:
    """The task that stands for an input on the Dask cluster (its argument is the data)."""
    return item


def plugin_is_path(spec: str) -> bool:
    """``--plugins`` names a file or package directory (not an installed module): the rule
    ``app.plugin_loading.load_plugin_module`` applies."""
    return spec.endswith(".py") or Path(spec).is_dir()


def input_paths(job: SweepJob) -> list[str]:
    """The paths a job reads, in a fixed order."""
    paths = [p for p in (job.config, job.cluster, job.replay.path if job.replay else None) if p is not None]
    return paths + [m for m in job.plugin_modules if plugin_is_path(m)]


def _skipped(rel: Path) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


def read_input(path: str) -> ShippedInput:
    """Read a file, or every regular file under a directory (hidden ones and ``__pycache__`` left
    out); OSError when it cannot be read."""
    root = Path(path)
    if root.is_dir():
        files = tuple(
            (p.relative_to(root).as_posix(), p.read_bytes())
            for p in sorted(root.rglob("*"))
            if p.is_file() and not _skipped(p.relative_to(root))
        )
    else:
        files = (("", root.read_bytes()),)
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return ShippedInput(path, root.is_dir(), files, digest.hexdigest())


def sweep_dir(sweep_id: str) -> Path:
    return Path(tempfile.gettempdir()) / f"kubesched-sweep-{sweep_id}"


def materialize(item: ShippedInput, root: Path) -> Path:
    """Write ``item`` under ``root`` (once: later jobs of the sweep on this machine reuse the copy) and
    return the copy's path; it keeps the original's name, which labels and plugin module names use."""
    name = Path(item.path.rstrip("/")).name or "input"
    target = root / item.digest[:24] / name
    if target.exists():
        return target
    # Written aside and renamed into place, so a job running beside this one never reads half a copy.
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        if item.is_dir:
            for rel, data in item.files:
                dest = staging / name / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            (staging / name).mkdir(exist_ok=True)  # an empty directory stays a directory
        else:
            (staging / name).write_bytes(item.files[0][1])
        with contextlib.suppress(OSError):  # another job got there first: its copy is the same bytes
            os.rename(staging, target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _forget_stale_plugin_module(spec: str, copy: Path) -> None:
    """A worker process outlives a sweep: a plugin module it imported for an earlier sweep (another
    copy, maybe older contents) must not stand in for this sweep's, so it is dropped from
    ``sys.modules`` and imported again from ``copy``."""
    name = copy.stem if copy.suffix == ".py" else copy.name
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if module is None or (file is not None and Path(file).is_relative_to(copy.parent)):
        return
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        sys.modules.pop(key, None)


@contextlib.contextmanager
def _errors_named_as_given(copies: dict[str, Path]) -> Iterator[None]:
    try:
        yield
    except Exception as e:
        message = str(e)
        for original, copy in copies.items():
            message = message.replace(str(copy), original)
        raise SweepJobError(message) from None


def run_shipped_job(job: SweepJob, inputs: Sequence[ShippedInput], sweep_id: str) -> dict[str, Any]:
    """``run_job`` on copies of the job's inputs written on this machine; the result as if it had run
    on the original paths."""
    root = sweep_dir(sweep_id)
    copies = {item.path: materialize(item, root) for item in inputs}
    missing = [p for p in input_paths(job) if p not in copies]
    if missing:
        raise SweepJobError(f"job {job.index}: inputs not sent: {', '.join(missing)}")
    for spec in job.plugin_modules:
        if spec in copies:
            _forget_stale_plugin_module(spec, copies[spec])
    local = replace(
        job,
        config=str(copies[job.config]) if job.config is not None else None,
        cluster=str(copies[job.cluster]) if job.cluster is not None else None,
        replay=job.replay.at(str(copies[job.replay.path])) if job.replay is not None else None,
        plugin_modules=tuple(str(copies.get(m, m)) for m in job.plugin_modules),
    )
    with _errors_named_as_given(copies):
        result = run_job(local)
    # The job's own fields (its paths as given) and labels, in the places run_job put them.
    result.update({k: v for k, v in asdict(job).items() if k in result})
    result.update(configLabel=job.config_label, clusterLabel=job.cluster_label)
    return result


def remove_sweep_dir(sweep_id: str) -> None:
    """Run on every worker at the end of a sweep: the copies go."""
    shutil.rmtree(sweep_dir(sweep_id), ignore_errors=True)
