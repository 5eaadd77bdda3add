"""Write plugin-maintained object status back to the cluster (e.g. PodGroup status for Coscheduling).

A plugin that owns the status of a custom object exposes ``status_updates()`` → {"ns/name": changed
status fields}; the leader merge-patches them into the object's ``status`` subresource every few
seconds, off the scheduling path. Failures are logged and retried on the next round (the plugin
reports the fields again only when they change, so a failed patch is re-sent from a local copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import aiohttp

from kubesched.kube.api import ApiClient, ApiError

log = logging.getLogger("kubesched.live")

#: Kind → the status subresource path of one object.
STATUS_PATHS = {"PodGroup": "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}/status"}
MERGE_PATCH = "application/merge-patch+json"

StatusSource = Callable[[], Mapping[str, Mapping[str, Any]]]


def status_sources(plugins: Iterable[Any]) -> list[tuple[str, StatusSource]]:
    """(kind, status_updates) of every plugin that maintains an object status kubesched knows."""
    out = []
    for p in plugins:
        kind = getattr(p, "status_kind", None) or ("PodGroup" if p.name == "Coscheduling" else None)
        updates = getattr(p, "status_updates", None)
        if kind in STATUS_PATHS and callable(updates):
            out.append((kind, updates))
    return out


class StatusPublisher:
    def __init__(self, api: ApiClient, sources: list[tuple[str, StatusSource]], interval: float = 2.0) -> None:
        self.api = api
        self.sources = sources
        self.interval = interval
        self._failed: dict[tuple[str, str], dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self.patched = 0

    def start(self) -> None:
        if self.sources and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await self.publish_once()
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.publish_once()

    async def publish_once(self) -> None:
        pending: dict[tuple[str, str], dict[str, Any]] = dict(self._failed)
        for kind, updates in self.sources:
            for key, changed in updates().items():
                pending.setdefault((kind, key), {}).update(changed)
        self._failed.clear()
        for (kind, key), status in pending.items():
            namespace, _, name = key.partition("/")
            path = STATUS_PATHS[kind].format(namespace=namespace, name=name)
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
