"""``kubesched compare``: several scheduler configurations on the same cluster, side by side
(terminal, ``--output json``, ``--report FILE.html``); the measures are in simulate/whatif/compare.py."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kubesched.api.quantity import format_bytes, format_milli_cpu
from kubesched.app.options import gangs_option, lenient_option, plugins_option
from kubesched.app.startup import UserError

__all__ = ["compare"]


@click.command("compare")
@click.option("--config", "config_paths", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A KubeSchedulerConfiguration to compare; give two or more (the same file twice compares a "
              "configuration with itself: no differences).")
@click.option("--cluster", "cluster_path", type=click.Path(exists=True, path_type=Path),
              help="Nodes and pods (as for `kubesched simulate --cluster`; default: the built-in demo cluster).")
@click.option("--nodes", type=click.IntRange(min=1), help="Generate a cluster with this many nodes.")
@click.option("--pods", type=click.IntRange(min=0), help="Generate this many pods (with --nodes).")
@gangs_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the generator and tie-breaking.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page with the comparison.")
@plugins_option
@lenient_option
@click.option("--max-rows", type=click.IntRange(min=1), default=25, show_default=True, help="Rows per table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def compare(
    config_paths: tuple[Path, ...],
    cluster_path: Path | None,
    nodes: int | None,
    pods: int | None,
    gang_specs: tuple[str, ...],
    seed: int,
    output: str,
    report_path: Path | None,
    plugin_modules: tuple[str, ...],
    lenient: bool,
    max_rows: int,
    quiet: bool,
) -> None:
    """Schedule the same cluster with each --config and compare: pods bound, nodes used, how evenly
    requests spread, how fragmented free capacity is left, and the pods placed differently."""
    from kubesched.app.render import console
    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.simulate.command import (
        check_output_path,
        gang_specs_of,
        load_cluster_input,
        load_gang_config,
        write_json,
        write_report,
    )
    from kubesched.simulate.engine.runner import Simulation
    from kubesched.simulate.whatif.compare import compare_doc, run_summary
    from kubesched.snapshot.pod import PodSpecError
    from kubesched.snapshot.table import NodeSpecError

    if len(config_paths) < 2:
        raise UserError("--config: give at least two configurations to compare")
    check_output_path("--report", report_path)
    gangs = gang_specs_of(gang_specs, nodes is not None)
    loaded = [load_gang_config(path, plugin_modules, bool(gangs)) for path in config_paths]
    kinds = {(k.api_version, k.kind): k for config, registry in loaded
             for k in profiles_object_kinds(registry, config.profiles, config.feature_gates)}
    cluster = load_cluster_input(cluster_path, nodes, pods, seed, list(kinds.values()), lenient, gangs)
    labels = _labels(config_paths)
    err = console(stderr=True)
    runs = []
    for i, ((config, registry), label) in enumerate(zip(loaded, labels, strict=True), start=1):
        if not (quiet or output == "json") and err.is_terminal:
            err.print(f"[dim]scheduling with {label} ({i}/{len(labels)})…[/dim]")
        try:
            result = asyncio.run(Simulation(config, registry, cluster, seed=seed).run())
        except (PodSpecError, NodeSpecError) as e:
            raise UserError(str(e)) from None
        runs.append(run_summary(label, str(config_paths[i - 1]), result))
        del result
        gc.collect()  # one simulation's cluster at a time
    doc = compare_doc(cluster.source, seed, runs)
    if output == "json":
        write_json(doc)
    else:
        print_comparison(console(), doc, max_rows)
    if report_path is not None:
        from kubesched.simulate.report.whatif import render_compare_html

        write_report(report_path, render_compare_html(doc), err)


def _labels(paths: tuple[Path, ...]) -> list[str]:
    """Each configuration's name in the tables: its file name, its path where names repeat, and a
    number where paths repeat too (a configuration compared with itself)."""
    stems = [p.stem for p in paths]
    labels = [str(p) if stems.count(p.stem) > 1 else p.stem for p in paths]
    return [f"{label} #{i}" if labels.count(label) > 1 else label for i, label in enumerate(labels, start=1)]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _util(u: dict[str, float]) -> str:
    return f"{_pct(u['mean'])} ± {_pct(u['stddev'])} ({_pct(u['min'])}–{_pct(u['max'])})"


def _free(f: dict[str, Any] | None) -> str:
    if not f:
        return "–"
    return f"{format_milli_cpu(f['cpu'])} cpu, {format_bytes(f['memory'])} on {f['node']}"


def print_comparison(console: Console, doc: dict[str, Any], max_rows: int) -> None:
    configs = doc["configs"]
    console.print(f"[bold]kubesched compare[/bold] — {doc['source']} — seed {doc['seed']}")
    t = Table(title="Side by side")
    t.add_column("")
    for c in configs:
        t.add_column(c["label"], justify="right", overflow="fold")
    rows: list[tuple[str, list[str]]] = [
        ("profiles", [", ".join(c["profiles"]) for c in configs]),
        ("[green]scheduled[/green]", [f"{c['scheduled']:,}" for c in configs]),
        ("[red]unschedulable[/red]", [f"{c['unschedulable']:,}" for c in configs]),
        ("preemptions", [f"{c['preemptions']:,}" for c in configs]),
        ("nodes used", [f"{c['nodesUsed']:,} of {c['nodes']:,}" for c in configs]),
        ("cpu requested: mean ± sd (min–max)", [_util(c["utilisation"]["cpu"]) for c in configs]),
        ("memory requested: mean ± sd (min–max)", [_util(c["utilisation"]["memory"]) for c in configs]),
        ("largest free cpu on a node", [_free(c["fragmentation"].get("largestFreeCpu")) for c in configs]),
        ("largest free memory on a node", [_free(c["fragmentation"].get("largestFreeMemory")) for c in configs]),
        ("free in total", [f"{format_milli_cpu(c['fragmentation']['freeCpu'])} cpu, "
                           f"{format_bytes(c['fragmentation']['freeMemory'])}" for c in configs]),
        ("wall time", [f"{c['wallSeconds']:.2f}s" for c in configs]),
    ]
    for name, values in rows:
        t.add_row(name, *values)
    console.print(t)
    diffs = doc["differences"]
    if not diffs:
        console.print(f"[green]Every one of the {doc['pods']:,} pods has the same outcome under each "
                      "configuration.[/green]")
        return
    d = Table(title=f"Pods placed differently: {len(diffs):,} of {doc['pods']:,}")
    d.add_column("pod")
    for c in configs:
        d.add_column(c["label"])
    for row in diffs[:max_rows]:
        d.add_row(row["pod"], *[str(o) for o in row["outcomes"]])
    console.print(d)
    if len(diffs) > max_rows:
        console.print(f"[dim]… and {len(diffs) - max_rows:,} more (see --output json)[/dim]")
