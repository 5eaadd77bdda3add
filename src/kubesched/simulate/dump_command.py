"""``kubesched dump``: write what a live cluster holds for the scheduler to one file that
``kubesched simulate --cluster`` reads (kube-scheduler-simulator calls this "import").

The kinds are those ``kubesched run`` would watch with the same configuration: Nodes, Pods, and
every kind the configuration's plugins declare (framework/objects.py; ``--plugins`` adds
out-of-tree plugins' kinds), plus PriorityClasses, which the simulator always reads (its
Priority admission). Each kind is listed in pages (``limit``/``continue``) and each page written
before the next is asked for, so memory holds one page whatever the cluster's size. Objects are
written as the API returns them, with ``apiVersion``/``kind`` set and ``managedFields`` dropped
(``--anonymize``: hashed as inputs/anonymize.py describes).

Each kind is one consistent list; the kinds are listed one after the other, as ``kubectl get``
would, not at one resourceVersion.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import click

from kubesched.app.options import config_option, context_option, plugins_option
from kubesched.app.startup import UserError, load_scheduler_config
from kubesched.framework.objects import ObjectKind, merge_object_kinds
from kubesched.framework.registry import profiles_object_kinds
from kubesched.kube.api import ApiClient, ApiError, ConnectionConfigError, load_connection
from kubesched.kube.objects import list_pages
from kubesched.simulate.inputs.anonymize import Anonymizer
from kubesched.simulate.inputs.dump_writer import DumpWriter, Format

NODE = ObjectKind("Node", "", "v1", "nodes", namespaced=False)
POD = ObjectKind("Pod", "", "v1", "pods")
#: Read by the simulator whatever the plugins declare (inputs/dump.py admits pods with them).
PRIORITY_CLASS = ObjectKind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", namespaced=False)
DEFAULT_PAGE_SIZE = 500


class DumpError(Exception):
    """The apiserver refused a list; the message names the kind and what to do."""


@dataclass
class DumpCounts:
    #: Objects written, per kind, in the order written.
    written: dict[str, int] = field(default_factory=dict)
    #: Declared kinds the apiserver does not serve (HTTP 404: e.g. a CRD not installed).
    not_served: list[str] = field(default_factory=list)
    pages: int = 0

    def summary(self) -> str:
        text = ", ".join(f"{n} {kind}" for kind, n in self.written.items())
        text += f" ({self.pages} list page{'s' if self.pages != 1 else ''})"
        if self.not_served:
            text += f"; not served by this cluster: {', '.join(self.not_served)}"
        return text


def dump_kinds(declared: Sequence[ObjectKind]) -> list[ObjectKind]:
    """Nodes first, then PriorityClasses and the declared kinds, pods last (a reader sees every
    node before the pods bound to them)."""
    return merge_object_kinds([NODE, PRIORITY_CLASS, *declared, POD])


def prepare(raw: dict[str, Any], kind: ObjectKind, anonymizer: Anonymizer | None) -> dict[str, Any]:
    """An object of a list page as the dump holds it: ``apiVersion`` and ``kind`` first (items of a
    typed list carry none), ``metadata.managedFields`` dropped (server-side apply bookkeeping,
    often half an object's size), anonymised when asked."""
    obj = {"apiVersion": kind.api_version, "kind": kind.kind}
    obj.update((k, v) for k, v in raw.items() if k not in ("apiVersion", "kind"))
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return anonymizer.anonymize(obj) if anonymizer is not None else obj


async def dump_cluster(
    api: ApiClient,
    kinds: Sequence[ObjectKind],
    writer: DumpWriter,
    namespaces: Sequence[str] = (),
    page_size: int = DEFAULT_PAGE_SIZE,
    anonymizer: Anonymizer | None = None,
    on_kind: Callable[[str, int], None] | None = None,
) -> DumpCounts:
    """List every kind (in ``namespaces`` only, for namespaced kinds, when any are given) page by
    page into ``writer``."""
    counts = DumpCounts()
    for kind in kinds:
        paths = [kind.collection_path_in(ns) for ns in namespaces] if kind.namespaced and namespaces else [
            kind.collection_path
        ]
        written = 0
        try:
            for path in paths:
                async for page in list_pages(api, path, page_size):
                    counts.pages += 1
                    for raw in page:
                        writer.write(prepare(raw, kind, anonymizer))
                    written += len(page)
        except ApiError as e:
            if e.status == 404 and written == 0:
                counts.not_served.append(f"{kind.kind} ({kind.api_version} {kind.resource})")
                continue
            raise DumpError(_list_failure(kind, e)) from None
        counts.written[kind.name] = written
        if on_kind is not None:
            on_kind(kind.name, written)
    return counts


def _list_failure(kind: ObjectKind, e: ApiError) -> str:
    what = f"listing {kind.resource} ({kind.kind}, {kind.api_version})"
    if e.status == 403:
        return (f"{what}: forbidden (HTTP 403): this identity may not list {kind.resource}; "
                "`kubesched run --print-rbac` prints the ClusterRole the configuration's kinds need")
    if e.status == 410:
        return (f"{what}: the list expired while it was read (HTTP 410: the apiserver compacted its snapshot); "
                "run again, with a larger --page-size to read it in fewer requests")
    return f"{what}: {e}"


def output_format(output: str, fmt: str | None) -> Format:
    """``--format``, else JSON for a ``*.json`` output, else YAML. A ``*.json`` file must hold
    JSON: the simulator reads files by their suffix."""
    suffix = Path(output).suffix.lower() if output != "-" else ""
    if fmt is None:
        return "json" if suffix == ".json" else "yaml"
    if fmt == "yaml" and suffix == ".json":
        raise UserError(f"-o {output}: simulate --cluster reads *.json files as JSON; name it .yaml or use "
                        "--format json")
    return "json" if fmt == "json" else "yaml"


@click.command("dump")
@config_option()
@plugins_option
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: clientConnection.kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster).")
@context_option
@click.option("--in-cluster", is_flag=True, help="Use the pod's service account (no kubeconfig).")
@click.option("-n", "--namespace", "namespaces", multiple=True, metavar="NS",
              help="Dump pods and other namespaced objects of NS only; repeatable (default: every namespace). "
              "Nodes and other cluster-scoped kinds are dumped whole.")
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE",
              help="Where to write the dump; - for stdout.")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default=None,
              help="Default: json for a *.json FILE, else yaml.")
