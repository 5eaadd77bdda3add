"""``kubesched capacity`` (simulate/whatif/capacity.py): every answer is checked against a brute force
that shares none of its search — one plain simulation per candidate, replicas added one at a time
(or nodes one at a time) until the answer flips — on clusters and templates where different
plugins are the limit (resources, node selectors, host ports, required anti-affinity, topology
spread, taints)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched import testing as builders
from kubesched.cli import main
from kubesched.config.load import load_config
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.records import SCHEDULED
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.simulate.inputs.workload import PodTemplate, latest_timestamp
from kubesched.simulate.whatif.capacity import NodeTemplate, fewest_nodes, how_many_fit
from unit.simulate.test_cli_simulate import ok

REGISTRY = builtin_registry()
CONFIG = load_config(None, REGISTRY)


def template(name: str, spec: dict[str, Any], labels: dict[str, str] | None = None, replicas: int = 1) -> PodTemplate:
    return PodTemplate("Deployment", "apps/v1", "team", name, replicas,
                       {"metadata": {"labels": labels or {"app": name}}, "spec": spec}, "test")


def container(cpu: str, memory: str = "64Mi", **extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


def small_cluster() -> ClusterInput:
    nodes = [builders.node(f"n{i}", cpu=str(2 + i % 3), memory="8Gi", pods=12,
                           labels={"zone": f"z{i % 2}", "disk": "ssd" if i % 3 == 0 else "hdd"},
                           taints=[{"key": "gpu", "value": "1", "effect": "NoSchedule"}] if i == 5 else None)
             for i in range(6)]
    pods = [builders.pod(f"sys-{i}", cpu="700m", memory="1Gi", node_name=f"n{i % 6}") for i in range(5)]
    pods.append(builders.pod("waiting", cpu="1", memory="1Gi"))
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source="test")


TEMPLATES = {
    "cpu": template("cpu", {"containers": [container("600m")]}),
    "memory": template("memory", {"containers": [container("10m", "1500Mi")]}),
    "selector": template("selector", {"nodeSelector": {"disk": "ssd"}, "containers": [container("300m")]}),
    "host-port": template("host-port", {"containers": [container("10m", ports=[{"containerPort": 80,
                                                                             "hostPort": 8080}])]}),
    "anti-affinity": template("anti-affinity", {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "anti-affinity"}}, "topologyKey": "kubernetes.io/hostname"}]}},
        "containers": [container("10m")]}),
    "spread": template("spread", {
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "spread"}}}],
        "nodeSelector": {"disk": "hdd"}, "containers": [container("250m")]}),
}


def simulate(cluster: ClusterInput, seed: int = 0) -> Any:
    return asyncio.run(Simulation(CONFIG, REGISTRY, cluster, seed=seed).run())


def brute_force_fit(cluster: ClusterInput, t: PodTemplate, seed: int) -> tuple[int, dict[str, int], str]:
    previous: dict[str, int]
    """Add replicas one at a time, each a fresh simulation, until one is not placed."""
    created = latest_timestamp(cluster.pods) + 1.0
    classes = cluster.objects.get("PriorityClass", {})
    k, previous = 0, {}
    while True:
        replicas = [t.replica(i, created + i, classes, never_preempt=True) for i in range(k + 1)]
        result = simulate(replace(cluster, pods=[*cluster.pods, *replicas]), seed)
        uids = {r["metadata"]["uid"] for r in replicas}
        recs = [result.records[u] for u in sorted(uids, key=lambda u: int(u.rsplit("-", 1)[1]))]
        if any(rec.status != SCHEDULED for rec in recs):
            return k, previous, recs[-1].message
        previous = {}
        for rec in recs:
            previous[rec.node] = previous.get(rec.node, 0) + 1
        k += 1
        assert k < 200, "brute force ran away"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("seed", [0, 3])
def test_how_many_fit_equals_adding_replicas_one_at_a_time(name: str, seed: int) -> None:
    cluster = small_cluster()
    t = TEMPLATES[name]
    answer = asyncio.run(how_many_fit(CONFIG, REGISTRY, cluster, t, seed))
    fits, per_node, message = brute_force_fit(cluster, t, seed)
    assert (answer.fits, answer.per_node, answer.message) == (fits, dict(sorted(per_node.items(),
                                                                  key=lambda kv: (-kv[1], kv[0]))), message)
    assert answer.fits > 0 and answer.message.startswith("0/6 nodes are available")
    assert not answer.slots_exhausted


def test_how_many_fit_on_a_generated_cluster_and_batches_beyond_the_first() -> None:
    """More replicas than one batch (64): the feed continues the same run, and still equals the
    brute force at the boundary (checked around the answer, not from 1: the cluster is bigger)."""
    cluster = generate_cluster(40, 60, 5)
    t = template("tiny", {"containers": [container("50m", "32Mi")]})
    answer = asyncio.run(how_many_fit(CONFIG, REGISTRY, cluster, t, 5))
    assert answer.fits > 64
    created = latest_timestamp(cluster.pods) + 1.0
    classes = cluster.objects.get("PriorityClass", {})
    for k, all_placed in ((answer.fits, True), (answer.fits + 1, False)):
        replicas = [t.replica(i, created + i, classes, never_preempt=True) for i in range(k)]
        result = simulate(replace(cluster, pods=[*cluster.pods, *replicas]), 5)
        placed = [result.records[r["metadata"]["uid"]].status == SCHEDULED for r in replicas]
        assert all(placed) is all_placed, k


def test_pod_slots_bound_the_answer() -> None:
    nodes = [builders.node(f"n{i}", cpu="64", memory="64Gi", pods=3) for i in range(2)]
    cluster = ClusterInput(nodes=nodes, pods=[builders.pod("p", cpu="1", node_name="n0")], objects={}, skipped={},
                           source="t")
    answer = asyncio.run(how_many_fit(CONFIG, REGISTRY, cluster, template("x", {"containers": [container("1")]})))
    assert answer.fits == 5 and answer.slots_exhausted and answer.per_node == {"n1": 3, "n0": 2}


# -- fewest nodes -------------------------------------------------------------------------------------


def brute_force_nodes(cluster: ClusterInput, workload: list[PodTemplate], nt: NodeTemplate, seed: int,
                      ignore: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    created = latest_timestamp(cluster.pods) + 1.0
    extra = [t.replica(i, created + n, {}) for n, (t, i) in
             enumerate((t, i) for t in workload for i in range(t.replicas))]
    for k in range(60):
        c = replace(cluster, nodes=[*cluster.nodes, *(nt.node(i) for i in range(k))], pods=[*cluster.pods, *extra])
        result = simulate(c, seed)
        left = {r.key for r in result.records.values() if r.status not in (SCHEDULED, "PreBound")}
        if not (left - ignore) and not result.preemptions:
            return k
    raise AssertionError("no count up to 60 fits")


def node_template(name: str, cpu: str, memory: str, cost: float = 1.0, labels: dict[str, str] | None = None
                  ) -> NodeTemplate:
    return NodeTemplate(name, builders.node(name, cpu=cpu, memory=memory, pods=20, labels=labels), cost, "test")


@pytest.mark.parametrize(
    ("workload", "nt"),
    [
        ([replace(TEMPLATES["cpu"], replicas=14)], node_template("c4", "4", "8Gi")),
        ([replace(TEMPLATES["memory"], replicas=40), replace(TEMPLATES["cpu"], replicas=3)],
         node_template("m", "2", "4Gi")),
        ([replace(TEMPLATES["anti-affinity"], replicas=9)], node_template("small", "1", "1Gi")),
        ([replace(TEMPLATES["spread"], replicas=30)], node_template("z", "2", "4Gi", labels={"zone": "z1",
                                                                                          "disk": "hdd"})),
    ],
)
def test_fewest_nodes_equals_adding_nodes_one_at_a_time(workload: list[PodTemplate], nt: NodeTemplate) -> None:
    cluster = small_cluster()
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, workload, nt, seed=1))
    assert answer.nodes is not None and answer.nodes > 0
    assert answer.nodes == brute_force_nodes(cluster, workload, nt, 1, set(answer.hopeless))
    assert answer.lower_bound <= answer.nodes
    assert len(answer.probes) < answer.nodes + 2 or answer.nodes <= 2  # a search, not a scan
    assert sum(answer.added_usage.values()) > 0


def test_fewest_nodes_names_the_pods_no_such_node_can_take() -> None:
    cluster = small_cluster()
    huge = template("huge", {"containers": [container("16")]})
    workload = [huge, replace(TEMPLATES["cpu"], replicas=14)]
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, workload, node_template("c4", "4", "8Gi"), seed=1))
    assert answer.hopeless == {"team/huge-0": "NodeResourcesFit: Insufficient cpu"}
    assert answer.nodes == asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, workload[1:],
                                                    node_template("c4", "4", "8Gi"), seed=1)).nodes


def test_fewest_nodes_stops_when_more_such_nodes_cannot_help() -> None:
    """Spread over zones, the template in zone z1 only: once zone z0 is full, z1 may hold at most one
    more; the doubling stops there (it does not go on up to max_nodes), says why, and the answer is
    the fewest nodes that reach that outcome."""
    cluster = small_cluster()
    spread = [replace(TEMPLATES["spread"], replicas=40)]
    nt = node_template("z", "2", "4Gi", labels={"zone": "z1", "disk": "hdd"})
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, spread, nt, seed=1))
    assert answer.saturated_at is not None and answer.saturated_at <= 4 and len(answer.probes) <= 5
    assert answer.hopeless and all("PodTopologySpread" in why for why in answer.hopeless.values())
    assert not answer.unplaced
    assert answer.nodes == brute_force_nodes(cluster, spread, nt, 1, set(answer.hopeless))


def test_fewest_nodes_gives_up_at_max_nodes() -> None:
    cluster = small_cluster()
    many = [replace(TEMPLATES["cpu"], replicas=60)]
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, many, node_template("c1", "1", "8Gi"), 1, max_nodes=8))
    assert answer.nodes is None and answer.unplaced and answer.cost is None
    assert max(p.nodes for p in answer.probes) == 8 and not answer.hopeless


# -- preemption: victims are evicted, then rescheduled or not ------------------------------------------


def owned(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "low",
                                           "uid": "rs-low", "controller": True}]
    return pod


def preempting_cluster(bare_victims: bool = False) -> ClusterInput:
    """Two 4-CPU nodes full of low-priority pods (owned by a ReplicaSet, or bare), and pending: a
    3-CPU high-priority pod (it preempts two of them) and three 1-CPU pods."""
    nodes = [builders.node(f"n{i}", cpu="4", memory="8Gi", pods=20) for i in range(2)]
    low = [builders.pod(f"low-{i}", cpu="1500m", memory="1Gi", node_name=f"n{i % 2}", priority=0) for i in range(4)]
    pods = [p if bare_victims else owned(p) for p in low]
    pods.append(builders.pod("high", cpu="3", memory="1Gi", priority=1000))
    pods += [builders.pod(f"w-{i}", cpu="1", memory="512Mi", priority=0) for i in range(3)]
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source="test")


def test_a_preemptor_no_template_node_holds_does_not_stall_the_search() -> None:
    """The issue's case: the high-priority pod fits on no 2-CPU template node, so it preempts in
    every probe. Its victims were counted as unplaced for ever (the search doubled to the maximum
    and answered "not within"); they are evicted, recreated by their ReplicaSet, and rescheduled on
    the added nodes: the answer is the count where they run again, as trying counts one by one says."""
    from unit.simulate.test_capacity_brute_force import not_running

    cluster = preempting_cluster()
    two = node_template("t2", "2", "8Gi")
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, [], two, max_nodes=1000))
    first = next(n for n in range(12) if not not_running(cluster, two, n, 0))
    # A search, not a scan: doubling (0, then 1, 2, 4, 8) then bisection (6, 5).
    assert answer.nodes == first == 5 and len(answer.probes) <= 7 and not answer.hopeless
    assert {(v.pod, v.preemptor, v.fate) for v in answer.victims} == {
        ("default/low-1", "default/high", "rescheduled"), ("default/low-3", "default/high", "rescheduled")}
    assert all(v.detail.startswith("on node t2-") for v in answer.victims)
    # A 4-CPU template node holds the high-priority pod: one node, no preemption at all.
    four = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, [], node_template("t4", "4", "8Gi")))
    assert four.nodes == 1 and not four.victims and four.probes[-1].preemptions == 0


def test_bare_victims_are_deleted_for_good_and_named() -> None:
    """Victims without a controller are not recreated: no number of 2-CPU nodes brings them back (the
    preemptor fits none), so they are named with why, and the answer places everything else."""
    cluster = preempting_cluster(bare_victims=True)
    answer = asyncio.run(fewest_nodes(CONFIG, REGISTRY, cluster, [], node_template("t2", "2", "8Gi")))
    assert answer.nodes is not None and answer.saturated_at is not None
    assert set(answer.hopeless) == {"default/low-1", "default/low-3"}
    assert all("evicted by default/high" in why and "Insufficient cpu" in why for why in answer.hopeless.values())
    assert {v.fate for v in answer.victims} == {"deleted for good"}


def test_how_many_fit_counts_victims_as_victims() -> None:
    """The cluster's high-priority pod evicts two pods: they were counted as "pending pods that did
    not fit"; they are victims (recreated, then not rescheduled: the cluster is full), and only the
    pending pod that found no room is counted as not fitting."""
    answer = asyncio.run(how_many_fit(CONFIG, REGISTRY, preempting_cluster(), template("x", {"containers": [
        container("100m")]})))
    assert answer.cluster_unplaced == 1
    assert [(v.pod, v.fate) for v in answer.victims] == [("default/low-1", "not rescheduled"),
                                                         ("default/low-3", "not rescheduled")]


# -- the command ----------------------------------------------------------------------------------------


def run_capacity(*args: str | Path) -> Any:
    from click.testing import CliRunner

    return CliRunner().invoke(main, ["capacity", "-q", *map(str, args)], env={"COLUMNS": "300"})


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    c = small_cluster()
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": c.nodes + c.pods}))
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump_all([
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
         "spec": {"replicas": 14, "template": {"metadata": {"labels": {"app": "web"}},
                                               "spec": {"containers": [container("600m")]}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl"},
         "spec": {"parallelism": 2, "template": {"spec": {"containers": [container("2")]}}}},
    ]))
    nodes = tmp_path / "nodes.yaml"
    small = builders.node("c4", cpu="4", memory="8Gi", pods=20, annotations={"kubesched.io/cost": "1"})
    big = builders.node("c16", cpu="16", memory="32Gi", pods=60, annotations={"kubesched.io/cost": "3.5"})
    nodes.write_text(yaml.safe_dump_all([small, big]))
    return {"cluster": cluster, "workload": workload, "nodes": nodes}


def test_capacity_command_json_and_text(files: dict[str, Path]) -> None:
    result = ok(run_capacity("--cluster", files["cluster"], "--workload", files["workload"],
                             "--node-template", files["nodes"], "--seed", "1", "--output", "json"))
    doc = json.loads(result.stdout)
    fit = {f["workload"]: f for f in doc["replicasThatFit"]}
    assert set(fit) == {"Deployment shop/web", "Job default/etl"}
    web = asyncio.run(how_many_fit(CONFIG, REGISTRY, small_cluster(), template("web", {"containers": [
        container("600m")]}), 1))
    assert fit["Deployment shop/web"]["fits"] == web.fits
    assert sum(fit["Deployment shop/web"]["perNode"].values()) == web.fits
    scale = {s["template"]: s for s in doc["scaleUp"]}
    assert set(scale) == {"c4", "c16"}
    for s in scale.values():
        assert s["nodes"] >= 1 and s["totalCost"] == s["nodes"] * s["costPerNode"]
        assert s["simulations"][0]["nodes"] == 0 and s["simulations"][0]["unplaced"] > 0
    cheapest = min(scale.values(), key=lambda s: s["totalCost"])
    assert doc["cheapest"] == cheapest["template"]

    text = ok(run_capacity("--cluster", files["cluster"], "--workload", files["workload"],
                           "--node-template", files["nodes"], "--seed", "1")).stdout
    assert "How many more replicas fit" in text and "Deployment shop/web" in text
    assert "0/6 nodes are available" in text and "cheapest" in text


@pytest.mark.parametrize(
    ("workload", "fragment"),
    [
        ({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {}},
         "a DaemonSet runs one pod per node"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, "v1 Service 's' is not a workload"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": -1,
          "template": {"spec": {"containers": [container("1")]}}}}, "spec.replicas must be a non-negative integer"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}},
         "spec.template.spec is required"),
    ],
)
def test_capacity_bad_workload_is_one_clear_line(files: dict[str, Path], tmp_path: Path, workload: dict[str, Any],
                                                 fragment: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(workload))
    result = run_capacity("--cluster", files["cluster"], "--workload", bad)
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output


def test_capacity_needs_a_question_and_a_sane_cost(files: dict[str, Path], tmp_path: Path) -> None:
    result = run_capacity("--cluster", files["cluster"])
    assert result.exit_code == 2 and "give --workload" in result.output
    bad = tmp_path / "n.yaml"
    bad.write_text(yaml.safe_dump(builders.node("x", annotations={"kubesched.io/cost": "cheap"})))
    result = run_capacity("--cluster", files["cluster"], "--node-template", bad)
    assert result.exit_code == 2 and "kubesched.io/cost" in result.output and "'cheap'" in result.output


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (None, ": document 1 (Node bare): status.allocatable: Required value: the Node has neither "
               "status.allocatable nor status.capacity"),
        ({"capacity": {"cpu": "4", "memory": "8Gi"}}, "(Node bare): status.capacity.pods is missing"),
        ({"allocatable": {"cpu": "4", "memory": "8Gi"}}, "(Node bare): status.allocatable.pods is missing"),
    ],
)
def test_a_template_node_that_cannot_be_sized_is_refused(files: dict[str, Path], tmp_path: Path,
                                                         status: dict[str, Any] | None, message: str) -> None:
    """A template without allocatable answered "nodes 0 ... every pending pod fits" above a list of
    pods no such node can take: it is refused, in one line naming the file, the Node and the field."""
    node = builders.node("bare")
    node.pop("status")
    if status is not None:
        node["status"] = status
    bad = tmp_path / "bare.yaml"
    bad.write_text(yaml.safe_dump(node))
    result = run_capacity("--cluster", files["cluster"], "--node-template", bad)
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--node-template {bad}{message if message.startswith(':') else ' ' + message}" \
        in lines[0], result.output


def test_terminal_json_and_report_agree_on_victims(tmp_path: Path) -> None:
    """The preempting cluster through the command: the JSON's answer and victims, the same in the
    terminal and on the page."""
    c = preempting_cluster()
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": c.nodes + c.pods}))
    nodes = tmp_path / "t2.yaml"
    nodes.write_text(yaml.safe_dump(builders.node("t2", cpu="2", memory="8Gi", pods=20)))
    args = ("--cluster", cluster, "--node-template", nodes)
    doc = json.loads(ok(run_capacity(*args, "--output", "json")).stdout)
    (scale,) = doc["scaleUp"]
    assert scale["nodes"] >= 2 and {v["fate"] for v in scale["victims"]} == {"rescheduled"}
    assert scale["simulations"][-1]["fits"] and not scale["simulations"][0]["fits"]
    assert scale["simulations"][0]["victims"]["evicted"] == 2
    text = ok(run_capacity(*args)).stdout
    row = next(line for line in text.splitlines() if line.startswith("│ t2 "))
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "t2", str(scale["nodes"]), str(scale["nodes"]), str(len(scale["simulations"])),
        "2 preemption victim(s) rescheduled"]
    for v in scale["victims"]:
        assert v["node"] == "n1" and v["detail"].startswith("on node t2-")
        assert f"{v['pod']}: evicted by default/high on node n1, rescheduled {v['detail']}" in text
    page = tmp_path / "capacity.html"
    ok(run_capacity(*args, "--report", page))
    html = page.read_text()
    assert f'<div class="val">+{scale["nodes"]:,}</div>' in html
    for v in scale["victims"]:
        assert f"<code>{v['pod']}</code>: evicted by default/high on node n1, rescheduled {v['detail']}" in html
