"""The four verbs end to end through the in-process HTTP server, with exact response bodies."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubesched.extender.requests import Deadline
from kubesched.extender.service import ExtenderService
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.registry import Registry
from kubesched.framework.score_totals import ScoredNodes
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod
from unit.extender.ext_helpers import FakeCluster, ip_profile, make_client

Client = TestClient[Any, Any]


def rv_node(name: str, rv: str = "1", **kw: Any) -> dict[str, Any]:
    n = node(name, **kw)
    n["metadata"]["resourceVersion"] = rv
    return n


def budget(n: int) -> dict[str, str]:
    return {"kubesched.io/underlay-ips": str(n)}


def ip_pod(name: str = "p", node_name: str = "", cpu: str = "500m", **kw: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, labels={"app": "ip"}, node_name=node_name, **kw)


NODES = [
    rv_node("a", labels=budget(0)),
    rv_node("b", labels={"node-role.kubernetes.io/control-plane": ""}),
    rv_node("c"),
    rv_node("d", cpu="100m"),
]
FILTER_REST = (
    b',"FailedNodes":{"a":"node(s) had no free underlay IP"},'
    b'"FailedAndUnresolvableNodes":{"b":"node(s) were control-plane nodes without underlay IPs",'
    b'"d":"Insufficient cpu"},'
    b'"Error":""}'
)


async def post(client: Client, path: str, body: Any) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    resp = await client.post(path, data=data, headers={"Content-Type": "application/json"})
    assert resp.headers["Content-Type"].startswith("application/json")
    return resp.status, await resp.read()


async def test_filter_nodes_mode_exact_body(client: Client) -> None:
    status, body = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"metadata": {}, "items": NODES},
                                                  "NodeNames": None})
    assert status == 200
    # The passing node comes back as the very object sent, in the NodeList shape.
    assert body == b'{"Nodes":{"metadata":{},"items":[' + orjson.dumps(NODES[2]) + b']},"NodeNames":null' + FILTER_REST


async def test_filter_accepts_lower_case_keys_and_missing_nil_field(client: Client) -> None:
    status, body = await post(client, "/filter", {"pod": ip_pod(), "nodes": {"items": NODES}})
    assert status == 200
    assert body.endswith(b'"NodeNames":null' + FILTER_REST)


async def test_filter_everything_passes_and_empty_node_list(client: Client) -> None:
    _, body = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": [NODES[2]]}})
    assert body == (b'{"Nodes":{"metadata":{},"items":[' + orjson.dumps(NODES[2])
                    + b']},"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}')
    _, body = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"metadata": {}, "items": None}})
    assert body == (b'{"Nodes":{"metadata":{},"items":[]},"NodeNames":null,"FailedNodes":{},'
                    b'"FailedAndUnresolvableNodes":{},"Error":""}')


async def test_filter_prefilter_narrowing_is_unresolvable(client: Client) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}
    p = ip_pod(affinity=affinity)
    _, body = await post(client, "/filter", {"Pod": p, "Nodes": {"items": NODES}})
    res = orjson.loads(body)
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["c"]
    assert set(res["FailedAndUnresolvableNodes"]) == {"a", "b", "d"}
    assert res["FailedAndUnresolvableNodes"]["a"].startswith("node(s) didn't satisfy plugin(s) [")


async def test_filter_names_mode_uses_the_cluster_cache_with_pods(registry: Registry) -> None:
    pods = [ip_pod(f"x{i}", node_name="c", cpu="10m") for i in range(10)] + [ip_pod("y", node_name="e")]
    cluster = FakeCluster([node("c"), node("e"), node("a", labels=budget(0))], pods)
    client = await make_client(ExtenderService(ip_profile(registry), registry, cluster))
    try:
        status, body = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": None, "NodeNames": ["c", "e", "a"]})
        assert status == 200
        assert body == (b'{"Nodes":null,"NodeNames":["e"],"FailedNodes":{"a":"node(s) had no free underlay IP",'
                        b'"c":"node(s) had no free underlay IP"},"FailedAndUnresolvableNodes":{},"Error":""}')
        # Unknown names: a 400 naming them, in the filter result shape.
        status, body = await post(client, "/filter", {"Pod": ip_pod(), "NodeNames": ["c", "zz"]})
        assert status == 400
        assert body == (b'{"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,'
                        b'"Error":"kubesched extender: bad filter request: NodeNames: 1 node(s) unknown to the '
                        b'extender\'s node cache: zz"}')
        # Not synced yet: the scheduler gets the reason as the filter Error.
        cluster.synced_flag = False
        status, body = await post(client, "/filter", {"Pod": ip_pod(), "NodeNames": ["c"]})
        assert status == 200 and b"has not synced" in body
    finally:
        await client.close()


async def test_names_mode_without_cluster_is_refused(client: Client) -> None:
    status, body = await post(client, "/filter", {"Pod": ip_pod(), "NodeNames": ["a"]})
    assert status == 400
    assert b"keeps no node cache: start it with --kubeconfig" in body


async def test_nodes_mode_with_cluster_counts_bound_pods(registry: Registry) -> None:
    cluster = FakeCluster([node("c"), node("e")], [ip_pod(f"x{i}", node_name="c", cpu="10m") for i in range(10)])
    client = await make_client(ExtenderService(ip_profile(registry), registry, cluster))
    try:
        _, body = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": [rv_node("c"), rv_node("e")]}})
        res = orjson.loads(body)
        assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["e"]
        assert res["FailedNodes"] == {"c": "node(s) had no free underlay IP"}
    finally:
        await client.close()


async def test_prioritize_maps_scores_to_extender_range(client: Client) -> None:
    nodes = [rv_node("ten", labels=budget(10)), rv_node("five", labels=budget(5)), rv_node("one", labels=budget(1))]
    status, body = await post(client, "/prioritize", {"Pod": ip_pod(), "Nodes": {"items": nodes}})
    assert status == 200
    # UnderlayIP normalises free IPs to 0-100 (10 → 100, 5 → 50, 1 → 10); /10 gives the extender range.
    assert body == b'[{"Host":"ten","Score":10},{"Host":"five","Score":5},{"Host":"one","Score":1}]'
    _, body = await post(client, "/prioritize", {"Pod": ip_pod(), "Nodes": {"items": []}})
    assert body == b"[]"


WEIGHTED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: w
    plugins:
      multiPoint:
        enabled:
          - name: UnderlayIP
            weight: 3
      score:
        disabled:
          - name: "*"
        enabled:
          - name: UnderlayIP
            weight: 3
          - name: NodeResourcesFit
            weight: 1
    pluginConfig:
      - name: UnderlayIP
        args:
          podSelector:
            matchLabels:
              app: ip
"""


