"""The informer drops metadata.managedFields (as kube-scheduler's informers do): stored objects and
objects handed to the handlers carry none; nothing else changes."""

from __future__ import annotations

from typing import Any

from kubesched.kube.informer import Handlers, Informer, trim


def _pod(rv: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"nodeName": ""},
    }


def test_trim_drops_managed_fields_only() -> None:
    pod = _pod("1")
    assert trim(pod) is pod
    assert "managedFields" not in pod["metadata"]
    assert pod["metadata"]["resourceVersion"] == "1" and pod["spec"] == {"nodeName": ""}
    assert trim({}) == {} and trim({"metadata": None}) == {"metadata": None}


async def test_watch_events_are_stored_and_delivered_trimmed() -> None:
    seen: list[dict[str, Any]] = []
    inf = Informer(None, "/api/v1/pods", Handlers(seen.append, lambda old, new: seen.append(new), seen.append))  # type: ignore[arg-type]
    inf._on_event({"type": "ADDED", "object": _pod("1")})
    inf._on_event({"type": "MODIFIED", "object": _pod("2")})
    assert [o["metadata"]["resourceVersion"] for o in seen] == ["1", "2"]
    assert all("managedFields" not in o["metadata"] for o in seen)
    assert all("managedFields" not in o["metadata"] for o in inf.store.values())


def test_trim_keeps_one_copy_of_each_repeated_string_and_changes_no_value() -> None:
    import orjson

    wire = orjson.dumps({**_pod("1"), "spec": {"nodeName": "node-1", "containers": [{"image": "pause:3.10"}],
                                               "tolerations": [{"key": "node.kubernetes.io/not-ready"}]}})
    a, b = trim(orjson.loads(wire)), trim(orjson.loads(wire))
    assert a == b == {**orjson.loads(wire), "metadata": {k: v for k, v in orjson.loads(wire)["metadata"].items()
                                                         if k != "managedFields"}}
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert a["spec"]["containers"][0]["image"] is b["spec"]["containers"][0]["image"]
    assert a["spec"]["tolerations"][0]["key"] is b["spec"]["tolerations"][0]["key"]


async def test_a_lists_objects_are_handed_on_at_once_and_interned_after() -> None:
    # A backlog's first bind must not wait for the interning (issue 32 item 2): the listed objects
    # reach the handlers as decoded, and share their repeated strings once the loop has run on.

    import orjson

    wire = orjson.dumps({**_pod("1"), "spec": {"nodeName": "node-1"}})
    seen: list[dict[str, Any]] = []
    inf = Informer(None, "/api/v1/pods", Handlers(seen.append, lambda old, new: seen.append(new), seen.append))  # type: ignore[arg-type]
    items = [trim({**orjson.loads(wire), "metadata": {**orjson.loads(wire)["metadata"], "uid": f"u{i}",
                                                      "name": f"p{i}"}}, intern=False) for i in range(600)]
    await inf._replace(items, "5")
    assert len(seen) == 600 and all("managedFields" not in o["metadata"] for o in seen)
    assert seen[0]["spec"]["nodeName"] is not seen[1]["spec"]["nodeName"]
    assert inf._interning is not None
    await inf._interning
    assert all(o["spec"]["nodeName"] is seen[0]["spec"]["nodeName"] for o in seen)
    assert len(inf.store) == 600


async def test_a_lists_interning_waits_for_intern_after() -> None:
    # kubesched run's backlog: the lists are interned once the backlog moves (its first bind), not
    # in turns with the first cycles.
    import asyncio

    import orjson

    wire = orjson.dumps({**_pod("1"), "spec": {"nodeName": "node-1"}})
    moving = asyncio.Event()
    inf = Informer(None, "/api/v1/pods", Handlers(), intern_after=moving)  # type: ignore[arg-type]
    items = [trim({**orjson.loads(wire), "metadata": {**orjson.loads(wire)["metadata"], "uid": f"u{i}",
                                                      "name": f"p{i}"}}, intern=False) for i in range(600)]
    await inf._replace(items, "5")
    assert inf._interning is not None
    for _ in range(20):  # the loop runs on: nothing is interned yet
        await asyncio.sleep(0)
    assert not inf._interning.done()
    assert items[0]["spec"]["nodeName"] is not items[599]["spec"]["nodeName"]
    moving.set()
    await inf._interning
    assert all(o["spec"]["nodeName"] is items[0]["spec"]["nodeName"] for o in items)
