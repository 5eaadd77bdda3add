"""The live shell's commands: ``kubesched run`` and ``kubesched explain``."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kubesched.app.options import config_option, context_option, debug_option, plugins_option, tie_break_option

if TYPE_CHECKING:
    from kubesched.backend.host_selection import TieBreak

DEFAULT_HEALTH_ADDR = "127.0.0.1:10251"


@click.command("run")
@config_option("one profile named default-scheduler")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Kubeconfig file (default: clientConnection.kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster).",
)
@context_option
@plugins_option
@click.option(
    "--health-addr",
    default=DEFAULT_HEALTH_ADDR,
    show_default=True,
    help="HOST:PORT for /healthz, /readyz and /metrics (plain HTTP); use 0.0.0.0:10251 in a pod.",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help="Override leaderElection.leaderElect from the configuration (default there: true).",
)
@click.option("--identity", help="Leader-election identity (default: hostname_uuid).")
@debug_option
@click.option("--replace-default-scheduler", is_flag=True,
              help="Run a default-scheduler profile although kube-scheduler holds its Lease (you are "
              "replacing it); without it that is refused, as both would bind the same pods.")
@click.option("--lease-name", help="Lease name (default: leaderElection.resourceName, with the upstream "
              "default kube-scheduler replaced by kubesched so it never contends with the default scheduler).")
@click.option("-v", "--verbosity", type=click.IntRange(min=0), default=0, show_default=True,
              help="Log verbosity: 0 info, 2 every attempt and bind, 4 libraries too.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--print-rbac", is_flag=True,
              help="Print the ClusterRole and leader-election Role this configuration needs (its plugins' "
              "declared objects included) as YAML, and exit. Bind them to the scheduler's service account.")
@click.option("--rbac-name", default="kubesched", show_default=True, help="metadata.name of the printed roles.")
@tie_break_option
def run_command(
    config_path: Path | None,
    kubeconfig: str | None,
    context: str | None,
    plugin_modules: tuple[str, ...],
    health_addr: str,
    leader_elect: bool | None,
    identity: str | None,
    replace_default_scheduler: bool,
    debug: bool,
    lease_name: str | None,
    verbosity: int,
    log_format: str,
    print_rbac: bool,
    rbac_name: str,
    tie_break: TieBreak,
) -> None:
    """Run kubesched as a scheduler in a real cluster: pods whose spec.schedulerName matches a profile
    are scheduled and bound. Exits 0 on SIGTERM (after draining binds and releasing the lease), 1 when
    the leader lease is lost."""
    # No cyclic garbage collection while the process starts (imports, configuration, informers'
    # caches): the runner turns it back on once synced (settings.end_startup_gc says why).
    gc.disable()
    from kubesched.kube.api import ConnectionConfigError
    from kubesched.live import logs
    from kubesched.live.early import run_live_starting_early
    from kubesched.live.settings import LiveOptions, lease_name_for

    if print_rbac:
        from kubesched.app.startup import load_scheduler_config

        config, registry = load_scheduler_config(config_path, plugin_modules)
        _print_rbac(config, registry, rbac_name, lease_name_for(config.leader_election.resource_name, lease_name))
        return

    def load() -> tuple[Any, Any]:
        """The configuration, then the flags that need no cluster checked (in this order, as ever);
        run in a worker thread while the backlog's informers start (live/early.py), so the
        imports they need (the framework, the plugins, numpy, pydantic) are not imported before."""
        from kubesched.app.startup import UserError, load_scheduler_config
        from kubesched.live.health import parse_addr

        loaded = load_scheduler_config(config_path, plugin_modules)
        try:
            parse_addr(health_addr)
        except ValueError as e:
            raise UserError(f"--health-addr: {e}") from None
        return loaded

    logs.configure(verbosity, log_format)
    options = LiveOptions(health_addr=health_addr, context=context, leader_elect=leader_elect, lease_name=lease_name,
                          replace_default_scheduler=replace_default_scheduler, debug=debug, owns_process_gc=True,
                          tie_break=tie_break)
    if identity:
        options.identity = identity
    try:
        code = asyncio.run(run_live_starting_early(load, config_path, kubeconfig, options))
    except (ConnectionConfigError, OSError) as e:  # OSError: e.g. the health address is in use
        from kubesched.app.startup import UserError

        raise UserError(str(e)) from None
    sys.exit(code)


def _print_rbac(config: Any, registry: Any, name: str, lease_name: str) -> None:
    import yaml

    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.live.rbac import cluster_role, leader_election_role

    kinds = profiles_object_kinds(registry, config.profiles, config.feature_gates)
    docs = [
        cluster_role(name, kinds),
        leader_election_role(f"{name}-leader-election", config.leader_election.resource_namespace, lease_name),
    ]
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


@click.command("explain")
@click.argument("pod")
@click.option("-n", "--namespace", default=None,
              help="Namespace (default: from POD as ns/name, else the kubeconfig context's, else default).")
@config_option()
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: as kubectl: $KUBECONFIG, ~/.kube/config, in-cluster).")
@context_option
@click.option("--profile", help="Explain with this profile (default: the pod's schedulerName).")
@plugins_option
@click.option("--max-rows", type=click.IntRange(min=1), default=50, show_default=True)
def explain_command(
    pod: str,
    namespace: str | None,
    config_path: Path | None,
    kubeconfig: str | None,
    context: str | None,
    profile: str | None,
    plugin_modules: tuple[str, ...],
    max_rows: int,
) -> None:
    """Why is POD pending (or why did it land where it did)? Every filter's verdict on every node and
    every score, computed from the live cluster's current nodes and pods."""

    from kubesched.app.render import console, print_explanation
    from kubesched.app.startup import UserError, load_scheduler_config
    from kubesched.kube.api import ApiClient, ConnectionConfigError, load_connection
    from kubesched.live.explain import ExplainError, explain_live

    if "/" in pod:
        ns, _, name = pod.partition("/")
        if namespace and namespace != ns:
            raise UserError(f"POD {pod!r} names namespace {ns!r} but -n says {namespace!r}")
        namespace = ns
    else:
        name = pod
    config, registry = load_scheduler_config(config_path, plugin_modules)

    async def go() -> object:
        conn = await load_connection(kubeconfig or config.client_connection.kubeconfig or None, context)
        api = ApiClient(conn, None, 0)
        try:
            return await explain_live(api, config, registry, name, namespace or conn.namespace or "default", profile)
        finally:
            await api.close()

    try:
        result = asyncio.run(go())
    except (ConnectionConfigError, ExplainError) as e:
        raise UserError(str(e)) from None
    out = console()
    from kubesched.live.explain import LiveExplanation

    assert isinstance(result, LiveExplanation)
    out.print(f"[dim]live cluster: {result.nodes} nodes, {result.pods} pods[/dim]")
    if result.pod.node_name:
        out.print(f"[dim]{result.pod.key} is bound to {result.pod.node_name}; explained as if unplaced[/dim]")
    if result.note:
        out.print(f"[yellow]{result.note}[/yellow]")
    print_explanation(out, result.explanation, max_rows=max_rows)