async def test_prioritize_weighted_mean_rounded_down(registry: Registry) -> None:
    svc = ExtenderService(ip_profile(registry, WEIGHTED), registry)
    client = await make_client(svc)
    try:
        nodes = [rv_node("n1", cpu="4", memory="8Gi", labels=budget(10)), rv_node("n2", cpu="2", labels=budget(4))]
        _, body = await post(client, "/prioritize", {"Pod": ip_pod(), "Nodes": {"items": nodes}})
        got = {h["Host"]: h["Score"] for h in orjson.loads(body)}
        # Recompute from the framework's own weighted totals: total * 10 // (100 * (3 + 1)).
        entry, names = svc._request_table(nodes, Deadline("test", 5))
        pod_info = PodInfo.from_raw(ip_pod())
        state = CycleState()
        entry.framework.run_pre_filter(state, pod_info)
        rows = np.array([entry.table.index[n] for n in names], dtype=np.intp)
        entry.framework.run_pre_score(state, pod_info, rows)
        scored = entry.framework.run_score(state, pod_info, rows)
        assert isinstance(scored, ScoredNodes)
        assert set(scored.by_plugin) == {"UnderlayIP", "NodeResourcesFit"}
        want = {n: int(t) * 10 // 400 for n, t in zip(names, scored.totals.tolist(), strict=True)}
        assert got == want
        assert got["n1"] > got["n2"]
    finally:
        await client.close()


async def test_preempt_meta_victims_kept_only_where_the_pod_then_fits(registry: Registry) -> None:
    full = [ip_pod(f"f{i}", node_name="full") for i in range(2)]
    tight = [ip_pod(f"t{i}", node_name="tight") for i in range(2)]
    cluster = FakeCluster([node("full", labels=budget(2)), node("tight", labels=budget(2))], full + tight)
    client = await make_client(ExtenderService(ip_profile(registry), registry, cluster))
    try:
        uid = [p["metadata"]["uid"] for p in full + tight]
        args = {
            "Pod": ip_pod(),
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {
                "full": {"Pods": [{"UID": uid[0]}], "NumPDBViolations": 1},  # frees one IP: fits
                "tight": {"Pods": [], "NumPDBViolations": 0},  # frees nothing: dropped
            },
        }
        status, body = await post(client, "/preempt", args)
        assert status == 200
        assert body == (b'{"NodeNameToMetaVictims":{"full":{"Pods":[{"UID":"' + uid[0].encode()
                        + b'"}],"NumPDBViolations":1}}}')
        # The live table was restored: the victim is still counted.
        assert len(cluster.cache.table.pods[cluster.cache.table.row_of("full")]) == 2  # type: ignore[index]
        status, _ = await post(client, "/preempt", {"Pod": ip_pod(), "NodeNameToMetaVictims": {"nope": None}})
        assert status == 400
    finally:
        await client.close()


async def test_preempt_full_victims_without_cluster(client: Client) -> None:
    # Node objects come from earlier filter calls; a node never seen is passed through unjudged.
    await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": NODES}})
    victim = ip_pod("v", node_name="c")
    args = {"Pod": ip_pod(), "NodeNameToVictims": {
        "a": {"Pods": [victim], "NumPDBViolations": 0},  # budget 0: never fits
        "c": {"Pods": [victim], "NumPDBViolations": 0},
        "unseen": {"Pods": [], "NumPDBViolations": 2},
    }}
    status, body = await post(client, "/preempt", args)
    assert status == 200
    uid = victim["metadata"]["uid"].encode()
    assert body == (b'{"NodeNameToMetaVictims":{"c":{"Pods":[{"UID":"' + uid + b'"}],"NumPDBViolations":0},'
                    b'"unseen":{"Pods":[],"NumPDBViolations":2}}}')


async def test_preempt_adds_the_victims_this_profile_needs_and_spares_the_rest(registry: Registry) -> None:
    # kube-scheduler chose `cpu-hog` (its NodeResourcesFit needs the CPU); the extender's
    # UnderlayIP also needs the node's only IP, held by `ip-low`: both go. `ip-high` (priority
    # above the preemptor) is never a victim, so node `guarded` is dropped.
    cpu_hog = pod("cpu-hog", cpu="1", node_name="open", priority=0)
    ip_low = ip_pod("ip-low", node_name="open", priority=0)
    ip_high = ip_pod("ip-high", node_name="guarded", priority=1000)
    cluster = FakeCluster([node("open", labels=budget(1)), node("guarded", labels=budget(1))],
                          [cpu_hog, ip_low, ip_high])
    client = await make_client(ExtenderService(ip_profile(registry), registry, cluster))
    try:
        uid = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (cpu_hog, ip_low, ip_high)}
        args = {"Pod": ip_pod("preemptor", priority=100), "NodeNameToMetaVictims": {
            "open": {"Pods": [{"UID": uid["cpu-hog"]}], "NumPDBViolations": 0},
            "guarded": {"Pods": [], "NumPDBViolations": 0},
        }}
        status, body = await post(client, "/preempt", args)
        assert status == 200
        got = orjson.loads(body)["NodeNameToMetaVictims"]
        assert list(got) == ["open"]
        assert [v["UID"] for v in got["open"]["Pods"]] == [uid["cpu-hog"], uid["ip-low"]]
        table = cluster.cache.table
        assert len(table.pods[table.row_of("open")]) == 2  # type: ignore[index]  # restored
    finally:
        await client.close()


