"""Sweeps: configurations × clusters × seeds, each one simulation, run in parallel worker processes
on this machine (here) or on a Dask cluster (``sweep_dask.py``) and gathered into one table
(``kubesched sweep``).

A job names everything it needs (configuration path, plugin modules, cluster file or generated size,
seed), and ``run_job`` — the one way a job runs, whatever runs it — rebuilds it from scratch and returns
a small summary. Every random choice is seeded by the job's seed (the generated cluster, the
scheduler's tie-breaks), so the results do not depend on how many workers ran them, which worker ran
which, in which order, or whether one was retried after a worker died.
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.backend.host_selection import TieBreak

__all__ = ["Replay", "SweepJob", "aggregate", "jobs_for", "run_job", "run_sweep"]


@dataclass(frozen=True)
class SweepJob:
    index: int
    config: str | None
    plugin_modules: tuple[str, ...]
    cluster: str | None
    nodes: int | None
    pods: int | None
    seed: int
    #: --lenient: skip the cluster file's invalid objects.
    lenient: bool = False
    #: A workload replayed over time instead of a cluster: ``--scenario FILE`` or ``--trace
    #: openb:PATH``, with ``--arrivals``, ``--inflate`` and ``--gpu-nodes-only`` as ``kubesched
    #: simulate`` takes them (inputs/scenario.py ``load_replay``; the job's seed draws the order
    #: and the clones).
    replay: Replay | None = None
    #: --tie-break: how each run picks among the nodes with the same highest score.
    tie_break: TieBreak = "random"
    #: --gangs: Workload API gangs generated with the cluster (the specs' text; a generated cluster only).
    gangs: tuple[str, ...] = ()

    @property
    def config_label(self) -> str:
        return Path(self.config).stem if self.config else "default"

    @property
    def cluster_label(self) -> str:
        if self.replay is not None:
            return self.replay.label
        if self.cluster:
            return Path(self.cluster).name
        return f"{self.nodes} nodes / {self.pods} pods" + "".join(f" + gangs {g}" for g in self.gangs)


@dataclass(frozen=True)
class Replay:
    """What a replay sweep replays (the same for every job of the sweep)."""

    scenario: str | None = None
    trace: str | None = None
    arrivals: str = "trace"
    inflate: float | None = None
    gpu_nodes_only: bool = False

    @property
    def path(self) -> str:
        """The file or directory read: the scenario, or the trace's PATH."""
        if self.scenario is not None:
            return self.scenario
        assert self.trace is not None
        return self.trace.partition(":")[2]

    @property
    def label(self) -> str:
        name = Path(self.path.rstrip("/")).name
        where = f"{self.trace.partition(':')[0]}:{name}" if self.trace is not None else name
        return where + (f" ×{self.inflate:g}" if self.inflate is not None else "")

    def at(self, path: str) -> Replay:
        """The same replay reading ``path`` (a worker's copy of the input)."""
        if self.scenario is not None:
            return replace(self, scenario=path)
        assert self.trace is not None
        return replace(self, trace=f"{self.trace.partition(':')[0]}:{path}")


def jobs_for(configs: Sequence[str | None], plugin_modules: tuple[str, ...], clusters: Sequence[str],
             sizes: Sequence[tuple[int, int]], seeds: Sequence[int], lenient: bool = False,
             replay: Replay | None = None, tie_break: TieBreak = "random", gangs: Sequence[str] = ()
             ) -> list[SweepJob]:
    """Every combination, configurations outermost, seeds innermost (with ``replay``: configurations
    × seeds, each replaying it); ``gangs`` go with every generated cluster."""
    targets: list[tuple[str | None, int | None, int | None]] = [(c, None, None) for c in clusters]
    targets += [(None, n, p) for n, p in sizes]
    if replay is not None:
        targets = [(None, None, None)]
    out: list[SweepJob] = []
    for config in configs:
        for cluster, nodes, pods in targets:
            for seed in seeds:
                out.append(SweepJob(len(out), config, plugin_modules, cluster, nodes, pods, seed, lenient, replay,
                                    tie_break, tuple(gangs) if nodes is not None else ()))
    return out


