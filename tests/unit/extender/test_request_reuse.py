"""What the extender reuses between requests (a parsed pod, filter's node rows for prioritize, the
encoded prioritize entries) never outlives a change: answers are what a fresh computation gives."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import orjson
import pytest

from kubesched.extender.rows import rows_in, unique_rows
from kubesched.extender.service import ExtenderService
from kubesched.extender.wire import encode_extender_scores, encode_filter_result, encode_host_priority_list
from kubesched.framework.registry import Registry
from kubesched.testing import node
from unit.extender.ext_helpers import FakeCluster, ip_profile, make_client
from unit.extender.test_service import Client, budget, ip_pod, post


def scores(body: bytes) -> list[tuple[str, int]]:
    return [(h["Host"], h["Score"]) for h in orjson.loads(body)]


async def names_client(registry: Registry, nodes: list[dict[str, Any]]) -> tuple[Client, FakeCluster]:
    cluster = FakeCluster(nodes)
    return await make_client(ExtenderService(ip_profile(registry), registry, cluster)), cluster


async def test_prioritize_after_filter_sees_node_changes(registry: Registry) -> None:
    client, cluster = await names_client(registry, [node("n1", labels=budget(10)), node("n2", labels=budget(5))])
    try:
        args = {"Pod": ip_pod(), "NodeNames": ["n1", "n2"]}
        _, body = await post(client, "/filter", args)
        assert orjson.loads(body)["NodeNames"] == ["n1", "n2"]
        _, body = await post(client, "/prioritize", args)
        assert scores(body) == [("n1", 10), ("n2", 5)]
        # The node changed after filter: prioritize over the very same names scores the new node
        # (UnderlayIP normalises free IPs to the best node: 2 of 5 is 40).
        cluster.cache.add_or_update_node(node("n1", labels=budget(2)))
        _, body = await post(client, "/prioritize", args)
        assert scores(body) == [("n1", 4), ("n2", 10)]
    finally:
        await client.close()


async def test_prioritize_after_filter_follows_nodes_that_moved_or_went(registry: Registry) -> None:
    client, cluster = await names_client(registry, [node("n1", labels=budget(10)), node("n2", labels=budget(5))])
    try:
        args = {"Pod": ip_pod(), "NodeNames": ["n1", "n2"]}
        await post(client, "/filter", args)
        _, body = await post(client, "/prioritize", args)
        assert scores(body) == [("n1", 10), ("n2", 5)]
        await post(client, "/filter", args)
        # n1 leaves, another node takes its place in the cache, n1 comes back elsewhere with a new budget.
        cluster.cache.remove_node("n1")
        cluster.cache.add_or_update_node(node("n3", labels=budget(1)))
        cluster.cache.add_or_update_node(node("n1", labels=budget(7)))
        _, body = await post(client, "/prioritize", args)
        assert scores(body) == [("n1", 10), ("n2", 7)]
        _, body = await post(client, "/prioritize", {"Pod": ip_pod(), "NodeNames": ["n3", "n2"]})
        assert scores(body) == [("n3", 2), ("n2", 10)]
        await post(client, "/filter", args)
        cluster.cache.remove_node("n2")
        status, body = await post(client, "/prioritize", args)
        assert status == 400 and b"1 node(s) unknown to the extender's node cache: n2" in body
    finally:
        await client.close()


async def test_same_pod_changed_between_requests_is_judged_as_it_is_now(registry: Registry) -> None:
    client, _ = await names_client(registry, [node("small", cpu="1"), node("big", cpu="4")])
    try:
        small_pod = ip_pod(cpu="500m")
        big_pod = ip_pod(cpu="2")  # the same pod (metadata, resourceVersion included) asking for more
        for p in (small_pod, big_pod):
            p["metadata"].update(uid="u-1", resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z")
        assert small_pod["metadata"] == big_pod["metadata"]
        names = ["small", "big"]
        _, body = await post(client, "/filter", {"Pod": small_pod, "NodeNames": names})
        assert orjson.loads(body)["NodeNames"] == ["small", "big"]
        _, body = await post(client, "/filter", {"Pod": big_pod, "NodeNames": names})
        res = orjson.loads(body)
        assert res["NodeNames"] == ["big"]
        assert res["FailedAndUnresolvableNodes"] == {"small": "Insufficient cpu"}
        _, body = await post(client, "/filter", {"Pod": small_pod, "NodeNames": names})
        assert orjson.loads(body)["NodeNames"] == ["small", "big"]
    finally:
        await client.close()


async def test_a_pod_that_was_fine_then_broken_is_refused(registry: Registry) -> None:
    client, _ = await names_client(registry, [node("a")])
    try:
        good = ip_pod()
        assert (await post(client, "/filter", {"Pod": good, "NodeNames": ["a"]}))[0] == 200
        broken = ip_pod()
        broken["spec"]["containers"][0]["resources"] = []
        status, body = await post(client, "/prioritize", {"Pod": broken, "NodeNames": ["a"]})
        assert status == 400 and b"Pod.spec.containers[0].resources: expected an object, got array" in body
    finally:
        await client.close()


async def test_repeated_names_get_one_answer_each(registry: Registry) -> None:
    client, _ = await names_client(registry, [node("n1", labels=budget(10)), node("n2", labels=budget(5))])
    try:
        args = {"Pod": ip_pod(), "NodeNames": ["n2", "n1", "n2"]}
        _, body = await post(client, "/filter", args)
        assert orjson.loads(body)["NodeNames"] == ["n2", "n1", "n2"]
        _, body = await post(client, "/prioritize", args)
        assert scores(body) == [("n2", 5), ("n1", 10), ("n2", 5)]
    finally:
        await client.close()


@pytest.mark.parametrize(
    "hosts",
    [[], ["a"], ["n-1", "n-2", "n-1"], ["<b>&", "caf\u00e9", "line\u2028sep", 'q"uote\\', "\x00ctl"]],
)
def test_extender_scores_encode_like_the_general_host_priority_list(hosts: list[str]) -> None:
    for scores_ in ([i % 11 for i in range(len(hosts))], [10 - i % 11 for i in range(len(hosts))]):
        want = encode_host_priority_list(list(zip(hosts, scores_, strict=True)))
        assert encode_extender_scores(hosts, scores_) == want
        assert encode_extender_scores(hosts, scores_) == want  # from the cached entries
        assert encode_extender_scores(hosts, np.array(scores_, dtype=np.int64)) == want
    if hosts:
        out_of_range = [11, *range(len(hosts) - 1)]
        want = encode_host_priority_list(list(zip(hosts, out_of_range, strict=True)))
        assert encode_extender_scores(hosts, out_of_range) == want
        assert encode_extender_scores(hosts, np.array(out_of_range)) == want
    with pytest.raises(ValueError, match="hosts but"):
        encode_extender_scores(hosts, [0] * (len(hosts) + 1))


def test_row_helpers_match_numpy() -> None:
    rng = np.random.default_rng(7)
    for size in (0, 1, 5, 50, 400):
        rows = rng.integers(0, 60, size=size).astype(np.intp)
        uniq, inverse = unique_rows(rows, inverse=True)
        want_uniq, want_inverse = np.unique(rows, return_inverse=True)
        assert uniq.tolist() == want_uniq.tolist()
        assert inverse is not None and inverse.tolist() == want_inverse.tolist()
        assert unique_rows(rows)[0].tolist() == want_uniq.tolist()
        members = rng.integers(0, 80, size=size // 2 + 1).astype(np.intp)
        assert rows_in(rows, members).tolist() == np.isin(rows, members).tolist()


async def test_one_connection_carries_many_requests(registry: Registry) -> None:
    # The kube-scheduler's Go client keeps its connection to the extender open between calls; the
    # server must not answer with "Connection: close" (a new TCP handshake per pod otherwise).
    client, _ = await names_client(registry, [node("n1", labels=budget(10))])
    try:
        assert client.port is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        try:
            body = orjson.dumps({"Pod": ip_pod(), "NodeNames": ["n1"]})
            for verb in ("filter", "prioritize", "filter", "prioritize"):
                writer.write(f"POST /{verb} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
                assert head.startswith("http/1.1 200")
                assert "connection: close" not in head
                length = next(int(h.split(":")[1]) for h in head.split("\r\n") if h.startswith("content-length:"))
                answer = orjson.loads(await reader.readexactly(length))
                assert answer == ({"Nodes": None, "NodeNames": ["n1"], "FailedNodes": {},
                                   "FailedAndUnresolvableNodes": {}, "Error": ""} if verb == "filter"
                                  else [{"Host": "n1", "Score": 10}])
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        await client.close()


async def test_prioritize_answers_name_every_node_as_the_cluster_grows(registry: Registry) -> None:
    client, cluster = await names_client(registry, [node("n0", labels=budget(10)), node("n1", labels=budget(5))])
    try:
        _, body = await post(client, "/prioritize", {"Pod": ip_pod(), "NodeNames": ["n1", "n0"]})
        assert scores(body) == [("n1", 5), ("n0", 10)]
        for i in range(2, 150):  # past the node table's first capacities
            cluster.cache.add_or_update_node(node(f"n{i}", labels=budget(10)))
        names = [f"n{i}" for i in range(149, -1, -3)]
        _, body = await post(client, "/prioritize", {"Pod": ip_pod(), "NodeNames": names})
        # The pod is held on the first of the best (n149): the nodes tied with it get one less.
        assert scores(body) == [(n, 5 if n == "n1" else 10 if n == "n149" else 9) for n in names]
    finally:
        await client.close()


async def test_a_recurring_node_list_is_answered_as_the_nodes_are_now(registry: Registry) -> None:
    # kube-scheduler sends the same NodeNames windows over and over (extender/rows.py NameWindows):
    # the kept rows and the kept all-passed answer never outlive a change of the nodes behind them.
    names = ["n1", "n2", "<n3>"]  # a name Go escapes in the answer
    client, cluster = await names_client(registry, [node(n, labels=budget(5)) for n in names])
    try:
        args = {"Pod": ip_pod(), "NodeNames": names}
        want = encode_filter_result(node_names=names, failed={}, failed_unresolvable={})
        for _ in range(2):
            assert (await post(client, "/filter", args))[1] == want
        # n1 leaves and comes back in another row with no IP left; n2 is gone.
        cluster.cache.remove_node("n1")
        cluster.cache.add_or_update_node(node("n4", labels=budget(5)))
        cluster.cache.add_or_update_node(node("n1", labels=budget(0)))
        res = orjson.loads((await post(client, "/filter", args))[1])
        assert res["NodeNames"] == ["n2", "<n3>"] and res["FailedNodes"] == {"n1": "node(s) had no free underlay IP"}
        cluster.cache.remove_node("n2")
        status, body = await post(client, "/filter", args)
        assert status == 400 and b"1 node(s) unknown to the extender's node cache: n2" in body
        cluster.cache.add_or_update_node(node("n2", labels=budget(5)))
        cluster.cache.add_or_update_node(node("n1", labels=budget(5)))
        assert (await post(client, "/filter", args))[1] == want
    finally:
        await client.close()
