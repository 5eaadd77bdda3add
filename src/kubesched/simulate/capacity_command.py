"""``kubesched capacity``: how many more replicas of a workload fit, and the fewest nodes of a
template to add so that everything fits — each answer from full simulations (simulate/whatif/capacity.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kubesched.app.options import config_option, gangs_option, lenient_option, plugins_option
from kubesched.app.startup import UserError

if TYPE_CHECKING:
    from kubesched.simulate.whatif.capacity import FitAnswer, NodeTemplate, ScaleAnswer

__all__ = ["capacity"]


@click.command("capacity")
@config_option()
@click.option("--cluster", "cluster_path", type=click.Path(exists=True, path_type=Path),
              help="Nodes and pods (as for `kubesched simulate --cluster`).")
@click.option("--nodes", type=click.IntRange(min=1), help="Generate a cluster with this many nodes.")
@click.option("--pods", type=click.IntRange(min=0), help="Generate this many pods (with --nodes).")
@gangs_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the generator and tie-breaking.")
@click.option("--workload", "workload_path", type=click.Path(exists=True, path_type=Path),
              help="Pods, Deployments, ReplicaSets, StatefulSets, Jobs, CronJobs (YAML/JSON file or directory): "
              "how many more replicas of each fit; with --node-template, placed at their replica counts.")
@click.option("--node-template", "node_templates", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="A Node (YAML/JSON) to add copies of: the fewest such nodes so that every pending pod and "
              f"workload replica fits. Repeatable; a node's cost is its {'kubesched.io/cost'!r} annotation "
              "(default 1) and the cheapest answer is named.")
@click.option("--max-nodes", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Give up on a node template beyond this many added nodes.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page with the answers (charts of where replicas go and why the next "
              "one does not fit; every step of the node search).")
@plugins_option
@lenient_option
@click.option("--max-rows", type=click.IntRange(min=1), default=15, show_default=True, help="Rows per table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def capacity(
    config_path: Path | None,
    cluster_path: Path | None,
    nodes: int | None,
    pods: int | None,
    gang_specs: tuple[str, ...],
    seed: int,
    workload_path: Path | None,
    node_templates: tuple[Path, ...],
    max_nodes: int,
    output: str,
    report_path: Path | None,
    plugin_modules: tuple[str, ...],
    lenient: bool,
    max_rows: int,
    quiet: bool,
) -> None:
    """Capacity what-ifs on a cluster, with any configuration (custom plugins included).

    With --workload: how many more replicas of each workload fit (one at a time, on the cluster as
    it is once its own pending pods are placed), where they go, and what stops the next one. With
    --node-template: the fewest such nodes to add so that every pending pod and every workload
    replica fits.
    """
    from kubesched.app.render import console
    from kubesched.simulate.command import check_output_path, gang_specs_of, load_input, write_json, write_report
    from kubesched.simulate.inputs.workload import PodTemplate, WorkloadError, load_workload
    from kubesched.simulate.whatif.capacity import fewest_nodes, how_many_fit

    if workload_path is None and not node_templates:
        raise UserError("give --workload (how many more replicas fit), --node-template (how many nodes to add), "
                        "or both")
    check_output_path("--report", report_path)
    config, registry, cluster = load_input(config_path, plugin_modules, cluster_path, nodes, pods, seed,
                                           lenient=lenient, gangs=gang_specs_of(gang_specs, nodes is not None))
    templates: list[PodTemplate] = []
    try:
        if workload_path is not None:
            templates = load_workload(workload_path)
        node_tpls = [t for path in node_templates for t in load_node_templates(path)]
    except WorkloadError as e:
        raise UserError(str(e)) from None
    err = console(stderr=True)
    doc: dict[str, Any] = {
        "kind": "Capacity",
        "schemaVersion": 2,
        "source": cluster.source,
        "profiles": [p.scheduler_name for p in config.profiles],
        "clusterNodes": len(cluster.nodes),
        "replicasThatFit": [],
        "scaleUp": [],
    }
    with _progress(err, quiet or output == "json") as step:
        try:
            for t in templates:
                step(f"how many more of {t.key} fit")
                doc["replicasThatFit"].append(_fit_json(asyncio.run(how_many_fit(config, registry, cluster, t, seed))))
            for nt in node_tpls:
                answer = asyncio.run(fewest_nodes(config, registry, cluster, templates, nt, seed, max_nodes, step))
                doc["scaleUp"].append(_scale_json(answer))
        except WorkloadError as e:
            raise UserError(str(e)) from None
    fitting = [s for s in doc["scaleUp"] if s["nodes"]]  # None: no answer; 0: nothing to add
    doc["cheapest"] = min(fitting, key=lambda s: (s["totalCost"], s["nodes"]))["template"] if fitting else None
    if output == "json":
        write_json(doc)
    else:
        print_capacity(console(), doc, max_rows)
    if report_path is not None:
        from kubesched.simulate.report.capacity import render_capacity_html

        write_report(report_path, render_capacity_html(doc), err)


def load_node_templates(path: Path) -> list[NodeTemplate]:
    """The Node objects of ``path`` as node templates (checked as a cluster's nodes are)."""
    from kubesched.simulate.inputs.dump import ClusterInputError, load_cluster
    from kubesched.simulate.inputs.workload import WorkloadError
    from kubesched.simulate.whatif.capacity import COST_ANNOTATION, NodeTemplate
    from kubesched.snapshot.table import NodeSpecError

    try:
        loaded = load_cluster(path)
    except (ClusterInputError, NodeSpecError) as e:
        raise WorkloadError(f"--node-template {e}") from None
    if not loaded.nodes:
        raise WorkloadError(f"--node-template {path}: no Node object found")
    out = []
    for raw in loaded.nodes:
        name = raw["metadata"]["name"]
        cost_text = ((raw["metadata"].get("annotations") or {}).get(COST_ANNOTATION)) or "1"
        try:
            cost = float(cost_text)
        except ValueError:
            cost = -1.0
        if not cost >= 0:
            raise WorkloadError(f"--node-template {path} (Node {name}): annotation {COST_ANNOTATION} must be a "
                                f"non-negative number, got {cost_text!r}")
        _check_sized(path, name, raw)
        out.append(NodeTemplate(name, raw, cost, str(path)))
    return out


#: What a template node must state so that its copies can be sized: the scheduler reads a node's
#: room from status.allocatable (upstream NodeInfo.Allocatable; defaulted from status.capacity, as
#: SetDefaults_NodeStatus does and as the node table reads it), and a node without pods would take
#: no pod at all ("Too many pods"). A Node with neither is refused by the dump loader already.
SIZED_BY = ("cpu", "memory", "pods")


def _check_sized(path: Path, name: str, raw: dict[str, Any]) -> None:
    from kubesched.simulate.inputs.workload import WorkloadError

    status = raw.get("status")
    room = (status.get("allocatable") or status.get("capacity")) if isinstance(status, dict) else None
    where = f"--node-template {path} (Node {name})"
    if not isinstance(room, dict) or not room:
        raise WorkloadError(f"{where}: status.allocatable is missing: a template node is sized by its "
                            f"status.allocatable {', '.join(SIZED_BY)}")
    missing = [r for r in SIZED_BY if r not in room]
    if missing:
        field_name = "allocatable" if status.get("allocatable") else "capacity"  # type: ignore[union-attr]
        raise WorkloadError(f"{where}: status.{field_name}.{missing[0]} is missing: a template node is sized by its "
                            f"status.allocatable {', '.join(SIZED_BY)}")


def _fit_json(a: FitAnswer) -> dict[str, Any]:
    return {
        "workload": a.template.key,
        "fits": a.fits,
        "nodesUsed": len(a.per_node),
        "perNode": a.per_node,
        "limit": {"message": a.message, "reasons": a.reasons},
        "slotsExhausted": a.slots_exhausted,
        "clusterUnplaced": a.cluster_unplaced,
        "victims": [v.to_json() for v in a.victims],
        "seconds": round(a.seconds, 3),
    }


def _scale_json(a: ScaleAnswer) -> dict[str, Any]:
    return {
        "template": a.template.name,
        "costPerNode": a.template.cost,
        "nodes": a.nodes,
        "totalCost": a.cost,
        "lowerBound": a.lower_bound,
        "simulations": [
            {"nodes": p.nodes, "unplaced": p.unplaced, "preemptions": p.preemptions, "victims": p.victims,
             "fits": p.fits, "seconds": round(p.seconds, 3)}
            for p in a.probes
        ],
        "cannotHelp": a.hopeless,
        "saturatedAt": a.saturated_at,
        "unplaced": a.unplaced,
        "victims": [v.to_json() for v in a.victims],
        "addedNodeUsage": a.added_usage,
    }


def print_capacity(console: Console, doc: dict[str, Any], max_rows: int) -> None:
    console.print(f"[bold]kubesched capacity[/bold] — {doc['source']} — profiles: {', '.join(doc['profiles'])}")
    if doc["replicasThatFit"]:
        t = Table(title="How many more replicas fit (each workload on its own)")
        for col in ("workload", "fit", "nodes used", "most on one node", "what stops the next one"):
            t.add_column(col, justify="right" if col in ("fit", "nodes used") else "left",
                         overflow="fold" if col.startswith("what") else "ellipsis")
        for f in doc["replicasThatFit"]:
            top = ", ".join(f"{n} ×{c}" for n, c in list(f["perNode"].items())[:3])
            stop = f["limit"]["message"] or "every free pod slot is used"
            t.add_row(f["workload"], f"{f['fits']:,}", f"{f['nodesUsed']:,}", top, stop)
        console.print(t)
        first = doc["replicasThatFit"][0]  # the cluster's own pods are placed alike before each workload
        if first["clusterUnplaced"]:
            console.print(f"[dim]{first['clusterUnplaced']} pending pod(s) of the cluster itself did not fit "
                          "(placed first, before the replicas)[/dim]")
        _print_victims(console, "the cluster's pending pods", first["victims"], max_rows)
    if doc["scaleUp"]:
        t = Table(title="Fewest nodes to add so that every pending pod and workload replica fits")
        for col in ("node template", "nodes", "cost", "simulations", "note"):
            t.add_column(col, justify="right" if col in ("nodes", "cost", "simulations") else "left",
                         overflow="fold")
        for s in doc["scaleUp"]:
            t.add_row(s["template"], "–" if s["nodes"] is None else f"{s['nodes']:,}",
                      "–" if s["totalCost"] is None else f"{s['totalCost']:,.2f}".rstrip("0").rstrip("."),
                      str(len(s["simulations"])), scale_note(s, doc["cheapest"], len(doc["scaleUp"])))
        console.print(t)
        if all(s["nodes"] == 0 and not s["cannotHelp"] for s in doc["scaleUp"]):
            console.print("[green]Every pending pod and workload replica fits without adding a node.[/green]")
        for s in doc["scaleUp"]:
            for title, pods in (("no node of this template can take, even empty (left out)", s["cannotHelp"]),
                                ("still not running at the largest count tried (more nodes may help)",
                                 s["unplaced"])):
                if pods:
                    console.print(f"[yellow]{s['template']}: {len(pods)} pod(s) {title}:[/yellow]")
                    for pod, why in list(pods.items())[:max_rows]:
                        console.print(f"  {escape(pod)}: {escape(why)}")
            _print_victims(console, f"{s['template']} (+{s['nodes'] if s['nodes'] is not None else '?'})",
                           s["victims"], max_rows)


def scale_note(s: dict[str, Any], cheapest: str | None, templates: int) -> str:
    """The answer's note, in the terminal's markup (the HTML report says the same in its cards)."""
    tried = max(p["nodes"] for p in s["simulations"])
    if s["nodes"] is None:
        return f"[red]not within {tried:,} nodes[/red]"
    parts = ["[green]cheapest[/green]"] if s["template"] == cheapest and templates > 1 else []
    if s["cannotHelp"]:
        parts.append(f"{len(s['cannotHelp'])} pod(s) no such node can take")
    if s["saturatedAt"] is not None:
        parts.append(f"from +{s['saturatedAt']:,} more such nodes change nothing")
    rescheduled = sum(1 for v in s["victims"] if v["fate"] == "rescheduled")
    if rescheduled:
        parts.append(f"{rescheduled} preemption victim(s) rescheduled")
    return "; ".join(parts)


def _print_victims(console: Console, whose: str, victims: list[dict[str, str]], max_rows: int) -> None:
    from kubesched.simulate.report.capacity import victim_fate

    if not victims:
        return
    console.print(f"[yellow]{whose}: {len(victims)} pod(s) evicted by preemption:[/yellow]")
    for v in victims[:max_rows]:
        console.print(escape(f"  {v['pod']}: {victim_fate(v)}"))


@contextmanager
def _progress(console: Console, disabled: bool) -> Iterator[Callable[[str], None]]:
    """A spinner with the current step and the elapsed time (searches have no known length)."""
    if disabled or not console.is_terminal:
        yield lambda text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as progress:
        task = progress.add_task("capacity", total=None)

        def step(text: str) -> None:
            progress.update(task, description=text)

        yield step