async def test_preempt_does_not_add_a_victim_the_profile_does_not_need(registry: Registry) -> None:
    # Two IPs, one used: kube-scheduler's victim alone is enough for this profile too.
    victim = pod("victim", cpu="1", node_name="n", priority=0)
    bystander = ip_pod("bystander", node_name="n", priority=0)
    cluster = FakeCluster([node("n", labels=budget(2))], [victim, bystander])
    client = await make_client(ExtenderService(ip_profile(registry), registry, cluster))
    try:
        args = {"Pod": ip_pod("preemptor", priority=100), "NodeNameToMetaVictims": {
            "n": {"Pods": [{"UID": victim["metadata"]["uid"]}], "NumPDBViolations": 1}}}
        status, body = await post(client, "/preempt", args)
        assert status == 200
        got = orjson.loads(body)["NodeNameToMetaVictims"]
        assert got == {"n": {"Pods": [{"UID": victim["metadata"]["uid"]}], "NumPDBViolations": 1}}
    finally:
        await client.close()


async def test_bind_with_and_without_cluster(registry: Registry, client: Client) -> None:
    args = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u1", "Node": "c"}
    status, body = await post(client, "/bind", args)
    assert status == 200 and body.startswith(b'{"Error":"kubesched extender: bind needs a cluster connection')

    cluster = FakeCluster([node("c")])
    svc = ExtenderService(ip_profile(registry), registry, cluster)
    c2 = await make_client(svc)
    try:
        p = ip_pod("p")
        await post(c2, "/filter", {"Pod": p, "NodeNames": ["c"]})
        uid = p["metadata"]["uid"]
        status, body = await post(c2, "/bind", {**args, "PodUID": uid})
        assert (status, body) == (200, b'{"Error":""}')
        assert cluster.bound == [("ns", "p", uid, "c")]
        # Accounted at once (the informer confirms later): UnderlayIP sees one IP in use on c.
        assert cluster.cache.table.pod(uid) is not None
        cluster.fail_bind = 'pods "p" not found'
        status, body = await post(c2, "/bind", args)
        assert (status, body) == (200, b'{"Error":"binding ns/p to c: pods \\"p\\" not found"}')
        status, body = await post(c2, "/bind", {"PodName": "p"})
        assert status == 400 and body.startswith(b'{"Error":"kubesched extender: bad bind request: PodNamespace')
    finally:
        await c2.close()


