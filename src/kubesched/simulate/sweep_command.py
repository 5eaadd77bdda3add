"""``kubesched sweep``: configurations × clusters × seeds in parallel worker processes, one table."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from kubesched.app.options import plugins_option
from kubesched.app.startup import UserError

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
@click.option("--seeds", default="0", show_default=True, metavar="LIST",
              help="Seeds, e.g. 1,2,3 or 1-5: each combination runs once per seed.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: the number of CPUs; 1: in this process).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@plugins_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def sweep(
    config_paths: tuple[Path, ...],
    cluster_paths: tuple[Path, ...],
    node_counts: str | None,
    pods_per_node: float,
    seeds: str,
    workers: int | None,
    output: str,
    plugin_modules: tuple[str, ...],
    quiet: bool,
) -> None:
    """Run every configuration on every cluster with every seed, in parallel worker processes, and
    gather the results into one table (per run, and per configuration and cluster over the seeds).
    The results are the same whatever the number of workers."""
    from kubesched.app.render import console
    from kubesched.app.startup import load_scheduler_config
    from kubesched.simulate.sweep import aggregate, jobs_for, run_sweep

    if not cluster_paths and not node_counts:
        raise UserError("give --cluster FILE or --nodes N[,N...] (or both)")
    sizes = [(n, round(n * pods_per_node)) for n in _int_list(node_counts, "--nodes")] if node_counts else []
    configs: list[str | None] = [str(p) for p in config_paths] or [None]
    for c in configs:  # fail here, once, with the command's own error, not in every worker
        load_scheduler_config(Path(c) if c else None, plugin_modules)
    jobs = jobs_for(configs, plugin_modules, [str(p) for p in cluster_paths], sizes, _int_list(seeds, "--seeds"))
    n_workers = min(workers or os.cpu_count() or 1, len(jobs))
    err = console(stderr=True)
    bar = None
    if not (quiet or output == "json") and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn(f"sweep ({n_workers} worker(s))"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=err, transient=True)
        bar.start()
        task = bar.add_task("jobs", total=len(jobs))
    try:
        results = run_sweep(jobs, n_workers, (lambda r: bar.advance(task)) if bar is not None else None)
    except Exception as e:  # a job's error (bad cluster file, plugin crash): one line, not a worker traceback
        raise UserError(f"sweep: a simulation failed: {e}") from None
    finally:
        if bar is not None:
            bar.stop()
    doc = {"kind": "Sweep", "schemaVersion": 1, "workers": n_workers, "results": results,
           "summary": aggregate(results)}
    if output == "json":
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_sweep(console(), doc)


def print_sweep(console: Console, doc: dict[str, Any]) -> None:
    t = Table(title=f"Sweep: {len(doc['results'])} simulation(s) on {doc['workers']} worker(s), over the seeds")
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
