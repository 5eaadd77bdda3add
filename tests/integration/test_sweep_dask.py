"""``kubesched sweep --engine dask`` against a real local Dask cluster: a ``dask scheduler`` and two
``dask worker`` processes (one single-threaded worker each) started by this module, as a user starts
them. The same sweep run locally and on Dask gives the same outcomes, seed for seed, pod for pod
(``placementDigest``); it still does when a worker is killed in the middle of a job; the workers
run in another directory, so they can only have read the inputs the client sent them.

No control plane: marked integration because it starts real servers (and must run under CI=true).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubesched.simulate.whatif.sweep import OUTCOME_FIELDS, REPLAY_OUTCOME_FIELDS, jobs_for
from unit.simulate.test_compare import BINPACK

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


EXAMPLE = REPO / "examples" / "plugins" / "domain_cap"
START_TIMEOUT = 120.0  # two cores shared with other test sessions: a cold `dask worker` is slow


def _dask() -> str:
    exe = Path(sys.executable).parent / "dask"
    if not exe.exists():
        pytest.fail(f"{exe} missing: the dev extra installs Dask's distributed (pip install -e '.[dev]')")
    return str(exe)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The whole process group (a `dask worker` is a nanny and its worker process)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class DaskCluster:
    dir: Path
    address: str = ""
    scheduler: subprocess.Popen[bytes] | None = None
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_worker(self, name: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 (the process writes it until it stops)
        self.workers[name] = subprocess.Popen(
            [_dask(), "worker", self.address, "--name", name, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard", "--memory-limit", "0", "--local-directory", str(self.dir / name)],
            cwd=self.dir / "workers", stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.dir.glob("*.log"))


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    from distributed import Client

    cluster = DaskCluster(tmp_path_factory.mktemp("dask"))
    (cluster.dir / "workers").mkdir()
    scheduler_file = cluster.dir / "scheduler.json"
    log = open(cluster.dir / "scheduler.log", "wb")  # noqa: SIM115
    cluster.scheduler = subprocess.Popen(
        [_dask(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)],
        cwd=cluster.dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not scheduler_file.exists():
            if cluster.scheduler.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dask scheduler did not start:\n{cluster.logs()}")
            time.sleep(0.2)
        cluster.address = json.loads(scheduler_file.read_text())["address"]
        for name in ("w1", "w2"):
            cluster.start_worker(name)
        with Client(cluster.address, timeout=30, set_as_default=False) as client:
            try:
                client.wait_for_workers(2, timeout=START_TIMEOUT)
            except TimeoutError:
                pytest.fail(f"dask workers did not join:\n{cluster.logs()}")
        yield cluster
    finally:
        for proc in [*cluster.workers.values(), cluster.scheduler]:
            _stop(proc)
        log.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's directory: a plugin package, two configurations and a cluster, named by relative
    paths (which mean nothing in the workers' directory)."""
    d = tmp_path_factory.mktemp("client")
    shutil.copytree(EXAMPLE, d / "domain_cap", ignore=shutil.ignore_patterns("__pycache__"))
    (d / "binpack.yaml").write_text(BINPACK)
    shutil.copytree(REPO / "examples" / "openb-mini", d / "openb-mini")
    for policy in ("gpushare-bestfit.yaml", "gpushare-randomfit.yaml"):
        shutil.copy(REPO / "examples" / policy, d / policy)
    return d


SWEEP = ["--plugins", "domain_cap", "--config", "domain_cap/config.yaml", "--config", "binpack.yaml",
         "--cluster", "domain_cap/cluster.yaml", "--nodes", "30", "--seeds", "1-2", "--output", "json"]


