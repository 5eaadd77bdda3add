"""``kubesched extender``: serve one profile's plugins to a real kube-scheduler as an HTTP extender."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from kubesched.app.options import config_option, plugins_option
from kubesched.extender.limits import DEFAULT_HOLD_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_TIMEOUT, normalize_prefix

if TYPE_CHECKING:
    from kubesched.framework.objects import ObjectKind

log = logging.getLogger("kubesched.extender")


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {listen!r}", param_hint="--listen")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def select_profile(config: Any, name: str | None) -> Any:
    from kubesched.app.startup import UserError

    if name is None:
        if len(config.profiles) > 1:
            raise UserError(
                "the configuration has several profiles; pick one with --profile: " + ", ".join(config.scheduler_names)
            )
        return config.profiles[0]
    try:
        return config.profile(name)
    except KeyError:
        raise UserError(f"--profile {name}: no such profile; the configuration has: "
                        + ", ".join(config.scheduler_names)) from None


#: The points an extender serves (filter and prioritize, and preempt through PreFilter + Filter).
SERVED_POINTS = ("preFilter", "filter", "preScore", "score")


def only_plugins(profile: Any, names: tuple[str, ...]) -> Any:
    """The profile with just ``names`` at the points the extender serves (``--only``), and at
    Reserve and PreBind (the in-flight holds and the bind verb); every name must be one of the
    profile's plugins at one of the served points."""
    if not names:
        return profile
    from kubesched.app.startup import UserError

    served = {n for point in SERVED_POINTS for n in profile.plugins.get(point, ())}
    unknown = [n for n in names if n not in served]
    if unknown:
        raise UserError(
            f"--only {', '.join(unknown)}: not a filter or score plugin of profile {profile.scheduler_name!r} "
            f"(it serves: {', '.join(sorted(served)) or 'none'}); enable it in the configuration or load it "
            "with --plugins"
        )
    keep = set(names)
    # Reserve/Unreserve too: the in-flight holds reserve with the state of the served plugins'
    # PreFilter; a plugin left out has none (VolumeBinding's Reserve would fail every hold, and the
    # extender would then hold nothing). PreBind too: the bind verb runs it with the hold's state,
    # where a plugin left out has none (VolumeBinding's PreBind would fail every bind).
    narrowed = (*SERVED_POINTS, "reserve", "preBind")
    plugins = {point: [n for n in ns if n in keep] if point in narrowed else list(ns)
               for point, ns in profile.plugins.items()}
    weights = {n: w for n, w in profile.score_weights.items() if n in keep}
    return dataclasses.replace(profile, plugins=plugins, score_weights=weights)


def served_object_kinds(registry: Any, profile: Any) -> list[ObjectKind]:
    """The kinds the extender watches for ``profile`` (after ``--only``): what its plugins declare.
    One function for the informers and ``--print-rbac``, so the printed role covers every watch."""
    from kubesched.framework.registry import profiles_object_kinds

    return profiles_object_kinds(registry, [profile])


def extender_stanza(
    *,
    url: str,
    weight: int = 1,
    bind: bool = False,
    preempt: bool = True,
    node_cache_capable: bool = False,
    ignorable: bool = False,
    managed_resources: tuple[str, ...] = (),
    https: bool = False,
    tls_config: dict[str, Any] | None = None,
    http_timeout: str | None = None,
) -> dict[str, Any]:
    """One entry of KubeSchedulerConfiguration ``extenders`` (staging kube-scheduler/config/v1 Extender)."""
    ext: dict[str, Any] = {"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize"}
    if preempt:
        ext["preemptVerb"] = "preempt"
    if bind:
        ext["bindVerb"] = "bind"
    ext["weight"] = weight
    ext["nodeCacheCapable"] = node_cache_capable
    if managed_resources:
        ext["managedResources"] = [{"name": r, "ignoredByScheduler": False} for r in managed_resources]
    ext["ignorable"] = ignorable
    if http_timeout:
        ext["httpTimeout"] = http_timeout
    if https:
        ext["enableHTTPS"] = True
        if tls_config:
            ext["tlsConfig"] = tls_config
    return ext


@click.command("extender")
@config_option("the default profile; the profile to serve is picked with --profile")
@click.option("--profile", "profile_name", metavar="NAME",
              help="schedulerName of the profile to serve (needed when the configuration has several).")
@click.option("--listen", default="127.0.0.1:8888", show_default=True, metavar="HOST:PORT")
@click.option("--url-prefix", default="/", show_default=True, help="Path prefix of the verbs: POST <prefix>/filter ...")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Serve HTTPS.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--client-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Require client certificates signed by this CA (the kube-scheduler's tlsConfig certFile/keyFile).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path),
              help="Connect to the cluster: node/pod cache (nodeCacheCapable), exact pod counts, bind.")
