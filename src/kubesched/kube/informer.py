"""List + watch informers (client-go's reflector and store, for raw JSON objects).

One :class:`Informer` per resource path (``/api/v1/nodes``, ``/api/v1/pods``, any collection, e.g.
``/apis/scheduling.x-k8s.io/v1alpha1/podgroups``):

* **watch-list** (``watch_list``, client-go's WatchListClient, on by default since v1.35): one WATCH
  with ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`` streams
  the initial state as ADDED events out of the apiserver's watch cache and marks its end with a
  BOOKMARK annotated ``k8s.io/initial-events-end``; the same stream then goes on as the watch. No
  pagination, no etcd read (8,152 pods: one request instead of 17 pages of 500). An apiserver that
  refuses it (an error, or a stream that ends before the bookmark) gets the paged list from then on,
  as client-go's reflector falls back (tools/cache/reflector.go ``watchList``).
* otherwise **list** in pages (``limit``/``continue``; handed on in list order, or shuffled as client-go's
  watch-list hands them: ``shuffle_lists``), then **watch** from the list's ``resourceVersion`` with
  ``allowWatchBookmarks=true`` and a server ``timeoutSeconds`` drawn from 5–10 minutes (client-go's
  ``minWatchTimeout`` × [1, 2)); a client read timeout ends a connection that went silent (the
  apiserver sends a bookmark about every minute, so a quiet watch is never mistaken for a dead one).
* a watch that ends, or fails, is resumed from the last ``resourceVersion`` seen (events or
  bookmarks) after an exponential backoff (0.8 s → 30 s with jitter) while the apiserver is down.
* **410 Gone** (as an HTTP status, or as an ``ERROR`` event with code 410, or a ``continue`` token
  that expired mid-list) → a fresh list, and the store is *reconciled* against it:
  :func:`reconcile` emits add / update / delete for exactly the differences, so after an outage no
  event is lost and none is delivered twice.

Handlers are plain synchronous callables run on the event loop (the scheduler core is not
thread-safe and does no I/O, so this is both safe and cheap).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesched.kube.aiohttp_import import aiohttp
from kubesched.kube.api import ApiClient, ApiError
from kubesched.kube.interning import intern_strings
from kubesched.kube.ratelimit import Backoff

log = logging.getLogger(__name__)

#: kube-scheduler's pod informer's field selector (pkg/scheduler/scheduler.go ``newPodInformer``),
#: used by both shells: finished pods are neither listed nor watched, and a pod that finishes leaves
#: the watch as a DELETED event carrying its final object.
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
#: Its complement (a field selector can only AND its terms): the Succeeded or Failed pods.
FINISHED_PODS = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"

Obj = dict[str, Any]

#: client-go reflector: minWatchTimeout = 5 min, each watch asks for [min, 2·min).
MIN_WATCH_TIMEOUT = 300.0
#: The apiserver's watch cache sends a bookmark roughly every minute; no byte for this long = dead.
DEFAULT_READ_TIMEOUT = 150.0
LIST_PAGE_SIZE = 500
#: The annotation on the BOOKMARK that ends a watch-list's initial events
#: (k8s.io/apimachinery/pkg/apis/meta/v1 ``InitialEventsAnnotationKey``).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class GoneError(Exception):
    """The resourceVersion we hold is too old (410): relist."""


class WatchListRefused(Exception):
    """The apiserver did not serve a watch-list (older server, WatchList gate off): list in pages."""


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


@dataclass(slots=True)
class Handlers:
    on_add: Callable[[Obj], None] = lambda obj: None
    on_update: Callable[[Obj, Obj], None] = lambda old, new: None
    on_delete: Callable[[Obj], None] = lambda obj: None
    #: Called with each listed object as it arrives, before the list is handed on (in the order the
    #: apiserver sends them, not the order they are handed on in): a handler's own per-object work
    #: (parsing) then runs while the rest of a large list is still being encoded and sent, instead of
    #: after its last object (issue 32 item 2). Nothing here may change what the handlers see.
    prepare: Callable[[Obj], None] | None = None


@dataclass(slots=True)
class Delta:
    kind: str  # "add" | "update" | "delete"
    obj: Obj
    old: Obj | None = None


def trim(obj: Obj, intern: bool = True) -> Obj:
    """Drop ``metadata.managedFields`` before an object is stored or handed on: nothing here reads
    them and they are about half of a pod's memory (a bound, KWOK-run pod: 14.9 KB → 7.6 KB as Python
    objects). kube-scheduler's informers do the same (cmd/kube-scheduler/app/server.go, ``trim``).
    Then (``intern``) one copy of each repeated string value (:mod:`kubesched.kube.interning`:
    about a third of what is left); a list's objects are interned after they are handed on
    (:func:`_intern_in_chunks`)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if intern:
        intern_strings(obj)
    return obj