async def test_node_tables_are_cached_by_resource_version(service: ExtenderService, client: Client) -> None:
    args = {"Pod": ip_pod(), "Nodes": {"items": NODES}}
    await post(client, "/filter", args)
    await post(client, "/prioritize", args)
    assert (service.table_builds, service.table_hits) == (1, 1)
    changed = [*NODES[:3], rv_node("d", rv="2", cpu="100m")]
    await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": changed}})
    assert service.table_builds == 2
    no_rv = [node("x")]
    await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": no_rv}})
    await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": no_rv}})
    assert service.table_builds == 4  # without resourceVersions nothing is cached


async def test_deadline(service: ExtenderService) -> None:
    client = await make_client(service, timeout=1e-9)
    try:
        args = {"Pod": ip_pod(), "Nodes": {"items": NODES}}
        status, body = await post(client, "/filter", args)
        assert status == 200 and b'"Error":"kubesched extender: filter exceeded its 1e-09s deadline' in body
        status, body = await post(client, "/prioritize", args)
        assert status == 504 and body.startswith(b'{"Error":"kubesched extender: prioritize exceeded')
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("method", "path", "status", "start"),
    [
        ("POST", "/filterx", 404, b'{"Error":"no such extender endpoint POST /filterx'),
        ("GET", "/filter", 405, b'{"Nodes":null,"NodeNames":null,"FailedNodes":null,'),
        ("PUT", "/bind", 405, b'{"Error":"bind takes POST'),
    ],
)
async def test_unknown_verbs_and_methods_get_json(client: Client, method: str, path: str, status: int,
                                                  start: bytes) -> None:
    resp = await client.request(method, path, data=b"{}")
    assert resp.status == status
    assert (await resp.read()).startswith(start)


