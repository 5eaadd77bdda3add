"""``kubesched simulate``: the simulator shell's command."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson
import yaml
from click.core import ParameterSource
from rich.console import Console

from kubesched.app.fast_exit import request_fast_exit
from kubesched.app.options import (
    config_option,
    debug_option,
    gangs_option,
    lenient_option,
    plugins_option,
    tie_break_option,
)
from kubesched.app.startup import UserError, load_scheduler_config
from kubesched.simulate.inputs.gc_pause import paused_gc

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kubesched.backend.host_selection import TieBreak
    from kubesched.config.load import SchedulerConfig
    from kubesched.framework.objects import ObjectKind
    from kubesched.framework.registry import Registry
    from kubesched.simulate.inputs.dump import ClusterInput
    from kubesched.simulate.inputs.scenario import Scenario
    from kubesched.simulate.inputs.workload_gangs import GangSpec


#: Pods listed per profile by ``-o wide`` when ``--max-rows`` is not given.
WIDE_POD_ROWS = 500


@click.command("simulate")
@config_option()
@click.option(
    "--cluster",
    "cluster_path",
    type=click.Path(exists=True, path_type=Path),
    help="Nodes and pods: `kubectl get nodes,pods -A -o yaml` output, multi-document YAML/JSON, or a directory.",
)
@click.option(
    "--scenario",
    "scenario_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay a workload over time: nodes, pods arriving at times with lifetimes, node events "
    "(YAML/JSON; docs/simulator.md). Metrics are sampled over time.",
)
@click.option(
    "--trace",
    metavar="openb:PATH",
    help="Replay a trace over time: openb:DIR (Alibaba cluster-trace-gpu-v2023 node and pod lists) or "
    "openb:POD_LIST.csv.",
)
@click.option(
    "--arrivals",
    type=click.Choice(["trace", "sequential"]),
    default="trace",
    show_default=True,
    help="With --scenario/--trace. trace: at their times, leaving after their lifetimes; sequential: one a "
    "second in a random order (--seed), never leaving, as the ATC '23 GPU-sharing experiments.",
)
@click.option(
    "--inflate",
    "inflate_to",
    type=click.FloatRange(min=0, min_open=True),
    metavar="FACTOR",
    help="With --scenario/--trace: clone random pods (--seed) until the arrived GPU demand reaches FACTOR × "
    "the GPU capacity (1.3 in the ATC '23 GPU-sharing experiments).",
)
@click.option("--gpu-nodes-only", is_flag=True,
              help="With --trace: only the nodes with GPUs (as the ATC '23 GPU-sharing experiments).")
@click.option("--nodes", type=click.IntRange(min=1), help="Generate a cluster with this many nodes.")
@click.option("--pods", type=click.IntRange(min=0), help="Generate this many pods (with --nodes).")
@gangs_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the generator and tie-breaking.")
@tie_break_option
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "wide", "json", "jsonl"]),
    default="text",
    show_default=True,
    help="text: a summary; wide: the summary and each pod → node with its score and the pods it preempted "
    f"(--max-rows pods per profile, {WIDE_POD_ROWS} unless given); "
    "json: one document, each pod's verdict, reasons and the chosen node's score; "
    "jsonl: JSON Lines, the document then one pod per line with every evaluated node's verdict and the "
    "top-scored nodes. json and jsonl go to stdout.",
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
@click.option(
    "--drain",
    "drain_nodes",
    metavar="NODE[,NODE...]",
    multiple=True,
    help="What-if: cordon these nodes and evict their pods as `kubectl drain --ignore-daemonsets "
    "--delete-emptydir-data --force` would (PodDisruptionBudgets of the dump applied as the eviction API does), "
    "then reschedule them; reports whether the drain would complete, which pods a budget blocks and which would "
    "not fit anywhere.",
)
@click.option(
    "--drain-selector",
    metavar="SELECTOR",
    help="Drain the nodes this label selector matches (kubectl syntax: 'pool=old,zone in (a,b)').",
)
@plugins_option
@lenient_option
@click.option("--max-rows", type=click.IntRange(min=1), default=25, show_default=True, help="Rows per summary table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@debug_option
def simulate(
    config_path: Path | None,
    cluster_path: Path | None,
    scenario_path: Path | None,
    trace: str | None,
    arrivals: str,
    inflate_to: float | None,
    gpu_nodes_only: bool,
    nodes: int | None,
    pods: int | None,
    gang_specs: tuple[str, ...],
    seed: int,
    tie_break: TieBreak,
    output: str,
    report_path: Path | None,
    out_cluster: Path | None,
    explain_pod: str | None,
    strict_scheduler_name: bool,
    drain_nodes: tuple[str, ...],
    drain_selector: str | None,
    plugin_modules: tuple[str, ...],
    lenient: bool,
    max_rows: int,
    quiet: bool,
    debug: bool,
) -> None:
    """Schedule a cluster in memory with any configuration and show where every pod lands and why.

    Without --cluster or --nodes, runs the built-in demo cluster (with the demo's two-profile
    configuration unless --config is given).
    """
    from kubesched.app.render import console, print_explanation, print_tracebacks
    from kubesched.simulate.engine.runner import Simulation
    from kubesched.simulate.report.json_doc import result_to_json, write_jsonl
    from kubesched.simulate.report.summary import print_summary
    from kubesched.snapshot.pod import PodSpecError
    from kubesched.snapshot.table import NodeSpecError

    check_output_path("--report", report_path)
    check_output_path("--out-cluster", out_cluster)
    draining = bool(drain_nodes) or drain_selector is not None
    if draining:
        from kubesched.simulate.whatif.drain_budget import PDB_KIND
    # The input lives until the process exits: built with the cyclic GC paused and frozen, so no
    # collection ever scans it (paused_gc's docstring).
    replay = scenario_path is not None or trace is not None
    drain_plan = None
    sim_input: ClusterInput | Scenario
    with paused_gc(freeze=True):
        if replay:
            config, registry, sim_input = _load_replay(
                config_path, plugin_modules, scenario_path, trace, arrivals, inflate_to, gpu_nodes_only, seed,
                other_inputs=bool(cluster_path or nodes or pods or gang_specs or draining))
        else:
            config, registry, cluster = load_input(config_path, plugin_modules, cluster_path, nodes, pods, seed,
                                                   extra_kinds=[PDB_KIND] if draining else [], lenient=lenient,
                                                   gangs=gang_specs_of(gang_specs, nodes is not None))
            if draining:
                from kubesched.simulate.whatif.drain import DrainError, plan_drain_options

                try:
                    cluster, drain_plan = plan_drain_options(cluster, drain_nodes, drain_selector)
                except DrainError as e:
                    raise UserError(str(e)) from None
            sim_input = cluster
    err = console(stderr=True)
    out = console()
    text = output in ("text", "wide")
    progress_cb, stop_progress = _progress(err, quiet or not text)
    sim = Simulation(
        config,
        registry,
        sim_input,
        seed=seed,
        tie_break=tie_break,
        explain_pod=explain_pod,
        strict_scheduler_name=strict_scheduler_name,
        progress=progress_cb,
        per_node=output == "jsonl",
        unfreeze_gc=False,  # this process exits after reporting
    )
    try:
        result = asyncio.run(sim.run())
    except (PodSpecError, NodeSpecError) as e:
        raise UserError(str(e)) from None
    finally:
        stop_progress()
    if explain_pod is not None and result.explanation is None:
        raise UserError(f"--explain: no pod {explain_pod!r} in the cluster (give name or namespace/name)")
    data = result_to_json(result, placements=output != "jsonl" or report_path is not None)
    if drain_plan is not None:
        from kubesched.simulate.whatif.drain import drain_to_json

        data["drain"] = drain_to_json(drain_plan, result.records)
    if output == "json":
        write_json(data)
    elif output == "jsonl":
        write_jsonl(data, result, sys.stdout.buffer)
    else:
        pod_rows = None
        if output == "wide":
            given = click.get_current_context().get_parameter_source("max_rows") == ParameterSource.COMMANDLINE
            pod_rows = max_rows if given else WIDE_POD_ROWS
        print_summary(out, data, max_rows, pod_rows)
    if debug:
        print_tracebacks(err, sim.recorder.exceptions)
    if result.explanation is not None:
        print_explanation(out if text else err, result.explanation, max_rows=max(max_rows, 50))
    if report_path is not None:
        from kubesched.simulate.report.html import render_html

        write_report(report_path, render_html(data), err)
    if out_cluster is not None:
        _write_cluster(out_cluster, result)
        err.print(f"resulting cluster written to {out_cluster}")
    request_fast_exit()  # all written: freeing the whole heap one object at a time would only cost time


def _load_replay(
    config_path: Path | None, plugin_modules: tuple[str, ...], scenario_path: Path | None, trace: str | None,
    arrivals: str, inflate_to: float | None, gpu_nodes_only: bool, seed: int, other_inputs: bool,
) -> tuple[SchedulerConfig, Registry, Scenario]:
    """``--scenario``/``--trace``: the configuration (the default profile unless ``--config``) and
    the scenario to replay."""
    from kubesched.simulate.inputs.scenario import ScenarioError, load_replay

    if other_inputs:
        raise UserError("--scenario/--trace replay a workload of their own: not with --cluster, --nodes, --pods, "
                        "--gangs or --drain")
    config, registry = load_scheduler_config(config_path, plugin_modules)
    try:
        return config, registry, load_replay(scenario_path, trace, arrivals, inflate_to, gpu_nodes_only, seed)
    except ScenarioError as e:
        raise UserError(str(e)) from None


def write_json(doc: Any) -> None:
    """``--output json`` of a what-if command: the document, indented, on stdout."""
    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def check_output_path(option: str, path: Path | None) -> None:
    """Refuse an output file whose directory is missing before any simulation runs (not after
    minutes of work, with a traceback)."""
    if path is not None and not path.resolve().parent.is_dir():
        raise UserError(f"{option} {path}: directory {path.parent} does not exist")


def write_report(path: Path, html: str, err: Console) -> None:
    """``--report FILE``: the rendered page, and a line on stderr saying where it went."""
    write_output("--report", path, html)
    err.print(f"report written to {path}")


def write_output(option: str, path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(f"{option} {path}: cannot write: {e.strerror or e}") from None


def gang_specs_of(texts: Sequence[str], generating: bool) -> list[GangSpec]:
    """``--gangs`` parsed (``generating``: the command generates a cluster, ``--nodes``); an error
    names the spec and the field."""
    from kubesched.simulate.inputs.workload_gangs import GangSpecError, parse_gang_spec

    if texts and not generating:
        raise UserError("--gangs needs --nodes (the gangs are generated into a generated cluster)")
    try:
        return [parse_gang_spec(t) for t in texts]
    except GangSpecError as e:
        raise UserError(str(e)) from None


def load_gang_config(
    config_path: Path | None, plugin_modules: tuple[str, ...], gangs: bool, default: Path | None = None
) -> tuple[SchedulerConfig, Registry]:
    """The configuration of a command generating ``gangs`` (``--gangs``), or of any command
    (``default``: its configuration without ``--config``): workload_gangs.py ``gang_config_source``;
    a ``--config`` leaving the GenericWorkload gate off is refused with gangs."""
    from kubesched.simulate.inputs.workload_gangs import gang_config_source, gate_off_error

    config, registry = load_scheduler_config(gang_config_source(config_path, gangs, default), plugin_modules)
    if gangs and (error := gate_off_error(config.feature_gates, config_path)) is not None:
        raise UserError(error)
    return config, registry


def load_input(
    config_path: Path | None, plugin_modules: tuple[str, ...], cluster_path: Path | None, nodes: int | None,
    pods: int | None, seed: int, extra_kinds: Sequence[ObjectKind] = (), lenient: bool = False,
    gangs: Sequence[GangSpec] = (),
) -> tuple[SchedulerConfig, Registry, ClusterInput]:
    """The configuration and the cluster of a what-if command: ``--cluster``, a generated one
    (``--nodes``/``--pods``, ``gangs``: ``--gangs``), or the built-in demo (with its configuration
    unless ``--config``). ``extra_kinds``: objects the command itself reads from the dump (the drain's
    budgets); ``lenient``: skip the dump's invalid objects (``--lenient``)."""
    from kubesched.framework.registry import profiles_object_kinds

    demo = cluster_path is None and nodes is None
    config, registry = load_gang_config(config_path, plugin_modules, bool(gangs),
                                        demo_dir() / "config.yaml" if demo else None)
    kinds = [*profiles_object_kinds(registry, config.profiles, config.feature_gates), *extra_kinds]
    return config, registry, load_cluster_input(cluster_path, nodes, pods, seed, kinds, lenient, gangs)