@click.option("--in-cluster", is_flag=True, help="Connect with the pod's service account (instead of --kubeconfig).")
@plugins_option
@click.option("--timeout", type=click.FloatRange(min=0.01), default=DEFAULT_TIMEOUT, show_default=True,
              help="Per-request deadline in seconds (keep it under the scheduler's httpTimeout, 5s by default).")
@click.option("--max-body", type=click.IntRange(min=1024), default=DEFAULT_MAX_BODY, show_default=True,
              help="Largest request body accepted, in bytes.")
@click.option("--table-cache", type=click.IntRange(min=1), default=8, show_default=True,
              help="Node tables kept (LRU, keyed by the nodes' resourceVersions) for nodeCacheCapable: false.")
@click.option("--in-flight-timeout", type=click.FloatRange(min=0), default=DEFAULT_HOLD_TIMEOUT, show_default=True,
              help="Seconds a pod approved by filter/prioritize counts on its node until the watch sees it "
              "bound (needs a cluster connection; 0: only the bind verb holds pods).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--only", "only", multiple=True, metavar="PLUGIN",
              help="Serve only these plugins of the profile (repeatable): kube-scheduler runs its own "
              "default plugins already, so an extender usually serves just yours.")
@click.option("--print-config", is_flag=True,
              help="Print the `extenders:` stanza for the kube-scheduler's configuration and exit.")
@click.option("--print-rbac", is_flag=True,
              help="Print the ClusterRole the extender needs with a cluster connection (its node/pod watch, "
              "pods/binding with --bind, the served plugins' declared objects) as YAML, and exit.")
@click.option("--rbac-name", default="kubesched-extender", show_default=True,
              help="[--print-rbac] metadata.name of the printed ClusterRole.")
@click.option("--url", help="[--print-config] URL the kube-scheduler reaches this extender at "
              "(default: from --listen, --url-prefix and TLS).")
@click.option("--weight", type=click.IntRange(min=1), default=1, show_default=True, help="[--print-config]")
@click.option("--bind", "with_bind", is_flag=True,
              help="[--print-config, --print-rbac] Let the extender bind (bindVerb; pods/binding create).")
@click.option("--no-preempt", is_flag=True, help="[--print-config] Leave out preemptVerb.")
@click.option("--node-cache-capable/--no-node-cache-capable", default=None,
              help="[--print-config] Default: on with --kubeconfig/--in-cluster.")
@click.option("--ignorable", is_flag=True, help="[--print-config] Schedule anyway when the extender is down.")
@click.option("--managed-resource", "managed_resources", multiple=True, metavar="NAME",
              help="[--print-config] Only call the extender for pods requesting this resource; repeatable.")