@click.option("--page-size", type=click.IntRange(min=1), default=DEFAULT_PAGE_SIZE, show_default=True,
              help="Objects per list request (limit).")
@click.option("--anonymize", is_flag=True,
              help="Hash names, namespaces, label values and what refers to them with one salt, so "
              "spread, affinity and selectors decide as before (docs/simulator.md says what is kept).")
@click.option("--salt", help="The --anonymize salt (default: a random one, so hashes cannot be looked up); "
              "give the same salt to compare two dumps.")
def dump_command(
    config_path: Path | None,
    plugin_modules: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    in_cluster: bool,
    namespaces: tuple[str, ...],
    output: str,
    fmt: str | None,
    page_size: int,
    anonymize: bool,
    salt: str | None,
) -> None:
    """Dump a live cluster for `kubesched simulate --cluster`: nodes, pods, PriorityClasses and every
    kind the configuration's plugins declare, listed page by page into one YAML (or JSON) file."""
    if salt is not None and not anonymize:
        raise UserError("--salt is only used with --anonymize")
    if in_cluster and (kubeconfig or context):
        raise UserError("--in-cluster excludes --kubeconfig and --context")
    config, registry = load_scheduler_config(config_path, plugin_modules)
    kinds = dump_kinds(profiles_object_kinds(registry, config.profiles, config.feature_gates))
    form = output_format(output, fmt)
    if output != "-" and not Path(output).resolve().parent.is_dir():
        raise UserError(f"-o {output}: no such directory {Path(output).parent}")
    anonymizer = Anonymizer(salt if salt is not None else secrets.token_hex(16)) if anonymize else None
    if namespaces:
        click.echo(f"note: -n {' -n '.join(namespaces)}: pods of other namespaces are not in the dump, nor is "
                   "their use of the nodes", err=True)

    def progress(kind: str, n: int) -> None:
        click.echo(f"{kind}: {n}", err=True)

    async def go(out: BinaryIO) -> DumpCounts:
        conn = await load_connection(kubeconfig or config.client_connection.kubeconfig or None, context,
                                     in_cluster=in_cluster)
        api = ApiClient(conn, None, 0, user_agent="kubesched-dump")
        writer = DumpWriter(out, form)
        try:
            counts = await dump_cluster(api, kinds, writer, namespaces, page_size, anonymizer, progress)
        finally:
            await api.close()
        writer.close()
        return counts

    try:
        if output == "-":
            counts = asyncio.run(go(sys.stdout.buffer))
        else:
            counts = _to_file(Path(output), lambda out: asyncio.run(go(out)))
    except (ConnectionConfigError, DumpError) as e:
        raise UserError(str(e)) from None
    except (OSError, ApiError) as e:
        raise UserError(f"dump: {e}") from None
    where = "stdout" if output == "-" else output
    click.echo(f"wrote {where}: {counts.summary()}", err=True)


def _to_file(path: Path, write: Callable[[BinaryIO], DumpCounts]) -> DumpCounts:
    """Write through a temporary file beside ``path``, renamed over it only once complete: an
    interrupted dump never leaves a truncated file that would load as a smaller cluster."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.resolve().parent)
    try:
        with os.fdopen(fd, "wb") as out:
            counts = write(out)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return counts