#: Listed objects interned between two yields to the event loop.
_INTERN_CHUNK = 256
#: Listed changes handed on between two yields to the event loop (Informer._replace).
_APPLY_CHUNK = 256


async def _intern_in_chunks(items: list[Obj], after: asyncio.Event | None = None) -> None:
    """Intern a list's objects after the list was handed on (and ``after`` is set), a chunk at a
    time: a backlog's first bind does not wait for ~20 µs a pod of interning (issue 32 item 2); the
    store and the handlers hold these very dicts, and a string value swapped for an equal one
    changes nothing they read."""
    if after is not None:
        await after.wait()
    for start in range(0, len(items), _INTERN_CHUNK):
        for obj in items[start:start + _INTERN_CHUNK]:
            intern_strings(obj)
        await asyncio.sleep(0)


def reconcile(store: dict[str, Obj], items: Iterable[Obj]) -> list[Delta]:
    """The changes that turn ``store`` into the listed ``items`` (client-go's Replace, made explicit).

    Deletes come first (an object recreated under the same key with a new uid is a delete of the old
    one and an add of the new one), then adds and updates in list order. Objects whose
    resourceVersion did not change produce nothing. ``store`` is not modified.
    """
    listed: dict[str, Obj] = {}
    for obj in items:
        listed[object_key(obj)] = obj
    deletes: list[Delta] = []
    changes: list[Delta] = []
    for key, old in store.items():
        new = listed.get(key)
        if new is None or _uid(new) != _uid(old):
            deletes.append(Delta("delete", old))
    for key, new in listed.items():
        prev = store.get(key)
        if prev is None or _uid(new) != _uid(prev):
            changes.append(Delta("add", new))
        elif _rv(new) != _rv(prev):
            changes.append(Delta("update", new, prev))
    return deletes + changes


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    relists_after_gone: int = 0
    watches: int = 0
    watch_errors: int = 0
    events: int = 0
    bookmarks: int = 0
    last_error: str = ""
    #: time.monotonic() of the first failure since the informer last heard from the apiserver, or
    #: None while it is connected (a list answered, or a watch delivered anything).
    disconnected_since: float | None = None
    #: HTTP status of the last failed request, when the apiserver answered (403: not allowed).
    last_status: int | None = None


