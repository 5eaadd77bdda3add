"""The backlog's informers asked for before the configuration is decoded (issue 32 item 2).

``kubesched run`` spends about a CPU second on imports and on decoding its configuration (the
framework, numpy, pydantic, the plugins), and the apiserver about as long or longer serving the
nodes' and pods' watch-lists of a large backlog (the openb trace's 8,152 pods: ~1.4 s of its own
JSON encoding, measured on the project's control plane). One after the other, the first bind waits
for their sum; kube-scheduler, a Go binary, starts its informers within milliseconds. So the node
and pod informers are started first, on the event loop, and the configuration is decoded in a
worker thread meanwhile: the apiserver encodes the lists while kubesched imports.

What stays as it was:

* The informers are the ones :class:`~kubesched.live.runner.LiveScheduler` would have made
  (:func:`backlog_informers`); the scheduler takes them over with its handlers, and nothing listed
  is handed on before :meth:`LiveScheduler.run` reaches the point where it starts them otherwise
  (the ``gate``), so every handler runs where and in the order it ran before.
* The connection is the one the decoded configuration names: the kubeconfig is read ahead from the
  ``--kubeconfig`` flag or the configuration file's ``clientConnection.kubeconfig``
  (:func:`kubeconfig_hint`); if the decoded configuration names another, the early informers are
  dropped and the run starts as before. Anything that goes wrong early (the file unreadable, the
  kubeconfig not loadable) only means no early start: the same error then surfaces where it did.
* The rate limit is the configuration's (``clientConnection.qps``/``burst``), set on the client
  once decoded; the informers' streams were never rate-limited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubesched.kube.api import ApiClient, load_connection
from kubesched.kube.informer import FINISHED_PODS, UNFINISHED_PODS, Handlers, Informer, Obj
from kubesched.snapshot.pod import PodInfo, PodSpecError

if TYPE_CHECKING:
    from kubesched.config.load import SchedulerConfig
    from kubesched.framework.registry import Registry
    from kubesched.live.settings import LiveOptions

log = logging.getLogger(__name__)


def _informer(api: ApiClient, path: str, name: str, read_timeout: float, selector: str = "") -> Informer:
    return Informer(
        api,
        path,
        name=name,
        params={"fieldSelector": selector} if selector else {},
        read_timeout=read_timeout,
        # kube-scheduler's informers hand the listed objects on in Go map order (random), so
        # a backlog is popped, and nodes are searched, in no particular order: do the same.
        shuffle_lists=True,
        # ... and get them with a watch-list (client-go's WatchListClient, on since v1.35):
        # one stream out of the watch cache instead of pages read from etcd.
        watch_list=True,
    )


def backlog_informers(api: ApiClient, read_timeout: float) -> tuple[Informer, Informer]:
    """The node and pod informers of ``kubesched run`` (handlers attached by the scheduler)."""
    nodes = _informer(api, "/api/v1/nodes", "nodes", read_timeout)
    # kube-scheduler lists and watches only unfinished pods (scheduler.go newPodInformer): a
    # cluster's many finished Job pods are neither listed, parsed nor kept. A pod that finishes
    # then arrives as a DELETED event carrying its final object.
    pods = _informer(api, "/api/v1/pods", "pods", read_timeout, UNFINISHED_PODS)
    # Every informer lists at once (upstream: InformerFactory.Start, then WaitForCacheSync), but
    # pods are handed on after nodes: every assigned pod lands on a known node.
    pods.apply_after = nodes.synced
    return nodes, pods


def finished_pods_informer(api: ApiClient, read_timeout: float) -> Informer:
    """The Succeeded/Failed pods, for plugins that count them (``Plugin.pod_terminated``, e.g.
    Coscheduling's PodGroup ``succeeded``/``failed``): the pod informer no longer lists them, and
    without it a restart would never see the members that finished before it. kube-scheduler has no
    such informer (none of its plugins counts finished pods), so it is made only when a configured
    plugin does."""
    return _informer(api, "/api/v1/pods", "finished-pods", read_timeout, FINISHED_PODS)


class PreparedPods:
    """The first list's pods parsed as they arrive (the pod informer's ``Handlers.prepare``), while
    the apiserver is still encoding the rest: the add handler takes each parse instead of parsing
    when the list is handed on (8,152 pods: ~0.2 s of parsing no longer between the list's last
    object and the first scheduling cycle). Parses are kept by the identity of the object parsed
    (the list holds it until it is handed on); a pod that does not parse keeps its error, raised to
    the handler that takes it. After :meth:`close` (the pods' first list handed on) nothing more
    is parsed ahead."""

    def __init__(self) -> None:
        self._parsed: dict[int, tuple[Obj, PodInfo | PodSpecError]] = {}
        self._open = True

    def prepare(self, raw: Obj) -> None:
        if self._open:
            try:
                parsed: PodInfo | PodSpecError = PodInfo.from_raw(raw)
            except PodSpecError as e:
                parsed = e.with_traceback(None)  # no cycle through this frame: freed when taken
            except Exception:  # not kept: the add handler parses it again and reports it, once
                return
            self._parsed[id(raw)] = (raw, parsed)

    def take(self, raw: Obj) -> PodInfo | None:
        """The parse of this very object, if it was parsed ahead (None: parse it now); raises the
        PodSpecError its parse raised."""
        entry = self._parsed.pop(id(raw), None)
        if entry is None or entry[0] is not raw:
            return None
        if isinstance(entry[1], PodSpecError):
            raise entry[1]
        return entry[1]

    def close(self) -> None:
        """Parse nothing more ahead; drop what a list that was never handed on (a broken stream) left."""
        self._open = False
        self._parsed.clear()


def kubeconfig_hint(config_path: Path | None, kubeconfig: str | None) -> str | None:
    """The kubeconfig ``run`` will connect with, read ahead of the decoding: the flag, else the
    configuration file's ``clientConnection.kubeconfig`` (None: the loaders' defaults). Raises
    ValueError when the file cannot tell (unreadable, not a mapping): then nothing starts early."""
    if kubeconfig:
        return kubeconfig
    if config_path is None:
        return None
    import yaml

    try:
        text = Path(config_path).read_text(encoding="utf-8")
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"cannot read {config_path}: {e}") from None
    connection = doc.get("clientConnection") if isinstance(doc, dict) else None
    value = connection.get("kubeconfig") if isinstance(connection, dict) else None
    if value is not None and not isinstance(value, str):
        raise ValueError("clientConnection.kubeconfig is not a string")
    return value or None


class _HeldRecords(logging.Filter):
    """Holds the informers' log records back (an unreachable apiserver's retries, say) until the run
    starts them, where they would have been logged first: a run that ends before (a configuration
    error) says only what it said before."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


