"""generate_cluster: deterministic, valid, realistic, and a valid starting state."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
import yaml

from kubesched.api.quantity import milli_value, parse_quantity, value
from kubesched.simulate.inputs.dump import ClusterInput, load_cluster
from kubesched.simulate.inputs.generator import PRIORITY_CLASSES, generate_cluster
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.pod_requests import compute_pod_requests
from kubesched.snapshot.table import NodeTable


@pytest.fixture(scope="module")
def cluster() -> ClusterInput:
    return generate_cluster(400, 1500, seed=7)


def dump(c: ClusterInput) -> bytes:
    return orjson.dumps({"nodes": c.nodes, "pods": c.pods, "objects": c.objects, "t": c.terminal_pods})


def test_same_seed_same_cluster_different_seed_different_cluster() -> None:
    a, b = generate_cluster(60, 200, seed=1), generate_cluster(60, 200, seed=1)
    assert dump(a) == dump(b)
    assert a.source == "generated cluster (nodes=60, pods=200, seed=1)"
    c = generate_cluster(60, 200, seed=2)
    assert dump(a) != dump(c)
    assert [p["metadata"]["uid"] for p in a.pods] != [p["metadata"]["uid"] for p in c.pods]


@pytest.mark.parametrize(("nodes", "pods"), [(0, 0), (0, 5), (1, 3), (2, 0), (7, 30), (400, 1500)])
def test_exact_counts(nodes: int, pods: int) -> None:
    c = generate_cluster(nodes, pods, seed=3)
    assert len(c.nodes) == nodes
    assert len(c.pods) == pods
    assert set(c.objects) == {"PriorityClass"}  # the classes its pods name, nothing else
    assert c.skipped == {}


def test_negative_counts_rejected() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        generate_cluster(-1, 0, seed=0)


def test_every_object_parses(cluster: ClusterInput) -> None:
    table = NodeTable()
    for node in cluster.nodes:
        table.upsert_node(node)
    infos = [PodInfo.from_raw(p) for p in cluster.pods]
    assert len(table) == 400
    assert len({i.uid for i in infos}) == len(infos)
    assert len({i.key for i in infos}) == len(infos)
    assert sum(i.terminal for i in infos) == cluster.terminal_pods > 0
    assert all(i.scheduler_name == "default-scheduler" for i in infos)


def test_names_and_creation_order(cluster: ClusterInput) -> None:
    assert [n["metadata"]["name"] for n in cluster.nodes[:3]] == ["node-0001", "node-0002", "node-0003"]
    assert cluster.nodes[-1]["metadata"]["name"] == "node-0400"
    for p in cluster.pods:
        meta = p["metadata"]
        team = meta["namespace"]
        assert meta["name"].startswith(team + "-")
        assert meta["name"].rsplit("-", 1)[1].isdigit()
    stamps = [PodInfo.from_raw(p).creation_ts for p in cluster.pods]
    assert all(a < b for a, b in pairwise(stamps))


def test_prebound_pods_fit_their_nodes(cluster: ClusterInput) -> None:
    alloc: dict[str, dict[str, int]] = {}
    for node in cluster.nodes:
        a = node["status"]["allocatable"]
        alloc[node["metadata"]["name"]] = {
            r: milli_value(parse_quantity(q)) if r == "cpu" else value(parse_quantity(q)) for r, q in a.items()
        }
    used: dict[str, Counter[str]] = {name: Counter() for name in alloc}
    ports: dict[str, list[int]] = {name: [] for name in alloc}
    bound = 0
    for p in cluster.pods:
        node = p["spec"].get("nodeName")
        if not node or p["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        bound += 1
        assert p["status"]["phase"] == "Running"
        req = compute_pod_requests(p)
        used[node].update({"cpu": req.milli_cpu, "memory": req.memory, "pods": 1, **req.scalar})
        ports[node] += [
            port["hostPort"] for c in p["spec"]["containers"] for port in c.get("ports", []) if "hostPort" in port
        ]
    assert 0.15 * len(cluster.pods) < bound <= 0.2 * len(cluster.pods)
    for name, u in used.items():
        for resource, amount in u.items():
            assert amount <= alloc[name].get(resource, 0), (name, resource)
        assert len(ports[name]) == len(set(ports[name])), name


def test_prebound_pods_respect_taints_and_selectors(cluster: ClusterInput) -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.nodes}
    for p in cluster.pods:
        node_name = p["spec"].get("nodeName")
        if not node_name:
            continue
        node = nodes[node_name]
        tolerated = {t.get("key") for t in p["spec"].get("tolerations", [])}
        for taint in node["spec"].get("taints", []):
            if taint["key"] != "node.kubernetes.io/unschedulable":
                assert taint["key"] in tolerated, (p["metadata"]["name"], taint)
        labels = node["metadata"]["labels"]
        for k, v in p["spec"].get("nodeSelector", {}).items():
            assert labels.get(k) == v
        required = (
            p["spec"].get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        )
        if required:
            (expr,) = required["nodeSelectorTerms"][0]["matchExpressions"]
            assert labels.get(expr["key"]) in expr["values"]


def test_node_mix(cluster: ClusterInput) -> None:
    nodes = cluster.nodes
    cp = nodes[0]
    assert "node-role.kubernetes.io/control-plane" in cp["metadata"]["labels"]
    assert cp["spec"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    workers = nodes[1:]
    gpu = [n for n in workers if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert len(gpu) == round(0.10 * 399)
    for n in gpu:
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in n["spec"]["taints"]
    infra = [n for n in workers if "node-role.kubernetes.io/infra" in n["metadata"]["labels"]]
    assert len(infra) == round(0.03 * 399)
    for n in infra:
        assert {"key": "dedicated", "value": "infra", "effect": "NoSchedule"} in n["spec"]["taints"]
    assert sum(bool(n["spec"].get("unschedulable")) for n in workers) == round(0.01 * 399)
    zones = Counter(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes)
    assert sorted(zones) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    arch = Counter(n["metadata"]["labels"]["kubernetes.io/arch"] for n in nodes)
    assert arch["amd64"] > arch["arm64"] > 0
    for n in nodes:
        labels = n["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == n["metadata"]["name"]
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["node.kubernetes.io/instance-type"]
        assert n["status"]["allocatable"]["pods"] == "110"
        assert n["status"]["capacity"]["ephemeral-storage"] == "100Gi"
        cap = parse_quantity(n["status"]["capacity"]["cpu"])
        assert cap in {2, 4, 8, 16, 32, 48, 64, 96}
        mem_per_cpu = parse_quantity(n["status"]["capacity"]["memory"]) / cap / 2**30
        assert mem_per_cpu in {Fraction(4), Fraction(8), Fraction(12)}


def test_pod_mix(cluster: ClusterInput) -> None:
    infos = [PodInfo.from_raw(p) for p in cluster.pods]
    assert {i.priority for i in infos} <= set(PRIORITY_CLASSES.values())
    assert Counter(i.priority for i in infos)[2000000000] > 0
    assert any(i.requests.milli_cpu == 0 and i.requests.memory == 0 for i in infos)
    assert any(i.raw["spec"].get("initContainers") for i in infos)
    assert any("nodeSelector" in i.raw["spec"] for i in infos)
    affinity = [i.affinity.get("nodeAffinity", {}) for i in infos]
    assert any("requiredDuringSchedulingIgnoredDuringExecution" in a for a in affinity)
    assert any("preferredDuringSchedulingIgnoredDuringExecution" in a for a in affinity)
    assert any(i.host_ports for i in infos)
    gpu = [i for i in infos if i.requests.scalar.get("nvidia.com/gpu")]
    assert gpu
    for i in gpu:
        assert any(t.get("key") == "nvidia.com/gpu" for t in i.tolerations)
    cpu, memory = set(), set()
    for i in infos:
        for c in i.raw["spec"]["containers"]:
            requests = c["resources"].get("requests", {})
            cpu |= {milli_value(requests["cpu"])} if "cpu" in requests else set()
            memory |= {value(requests["memory"])} if "memory" in requests else set()
    assert (min(cpu), max(cpu)) == (100, 4000)
    assert (min(memory), max(memory)) == (128 * 2**20, 16 * 2**30)
    assert len({i.namespace for i in infos}) >= 4


def test_generates_the_asked_sizes_at_scale() -> None:
    # Its speed is a benchmark's business (bench/), not a timed test's.
    c = generate_cluster(5000, 10000, seed=0)
    assert (len(c.nodes), len(c.pods)) == (5000, 10000)


def test_round_trips_through_load_cluster(tmp_path: Path) -> None:
    c = generate_cluster(30, 120, seed=11)
    path = tmp_path / "cluster.yaml"
    classes = list(c.objects["PriorityClass"].values())
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": c.nodes + c.pods + classes}))
    loaded = load_cluster(path)
    assert loaded.nodes == c.nodes
    assert loaded.pods == c.pods  # admission agrees with the priorities the generator wrote
    assert loaded.objects["PriorityClass"] == c.objects["PriorityClass"]
    assert loaded.terminal_pods == c.terminal_pods


def test_pod_topology_gives_apps_spread_and_affinity_without_changing_anything_else() -> None:
    plain = generate_cluster(300, 1200, seed=3)
    shaped = generate_cluster(300, 1200, seed=3, pod_topology=True)
    assert plain.nodes == shaped.nodes
    assert [p["metadata"] for p in plain.pods] == [p["metadata"] for p in shaped.pods]
    for a, b in zip(plain.pods, shaped.pods, strict=True):
        extra = {k for k in b["spec"] if b["spec"][k] != a["spec"].get(k)}
        assert extra <= {"topologySpreadConstraints", "affinity"}
    spec_of = [p["spec"] for p in shaped.pods]
    spread = [s for s in spec_of if "topologySpreadConstraints" in s]
    anti = [s for s in spec_of if "podAntiAffinity" in s.get("affinity", {})]
    aff = [s for s in spec_of if "podAffinity" in s.get("affinity", {})]
    assert 0.2 < len(spread) / len(spec_of) < 0.5
    assert len(anti) > 0 and len(aff) > 0
    # One pattern per app: every replica of an app carries the same constraints.
    by_app: dict[str, set[str]] = {}
    for p in shaped.pods:
        app = p["metadata"]["labels"]["app.kubernetes.io/name"]
        by_app.setdefault(app, set()).add(repr(p["spec"].get("topologySpreadConstraints")))
    assert all(len(v) == 1 for v in by_app.values())
    assert generate_cluster(300, 1200, seed=3, pod_topology=True).pods == shaped.pods
