"""Property: malformed requests of every kind get a 4xx with a JSON ``Error``; the server stays up.

Bodies go through real HTTP to the server: random JSON that is not the verb's type, objects with
wrong field types, broken pods and nodes, truncated JSON, invalid UTF-8, huge strings, deeply
nested JSON, unknown verbs and wrong methods; and valid wire shapes mutated one field at a time
(any answer but a 5xx). CI sends a few thousand to the in-process server; ``python -m bench fuzz``
sends over 100,000 to a real `kubesched extender` process (``KUBESCHED_FUZZ_URL``,
``KUBESCHED_FUZZ_EXAMPLES``) and watches its memory.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, ClientTimeout
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubesched.extender.requests import VERBS
from kubesched.extender.service import ExtenderService
from kubesched.plugins.builtin import builtin_registry
from kubesched.testing import node, pod
from unit.extender.ext_helpers import ip_profile, make_client
from unit.fuzz_mutation import field_paths, mutate

#: Each example sends a batch of BATCH requests concurrently (hypothesis' per-example overhead dominates).
EXAMPLES = int(os.environ.get("KUBESCHED_FUZZ_EXAMPLES", "400"))
BATCH = 4
#: A running extender to fuzz instead of the in-process one (bench/chaos_fuzz.py sets it).
EXTERNAL_URL = os.environ.get("KUBESCHED_FUZZ_URL", "").rstrip("/")
MAX_BODY = 256 * 1024
FIELDS = ("Pod", "Nodes", "NodeNames", "NodeNameToVictims", "NodeNameToMetaVictims", "PodName", "PodNamespace",
          "PodUID", "Node")

finite_floats = st.floats(allow_nan=False, allow_infinity=False)  # orjson writes inf as null
json_scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | finite_floats
                | st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
not_object = json_scalars | st.lists(json_values, max_size=4)
not_array = json_scalars.filter(lambda v: v is not None) | st.dictionaries(st.text(max_size=5), json_values, max_size=3)
non_null_not_object = not_object.filter(lambda v: v is not None)
non_null_non_string = non_null_not_object.filter(lambda v: not isinstance(v, str))
key_case = st.sampled_from([str, str.lower, str.upper])


def _keys_without(forbidden: set[str]) -> st.SearchStrategy[str]:
    return st.text(max_size=12).filter(lambda k: k.casefold() not in forbidden)


VALID_POD = pod("p", cpu="100m", labels={"app": "ip"})
VALID_NODES = {"metadata": {}, "items": [node("a"), node("b")]}


@st.composite
def bad_requests(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """(method, path, body) that must all be answered with a 4xx."""
    verb = draw(st.sampled_from(VERBS))
    kind = draw(st.integers(0, 12))
    case = draw(key_case)
    body: Any
    if kind == 0:  # top level of the wrong JSON type
        body = draw(not_object)
    elif kind == 1:  # an object without the required fields
        required = {"bind": {"node", "podname", "podnamespace"}}.get(verb, {"pod"})
        body = draw(st.dictionaries(_keys_without(required), json_values, max_size=5))
    elif kind == 2:  # Pod of the wrong type (null counts: it is required)
        body = {case("Pod"): draw(not_object), case("NodeNames"): ["a"]}
        if verb == "bind":
            body = {case("PodName"): draw(non_null_not_object.filter(lambda v: not isinstance(v, str))),
                    case("PodNamespace"): "ns", "Node": "n"}
    elif kind == 3:  # Nodes / NodeNames of the wrong type, or both, or neither
        body = draw(st.sampled_from([
            {case("Pod"): VALID_POD, case("Nodes"): draw(non_null_not_object)},
            {case("Pod"): VALID_POD, case("NodeNames"): draw(not_array)},
            {case("Pod"): VALID_POD, case("NodeNames"): draw(st.lists(non_null_not_object.filter(
                lambda v: not isinstance(v, str)), min_size=1, max_size=3))},
            {case("Pod"): VALID_POD, case("Nodes"): {"items": draw(not_array)}},
            {case("Pod"): VALID_POD, case("Nodes"): {"items": draw(st.lists(non_null_not_object, min_size=1,
                                                                            max_size=3))}},
            {case("Pod"): VALID_POD, case("Nodes"): VALID_NODES, case("NodeNames"): ["a"]},
            {case("Pod"): VALID_POD},
        ]))
        if verb == "preempt":
            body = {case("Pod"): VALID_POD, case("NodeNameToMetaVictims"): draw(non_null_not_object)}
        elif verb == "bind":
            body = {"PodName": "p", "PodNamespace": "ns", case("PodUID"): draw(non_null_not_object.filter(
                lambda v: not isinstance(v, str))), "Node": "n"}
    elif kind == 4:  # broken pods the plugins would trip on
        field = draw(st.sampled_from(["metadata", "spec", "labels", "containers", "tolerations", "affinity",
                                      "nodeSelector", "resources", "requests", "priority", "name", "quantity"]))
        bad = draw(non_null_non_string.filter(lambda v: v != []))
        p = orjson.loads(orjson.dumps(VALID_POD))
        if field == "metadata":
            p["metadata"] = bad
        elif field == "spec":
            p["spec"] = bad
        elif field == "labels":
            p["metadata"]["labels"] = {"app": bad}
        elif field in ("containers", "tolerations"):
            p["spec"][field] = draw(st.sampled_from([5, "x", True, {"a": 1}, [1], [[]], ["s"], [None], [{}, 2]]))
        elif field == "affinity":
            p["spec"]["affinity"] = draw(st.sampled_from([bad, {"nodeAffinity": bad}]))
        elif field == "nodeSelector":
            p["spec"]["nodeSelector"] = draw(st.sampled_from([bad, {"k": bad}]))
        elif field == "resources":
            p["spec"]["containers"][0]["resources"] = bad
        elif field == "requests":
            p["spec"]["containers"][0]["resources"] = {"requests": bad}
        elif field == "priority":
            p["spec"]["priority"] = draw(st.text(max_size=5) | finite_floats | st.lists(st.none()))
        elif field == "name":
            p["metadata"]["name"] = draw(st.sampled_from(["", None]))
        else:
            p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": draw(st.sampled_from(
                ["abc", "1x", "--1", "1.2.3", ""]))}}
        body = {case("Pod"): p, case("Nodes"): VALID_NODES}
        if verb == "preempt":
            body = {"Pod": p, "NodeNameToMetaVictims": {}}
        elif verb == "bind":
            body = {"PodName": "", "PodNamespace": "ns", "Node": "n"}
    elif kind == 5:  # broken nodes
        bad = draw(non_null_non_string.filter(lambda v: v != []))
        n = node("a")
        where = draw(st.sampled_from(["metadata", "name", "allocatable", "quantity", "taints", "taint"]))
        if where == "metadata":
            n["metadata"] = bad
        elif where == "name":
            n["metadata"]["name"] = draw(st.sampled_from(["", None, 5, [], {}]))
        elif where == "allocatable":
            n["status"]["allocatable"] = draw(st.lists(st.integers(0, 9), min_size=1) | st.integers(0, 9)
                                              | st.booleans())
        elif where == "quantity":
            n["status"]["allocatable"] = {"cpu": draw(st.sampled_from(["abc", "1x", "", "--2", "1.2.3"]))}
        elif where == "taints":
            n["spec"]["taints"] = draw(st.dictionaries(st.text(max_size=3), json_values, min_size=1, max_size=2)
                                       | st.integers(-9, 9) | st.text(min_size=1, max_size=3))
        else:
            n["spec"]["taints"] = [draw(st.sampled_from([{"key": "k"}, {"effect": "NoSchedule"}, [], 3,
                                                         {"key": "k", "effect": "Sometimes"}]))]
        body = {"Pod": VALID_POD, "Nodes": {"items": [node("ok"), n]}}
        if verb in ("preempt", "bind"):
            body = {"Pod": VALID_POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": ""}]}}}
            if verb == "bind":
                body = {"PodName": "p", "PodNamespace": bad, "Node": "n"}
    elif kind == 6:  # names mode without a node cache
        body = {case("Pod"): VALID_POD, case("NodeNames"): draw(st.lists(st.text(max_size=10), max_size=3))}
        if verb == "preempt":
            body = {"Pod": VALID_POD, "NodeNameToMetaVictims": {draw(st.text(max_size=5)): {"Pods": [],
                                                                                          "NumPDBViolations": 0}}}
        elif verb == "bind":
            body = {"PodName": "p", "PodNamespace": "ns", "Node": ""}
    elif kind == 7:  # huge strings
        huge = "x" * draw(st.integers(10_000, 300_000))
        body = draw(st.sampled_from([
            {"Pod": huge, "NodeNames": []},
            {"Pod": {"metadata": {"name": "p", "labels": {"k": huge}}}, "NodeNames": [huge],
             "NodeNameToMetaVictims": huge},
            {"Pod": {"metadata": {"name": huge}}, "Nodes": {"items": [{"metadata": {"name": huge}, "status": huge}]},
             "NodeNameToVictims": [huge]},
            {"PodName": huge, "PodNamespace": "", "Node": huge},
        ]))
    elif kind == 8:  # preemption victims of the wrong shape
        body = draw(st.sampled_from([
            {"Pod": VALID_POD, "NodeNameToVictims": {"a": draw(non_null_not_object)}},
            {"Pod": VALID_POD, "NodeNameToVictims": {"a": {"Pods": [draw(non_null_not_object)]}}},
            {"Pod": VALID_POD, "NodeNameToVictims": {"a": {"Pods": [{"metadata": {"uid": draw(
                non_null_non_string)}}]}}},
            {"Pod": VALID_POD, "NodeNameToMetaVictims": {"a": {"NumPDBViolations": draw(
                st.text(max_size=3) | finite_floats.filter(lambda f: not f.is_integer()))}}},
            {"Pod": VALID_POD, "NodeNameToVictims": {}, "NodeNameToMetaVictims": {}},
        ]))
        if verb != "preempt":
            body = {"Pod": body["Pod"], "Nodes": draw(non_null_not_object)}
            if verb == "bind":
                body = {"Node": "n"}
    elif kind == 9:  # deeply nested: past orjson's recursion limit, or just under it inside a field
        depth = draw(st.sampled_from([200, 1_000, 1_025, 5_000, 100_000]))
        inner = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        nest = (inner[0] * depth + "1" + inner[1] * depth).encode()
        where = draw(st.sampled_from(["top", "Pod", "labels", "Nodes"]))
        if where == "top":
            return "POST", f"/{verb}", nest
        if where == "Pod":
            return "POST", f"/{verb}", b'{"Pod":' + nest + b',"NodeNames":[],"PodName":' + nest + b"}"
        if where == "labels":
            return "POST", f"/{verb}", (b'{"Pod":{"metadata":{"name":"p","labels":' + nest + b'}},"Nodes":{"items":[]},'
                                        b'"PodName":"p","PodNamespace":' + nest + b',"Node":"n"}')
        return "POST", f"/{verb}", (b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":' + nest + b'},"Node":'
                                    + nest + b',"NodeNameToMetaVictims":[' + nest + b"]}")
    else:
        # Not JSON at all: truncated, invalid UTF-8, or random bytes.
        valid = orjson.dumps({"Pod": VALID_POD, "Nodes": VALID_NODES})
        raw = draw(st.sampled_from(["truncated", "utf8", "bytes", "bigint"]))
        if raw == "truncated":
            data = valid[: draw(st.integers(0, len(valid) - 1))]
        elif raw == "utf8":
            data = valid[:20] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88"])) + valid[20:]
        elif raw == "bigint":
            data = b'{"Pod":' + str(draw(st.integers(2**64, 2**200))).encode() + b',"NodeNames":[]}'
        else:
            data = draw(st.binary(max_size=64).filter(lambda b: not _is_json_of_object(b)))
        method, path = "POST", f"/{verb}"
        if draw(st.integers(0, 4)) == 0:  # wrong verb or method, with any body
            method, path = draw(st.sampled_from([
                ("POST", "/x" + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz/", max_size=12))),
                ("POST", f"/{verb}/" + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=6))),
                ("GET", f"/{verb}"), ("PUT", f"/{verb}"), ("DELETE", f"/{verb}"), ("PATCH", f"/{verb}"),
            ]))
        return method, path, data
    return "POST", f"/{verb}", orjson.dumps(body)


def _is_json_of_object(b: bytes) -> bool:
    try:
        return isinstance(orjson.loads(b), dict)
    except orjson.JSONDecodeError:
        return False


Send = Callable[[str, str, bytes], Awaitable[tuple[int, str, bytes]]]


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[asyncio.AbstractEventLoop, Send]]:
    """An event loop and ``send(method, path, body) -> (status, content type, body)`` to the server."""
    loop = asyncio.new_event_loop()
    closers: list[Callable[[], Awaitable[None]]] = []
    if EXTERNAL_URL:
        session = loop.run_until_complete(_session())
        closers.append(session.close)

        async def send(method: str, path: str, data: bytes) -> tuple[int, str, bytes]:
            async with session.request(method, EXTERNAL_URL + path, data=data,
                                       headers={"Content-Type": "application/json"}) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), await resp.read()
    else:
        registry = builtin_registry()
        service = ExtenderService(ip_profile(registry), registry)
        client = loop.run_until_complete(make_client(service, max_body=MAX_BODY))
        closers.append(client.close)

        async def send(method: str, path: str, data: bytes) -> tuple[int, str, bytes]:
            async with client.request(method, path, data=data, headers={"Content-Type": "application/json"}) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), await resp.read()
    try:
        yield loop, send
    finally:
        for close in closers:
            loop.run_until_complete(close())
        loop.close()


async def _session() -> ClientSession:
    return ClientSession(timeout=ClientTimeout(total=30))


SENT: list[float] = []
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None, derandomize=not EXTERNAL_URL,
    phases=(Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _send_batch(running: tuple[asyncio.AbstractEventLoop, Send], reqs: list[tuple[str, str, bytes]]
                ) -> list[tuple[int, str, bytes]]:
    loop, send = running

    async def send_all() -> list[tuple[int, str, bytes]]:
        return await asyncio.gather(*(send(*r) for r in reqs))

    t0 = time.perf_counter()
    answers = loop.run_until_complete(send_all())
    SENT.extend([(time.perf_counter() - t0) / len(reqs)] * len(reqs))
    return answers


@FUZZ_SETTINGS
@given(reqs=st.lists(bad_requests(), min_size=BATCH, max_size=BATCH))
def test_malformed_requests_get_4xx_json_error(
    running: tuple[asyncio.AbstractEventLoop, Send], reqs: list[tuple[str, str, bytes]]
) -> None:
    answers = _send_batch(running, reqs)
    for (method, path, data), (status, ctype, body) in zip(reqs, answers, strict=True):
        where = (method, path, data[:200])
        assert 400 <= status < 500, (status, body[:300], where)
        assert ctype.startswith("application/json"), (ctype, where)
        answer = orjson.loads(body)
        assert isinstance(answer, dict), (body[:300], where)
        assert isinstance(answer.get("Error"), str) and answer["Error"], (body[:300], where)


# -- valid wire shapes, mutated one field at a time ------------------------------------------------------
VALID_BODIES: dict[str, dict[str, Any]] = {
    "filter": {"Pod": VALID_POD, "Nodes": VALID_NODES, "NodeNames": None},
    "prioritize": {"Pod": VALID_POD, "Nodes": VALID_NODES, "NodeNames": None},
    "preempt": {"Pod": VALID_POD, "NodeNameToVictims": None,
                "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 0}}},
    "bind": {"PodName": "p", "PodNamespace": "default", "PodUID": "u1", "Node": "a"},
}


PATHS = {verb: field_paths(body) for verb, body in VALID_BODIES.items()}
replacement = (json_values | st.sampled_from(["DELETE", "x" * 70_000, -1, 2**63, 1e308, "", [], {}])
               | st.builds(lambda d: {"a": [d] * 3}, json_values))


@st.composite
def mutated_requests(draw: st.DrawFn) -> tuple[str, bytes]:
    verb = draw(st.sampled_from(sorted(VALID_BODIES)))
    body = orjson.loads(orjson.dumps(VALID_BODIES[verb]))
    mutate(draw, body, PATHS[verb], replacement)
    return verb, orjson.dumps(body)


@FUZZ_SETTINGS
@given(reqs=st.lists(mutated_requests(), min_size=BATCH, max_size=BATCH))
def test_mutated_wire_shapes_never_get_a_5xx(
    running: tuple[asyncio.AbstractEventLoop, Send], reqs: list[tuple[str, bytes]]
) -> None:
    """A field of a valid request changed, removed or blown up: answered (200 when still valid,
    else 4xx with an Error), never a server error."""
    answers = _send_batch(running, [("POST", f"/{verb}", data) for verb, data in reqs])
    for (verb, data), (status, ctype, body) in zip(reqs, answers, strict=True):
        where = (verb, data[:300])
        assert status == 200 or 400 <= status < 500, (status, body[:300], where)
        assert ctype.startswith("application/json"), (ctype, where)
        answer = orjson.loads(body)
        if status != 200:
            assert isinstance(answer, dict) and isinstance(answer.get("Error"), str) and answer["Error"], where


def test_server_still_serves_after_the_fuzzing(running: tuple[asyncio.AbstractEventLoop, Send]) -> None:
    loop, send = running
    status, _, body = loop.run_until_complete(send("POST", "/filter", orjson.dumps({"Pod": VALID_POD,
                                                                                   "Nodes": VALID_NODES})))
    assert status == 200 and orjson.loads(body)["Error"] == ""
    status, _, _ = loop.run_until_complete(send("GET", "/healthz", b""))
    assert status == 200
    print(f"sent {len(SENT)} requests, {sum(SENT):.1f}s in HTTP")
    assert len(SENT) >= 2 * EXAMPLES * BATCH or len(SENT) == 0  # 0 when run alone with -k