def load_cluster_input(
    cluster_path: Path | None, nodes: int | None, pods: int | None, seed: int, kinds: Sequence[ObjectKind],
    lenient: bool = False, gangs: Sequence[GangSpec] = (),
) -> ClusterInput:
    """``--cluster`` (keeping objects of ``kinds``), a generated cluster (with ``gangs``), or the
    built-in demo's."""
    from kubesched.simulate.inputs.dump import ClusterInputError, load_cluster
    from kubesched.simulate.inputs.generator import generate_cluster
    from kubesched.snapshot.pod import PodSpecError
    from kubesched.snapshot.table import NodeSpecError

    if cluster_path and (nodes or pods):
        raise UserError("give either --cluster or --nodes/--pods, not both")
    if pods is not None and nodes is None:
        raise UserError("--pods needs --nodes")
    try:
        if cluster_path is not None:
            cluster = load_cluster(cluster_path, kinds, lenient)
        elif nodes is not None:
            cluster = generate_cluster(nodes, pods if pods is not None else nodes * 2, seed, pod_topology=True,
                                       gangs=gangs)
        else:
            cluster = load_cluster(demo_dir() / "cluster.yaml", kinds)
    except (ClusterInputError, PodSpecError, NodeSpecError) as e:
        raise UserError(str(e)) from None
    if cluster_path is not None and not cluster.nodes and not cluster.pods:
        skipped = ", ".join(f"{n} {kind}" for kind, n in cluster.skipped.items()) or "nothing"
        raise UserError(f"--cluster {cluster_path}: no Node or Pod objects found (read: {skipped})")
    for warning in cluster.warnings:  # once, for every what-if command (and in the JSON: inputWarnings)
        click.echo(f"warning: {warning}", err=True)
    return cluster


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
    write_output("--out-cluster", path, yaml.dump(doc, Dumper=dumper, sort_keys=False))


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