def kubesched(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return subprocess.run([str(Path(sys.executable).parent / "kubesched"), "sweep", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def outcomes(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("index", "config", "cluster", "nodes", "seed", *OUTCOME_FIELDS)
    return [{k: r[k] for k in keys} for r in results]


def sweep_dirs() -> set[Path]:
    import tempfile

    return set(Path(tempfile.gettempdir()).glob("kubesched-sweep-*"))


def test_a_sweep_on_dask_gives_the_results_of_the_same_sweep_run_here(dask_cluster: DaskCluster,
                                                                      inputs: Path) -> None:
    before = sweep_dirs()
    local = kubesched(inputs, *SWEEP, "--workers", "2")
    assert local.returncode == 0, local.stderr
    on_dask = kubesched(inputs, *SWEEP, "--engine", "dask", "--dask-scheduler", dask_cluster.address)
    assert on_dask.returncode == 0, f"{on_dask.stderr}\n{dask_cluster.logs()}"
    here, there = json.loads(local.stdout), json.loads(on_dask.stdout)
    assert (there["engine"], there["daskScheduler"], there["workers"]) == ("dask", dask_cluster.address, 2)
    assert len(there["results"]) == 2 * 2 * 2
    assert outcomes(there["results"]) == outcomes(here["results"])
    # Labels and paths as the user gave them, not the workers' copies.
    assert {r["configLabel"] for r in there["results"]} == {"config", "binpack"}
    assert {r["config"] for r in there["results"]} == {"domain_cap/config.yaml", "binpack.yaml"}
    assert {r["plugin_modules"][0] for r in there["results"]} == {"domain_cap"}
    numeric = ("runs", "scheduled", "unschedulable", "preemptions", "nodesUsed", "cpuStddev", "memoryStddev")
    assert [{k: row[k] for k in ("config", "cluster", *numeric)} for row in there["summary"]] == [
        {k: row[k] for k in ("config", "cluster", *numeric)} for row in here["summary"]]
    # The example cluster under its own configuration: DomainCap (shipped as a package directory) ran.
    capped = next(r for r in there["results"] if r["configLabel"] == "config" and r["cluster"])
    assert (capped["scheduled"], capped["unschedulable"]) == (5, 2)  # as examples/plugins/domain_cap says
    # The workers' copies are gone once the sweep is over.
    assert sweep_dirs() <= before


def test_a_replay_sweep_on_dask_gives_the_curves_of_the_same_sweep_run_here(dask_cluster: DaskCluster,
                                                                           inputs: Path) -> None:
    """Policies × seeds over a trace: the trace directory is sent to the workers like a cluster."""
    args = ["--trace", "openb:openb-mini", "--arrivals", "sequential", "--inflate", "1.3", "--gpu-nodes-only",
            "--config", "gpushare-bestfit.yaml", "--config", "gpushare-randomfit.yaml", "--seeds", "1-2",
            "--output", "json"]
    local = kubesched(inputs, *args, "--workers", "2")
    assert local.returncode == 0, local.stderr
    on_dask = kubesched(inputs, *args, "--engine", "dask", "--dask-scheduler", dask_cluster.address)
    assert on_dask.returncode == 0, f"{on_dask.stderr}\n{dask_cluster.logs()}"
    here, there = json.loads(local.stdout), json.loads(on_dask.stdout)
    keys = ("index", "configLabel", "clusterLabel", "seed", "replay", *REPLAY_OUTCOME_FIELDS)
    assert [{k: r[k] for k in keys} for r in there["results"]] == [{k: r[k] for k in keys} for r in here["results"]]
    assert {r["replay"]["trace"] for r in there["results"]} == {"openb:openb-mini"}  # as given, not the copy
    assert [row["curves"] for row in there["summary"]] == [row["curves"] for row in here["summary"]]


def test_a_failing_simulation_on_a_worker_is_one_line_naming_the_file_as_given(dask_cluster: DaskCluster,
                                                                              inputs: Path) -> None:
    (inputs / "broken.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: [1\n")
    r = kubesched(inputs, "--cluster", "broken.yaml", "--engine", "dask", "--dask-scheduler", dask_cluster.address)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Error: sweep: a simulation failed: broken.yaml: line "), r.stderr
    assert "Traceback" not in r.stderr and "kubesched-sweep-" not in r.stderr


def test_a_worker_killed_in_the_middle_of_a_job_changes_nothing(dask_cluster: DaskCluster, inputs: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs last in this module: it leaves one worker."""
    from kubesched.simulate.whatif.sweep_dask import connect

    configs = ["domain_cap/config.yaml", "binpack.yaml"]
    local = kubesched(inputs, "--plugins", "domain_cap", *(a for c in configs for a in ("--config", c)),
                      "--nodes", "40", "--seeds", "1-3", "--workers", "2", "--output", "json")
    assert local.returncode == 0, local.stderr
    monkeypatch.chdir(inputs)  # the jobs' relative paths, read by the client
    jobs = jobs_for(configs, ("domain_cap",), [], [(40, 80)], [1, 2, 3])
    killed: list[tuple[str, list[str]]] = []
    with connect(dask_cluster.address) as cluster:

        def kill_a_busy_worker(_result: dict[str, Any]) -> None:
            if killed:
                return
            names = {addr: w["name"] for addr, w in cluster.client.scheduler_info()["workers"].items()}
            busy = {names[addr]: keys for addr, keys in cluster.client.processing().items() if keys}
            if not busy:
                return
            name = sorted(busy)[0]
            killed.append((name, list(busy[name])))
            os.killpg(dask_cluster.workers[name].pid, signal.SIGKILL)

        results = cluster.run(jobs, kill_a_busy_worker)
    assert killed and killed[0][1], "no worker was running a job when the first result came"
    assert dask_cluster.workers[killed[0][0]].wait(timeout=30) == -signal.SIGKILL
    assert outcomes(results) == outcomes(json.loads(local.stdout)["results"])
