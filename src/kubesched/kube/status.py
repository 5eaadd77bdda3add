"""Write plugin-maintained object status back to the cluster (e.g. PodGroup status for Coscheduling).

A plugin that declares a kind with ``writes_status`` (framework/objects.py) reports
``status_updates()`` → {kind: {"ns/name": changed status fields}}; the leader merge-patches them
into each object's ``status`` subresource every few seconds, off the scheduling path. Failures are
logged and retried on the next round (the plugin reports the fields again only when they change,
so a failed patch is re-sent from a local copy). Two answers are not worth repeating every round:
403 (the service account may not patch ``<resource>/status``: said once as an error naming the RBAC
rule, then retried with a doubling back-off up to five minutes, so fixing the Role heals it without a
restart and a missing rule is not a request stream) and 400/422 (the apiserver refuses that status:
sending it again cannot succeed; dropped with an error, the next change is sent as usual).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubesched.framework.interfaces import Plugin
from kubesched.framework.objects import POD_KIND, ObjectEvent, ObjectKind
from kubesched.kube.aiohttp_import import aiohttp
from kubesched.kube.api import ApiClient, ApiError

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
#: Back-off after a 403 on a kind's status: first retry after this many seconds, doubling to the cap.
FORBIDDEN_FIRST_RETRY = 30.0
FORBIDDEN_MAX_RETRY = 300.0


def merge_patch_into(patch: dict[str, Any], later: Mapping[str, Any]) -> None:
    """Compose two JSON merge patches (RFC 7386) in place: nested objects merge field by field,
    the later value wins, nulls (deletions) are kept. A patch that failed and is sent again with
    the next round's changes then loses none of its nested fields (e.g. one pool allocation)."""
    for k, v in later.items():
        have = patch.get(k)
        if isinstance(v, Mapping) and isinstance(have, dict):
            merge_patch_into(have, v)
        elif isinstance(v, Mapping):
            patch[k] = {}
            merge_patch_into(patch[k], v)  # a copy: later merges never touch the plugin's dicts
        else:
            patch[k] = v


class StatusPublisher:
    def __init__(
        self,
        api: ApiClient,
        plugins: Iterable[Plugin],
        kinds: Sequence[ObjectKind],
        interval: float = 2.0,
        emit: Callable[[ObjectKind, ObjectEvent], None] | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        plugins = list(plugins)
        self.kinds = {k.name: k for k in kinds if k.writes_status}
        #: Only plugins that declare a kind whose status they write are asked for updates.
        self.sources = [p for p in plugins if any(k.writes_status for k in type(p).object_kinds)]
        #: Plugins that report Events about their objects (``Plugin.object_events``), and where
        #: they go (the shell's event writer); collected on the same rounds as the status.
        self.emit = emit
        self.event_kinds = {k.name: k for k in (*kinds, POD_KIND)}
        self.event_sources = [p for p in plugins if type(p).object_events is not Plugin.object_events] if emit else []
        self.interval = interval
        self._failed: dict[tuple[str, str], dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self.now = now
        #: kind → (monotonic time before which its patches wait, current back-off) after a 403.
        self._forbidden: dict[str, tuple[float, float]] = {}
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
                    merge_patch_into(pending.setdefault((kind, key), {}), changed)
        self._failed.clear()
        now = self.now()
        for (kind, key), status in pending.items():
            blocked = self._forbidden.get(kind)
            if blocked is not None and now < blocked[0]:
                self._failed[(kind, key)] = status  # kept locally until the back-off ends
                continue
            path = self.kinds[kind].object_path(key, "status")
            try:
                await self.api.request("PATCH", path, {"status": status}, content_type=MERGE_PATCH)
                self.patched += 1
                self._forbidden.pop(kind, None)
            except ApiError as e:
                self._patch_refused(kind, key, status, e, now)
            except (OSError, TimeoutError, aiohttp.ClientError) as e:
                log.warning("event=status_patch_failed kind=%s object=%s err=%r", kind, key, str(e))
                self._failed[(kind, key)] = status

    def _patch_refused(self, kind: str, key: str, status: dict[str, Any], e: ApiError, now: float) -> None:
        if e.status == 404:  # the object is gone: nothing to report any more
            return
        if e.status in (400, 422):
            log.error("event=status_patch_invalid kind=%s object=%s status=%d dropped: %s", kind, key, e.status, e)
            return
        self._failed[(kind, key)] = status
        if e.status != 403:
            log.warning("event=status_patch_failed kind=%s object=%s status=%d", kind, key, e.status)
            return
        previous = self._forbidden.get(kind)
        backoff = FORBIDDEN_FIRST_RETRY if previous is None else min(previous[1] * 2, FORBIDDEN_MAX_RETRY)
        self._forbidden[kind] = (now + backoff, backoff)
        if previous is None:
            resource = self.kinds[kind].resource
            log.error(
                "event=status_patch_forbidden kind=%s object=%s: the scheduler's service account may not "
                "patch %s/status (RBAC: verbs [patch] on resource %s/status); kept and retried in %.0f s, "
                "doubling to %.0f s: %s", kind, key, resource, resource, backoff, FORBIDDEN_MAX_RETRY, e,
            )
