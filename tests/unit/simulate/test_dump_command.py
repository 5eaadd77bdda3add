"""``kubesched dump`` against a small fake apiserver (aiohttp): lists are read page by page and each
page is written before the next is asked for, kinds the cluster does not serve are named, a
refused list is one line naming the kind, ``-n`` lists namespaced kinds per namespace, and the
file loads as ``simulate --cluster`` input. The real apiserver: tests/integration/test_dump.py."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.framework.objects import ObjectKind
from kubesched.kube.api import ApiClient, Connection
from kubesched.simulate.dump_command import NODE, POD, PRIORITY_CLASS, DumpError, dump_cluster, dump_kinds
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.simulate.inputs.dump_writer import DumpWriter
from kubesched.testing import node, pod

POD_GROUP = ObjectKind("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups")


class FakeApiserver:
    """Collections by path, served in pages of ``limit`` with an opaque ``continue``; other paths 404."""

    def __init__(self) -> None:
        self.collections: dict[str, list[dict[str, Any]]] = {}
        self.forbidden: set[str] = set()
        #: Paths whose continuation has expired (the apiserver compacted the list's snapshot).
        self.expired: set[str] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        self.requests.append((request.path, q))
        if request.path in self.forbidden:
            return web.json_response({"kind": "Status", "reason": "Forbidden", "code": 403,
                                      "message": "forbidden"}, status=403)
        if request.path in self.expired and "continue" in q:
            return web.json_response({"kind": "Status", "reason": "Expired", "code": 410,
                                      "message": "The provided continue parameter is too old"}, status=410)
        items = self.collections.get(request.path)
        if items is None:
            return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)
        start = int(q.get("continue", "0").removeprefix("tok-"))
        limit = int(q["limit"])
        meta: dict[str, Any] = {"resourceVersion": "7"}
        if start + limit < len(items):
            meta["continue"] = f"tok-{start + limit}"
        # As the apiserver does: a typed list's items carry no apiVersion/kind.
        page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items[start: start + limit]]
        return web.json_response({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page})


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApiserver, ApiClient]]:
    server_state = FakeApiserver()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", server_state.handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Connection(host=str(server.make_url("")).rstrip("/"), ssl_context=False), qps=None)
    try:
        yield server_state, api
    finally:
        await api.close()
        await server.close()


def managed(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return obj


class RecordingWriter(DumpWriter):
    """Notes how many list requests had been sent when each object was written."""

    def __init__(self, out: Any, apiserver: FakeApiserver) -> None:
        super().__init__(out, "yaml")
        self.apiserver = apiserver
        self.requests_at_write: list[int] = []

    def write(self, obj: dict[str, Any]) -> None:
        self.requests_at_write.append(len(self.apiserver.requests))
        super().write(obj)


async def test_each_page_is_written_before_the_next_is_listed(
    fake: tuple[FakeApiserver, ApiClient], tmp_path: Path
) -> None:
    apiserver, api = fake
    apiserver.collections["/api/v1/nodes"] = [managed(node(f"n{i}")) for i in range(7)]
    apiserver.collections["/api/v1/pods"] = [managed(pod(f"p{i}", cpu="100m")) for i in range(23)]
    apiserver.collections["/apis/scheduling.k8s.io/v1/priorityclasses"] = []
    path = tmp_path / "dump.yaml"
    with path.open("wb") as out:
        writer = RecordingWriter(out, apiserver)
        counts = await dump_cluster(api, dump_kinds([POD_GROUP]), writer, page_size=5)
        writer.close()

    assert counts.written == {"Node": 7, "PriorityClass": 0, "Pod": 23}
    assert counts.not_served == ["PodGroup (scheduling.x-k8s.io/v1alpha1 podgroups)"]
    pod_requests = [q for p, q in apiserver.requests if p == "/api/v1/pods"]
    assert [q.get("continue") for q in pod_requests] == [None, "tok-5", "tok-10", "tok-15", "tok-20"]
    assert all(q["limit"] == "5" for q in pod_requests)
    # Nodes: requests 1-2; PriorityClasses 3; PodGroups 4 (404); pod page k is request 4 + k.
    pods_written_at = writer.requests_at_write[7:]
    assert pods_written_at == [5 + i // 5 for i in range(23)]

    loaded = load_cluster(path)
    assert [n["metadata"]["name"] for n in loaded.nodes] == [f"n{i}" for i in range(7)]
    assert [p["metadata"]["name"] for p in loaded.pods] == [f"p{i}" for i in range(23)]
    assert loaded.pods[0]["apiVersion"] == "v1" and loaded.pods[0]["kind"] == "Pod"
    assert "managedFields" not in loaded.pods[0]["metadata"]


async def test_namespaces_list_namespaced_kinds_per_namespace_and_cluster_scoped_ones_whole(
    fake: tuple[FakeApiserver, ApiClient]
) -> None:
    apiserver, api = fake
    apiserver.collections["/api/v1/nodes"] = [node("n0")]
    apiserver.collections["/api/v1/namespaces/a/pods"] = [pod("pa", namespace="a")]
    apiserver.collections["/api/v1/namespaces/b/pods"] = [pod("pb", namespace="b")]
    buf = io.BytesIO()
    writer = DumpWriter(buf, "json")
    counts = await dump_cluster(api, [NODE, POD], writer, namespaces=["a", "b"], page_size=10)
    writer.close()
    assert counts.written == {"Node": 1, "Pod": 2}
    assert [p for p, _ in apiserver.requests] == ["/api/v1/nodes", "/api/v1/namespaces/a/pods",
                                                  "/api/v1/namespaces/b/pods"]


async def test_a_refused_list_names_the_kind_and_the_rbac_to_grant(fake: tuple[FakeApiserver, ApiClient]) -> None:
    apiserver, api = fake
    apiserver.collections["/api/v1/nodes"] = [node("n0")]
    apiserver.forbidden.add("/apis/scheduling.k8s.io/v1/priorityclasses")
    with pytest.raises(DumpError) as e:
        await dump_cluster(api, [NODE, PRIORITY_CLASS, POD], DumpWriter(io.BytesIO(), "yaml"))
    assert str(e.value).startswith("listing priorityclasses (PriorityClass, scheduling.k8s.io/v1): forbidden "
                                   "(HTTP 403)")
    assert "kubesched run --print-rbac" in str(e.value)


async def test_an_expired_continuation_is_an_error_not_a_mixed_snapshot(
    fake: tuple[FakeApiserver, ApiClient]
) -> None:
    apiserver, api = fake
    apiserver.collections["/api/v1/pods"] = [pod(f"p{i}") for i in range(4)]
    apiserver.expired.add("/api/v1/pods")
    with pytest.raises(DumpError) as e:
        await dump_cluster(api, [POD], DumpWriter(io.BytesIO(), "yaml"), page_size=2)
    assert "listing pods (Pod, v1): the list expired while it was read (HTTP 410" in str(e.value)


def test_dump_kinds_follow_the_configuration_nodes_first_pods_last() -> None:
    kinds = [k.kind for k in dump_kinds([POD_GROUP, PRIORITY_CLASS])]
    assert kinds == ["Node", "PriorityClass", "PodGroup", "Pod"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--salt", "s"], "--salt is only used with --anonymize"),
        (["--format", "yaml", "-o", "x.json"], "-o x.json: simulate --cluster reads *.json files as JSON"),
        (["-o", "no/such/dir/x.yaml"], "-o no/such/dir/x.yaml: no such directory no/such/dir"),
        (["--kubeconfig", "missing.conf"], "--kubeconfig missing.conf: no such file"),
        (["--in-cluster", "--context", "c"], "--in-cluster excludes --kubeconfig and --context"),
    ],
)
def test_bad_options_get_one_line(args: list[str], message: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["dump", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
