"""``kubesched sweep``: configurations × clusters × seeds in parallel worker processes (here, or on a
Dask cluster), one table."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from kubesched.app.options import gangs_option, lenient_option, plugins_option, tie_break_option
from kubesched.app.startup import UserError
from kubesched.simulate.whatif.sweep import Replay

if TYPE_CHECKING:
    from kubesched.backend.host_selection import TieBreak

__all__ = ["sweep"]


def _int_list(text: str, option: str) -> list[int]:
    """``1,2,5`` or ``1-4`` (or both: ``1-3,7``)."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            raise UserError(f"{option}: {part!r} is not a number or a range like 1-4")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo:
            raise UserError(f"{option}: empty range {part!r}")
        out.extend(range(lo, hi + 1))
    if not out:
        raise UserError(f"{option}: give at least one number")
    return out


@click.command("sweep")
@click.option("--config", "config_paths", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A KubeSchedulerConfiguration; repeatable (default: the default profile).")
@click.option("--cluster", "cluster_paths", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="A cluster to simulate (as for `kubesched simulate --cluster`); repeatable.")
@click.option("--nodes", "node_counts", metavar="N[,N...]",
              help="Generated clusters of these sizes (e.g. 500,5000), with --pods-per-node pods each.")
@click.option("--pods-per-node", type=click.FloatRange(min=0), default=2.0, show_default=True)
@gangs_option
@click.option("--scenario", "scenario_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Replay this workload over time in every run (as `kubesched simulate --scenario`) instead of "
              "a cluster.")
@click.option("--trace", metavar="openb:PATH",
              help="Replay this trace in every run (as `kubesched simulate --trace`): openb:DIR.")
@click.option("--arrivals", type=click.Choice(["trace", "sequential"]), default="trace", show_default=True,
              help="With --scenario/--trace, as `kubesched simulate --arrivals` (sequential: the ATC '23 "
              "experiments' order, drawn with each run's seed).")
@click.option("--inflate", "inflate_to", type=click.FloatRange(min=0, min_open=True), metavar="FACTOR",
              help="With --scenario/--trace: clone random pods (each run's seed) until the arrived GPU demand "
              "reaches FACTOR × the GPU capacity.")
@click.option("--gpu-nodes-only", is_flag=True, help="With --trace: only the nodes with GPUs.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="With --scenario/--trace: write an HTML page with the GPU allocation and fragmentation "
              "curves against the arrived GPU demand, per configuration over the seeds.")
@click.option("--seeds", default="0", show_default=True, metavar="LIST",
              help="Seeds, e.g. 1,2,3 or 1-5: each combination runs once per seed.")
@tie_break_option
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes with --engine local (default: the number of CPUs; 1: in this process).")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where the simulations run: worker processes on this machine, or a Dask cluster "
              "(needs kubesched[dask]; see --dask-scheduler).")
