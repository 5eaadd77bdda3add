"""``kubesched simulate``: the simulator shell's command."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import yaml
from rich.console import Console

from kubesched.app.options import config_option, debug_option, plugins_option
from kubesched.app.startup import UserError, load_scheduler_config


@click.command("simulate")
@config_option()
@click.option(
    "--cluster",
    "cluster_path",
    type=click.Path(exists=True, path_type=Path),
    help="Nodes and pods: `kubectl get nodes,pods -A -o yaml` output, multi-document YAML/JSON, or a directory.",
)
@click.option("--nodes", type=click.IntRange(min=1), help="Generate a cluster with this many nodes.")
@click.option("--pods", type=click.IntRange(min=0), help="Generate this many pods (with --nodes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the generator and tie-breaking.")
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: a summary; json: every placement with per-plugin verdicts and scores, on stdout.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a self-contained HTML report with charts.",
)
@click.option(
    "--out-cluster",
    "out_cluster",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the resulting cluster (nodes and pods with their nodes) as a YAML v1 List.",
)
@click.option(
    "--explain",
    "explain_pod",
    metavar="POD",
    help="Show per-node, per-plugin verdicts and scores for one pod (name or namespace/name).",
)
@click.option(
    "--strict-scheduler-name",
    is_flag=True,
    help="Leave pending pods whose schedulerName matches no profile unscheduled "
    "(default: simulate them with the first profile).",
)
@plugins_option
@click.option("--max-rows", type=click.IntRange(min=1), default=25, show_default=True, help="Rows per summary table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@debug_option
def simulate(
    config_path: Path | None,
    cluster_path: Path | None,
    nodes: int | None,
    pods: int | None,
    seed: int,
    output: str,
    report_path: Path | None,
    out_cluster: Path | None,
    explain_pod: str | None,
    strict_scheduler_name: bool,
    plugin_modules: tuple[str, ...],
    max_rows: int,
    quiet: bool,
    debug: bool,
) -> None:
    """Schedule a cluster in memory with any configuration and show where every pod lands and why.

    Without --cluster or --nodes, runs the built-in demo cluster (with the demo's two-profile
    configuration unless --config is given).
    """
    from kubesched.app.render import console, print_explanation, print_tracebacks
    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.simulate.generator import generate_cluster
    from kubesched.simulate.inputs import ClusterInputError, load_cluster
    from kubesched.simulate.report_json import result_to_json
    from kubesched.simulate.runner import Simulation
    from kubesched.simulate.summary import print_summary
    from kubesched.snapshot.pod import PodSpecError
    from kubesched.snapshot.table import NodeSpecError

    if cluster_path and (nodes or pods):
        raise UserError("give either --cluster or --nodes/--pods, not both")
    if pods is not None and nodes is None:
        raise UserError("--pods needs --nodes")
    demo = cluster_path is None and nodes is None
    if demo and config_path is None:
        config_path = demo_dir() / "config.yaml"
    config, registry = load_scheduler_config(config_path, plugin_modules)
    kinds = profiles_object_kinds(registry, config.profiles)
    try:
        if cluster_path is not None:
            cluster = load_cluster(cluster_path, kinds)
        elif nodes is not None:
            cluster = generate_cluster(nodes, pods if pods is not None else nodes * 2, seed, pod_topology=True)
        else:
            cluster = load_cluster(demo_dir() / "cluster.yaml", kinds)
    except (ClusterInputError, PodSpecError, NodeSpecError) as e:
        raise UserError(str(e)) from None
    if cluster_path is not None and not cluster.nodes and not cluster.pods:
        skipped = ", ".join(f"{n} {kind}" for kind, n in cluster.skipped.items()) or "nothing"
        raise UserError(f"--cluster {cluster_path}: no Node or Pod objects found (read: {skipped})")

    err = console(stderr=True)
    out = console()
    for warning in cluster.warnings:
        click.echo(f"warning: {warning}", err=True)
    progress_cb, stop_progress = _progress(err, quiet or output == "json")
    sim = Simulation(
        config,
        registry,
        cluster,
        seed=seed,
        explain_pod=explain_pod,
        strict_scheduler_name=strict_scheduler_name,
        progress=progress_cb,
    )
    try:
        result = asyncio.run(sim.run())
    except (PodSpecError, NodeSpecError) as e:
        raise UserError(str(e)) from None
    finally:
        stop_progress()
    if explain_pod is not None and result.explanation is None:
        raise UserError(f"--explain: no pod {explain_pod!r} in the cluster (give name or namespace/name)")
    data = result_to_json(result)
    if output == "json":
        sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_summary(out, data, max_rows)
    if debug:
        print_tracebacks(err, sim.recorder.exceptions)
    if result.explanation is not None:
        print_explanation(err if output == "json" else out, result.explanation, max_rows=max(max_rows, 50))
    if report_path is not None:
        from kubesched.simulate.report_html import render_html

        report_path.write_text(render_html(data), encoding="utf-8")
        err.print(f"report written to {report_path}")
    if out_cluster is not None:
        _write_cluster(out_cluster, result)
        err.print(f"resulting cluster written to {out_cluster}")


def demo_dir() -> Path:
    """The built-in demo: a cluster and a two-profile configuration shipped with the package."""
    return Path(__file__).parent / "demo"


def _write_cluster(path: Path, result: Any) -> None:
    items: list[dict[str, Any]] = list(result.cluster.nodes.values())
    items += [p.raw for p in result.cluster.pods.values()]
    for kind, objs in result.cluster.objects.items():
        del kind
        items += list(objs.values())
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump(doc, Dumper=dumper, sort_keys=False), encoding="utf-8")


def _progress(console: Console, disabled: bool) -> tuple[Any, Any]:
    if disabled or not console.is_terminal:
        return None, lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("scheduling"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    progress.start()
    task = progress.add_task("pods", total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return update, progress.stop