@dataclass(eq=False)
class Informer:
    api: ApiClient
    path: str
    handlers: Handlers = field(default_factory=Handlers)
    name: str = ""
    params: dict[str, str] = field(default_factory=dict)
    read_timeout: float = DEFAULT_READ_TIMEOUT
    min_watch_timeout: float = MIN_WATCH_TIMEOUT
    page_size: int = LIST_PAGE_SIZE
    backoff: Backoff = field(default_factory=Backoff)
    #: An object that cannot be handled is logged and skipped; the informer goes on.
    store: dict[str, Obj] = field(default_factory=dict)
    resource_version: str = ""
    stats: InformerStats = field(default_factory=InformerStats)
    #: Hand a list's objects to the handlers in a random order, as client-go's informers do since
    #: WatchListClient went on by default (v1.35): the reflector collects the initial objects into a
    #: temporary store and replaces with its ``List()``, the iteration order of a Go map
    #: (client-go tools/cache/reflector.go ``watchList``, thread_safe_store.go ``List``). The live
    #: scheduler sets it so a backlog is queued, and nodes enter the snapshot, in kube-scheduler's
    #: order; otherwise list (key) order.
    shuffle_lists: bool = False
    #: Get the initial state with a watch-list (one streamed WATCH) rather than a paged LIST
    #: (a list refused as a watch-list is listed in pages instead).
    watch_list: bool = False
    #: Hold the first listed state until this is set before handing it on (the live scheduler's pods
    #: wait for its nodes, so every assigned pod lands on a known node), while it is already fetched.
    apply_after: asyncio.Event | None = None
    #: Intern a list's objects only once this is set (the live scheduler's backlog: after its first
    #: bind, so that the interning does not share the loop with the first cycles).
    intern_after: asyncio.Event | None = None

    def disconnected_for(self, now: float | None = None) -> float:
        """Seconds since the informer last failed to reach the apiserver without hearing from it
        since (0 while connected)."""
        since = self.stats.disconnected_since
        return 0.0 if since is None else (time.monotonic() if now is None else now) - since

    def __post_init__(self) -> None:
        self.name = self.name or self.path
        self.synced = asyncio.Event()
        self._resume = asyncio.Event()
        self._resume.set()
        self._task: asyncio.Task[None] | None = None
        #: The last list's objects being interned (_intern_in_chunks); held so it is not collected.
        self._interning: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._rng = random.Random()
        self._stopped = False
        #: The store must be (re)filled from a list (or a watch-list's initial events) first.
        self._need_list = True
        self._fallback_to_list = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer {self.name}")
        return self._task

    async def stop(self) -> None:
        self._stopped = True
        self._resume.set()
        if self._interning is not None:
            self._interning.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def pause(self) -> None:
        """Drop the watch and do not reconnect until :meth:`resume` (tests, debugging)."""
        self._resume.clear()
        if self._watch_task is not None:
            self._watch_task.cancel()

    def resume(self) -> None:
        self._resume.set()

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        while not self._stopped:
            await self._resume.wait()
            try:
                if self._need_list and self.watch_list and not self._fallback_to_list:
                    # The initial state and then the watch, on one stream.
                    self._watch_task = asyncio.get_running_loop().create_task(self._watch_list())
                else:
                    if self._need_list:
                        await self._list_and_reconcile()
                        self._fallback_to_list = False
                        self.synced.set()
                    self._watch_task = asyncio.get_running_loop().create_task(self._watch())
                try:
                    await self._watch_task
                finally:
                    self._watch_task = None
                continue  # a watch that timed out or was closed: resume at once
            except asyncio.CancelledError:
                if self._stopped or self._resume.is_set():
                    raise
                continue  # paused
            except WatchListRefused as e:
                # As client-go: this list in pages, the next one (after a 410) tries the watch-list again.
                log.info("informer=%s event=watch_list_refused msg=%r: listing in pages", self.name, str(e))
                self._fallback_to_list = True
                continue
            except GoneError as e:
                log.info("informer=%s event=gone msg=%r: relisting", self.name, str(e))
                self.stats.relists_after_gone += 1
                self._need_list = True
                continue
            except (TimeoutError, aiohttp.ClientError, OSError, ApiError, ValueError) as e:
                self.stats.watch_errors += 1
                self.stats.last_status = e.status if isinstance(e, ApiError) else None
                if self.stats.disconnected_since is None:
                    self.stats.disconnected_since = time.monotonic()
                self.stats.last_error = f"{type(e).__name__}: {e}"
                delay = self.backoff.next()
                log.warning(
                    "informer=%s event=error err=%r retry_in=%.1fs", self.name, self.stats.last_error, delay
                )
                await asyncio.sleep(delay)

    async def _list_and_reconcile(self) -> None:
        items: list[Obj] = []
        cont: str | None = None
        started = time.monotonic()
        while True:
            params: dict[str, Any] = {**self.params, "limit": self.page_size}
            if cont:
                params["continue"] = cont
            try:
                page = await self.api.request("GET", self.path, params=params, timeout=120)
            except ApiError as e:
                if e.status == 410 and cont:
                    log.info("informer=%s event=continue_expired: restarting the list", self.name)
                    items, cont = [], None
                    continue
                raise
            kind = str(page.get("kind", "")).removesuffix("List")
            api_version = page.get("apiVersion", "")
            for obj in page.get("items") or []:
                # Lists omit kind/apiVersion on items; watches include them. Make them the same.
                obj.setdefault("kind", kind)
                obj.setdefault("apiVersion", api_version)
                items.append(trim(obj, intern=False))
                self._prepare(obj)
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or None
            if not cont:
                rv = str(meta.get("resourceVersion", ""))
                break
        received = time.monotonic()
        if self.apply_after is not None:
            await self.apply_after.wait()
        await self._replace(items, rv, (started, received))

    async def _replace(self, items: list[Obj], rv: str, timing: tuple[float, float] | None = None) -> None:
        """The listed state (a paged list's or a watch-list's initial events) into the store, handed
        on ``_APPLY_CHUNK`` changes at a time with a yield to the event loop between: the handlers
        of a large backlog (~40 µs a pod: 0.3 s for 8,152 pods) no longer hold the loop in one go,
        so the other informers' requests (the plugins' kinds) go out and their answers are read
        meanwhile, as each of upstream's informers runs on its own goroutine (issue 32 item 2).
        The changes are handed on in the same order, and nothing else of this informer runs between
        (its stream is not read until the list is in)."""
        applying = time.monotonic()
        self.stats.lists += 1
        self.stats.disconnected_since = None
        self.stats.last_status = None
        if self.shuffle_lists:
            self._rng.shuffle(items)
        deltas = reconcile(self.store, items)
        for start in range(0, len(deltas), _APPLY_CHUNK):
            if start:
                await asyncio.sleep(0)
            for d in deltas[start:start + _APPLY_CHUNK]:
                self._apply(d.kind, d.obj, d.old)
        self.resource_version = rv
        self._need_list = False
        # Where a slow start went: the apiserver and the transfer (list_ms: request to the last
        # object), waiting for the informer it is handed on after (held_ms), handing it on
        # (apply_ms: the handlers, and what else the loop ran between the chunks).
        list_ms, held_ms = ((1000 * (timing[1] - timing[0]), 1000 * (applying - timing[1]))
                            if timing is not None else (-1.0, -1.0))
        log.info("informer=%s event=listed items=%d changes=%d rv=%s list_ms=%.0f held_ms=%.0f apply_ms=%.0f",
                 self.name, len(items), len(deltas), rv, list_ms, held_ms, 1000 * (time.monotonic() - applying))
        if items:
            self._interning = asyncio.get_running_loop().create_task(_intern_in_chunks(items, self.intern_after))

    async def _watch_list(self) -> None:
        """client-go's ``watchList``: the initial state as ADDED events up to the bookmark annotated
        ``k8s.io/initial-events-end`` (collected, then reconciled into the store as a list is), then
        the same stream as the watch. Any failure before that bookmark is :class:`WatchListRefused`
        (client-go falls back to LIST on any watch-list error; a 410 included)."""
        timeout = self.min_watch_timeout * (1.0 + self._rng.random())
        params = {
            **self.params,
            "watch": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": int(timeout),
        }
        self.stats.watches += 1
        items: list[Obj] | None = []
        started = time.monotonic()
        try:
            async with self.api.stream(self.path, params, self.read_timeout, timeout + 30.0) as events:
                async for ev in events:
                    if items is None:
                        self._on_event(ev)
                        continue
                    etype = ev.get("type")
                    obj: Obj = ev.get("object") or {}
                    if etype == "ADDED":
                        items.append(trim(obj, intern=False))
                        self._prepare(obj)
                    elif etype == "BOOKMARK":
                        annotations = (obj.get("metadata") or {}).get("annotations") or {}
                        if annotations.get(INITIAL_EVENTS_END) == "true":
                            received = time.monotonic()
                            if self.apply_after is not None:
                                await self.apply_after.wait()
                            self.backoff.reset()
                            await self._replace(items, _rv(obj), (started, received))
                            items = None
                            self.synced.set()
                    else:
                        message = obj.get("message", "")
                        raise WatchListRefused(f"{etype} event before the initial events ended: {message}")
        except ApiError as e:
            if items is not None:
                raise WatchListRefused(str(e)) from None
            if e.status == 410:
                raise GoneError(str(e)) from None
            raise
        if items is not None:
            ended = f"the stream ended after {len(items)} objects"
            raise WatchListRefused(f"{ended} without the {INITIAL_EVENTS_END} bookmark")

    async def _watch(self) -> None:
        timeout = self.min_watch_timeout * (1.0 + self._rng.random())
        params = {
            **self.params,
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": int(timeout),
        }
        self.stats.watches += 1
        try:
            async with self.api.stream(self.path, params, self.read_timeout, timeout + 30.0) as events:
                got_any = False
                async for ev in events:
                    if not got_any:
                        got_any = True
                        self.backoff.reset()
                        self.stats.disconnected_since = None
                    self._on_event(ev)
        except ApiError as e:
            if e.status == 410:
                raise GoneError(str(e)) from None
            raise

    def _on_event(self, ev: Obj) -> None:
        etype = ev.get("type")
        obj: Obj = trim(ev.get("object") or {})
        if etype == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise GoneError(str(obj.get("message", "")))
            raise ApiError("WATCH", self.path, int(code or 500), obj)
        rv = _rv(obj)
        if etype == "BOOKMARK":
            self.stats.bookmarks += 1
            if rv:
                self.resource_version = rv
            return
        self.stats.events += 1
        key = object_key(obj)
        old = self.store.get(key)
        if etype == "DELETED":
            self._apply("delete", obj)
        elif old is not None and _uid(old) != _uid(obj):
            self._apply("delete", old)
            self._apply("add", obj)
        elif old is None:
            self._apply("add", obj)
        else:
            self._apply("update", obj, old)
        if rv:
            self.resource_version = rv

    def _prepare(self, obj: Obj) -> None:
        prepare = self.handlers.prepare
        if prepare is None:
            return
        try:
            prepare(obj)
        except Exception:  # the object is handed on all the same; its handler meets the problem again
            log.exception("informer=%s event=prepare_error key=%s", self.name, object_key(obj))

    def _apply(self, kind: str, obj: Obj, old: Obj | None = None) -> None:
        key = object_key(obj)
        if kind == "delete":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        try:
            if kind == "add":
                self.handlers.on_add(obj)
            elif kind == "update":
                self.handlers.on_update(old or {}, obj)
            else:
                self.handlers.on_delete(obj)
        except Exception:
            log.exception("informer=%s event=handler_error kind=%s key=%s", self.name, kind, key)