@dataclass(eq=False)
class EarlyInformers:
    """The node and pod informers, started; nothing is handed on, and nothing they log is shown,
    until :meth:`hand_on`."""

    api: ApiClient
    kubeconfig: str | None
    nodes: Informer
    pods: Informer
    gate: asyncio.Event
    held: _HeldRecords
    prepared: PreparedPods

    def hand_on(self) -> None:
        """From now on the informers hand on what they get, and log as any informer (what they logged
        so far is logged now)."""
        self.gate.set()
        self.release_logs(show=True)

    def release_logs(self, show: bool) -> None:
        """Stop holding the informers' log records back; log those held (``show``) or drop them."""
        informer_log = logging.getLogger(Informer.__module__)
        informer_log.removeFilter(self.held)
        records, self.held.records = self.held.records, []
        for record in records if show else ():
            informer_log.handle(record)

    @classmethod
    async def start(
        cls, config_path: Path | None, kubeconfig: str | None, options: LiveOptions
    ) -> EarlyInformers | None:
        try:
            hint = kubeconfig_hint(config_path, kubeconfig)
            conn = await load_connection(hint, options.context)
        except Exception as e:  # surfaces again, worded as before, once the configuration is decoded
            log.debug("event=no_early_start reason=%r", str(e))
            return None
        api = ApiClient(conn, qps=None)  # the configuration's limit is set once it is decoded
        nodes, pods = backlog_informers(api, options.watch_read_timeout)
        prepared = PreparedPods()
        pods.handlers = Handlers(prepare=prepared.prepare)  # the scheduler's own handlers replace these
        gate = asyncio.Event()
        nodes.apply_after = gate
        held = _HeldRecords()
        logging.getLogger(Informer.__module__).addFilter(held)
        nodes.start()
        pods.start()
        return cls(api, hint, nodes, pods, gate, held, prepared)

    async def close(self) -> None:
        """Stop them unused (what they logged is dropped)."""
        self.release_logs(show=False)
        for inf in (self.nodes, self.pods):
            await inf.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.api.close(), 2.0)


async def run_live_starting_early(
    load: Callable[[], tuple[SchedulerConfig, Registry]],
    config_path: Path | None,
    kubeconfig: str | None,
    options: LiveOptions,
) -> int:
    """``kubesched run``: the backlog's informers started, then ``load`` (the configuration, in a
    worker thread), then :func:`~kubesched.live.runner.run_live` with those informers."""
    early = await EarlyInformers.start(config_path, kubeconfig, options)
    try:
        config, registry = await asyncio.to_thread(_load_and_import, load)
    except BaseException:
        if early is not None:
            await early.close()
        raise
    if early is not None and early.kubeconfig != (kubeconfig or config.client_connection.kubeconfig or None):
        await early.close()
        early = None
    from kubesched.live.runner import run_live

    return await run_live(config, registry, kubeconfig, options, early=early)


def _load_and_import(load: Callable[[], tuple[SchedulerConfig, Registry]]) -> tuple[SchedulerConfig, Registry]:
    """``load``, then the runner's own imports (metrics, the health server), in the worker thread."""
    loaded = load()
    import kubesched.live.runner  # noqa: F401

    return loaded
