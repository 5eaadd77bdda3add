"""Write plugin-maintained object status back to the cluster (e.g. PodGroup status for Coscheduling).

A plugin that declares a kind with ``writes_status`` (framework/objects.py) reports
``status_updates()`` → {kind: {"ns/name": changed status fields}}; the leader merge-patches them
into each object's ``status`` subresource every few seconds, off the scheduling path. Failures are
logged and retried on the next round (the plugin reports the fields again only when they change,
so a failed patch is re-sent from a local copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiohttp

from kubesched.framework.interfaces import Plugin
from kubesched.framework.objects import ObjectEvent, ObjectKind
from kubesched.kube.api import ApiClient, ApiError

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


class StatusPublisher:
    def __init__(
        self,
        api: ApiClient,
        plugins: Iterable[Plugin],
        kinds: Sequence[ObjectKind],
        interval: float = 2.0,
        emit: Callable[[ObjectKind, ObjectEvent], None] | None = None,
    ) -> None:
        self.api = api
        plugins = list(plugins)
        self.kinds = {k.kind: k for k in kinds if k.writes_status}
        #: Only plugins that declare a kind whose status they write are asked for updates.
        self.sources = [p for p in plugins if any(k.writes_status for k in type(p).object_kinds)]
        #: Plugins that report Events about their objects (``Plugin.object_events``), and where
        #: they go (the shell's event writer); collected on the same rounds as the status.
        self.emit = emit
        self.event_kinds = {k.kind: k for k in kinds}
        self.event_sources = [p for p in plugins if type(p).object_events is not Plugin.object_events] if emit else []
        self.interval = interval
        self._failed: dict[tuple[str, str], dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self.patched = 0

    def start(self) -> None:
        if (self.sources or self.event_sources) and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await self.publish_once()
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None

    def publish_events(self) -> None:
        """Hand the plugins' object Events to the event writer (which queues them)."""
        if self.emit is None:
            return
        for plugin in self.event_sources:
            for ev in plugin.object_events():
                kind = self.event_kinds.get(ev.kind)
                if kind is None:
                    log.warning("event=event_of_undeclared_kind plugin=%s kind=%s", plugin.name, ev.kind)
                    continue
                self.emit(kind, ev)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.publish_once()

    async def publish_once(self) -> None:
        self.publish_events()
        pending: dict[tuple[str, str], dict[str, Any]] = dict(self._failed)
        for plugin in self.sources:
            for kind, updates in plugin.status_updates().items():
                if kind not in self.kinds:
                    log.warning("event=status_of_undeclared_kind plugin=%s kind=%s", plugin.name, kind)
                    continue
                for key, changed in updates.items():
                    pending.setdefault((kind, key), {}).update(changed)
        self._failed.clear()
        for (kind, key), status in pending.items():
            path = self.kinds[kind].object_path(key, "status")
            try:
                await self.api.request("PATCH", path, {"status": status}, content_type=MERGE_PATCH)
                self.patched += 1
            except ApiError as e:
                if e.status != 404:  # the object is gone: nothing to report any more
                    log.warning("event=status_patch_failed kind=%s object=%s status=%d", kind, key, e.status)
                    self._failed[(kind, key)] = status
            except (OSError, TimeoutError, aiohttp.ClientError) as e:
                log.warning("event=status_patch_failed kind=%s object=%s err=%r", kind, key, str(e))
                self._failed[(kind, key)] = status