async def test_body_size_limit(service: ExtenderService) -> None:
    client = await make_client(service, max_body=2048)
    try:
        status, body = await post(client, "/prioritize", b'{"Pod":"' + b"x" * 4096 + b'"}')
        assert status == 413 and body == b'{"Error":"request body larger than 2048 bytes"}'
    finally:
        await client.close()


async def test_url_prefix(service: ExtenderService) -> None:
    client = await make_client(service, url_prefix="/scheduler/")
    try:
        status, _ = await post(client, "/scheduler/filter", {"Pod": ip_pod(), "Nodes": {"items": NODES}})
        assert status == 200
        status, _ = await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": NODES}})
        assert status == 404
    finally:
        await client.close()


async def test_health_and_metrics(client: Client) -> None:
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200
    await post(client, "/filter", {"Pod": ip_pod(), "Nodes": {"items": NODES}})
    await post(client, "/filter", b"{")
    text = await (await client.get("/metrics")).text()
    assert 'kubesched_extender_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'kubesched_extender_requests_total{code="400",verb="filter"} 1.0' in text
    assert 'kubesched_extender_request_duration_seconds_count{verb="filter"} 2.0' in text
    assert "kubesched_extender_node_table_builds 1.0" in text


def test_request_metrics_expose_what_prometheus_clients_counter_and_histogram_would() -> None:
    # The same observations through prometheus_client's own Counter and Histogram and through
    # the extender's plain counts: the same exposition, but for the _created timestamps.
    import re

    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from kubesched.extender.metrics import LATENCY_BUCKETS, RequestMetrics

    reference = CollectorRegistry()
    requests = Counter("kubesched_extender_requests", "Extender requests by verb and HTTP status code.",
                       ["verb", "code"], registry=reference)
    latency = Histogram("kubesched_extender_request_duration_seconds", "Time to answer an extender request, by verb.",
                        ["verb"], buckets=LATENCY_BUCKETS, registry=reference)
    errors = Counter("kubesched_extender_errors", "Requests answered with an Error, by verb and kind.",
                     ["verb", "kind"], registry=reference)
    ours = CollectorRegistry()
    metrics = RequestMetrics()
    ours.register(metrics)
    for verb, code, seconds in [("filter", "200", 0.0004), ("filter", "200", 0.0005), ("filter", "400", 0.003),
                                ("prioritize", "200", 7.0), ("prioritize", "200", 0.001), ("bind", "500", 5.0)]:
        requests.labels(verb, code).inc()
        latency.labels(verb).observe(seconds)
        metrics.count(verb, code)
        metrics.observe(verb, seconds)
    for verb, kind in [("filter", "bad_request"), ("filter", "bad_request"), ("bind", "internal")]:
        errors.labels(verb, kind).inc()
        metrics.error(verb, kind)

    def text(registry: CollectorRegistry) -> str:
        return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", generate_latest(registry).decode())

    assert text(ours) == text(reference)
    assert 'kubesched_extender_request_duration_seconds_bucket{le="0.0005",verb="filter"} 2.0' in text(ours)