def run_job(job: SweepJob) -> dict[str, Any]:
    """One simulation, start to finish, in whatever process runs it; a compact summary back."""
    import resource

    import orjson

    from kubesched.app.startup import load_scheduler_config
    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.simulate.engine.runner import Simulation
    from kubesched.simulate.engine.timeline import demand_curves
    from kubesched.simulate.inputs.dump import load_cluster
    from kubesched.simulate.inputs.generator import generate_cluster
    from kubesched.simulate.inputs.scenario import load_replay
    from kubesched.simulate.inputs.workload_gangs import gang_config_source, parse_gang_spec
    from kubesched.simulate.whatif.compare import run_summary

    # The command checked the configurations and the gang specs (sweep_command.py) once.
    source = gang_config_source(Path(job.config) if job.config else None, bool(job.gangs))
    config, registry = load_scheduler_config(source, job.plugin_modules)
    cluster: Any
    if job.replay is not None:
        r = job.replay
        cluster = load_replay(r.scenario, r.trace, r.arrivals, r.inflate, r.gpu_nodes_only, job.seed)
    elif job.cluster is not None:
        kinds = profiles_object_kinds(registry, config.profiles, config.feature_gates)
        cluster = load_cluster(job.cluster, kinds, job.lenient)
    else:
        assert job.nodes is not None
        cluster = generate_cluster(job.nodes, job.pods if job.pods is not None else 2 * job.nodes, job.seed,
                                   pod_topology=True, gangs=[parse_gang_spec(g) for g in job.gangs])
    result = asyncio.run(Simulation(config, registry, cluster, seed=job.seed, tie_break=job.tie_break).run())
    summary = run_summary(job.config_label, job.config or "", result)
    simulated = summary["scheduled"] + summary["unschedulable"] + summary["errors"]
    replayed: dict[str, Any] = {}
    if result.timeline is not None:
        final = {c: v[-1] for c, v in result.timeline.samples.columns.items() if v}
        idle = final.get("idleGpuMilli", 0)
        replayed = {
            "arrived": result.timeline.arrived,
            "gpuAllocation": final.get("gpuAllocation", 0.0),
            "fragmentedGpuMilli": final.get("fragmentedGpuMilli", 0.0),
            "idleGpuMilli": idle,
            "fragmentationRatio": round(final.get("fragmentedGpuMilli", 0.0) / idle, 6) if idle else 0.0,
            # JSON keys are strings: the curves are sent and written as JSON.
            "curves": {name: {str(p): v for p, v in curve.items()}
                       for name, curve in demand_curves(result.timeline.samples).items()},
        }
    return {
        **asdict(job),
        "configLabel": job.config_label,
        "clusterLabel": job.cluster_label,
        "scheduled": summary["scheduled"],
        "unschedulable": summary["unschedulable"],
        "preemptions": summary["preemptions"],
        "nodesUsed": summary["nodesUsed"],
        "cpuStddev": summary["utilisation"]["cpu"]["stddev"],
        "memoryStddev": summary["utilisation"]["memory"]["stddev"],
        # Every pod's outcome (node, or why not) in one value: equal digests, equal placements.
        "placementDigest": hashlib.sha256(orjson.dumps(summary["outcomes"], option=orjson.OPT_SORT_KEYS)).hexdigest(),
        "wallSeconds": summary["wallSeconds"],
        "podsPerSecond": round(simulated / summary["wallSeconds"], 1) if summary["wallSeconds"] else 0.0,
        # Peak RSS of the process that ran it (a worker may run several jobs: an upper bound).
        "peakRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        **replayed,
    }


def run_sweep(jobs: Sequence[SweepJob], workers: int, done: Callable[[dict[str, Any]], None] | None = None
              ) -> list[dict[str, Any]]:
    """Run every job (``workers`` > 1: in that many worker processes) and return the results in job
    order, calling ``done`` as each finishes."""
    results: list[dict[str, Any]] = []
    if workers <= 1:
        for job in jobs:
            r = run_job(job)
            results.append(r)
            if done is not None:
                done(r)
    else:
        # spawn: each worker starts clean (no copy of this process's loaded modules or threads).
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            for future in as_completed([pool.submit(run_job, job) for job in jobs]):
                r = future.result()
                results.append(r)
                if done is not None:
                    done(r)
    return sorted(results, key=lambda r: r["index"])


#: Fields that depend on the seed and the scheduling, not on the machine (what must not change with
#: the number of workers or the engine).
NUMERIC_OUTCOMES = ("scheduled", "unschedulable", "preemptions", "nodesUsed", "cpuStddev", "memoryStddev")
#: A replay's, besides: at the end, and the curves against the arrived GPU demand.
REPLAY_OUTCOMES = ("arrived", "gpuAllocation", "fragmentedGpuMilli", "fragmentationRatio")
OUTCOME_FIELDS = (*NUMERIC_OUTCOMES, "placementDigest")
REPLAY_OUTCOME_FIELDS = (*OUTCOME_FIELDS, *REPLAY_OUTCOMES, "curves")


def _spread(values: Sequence[float]) -> dict[str, float]:
    """Over the seeds: mean, sample standard deviation (0 for one run), min and max."""
    return {"mean": round(statistics.fmean(values), 6),
            "sd": round(statistics.stdev(values), 6) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def aggregate(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (configuration, cluster): the seeds' mean, min and max of each outcome and of pods/s; for
    a replay, also of the GPU figures at the end and of each curve at each demand percent (over
    the runs that reached it: ``runs`` there)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["configLabel"], r["clusterLabel"]), []).append(r)
    out = []
    for (config, cluster), rs in groups.items():
        row: dict[str, Any] = {"config": config, "cluster": cluster, "runs": len(rs)}
        replayed = all("curves" in r for r in rs)
        keys = (*NUMERIC_OUTCOMES, "podsPerSecond", "wallSeconds", "peakRssMiB")
        for key in (*keys, *REPLAY_OUTCOMES) if replayed else keys:
            values = [float(r[key]) for r in rs]
            row[key] = {k: v for k, v in _spread(values).items() if k != "sd" or key in REPLAY_OUTCOMES}
        if replayed:
            curves: dict[str, dict[str, dict[str, float]]] = {}
            for name in rs[0]["curves"]:
                percents = sorted({int(p) for r in rs for p in r["curves"][name]})
                curves[name] = {}
                for p in percents:
                    values = [float(r["curves"][name][str(p)]) for r in rs if str(p) in r["curves"][name]]
                    curves[name][str(p)] = {**_spread(values), "runs": len(values)}
            row["curves"] = curves
        out.append(row)
    return out