@click.option("--dask-scheduler", "dask_address", metavar="tcp://HOST:PORT", envvar="DASK_SCHEDULER_ADDRESS",
              help="The Dask scheduler to send the simulations to, with --engine dask "
              "(default: $DASK_SCHEDULER_ADDRESS).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@plugins_option
@lenient_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def sweep(
    config_paths: tuple[Path, ...],
    cluster_paths: tuple[Path, ...],
    node_counts: str | None,
    pods_per_node: float,
    gang_specs: tuple[str, ...],
    scenario_path: Path | None,
    trace: str | None,
    arrivals: str,
    inflate_to: float | None,
    gpu_nodes_only: bool,
    report_path: Path | None,
    seeds: str,
    tie_break: TieBreak,
    workers: int | None,
    engine: str,
    dask_address: str | None,
    output: str,
    plugin_modules: tuple[str, ...],
    lenient: bool,
    quiet: bool,
) -> None:
    """Run every configuration on every cluster with every seed, in parallel worker processes (on this
    machine, or on a Dask cluster with --engine dask), and gather the results into one table (per run,
    and per configuration and cluster over the seeds). The results are the same whatever the number
    of workers and wherever they run.

    With --trace or --scenario, every configuration (a policy) replays that workload once per seed
    instead: the table gives the GPU allocation against the arrived GPU demand and the
    fragmentation, mean and spread over the seeds (--report: the curves as an HTML figure)."""
    from kubesched.app.render import console
    from kubesched.simulate.command import check_output_path, gang_specs_of, load_gang_config, write_json, write_report
    from kubesched.simulate.whatif.sweep import aggregate, jobs_for, run_sweep

    replay = _replay(scenario_path, trace, arrivals, inflate_to, gpu_nodes_only, bool(cluster_paths or node_counts))
    if replay is None and not cluster_paths and not node_counts:
        raise UserError("give --cluster FILE or --nodes N[,N...] (or both), or a workload to replay: --trace "
                        "openb:DIR or --scenario FILE")
    if replay is None and report_path is not None:
        raise UserError("--report draws the curves of a replay: give --trace or --scenario")
    check_output_path("--report", report_path)
    ctx = click.get_current_context()
    if engine == "dask":
        if not dask_address:
            raise UserError("--engine dask: give --dask-scheduler tcp://HOST:PORT (or set DASK_SCHEDULER_ADDRESS)")
        if workers is not None:
            raise UserError("--workers is for --engine local; a Dask cluster's size is set where its workers start "
                            "(dask worker --nworkers N)")
    elif ctx.get_parameter_source("dask_address") is click.core.ParameterSource.COMMANDLINE:
        raise UserError("--dask-scheduler needs --engine dask")
    sizes = [(n, round(n * pods_per_node)) for n in _int_list(node_counts, "--nodes")] if node_counts else []
    configs: list[str | None] = [str(p) for p in config_paths] or [None]
    gang_specs_of(gang_specs, bool(node_counts))
    for c in configs:  # fail here, once, with the command's own error, not in every worker
        load_gang_config(Path(c) if c else None, plugin_modules, bool(gang_specs))
    jobs = jobs_for(configs, plugin_modules, [str(p) for p in cluster_paths], sizes, _int_list(seeds, "--seeds"),
                    lenient, replay, tie_break, gang_specs)
    show_progress = not (quiet or output == "json")
    doc: dict[str, Any] = {"kind": "Sweep", "schemaVersion": 1, "engine": engine}
    if engine == "dask":
        from kubesched.simulate.whatif.sweep_dask import connect

        assert dask_address is not None
        with connect(dask_address) as cluster:
            n_workers = cluster.workers
            with _progress(f"sweep on Dask {dask_address} ({n_workers} worker(s))", len(jobs), show_progress) as done:
                results = _failing_clearly(lambda: cluster.run(jobs, done))
        doc["daskScheduler"] = dask_address
    else:
        n_workers = min(workers or os.cpu_count() or 1, len(jobs))
        with _progress(f"sweep ({n_workers} worker(s))", len(jobs), show_progress) as done:
            results = _failing_clearly(lambda: run_sweep(jobs, n_workers, done))
    doc |= {"workers": n_workers, "results": results, "summary": aggregate(results)}
    if replay is not None:
        doc["replay"] = asdict(replay)
    if output == "json":
        write_json(doc)
    elif replay is not None:
        from kubesched.simulate.report.sweep import print_replay_sweep

        print_replay_sweep(console(), doc)
    else:
        print_sweep(console(), doc)
    if report_path is not None:
        from kubesched.simulate.report.sweep import render_sweep_html

        write_report(report_path, render_sweep_html(doc), console(stderr=True))


def _replay(scenario: Path | None, trace: str | None, arrivals: str, inflate_to: float | None,
            gpu_nodes_only: bool, clusters_given: bool) -> Replay | None:
    """The workload every run replays (None: none asked for); the options' errors, once, here."""
    from kubesched.simulate.inputs.scenario import ScenarioError, load_replay

    ctx = click.get_current_context()
    replay_only = [f"--{name.replace('_', '-')}" for name in ("arrivals", "inflate_to", "gpu_nodes_only")
                   if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if scenario is None and trace is None:
        if replay_only:
            raise UserError(f"{replay_only[0].replace('-to', '')} applies to a replay: give --trace or --scenario")
        return None
    if clusters_given:
        raise UserError("--scenario/--trace replay a workload of their own: not with --cluster or --nodes")
    try:  # fail here, once, with the command's own error, not in every worker
        load_replay(scenario, trace, arrivals, inflate_to, gpu_nodes_only, 0)
    except ScenarioError as e:
        raise UserError(str(e)) from None
    return Replay(str(scenario) if scenario is not None else None, trace, arrivals, inflate_to, gpu_nodes_only)


@contextmanager
def _progress(label: str, total: int, enabled: bool) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """A progress bar on stderr (when it is a terminal) advanced by the callback this yields."""
    from kubesched.app.render import console

    err = console(stderr=True)
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task("jobs", total=total)
        yield lambda _result: bar.advance(task)


def _failing_clearly(run: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    try:
        return run()
    except UserError:
        raise
    except Exception as e:  # a job's error (bad cluster file, plugin crash): one line, not a worker traceback
        raise UserError(f"sweep: a simulation failed: {e}") from None


def print_sweep(console: Console, doc: dict[str, Any]) -> None:
    where = f" of Dask {doc['daskScheduler']}" if doc.get("engine") == "dask" else ""
    t = Table(title=f"Sweep: {len(doc['results'])} simulation(s) on {doc['workers']} worker(s){where}, over the seeds")
    for col in ("configuration", "cluster", "runs", "scheduled", "unschedulable", "preemptions", "nodes used",
                "cpu spread (sd)", "pods/s", "peak RSS MiB"):
        t.add_column(col, justify="left" if col in ("configuration", "cluster") else "right")

    def span(v: dict[str, float], fmt: str = "{:,.0f}") -> str:
        lo, hi = fmt.format(v["min"]), fmt.format(v["max"])
        return lo if lo == hi else f"{fmt.format(v['mean'])} ({lo}–{hi})"

    for row in doc["summary"]:
        t.add_row(row["config"], row["cluster"], str(row["runs"]), span(row["scheduled"]), span(row["unschedulable"]),
                  span(row["preemptions"]), span(row["nodesUsed"]), span(row["cpuStddev"], "{:.3f}"),
                  span(row["podsPerSecond"]), span(row["peakRssMiB"]))
    console.print(t)
