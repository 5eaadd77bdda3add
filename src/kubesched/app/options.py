"""Command-line options every shell's commands share, declared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def config_option(default: str = "the default profile") -> Callable[[F], F]:
    """``--config FILE`` → ``config_path``: a KubeSchedulerConfiguration."""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=f"KubeSchedulerConfiguration YAML (default: {default}).",
    )


def debug_option(f: F) -> F:
    """``--debug`` → ``debug`` (also on with ``KUBESCHED_DEBUG=1``): tracebacks of plugin errors."""
    return click.option(
        "--debug",
        is_flag=True,
        envvar="KUBESCHED_DEBUG",
        help="Print the traceback of each distinct plugin error (also: KUBESCHED_DEBUG=1).",
    )(f)


def plugins_option(f: F) -> F:
    """``--plugins MODULE`` (repeatable) → ``plugin_modules``: out-of-tree plugins to load."""
    return click.option(
        "--plugins",
        "plugin_modules",
        multiple=True,
        metavar="MODULE",
        help="Import out-of-tree plugins from a Python module, package directory or .py file (its PLUGINS "
        "list); repeatable.",
    )(f)


def lenient_option(f: F) -> F:
    """``--lenient`` → ``lenient``: skip the invalid objects of a ``--cluster`` dump instead of stopping."""
    return click.option(
        "--lenient",
        is_flag=True,
        help="Skip the objects of --cluster the apiserver would refuse (negative quantities, unknown enum "
        "values, Nodes without a size, duplicates, ...) and say how many, instead of stopping at the first.",
    )(f)


def tie_break_option(f: F) -> F:
    """``--tie-break heap|random|name|shuffled`` → ``tie_break``: how the scheduler picks among the nodes
    with the same highest score (``kubesched.backend.host_selection.TIE_BREAKS``, not imported at start-up)."""
    return click.option(
        "--tie-break",
        type=click.Choice(["heap", "random", "name", "shuffled"]),
        default="random",
        show_default=True,
        help="Among nodes with the same highest score: random (seeded, uniform: kube-scheduler's selectHost up to "
        "v1.34), heap (v1.37's heap of scored nodes, over the order kubesched's Filter search found them), name (the "
        "node whose name sorts first) or shuffled (the node first in one random order of the nodes, fixed for the "
        "run from the seed, as the ATC '23 GPU-sharing experiments' simulator).",
    )(f)


def gangs_option(f: F) -> F:
    """``--gangs SPEC`` (repeatable) → ``gang_specs``: Workload API gangs generated with ``--nodes``
    (``kubesched.simulate.inputs.workload_gangs.parse_gang_spec``, not imported at start-up)."""
    return click.option(
        "--gangs",
        "gang_specs",
        metavar="count=N,members=M[,minCount=K,policy=gang|basic,cpu=Q,memory=Q,namespace=NS]",
        multiple=True,
        help="With --nodes: also generate N Workload API gangs of M pods (scheduling.k8s.io/v1beta1 Workload and "
        "PodGroup with schedulingPolicy.gang.minCount, default M; pods join by spec.schedulingGroup.podGroupName), "
        "besides the generated pods. Repeat for gangs of other shapes. Needs the GenericWorkload feature gate: on "
        "by default without --config; a --config must set featureGates: {GenericWorkload: true}.",
    )(f)


def context_option(f: F) -> F:
    """``--context NAME`` → ``context``: the kubeconfig context to use, as kubectl's ``--context``."""
    return click.option(
        "--context",
        metavar="NAME",
        help="The kubeconfig context to use (default: its current-context), as kubectl's --context.",
    )(f)
