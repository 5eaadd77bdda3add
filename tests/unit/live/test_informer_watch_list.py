"""Watch-list (client-go's WatchListClient): the initial state streamed on one WATCH up to the
initial-events-end bookmark, the same stream then the watch; a paged LIST where the apiserver refuses it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.kube.informer import Handlers
from unit.live.informer_harness import collection_of, started_informer, until


async def test_watch_list_syncs_without_a_list_and_goes_on_watching_on_the_same_stream() -> None:
    coll = await collection_of(*(f"p{i}" for i in range(7)))
    async with started_informer(coll, page_size=3, watch_list=True) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert coll.list_requests == []
        w = coll.watch_requests[0]
        assert (w["sendInitialEvents"], w["resourceVersionMatch"], w["allowWatchBookmarks"]) == (
            "true", "NotOlderThan", "true")
        assert sorted(n for _, n, _ in rec.log) == [f"p{i}" for i in range(7)]
        assert {k for k, _, _ in rec.log} == {"add"}
        assert inf.resource_version == str(coll.rv)
        await coll.put("p1", flavour="new")
        await coll.put("p7")
        await coll.delete("p0")
        await rec.wait_for(10)
        assert rec.log[7:] == [("update", "p1", "uid-p1"), ("add", "p7", "uid-p7"), ("delete", "p0", "uid-p0")]
        assert len(coll.watch_requests) == 1  # no second request: the watch-list's stream went on
        assert set(inf.store) == {f"default/p{i}" for i in range(1, 8)}


async def test_refused_watch_list_falls_back_to_a_paged_list() -> None:
    coll = await collection_of(*(f"p{i}" for i in range(5)))
    coll.watch_list = False  # an apiserver without the WatchList feature: 422
    async with started_informer(coll, page_size=2, watch_list=True) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert len(coll.list_requests) == 3
        assert sorted(n for _, n, _ in rec.log) == [f"p{i}" for i in range(5)]
        assert inf.stats.watch_errors == 0  # a refusal is no outage: no backoff, no error counted
        await coll.put("p5")
        await rec.wait_for(6)
        assert rec.log[-1] == ("add", "p5", "uid-p5")
        assert "sendInitialEvents" not in coll.watch_requests[-1]


async def test_watch_list_after_410_reconciles_against_the_streamed_state() -> None:
    coll = await collection_of("keep", "change", "remove")
    async with started_informer(coll, watch_list=True) as (inf, rec):
        await asyncio.wait_for(inf.synced.wait(), 5)
        inf.pause()
        await until(lambda: not coll._watchers)
        coll.silent_put("change", flavour="x")
        coll.silent_delete("remove")
        coll.silent_put("added")
        coll.compact()
        rec.log.clear()
        inf.resume()
        await rec.wait_for(3)
        await asyncio.sleep(0.05)
        assert inf.stats.relists_after_gone == 1
        assert coll.list_requests == []
        assert sorted(rec.log) == sorted(
            [("update", "change", "uid-change"), ("delete", "remove", "uid-remove"), ("add", "added", "uid-added")]
        )
        await coll.put("later")
        await rec.wait_for(4)
        assert rec.log[-1] == ("add", "later", "uid-later")


async def test_apply_after_holds_the_listed_objects_until_it_is_set() -> None:
    coll = await collection_of(*(f"p{i}" for i in range(3)))
    gate = asyncio.Event()
    async with started_informer(coll, watch_list=True, apply_after=gate) as (inf, rec):
        await until(lambda: coll.watch_requests)
        await asyncio.sleep(0.1)
        assert not inf.synced.is_set() and rec.log == [] and inf.store == {}
        gate.set()
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert sorted(n for _, n, _ in rec.log) == ["p0", "p1", "p2"]


@pytest.mark.parametrize("watch_list", [True, False])
async def test_prepare_sees_each_listed_object_before_the_list_is_handed_on(watch_list: bool) -> None:
    """Handlers.prepare: a handler's per-object work done while the rest of the list streams in."""
    coll = await collection_of(*(f"p{i}" for i in range(7)))
    prepared: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []

    def prepare(obj: dict[str, Any]) -> None:
        assert added == []  # every listed object is prepared before the first is handed on
        prepared.append(obj)
        if obj["metadata"]["name"] == "p3":
            raise RuntimeError("a prepare that fails")

    handlers = Handlers(added.append, prepare=prepare)
    async with started_informer(coll, handlers, page_size=3, watch_list=watch_list) as (inf, _):
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert sorted(o["metadata"]["name"] for o in added) == [f"p{i}" for i in range(7)]  # p3 too
        assert {id(o) for o in prepared} == {id(o) for o in added}  # the very objects handed on
        await coll.put("p7")  # a watch event: handed on, not prepared
        await until(lambda: len(added) == 8)
        assert len(prepared) == 7
