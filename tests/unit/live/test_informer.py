"""Informer logic: reconcile diffs, list pagination, watch resume, 410 → relist + reconcile, outages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.kube.informer import Handlers, object_key, reconcile
from unit.live.informer_harness import collection_of, started_informer, until


def _obj(name: str, rv: int, uid: str | None = None, ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "resourceVersion": str(rv)}}


# -- reconcile (pure) ---------------------------------------------------------------------------------
def test_reconcile_emits_exactly_the_differences() -> None:
    store = {object_key(o): o for o in (_obj("same", 1), _obj("changed", 2), _obj("gone", 3))}
    listed = [_obj("same", 1), _obj("changed", 5), _obj("new", 6)]
    deltas = reconcile(store, listed)
    assert [(d.kind, d.obj["metadata"]["name"]) for d in deltas] == [
        ("delete", "gone"),
        ("update", "changed"),
        ("add", "new"),
    ]
    upd = deltas[1]
    assert upd.old is not None and upd.old["metadata"]["resourceVersion"] == "2"
    assert len(store) == 3  # untouched


def test_reconcile_recreated_object_is_delete_then_add() -> None:
    store = {"default/p": _obj("p", 1, uid="old")}
    deltas = reconcile(store, [_obj("p", 9, uid="new")])
    assert [(d.kind, d.obj["metadata"]["uid"]) for d in deltas] == [("delete", "old"), ("add", "new")]


def test_reconcile_nothing_changed_is_empty() -> None:
    objs = [_obj(f"p{i}", i) for i in range(5)]
    assert reconcile({object_key(o): o for o in objs}, objs) == []


def test_object_key_cluster_scoped() -> None:
    assert object_key({"metadata": {"name": "n1"}}) == "n1"
    assert object_key({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"


# -- against the fake apiserver ---------------------------------------------------------------------
async def test_paginated_list_then_watch_delivers_each_change_once() -> None:
    coll = await collection_of(*(f"p{i}" for i in range(7)))
    async with started_informer(coll, page_size=3) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert len(coll.list_requests) == 3  # 3 + 3 + 1
        assert sorted(n for _, n, _ in rec.log) == [f"p{i}" for i in range(7)]
        assert {k for k, _, _ in rec.log} == {"add"}
        await coll.put("p1", flavour="new")
        await coll.put("p7")
        await coll.delete("p0")
        await rec.wait_for(10)
        assert rec.log[7:] == [("update", "p1", "uid-p1"), ("add", "p7", "uid-p7"), ("delete", "p0", "uid-p0")]
        assert inf.resource_version == str(coll.rv)
        w = coll.watch_requests[0]
        assert w["allowWatchBookmarks"] == "true"
        assert 300 <= int(w["timeoutSeconds"]) < 600
        assert set(inf.store) == {f"default/p{i}" for i in range(1, 8)}


@pytest.mark.parametrize("as_http", [False, True], ids=["error-event", "http-410"])
async def test_410_relists_and_reconciles_without_loss_or_duplicates(as_http: bool) -> None:
    coll = await collection_of("keep", "change", "remove")
    coll.gone_as_http = as_http
    async with started_informer(coll) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        inf.pause()
        await until(lambda: not coll._watchers)
        # While we are away: changes the watch can no longer replay.
        coll.silent_put("change", flavour="x")
        coll.silent_delete("remove")
        coll.silent_put("added")
        coll.silent_delete("keep")
        coll.silent_put("keep", uid="uid-keep-2")  # recreated under the same name
        coll.compact()
        rec.log.clear()
        inf.resume()
        await rec.wait_for(5)
        await asyncio.sleep(0.05)
        assert inf.stats.relists_after_gone == 1
        assert sorted(rec.log) == sorted(
            [
                ("update", "change", "uid-change"),
                ("delete", "remove", "uid-remove"),
                ("add", "added", "uid-added"),
                ("delete", "keep", "uid-keep"),
                ("add", "keep", "uid-keep-2"),
            ]
        )
        # ... and the watch goes on from the relisted version.
        await coll.put("later")
        await rec.wait_for(6)
        assert rec.log[-1] == ("add", "later", "uid-later")


async def test_continue_token_expiring_mid_list_restarts_the_list() -> None:
    coll = await collection_of(*(f"p{i}" for i in range(5)))
    coll.fail_continue_once = True
    async with started_informer(coll, page_size=2) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert sorted(n for _, n, _ in rec.log) == [f"p{i}" for i in range(5)]  # each exactly once


async def test_outage_backs_off_and_resumes_from_last_resource_version() -> None:
    coll = await collection_of("a")
    async with started_informer(coll) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        await until(lambda: coll._watchers)
        rv_before = inf.resource_version
        coll.down = True
        await coll.drop_watches()
        await until(lambda: inf.stats.watch_errors >= 2)
        coll.down = False
        await coll.put("b")  # still in the log: a resume, not a relist
        await rec.wait_for(2)
        assert rec.log == [("add", "a", "uid-a"), ("add", "b", "uid-b")]
        assert inf.stats.lists == 1
        assert any(w["resourceVersion"] == rv_before for w in coll.watch_requests[1:])


async def test_bookmarks_advance_the_resource_version() -> None:
    coll = await collection_of("a")
    coll.bookmark_every = 0.05
    async with started_informer(coll, Handlers()) as (inf, _):
        await asyncio.wait_for(inf.synced.wait(), 5)
        coll.silent_put("b")  # moves the collection's rv without an event
        await until(lambda: inf.stats.bookmarks > 0 and inf.resource_version == str(coll.rv))


async def test_silent_connection_is_detected_by_the_read_timeout() -> None:
    coll = await collection_of("a")
    async with started_informer(coll, Handlers(), read_timeout=0.2) as (inf, _):
        await asyncio.wait_for(inf.synced.wait(), 5)
        await until(lambda: len(coll.watch_requests) >= 2, timeout=5)  # reconnected after silence
        assert inf.stats.lists == 1


async def test_handler_exception_does_not_stop_the_informer() -> None:
    coll = await collection_of("bad")
    seen: list[str] = []

    def add(o: dict[str, Any]) -> None:
        if o["metadata"]["name"] == "bad":
            raise RuntimeError("boom")
        seen.append(o["metadata"]["name"])

    async with started_informer(coll, Handlers(on_add=add)) as (inf, _):
        await asyncio.wait_for(inf.synced.wait(), 5)
        await coll.put("good")
        await until(lambda: seen == ["good"])


@pytest.mark.parametrize("shuffle", [False, True], ids=["list-order", "shuffled"])
async def test_listed_objects_are_handed_on_in_list_or_random_order(shuffle: bool) -> None:
    """Without ``shuffle_lists`` the handlers see a list in key order; with it (the live scheduler,
    as client-go's watch-list: Go map order) in an order that differs from one process to the next
    and is not the key order, every object still exactly once."""
    orders = []
    for _ in range(3):
        coll = await collection_of(*(f"p{i:02d}" for i in range(40)))
        async with started_informer(coll, page_size=16, shuffle_lists=shuffle) as (inf, rec):
            await asyncio.wait_for(inf.synced.wait(), 5)
        names = [n for _, n, _ in rec.log]
        assert sorted(names) == [f"p{i:02d}" for i in range(40)]
        orders.append(names)
    if shuffle:
        assert len({tuple(o) for o in orders}) == 3 and sorted(orders[0]) not in orders
    else:
        assert orders == [sorted(orders[0])] * 3
