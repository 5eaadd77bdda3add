"""Informers for the objects plugins declare (framework/objects.py), shared by the live scheduler
and the extender: one list+watch informer per kind, whose store answers ``handle.objects(kind)``,
and the RBAC rules a deployment needs for them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from kubesched.framework.objects import ObjectKind
from kubesched.framework.types import ActionType
from kubesched.kube.api import ApiClient
from kubesched.kube.informer import DEFAULT_READ_TIMEOUT, Handlers, Informer, Obj

log = logging.getLogger(__name__)

#: Called after an object of a kind changed (the shell turns it into a ClusterEvent).
OnChange = Callable[[ObjectKind, ActionType], None]

_EMPTY: Mapping[str, dict[str, Any]] = {}


class ObjectInformers:
    """One informer per declared kind."""

    def __init__(
        self,
        api: ApiClient,
        kinds: Sequence[ObjectKind],
        on_change: OnChange | None = None,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        self.kinds = list(kinds)
        self._on_change = on_change
        self.informers: dict[str, Informer] = {
            k.name: Informer(api, k.collection_path, self._handlers(k), name=k.name, read_timeout=read_timeout)
            for k in self.kinds
        }

    def _handlers(self, kind: ObjectKind) -> Handlers:
        def changed(action: ActionType) -> Callable[..., None]:
            def handler(*_objs: Obj) -> None:
                if self._on_change is not None:
                    self._on_change(kind, action)

            return handler

        return Handlers(changed(ActionType.ADD), changed(ActionType.UPDATE_OTHER), changed(ActionType.DELETE))

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """The current objects of ``kind`` keyed ``namespace/name`` (``name`` if cluster-scoped)."""
        inf = self.informers.get(kind)
        return inf.store if inf is not None else _EMPTY

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    async def start(self, sync_timeout: float = 10.0) -> None:
        """Start every informer and wait up to ``sync_timeout`` for their first lists. A kind whose
        list fails (e.g. a CRD that is not installed) is logged and retried in the background; the
        shell goes on, and the plugin sees no objects of that kind until it syncs."""
        for inf in self.informers.values():
            inf.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + sync_timeout
        for kind, inf in self.informers.items():
            # Wait for the first list, unless the apiserver refused it outright: a kind this
            # identity may not list (403) or that is not installed (404) will not sync by waiting.
            while not inf.synced.is_set() and inf.stats.last_status not in (403, 404):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(inf.synced.wait(), min(remaining, 0.1))
            if not inf.synced.is_set():
                log.warning("event=objects_not_synced kind=%s err=%r (plugins see no %s objects until it syncs; %s)",
                            kind, inf.stats.last_error, kind, _not_synced_hint(inf.stats.last_status))

    async def stop(self) -> None:
        for inf in self.informers.values():
            with contextlib.suppress(Exception):
                await inf.stop()


def _not_synced_hint(status: int | None) -> str:
    """What to check for a kind that did not sync: its RBAC (403), its CRD (404), else the apiserver."""
    if status == 403:
        return "`kubesched run --print-rbac` or `kubesched extender --print-rbac` lists what the configuration needs"
    if status == 404:
        return "the apiserver does not serve it: is its CustomResourceDefinition installed (deploy/crds)?"
    return "it is retried in the background"


async def list_all(api: ApiClient, path: str, page_size: int = 500) -> list[dict[str, Any]]:
    """Every object of a collection, listed in pages (a one-off read, e.g. ``kubesched explain``)."""
    items: list[dict[str, Any]] = []
    async for page in list_pages(api, path, page_size):
        items.extend(page)
    return items


async def list_pages(
    api: ApiClient, path: str, page_size: int = 500
) -> AsyncIterator[list[dict[str, Any]]]:
    """The items of a collection one page at a time (``limit``/``continue``), so a caller that
    handles each page before asking for the next (``kubesched dump``) holds one page in memory.
    The pages are one consistent snapshot: the apiserver serves every continuation at the first
    page's resourceVersion. A continuation that expired (HTTP 410: the snapshot was compacted
    away while the pages were read) raises :class:`ApiError` like any other failure; resuming
    from a newer snapshot would mix two states of the cluster in one list."""
    cont: str | None = None
    while True:
        params: dict[str, object] = {"limit": page_size}
        if cont:
            params["continue"] = cont
        page = await api.request("GET", path, params=params, timeout=120)
        yield page.get("items") or []
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return


def rbac_rules(kinds: Iterable[ObjectKind]) -> list[dict[str, Any]]:
    """ClusterRole rules for the declared kinds: list/watch (what an informer does), the verbs a
    plugin writes the objects with (``ObjectKind.writes``) and subresources it must be authorized for
    (``ObjectKind.subresource_writes``), and patch (plus
    ``ObjectKind.status_writes``) of the status subresource of kinds a plugin writes status of. One
    rule per API group and verb set, resources sorted, so the output is stable and diffable against a
    committed manifest."""
    read: dict[str, set[str]] = {}
    #: (group, verbs) -> status subresources.
    status: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    #: (group, verbs) -> resources a plugin writes (ObjectKind.writes, e.g. PVs updated at PreBind).
    written: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for k in kinds:
        read.setdefault(k.group, set()).add(k.resource)
        if k.writes_status or k.status_writes:
            verbs = tuple(sorted({"patch", *k.status_writes}))
            status.setdefault((k.group, verbs), set()).add(f"{k.resource}/status")
        if k.writes:
            written.setdefault((k.group, tuple(sorted(k.writes))), set()).add(k.resource)
        for subresource, verbs in k.subresource_writes:
            written.setdefault((k.group, tuple(sorted(verbs))), set()).add(f"{k.resource}/{subresource}")
    rules: list[dict[str, Any]] = []
    for group in sorted(read):
        rules.append({"apiGroups": [group], "resources": sorted(read[group]), "verbs": ["list", "watch"]})
    for (group, verbs), resources in sorted(written.items()):
        rules.append({"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)})
    for (group, verbs), resources in sorted(status.items()):
        rules.append({"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)})
    return rules