@click.option("--scheduler-cert", help="[--print-config] tlsConfig.certFile: the kube-scheduler's client cert.")
@click.option("--scheduler-key", help="[--print-config] tlsConfig.keyFile.")
@click.option("--scheduler-ca", help="[--print-config] tlsConfig.caFile: CA of this extender's serving cert.")
def extender(
    config_path: Path | None,
    profile_name: str | None,
    listen: str,
    url_prefix: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    client_ca: Path | None,
    kubeconfig: Path | None,
    in_cluster: bool,
    plugin_modules: tuple[str, ...],
    timeout: float,
    max_body: int,
    table_cache: int,
    in_flight_timeout: float,
    log_level: str,
    only: tuple[str, ...],
    print_config: bool,
    print_rbac: bool,
    rbac_name: str,
    url: str | None,
    weight: int,
    with_bind: bool,
    no_preempt: bool,
    node_cache_capable: bool | None,
    ignorable: bool,
    managed_resources: tuple[str, ...],
    scheduler_cert: str | None,
    scheduler_key: str | None,
    scheduler_ca: str | None,
) -> None:
    """Run the profile's PreFilter/Filter, PreScore/Score plugins as a kube-scheduler HTTP extender.

    POST <prefix>/filter, /prioritize, /preempt and /bind take the upstream extender/v1 types;
    GET /healthz, /readyz and /metrics are served too. `--print-config` prints the matching
    `extenders:` entry for the kube-scheduler's KubeSchedulerConfiguration, `--print-rbac` the
    ClusterRole for the extender's service account.
    """
    from kubesched.app.startup import UserError, load_scheduler_config

    if print_config and print_rbac:
        raise UserError("--print-config and --print-rbac: pick one")
    if (tls_cert is None) != (tls_key is None):
        raise UserError("--tls-cert and --tls-key go together")
    if client_ca is not None and tls_cert is None:
        raise UserError("--client-ca needs --tls-cert/--tls-key (client certificates need HTTPS)")
    host, port = parse_listen(listen)
    https = tls_cert is not None
    connected = kubeconfig is not None or in_cluster
    # Loaded and checked before --print-config/--print-rbac too: they accept exactly what the
    # server would serve.
    config, registry = load_scheduler_config(config_path, plugin_modules, extender=True)
    profile = only_plugins(select_profile(config, profile_name), only)

    if print_rbac:
        from kubesched.extender.rbac import extender_cluster_role

        role = extender_cluster_role(rbac_name, served_object_kinds(registry, profile), bind=with_bind)
        click.echo(yaml.safe_dump(role, sort_keys=False), nl=False)
        return

    if print_config:
        if url is None:
            shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
            if ":" in shown:
                shown = f"[{shown}]"
            url = f"{'https' if https else 'http'}://{shown}:{port}{normalize_prefix(url_prefix)}/"
        tls: dict[str, Any] = {}
        if https:
            if scheduler_cert:
                tls["certFile"] = scheduler_cert
            if scheduler_key:
                tls["keyFile"] = scheduler_key
            if scheduler_ca:
                tls["caFile"] = scheduler_ca
            else:
                tls["insecure"] = True  # upstream: enableHTTPS without a CA skips verification anyway
        if client_ca is not None and not (scheduler_cert and scheduler_key):
            click.echo("warning: --client-ca requires the scheduler to present a client certificate: "
                       "pass --scheduler-cert/--scheduler-key for tlsConfig", err=True)
        stanza = extender_stanza(
            url=url,
            weight=weight,
            bind=with_bind,
            preempt=not no_preempt,
            node_cache_capable=connected if node_cache_capable is None else node_cache_capable,
            ignorable=ignorable,
            managed_resources=managed_resources,
            https=https,
            tls_config=tls,
        )
        click.echo(yaml.safe_dump({"extenders": [stanza]}, sort_keys=False), nl=False)
        return

    logging.basicConfig(
        level=getattr(logging, log_level.upper()), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ssl_context = None
    if tls_cert is not None and tls_key is not None:
        from kubesched.extender.server import server_ssl_context

        try:
            ssl_context = server_ssl_context(tls_cert, tls_key, client_ca)
        except (OSError, ValueError) as e:
            raise UserError(f"TLS: {e}") from None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(profile, registry, host, port, url_prefix, ssl_context, kubeconfig, in_cluster,
                           timeout, max_body, table_cache, in_flight_timeout))


async def _serve(
    profile: Any,
    registry: Any,
    host: str,
    port: int,
    url_prefix: str,
    ssl_context: Any,
    kubeconfig: Path | None,
    in_cluster: bool,
    timeout: float,
    max_body: int,
    table_cache: int,
    in_flight_timeout: float,
) -> None:
    from kubesched.app.startup import UserError
    from kubesched.extender.server import ExtenderServer, settle_heap, start_server
    from kubesched.extender.service import ExtenderService
    from kubesched.framework.runtime import FrameworkError

    cluster = None
    if kubeconfig is not None or in_cluster:
        from kubesched.extender.cluster import ExtenderCluster
        from kubesched.kube.api import ConnectionConfigError

        try:
            kinds = served_object_kinds(registry, profile)
            cluster = await ExtenderCluster.connect(str(kubeconfig) if kubeconfig else None, kinds)
        except ConnectionConfigError as e:
            raise UserError(str(e)) from None
        await cluster.start()
    try:
        try:
            service = ExtenderService(
                profile, registry, cluster, table_cache_size=table_cache, hold_timeout=in_flight_timeout
            )
        except FrameworkError as e:
            raise UserError(str(e)) from None
        await service.start_plugins()
        server = ExtenderServer(service, url_prefix=url_prefix, timeout=timeout, max_body=max_body)
        try:
            runner, bound = await start_server(server, host, port, ssl_context)
        except OSError as e:
            raise UserError(f"--listen {host}:{port}: {e}") from None
        settle_heap()
        scheme = "https" if ssl_context is not None else "http"
        mtls = " (client certificates required)" if ssl_context is not None and \
            ssl_context.verify_mode.name == "CERT_REQUIRED" else ""
        log.info("extender: profile %r listening on %s://%s:%d%s/{filter,prioritize,preempt,bind}%s",
                 profile.scheduler_name, scheme, host, bound, server.prefix, mtls)
        if cluster is None:
            log.info(
                "extender: no cluster connection: serving nodeCacheCapable: false requests from the Node objects "
                "they carry; pods already on the nodes are unknown (plugins that count pods per node see none); "
                "NodeNames (nodeCacheCapable: true) requests and bind are refused; start with --kubeconfig for those"
            )
        else:
            log.info("extender: connected: node/pod cache from the cluster (both node modes, exact pod counts, bind)")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("extender: shutting down")
        await runner.cleanup()
        await service.stop_plugins()
    finally:
        if cluster is not None:
            await cluster.stop()
