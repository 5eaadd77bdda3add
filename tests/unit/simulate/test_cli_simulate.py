"""``kubesched simulate`` end to end, as a user runs it: the demo, generated clusters, the JSON
document, the HTML report, ``--explain``, ``--out-cluster`` and bad input.

Placement validity (resources, taints, nodeSelector / required node affinity, host ports) is
checked with deliberately simple code written here from the *input* objects, never with
kubesched's own plugins, so a bug in a plugin cannot hide itself.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kubesched import testing as builders
from kubesched.cli import main
from kubesched.simulate.command import demo_dir
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.simulate.inputs.generator import generate_cluster

DATA = Path(__file__).parent / "data" / "cli"
DEMO_CLUSTER = demo_dir() / "cluster.yaml"
DEMO_CONFIG = demo_dir() / "config.yaml"
#: Wide enough that rich never wraps or ellipsises a table cell in these tests.
WIDE = {"COLUMNS": "320", "LINES": "100"}


# -- running the CLI -----------------------------------------------------------------------------------


def run_cli(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner()
    return runner.invoke(main, ["simulate", "-q", *map(str, args)], env={**WIDE, **(env or {})}, catch_exceptions=True)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result


def run_json(*args: str | Path) -> dict[str, Any]:
    result = ok(run_cli("--output", "json", *args))
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def kubesched_exe() -> str:
    exe = Path(sys.executable).parent / "kubesched"
    if exe.exists():
        return str(exe)
    found = shutil.which("kubesched")
    if found is None:
        pytest.skip("the kubesched console script is not installed")
    return found


# -- independent checks -----------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def qty(value: Any) -> Fraction:
    """A Kubernetes quantity (the forms used by the demo and the generator) as an exact number."""
    s = str(value)
    for suffix, mult in _BINARY.items():
        if s.endswith(suffix):
            return Fraction(s[: -len(suffix)]) * mult
    if s and s[-1] in _DECIMAL:
        return Fraction(s[:-1]) * _DECIMAL[s[-1]]
    return Fraction(s)


def milli(value: Any) -> int:
    return math.ceil(qty(value) * 1000)


def whole(value: Any) -> int:
    return math.ceil(qty(value))


def _container_requests(c: dict[str, Any]) -> Counter[str]:
    req = ((c.get("resources") or {}).get("requests")) or {}
    out: Counter[str] = Counter()
    for name, v in req.items():
        out[name] += milli(v) if name == "cpu" else whole(v)
    return out


def pod_requests(pod: dict[str, Any]) -> Counter[str]:
    """Effective requests: max(sum(containers) + sidecars, every init container's peak) + overhead."""
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for c in spec.get("containers") or []:
        total += _container_requests(c)
    sidecars: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    for c in spec.get("initContainers") or []:
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars += req
            candidate = Counter(sidecars)
        else:
            candidate = sidecars + req
        for k, v in candidate.items():
            peak[k] = max(peak[k], v)
    total += sidecars
    for k, v in peak.items():
        total[k] = max(total[k], v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += milli(v) if k == "cpu" else whole(v)
    return total


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    op, key, values = expr["operator"], expr["key"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op == "Gt":
        return key in labels and int(labels[key]) > int(values[0])
    if op == "Lt":
        return key in labels and int(labels[key]) < int(values[0])
    raise AssertionError(f"operator {op} not handled by the test")


def placement_problems(pod: dict[str, Any], node: dict[str, Any]) -> list[str]:
    """Why ``pod`` must not have been scheduled onto ``node`` (empty when the placement is valid)."""
    problems = []
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    tolerations = spec.get("tolerations") or []
    node_spec = node.get("spec") or {}
    for taint in node_spec.get("taints") or []:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            problems.append(f"untolerated taint {taint}")
    if node_spec.get("unschedulable") and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        problems.append("node is cordoned")
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            problems.append(f"nodeSelector {k}={v}")
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    ).get("nodeSelectorTerms")
    if required:
        term_ok = [
            all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])
            and all(
                _expression_matches(e, {"metadata.name": node["metadata"]["name"]})
                for e in term.get("matchFields") or []
            )
            for term in required
        ]
        if not any(term_ok):
            problems.append("required node affinity")
    return problems


def host_ports(pod: dict[str, Any]) -> set[tuple[str, int]]:
    ports = set()
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                ports.add((p.get("protocol", "TCP"), int(p["hostPort"])))
    return ports


def final_assignment(pods: list[dict[str, Any]], data: dict[str, Any]) -> dict[str, str]:
    """pod key -> node after the run: the input's spec.nodeName plus the JSON's Scheduled placements,
    minus the pods preemption evicted."""
    where = {pod_key(p): p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")}
    for pl in data["placements"]:
        if pl["status"] == "Scheduled":
            assert pl["pod"] not in where, f"{pl['pod']} was pre-bound but reported as scheduled"
            where[pl["pod"]] = pl["node"]
    for pl in data["placements"]:
        if pl["status"] == "Preempted":  # evicted by preemption: no longer on its node
            where.pop(pl["pod"], None)
    return where


def assert_valid_run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], data: dict[str, Any]) -> None:
    """Every scheduled pod respects taints, selectors, required affinity and host ports; no node is
    over-committed (recomputed from the input objects); the JSON's requestedAfter agrees."""
    by_node = {n["metadata"]["name"]: n for n in nodes}
    by_pod = {pod_key(p): p for p in pods}
    where = final_assignment(pods, data)

    scheduled = [pl for pl in data["placements"] if pl["status"] == "Scheduled"]
    assert scheduled, "nothing was scheduled: the validity checks would be vacuous"
    for pl in scheduled:
        problems = placement_problems(by_pod[pl["pod"]], by_node[pl["node"]])
        assert not problems, f"{pl['pod']} on {pl['node']}: {problems}"

    used: dict[str, Counter[str]] = defaultdict(Counter)
    count: Counter[str] = Counter()
    ports: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for key, node_name in where.items():
        pod = by_pod[key]
        if terminal(pod):
            continue
        used[node_name] += pod_requests(pod)
        count[node_name] += 1
        clash = ports[node_name] & host_ports(pod)
        assert not clash, f"{key}: host port(s) {clash} already used on {node_name}"
        ports[node_name] |= host_ports(pod)

    json_nodes = {n["name"]: n for n in data["nodes"]}
    assert set(json_nodes) == set(by_node)
    for name, node in by_node.items():
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for res, amount in used[name].items():
            limit = milli(alloc.get(res, 0)) if res == "cpu" else whole(alloc.get(res, 0))
            assert amount <= limit, f"{name}: {res} requested {amount} > allocatable {limit}"
        assert count[name] <= whole(alloc["pods"]), f"{name}: {count[name]} pods > {alloc['pods']}"
        # The JSON must tell the same story as the independent recomputation.
        jn = json_nodes[name]
        assert jn["podsAfter"] == count[name], name
        assert jn["requestedAfter"]["pods"] == count[name], name
        assert jn["requestedAfter"]["cpu"] == used[name]["cpu"], name
        assert jn["requestedAfter"]["memory"] == used[name]["memory"], name
        for res in ("cpu", "memory", "pods"):
            assert jn["requestedAfter"][res] <= jn["allocatable"][res], (name, res)


# -- the JSON schema -------------------------------------------------------------------------------------

SUMMARY_INTS = (
    "nodes", "pods", "preBound", "simulated", "scheduled", "unschedulable", "errors", "waiting", "pending", "attempts",
)  # fmt: skip
NODE_KEYS = {
    "name", "labels", "taints", "unschedulable", "allocatable", "requestedBefore", "requestedAfter",
    "podsBefore", "podsAfter",
}  # fmt: skip
PLACEMENT_KEYS = {
    "pod", "uid", "profile", "status", "node", "attempts", "message", "time", "feasibleNodes", "evaluatedNodes",
    "reasons", "score",
}  # fmt: skip
#: --output jsonl adds the per-node detail to each placement.
DETAIL_KEYS = PLACEMENT_KEYS | {"kind", "filters", "scores"}
STATUSES = {"Scheduled", "Unschedulable", "Error", "Waiting", "Pending", "Preempted"}


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def assert_score(sc: dict[str, Any], node_names: set[str]) -> None:
    assert set(sc) == {"node", "total", "plugins"} and sc["node"] in node_names
    assert is_int(sc["total"])
    assert all(isinstance(k, str) and is_int(v) for k, v in sc["plugins"].items())
    if sc["plugins"]:
        assert sc["total"] == sum(sc["plugins"].values())


def assert_detail(p: dict[str, Any], node_names: set[str]) -> None:
    """A JSON Lines placement: the JSON one plus every evaluated node's rejection and the top scores."""
    assert set(p) == DETAIL_KEYS and p["kind"] == "Placement", p["pod"]
    # filters: {plugin: {reason: [nodes]}}
    rejected = [n for reasons in p["filters"].values() for ns in reasons.values() for n in ns]
    assert len(rejected) == len(set(rejected)) and set(rejected) <= node_names
    for plugin, reasons in p["filters"].items():
        assert isinstance(plugin, str) and plugin and all(reason and nodes for reason, nodes in reasons.items())
    # scores: [{node, total, plugins}], the chosen node first, then best first
    for sc in p["scores"]:
        assert_score(sc, node_names)
    totals = [sc["total"] for sc in p["scores"][1:]]
    assert totals == sorted(totals, reverse=True)
    if p["status"] == "Scheduled":
        assert p["scores"][0] == p["score"] and p["node"] not in rejected
    if p["status"] == "Unschedulable":
        assert p["scores"] == [] and len(rejected) == p["evaluatedNodes"]
        # The JSON's reasons are these nodes counted per reason.
        counts = Counter(reason for reasons in p["filters"].values() for reason, ns in reasons.items() for _ in ns)
        for reason, n in p["reasons"].items():
            assert sum(c for r, c in counts.items() if reason in r) >= n, reason


def assert_schema(data: dict[str, Any]) -> None:
    assert data["schemaVersion"] == 2
    assert isinstance(data["kubeschedVersion"], str) and data["kubeschedVersion"]
    assert isinstance(data["source"], str)
    assert isinstance(data["profiles"], list) and all(isinstance(p, str) for p in data["profiles"])
    s = data["summary"]
    for k in SUMMARY_INTS:
        assert is_int(s[k]) and s[k] >= 0, k
    for k in ("virtualSeconds", "wallSeconds", "podsPerSecond"):
        assert is_num(s[k]) and s[k] >= 0, k
    assert isinstance(s["interrupted"], bool)
    for k in ("utilisationBefore", "utilisationAfter"):
        assert set(s[k]) == {"cpu", "memory", "pods"}
        assert all(is_num(v) and v >= 0 for v in s[k].values())
    for k in ("skippedObjects", "reassignedSchedulerNames", "unschedulableReasons"):
        assert isinstance(data[k], dict) and all(isinstance(a, str) and is_int(b) for a, b in data[k].items()), k

    assert len(data["nodes"]) == s["nodes"]
    for n in data["nodes"]:
        assert set(n) == NODE_KEYS, n["name"]
        assert isinstance(n["name"], str) and isinstance(n["labels"], dict) and isinstance(n["unschedulable"], bool)
        assert all(set(t) == {"key", "value", "effect"} for t in n["taints"])
        for k in ("allocatable", "requestedBefore", "requestedAfter"):
            assert {"cpu", "memory", "pods"} <= set(n[k]), (n["name"], k)
            assert all(isinstance(r, str) and is_int(v) for r, v in n[k].items())
        assert is_int(n["podsBefore"]) and is_int(n["podsAfter"])
        # Without preemption a node only gains pods.
        assert n["podsBefore"] <= n["podsAfter"] or s.get("preemptions")

    node_names = {n["name"] for n in data["nodes"]}
    assert len(data["placements"]) == s["pods"] - s["preBound"]
    for p in data["placements"]:
        assert set(p) == PLACEMENT_KEYS, p["pod"]
        assert re.fullmatch(r"[^/]+/[^/]+", p["pod"])
        assert p["status"] in STATUSES
        assert p["profile"] in data["profiles"] or p["status"] == "Pending"
        # A preempted pod keeps the node it ran on (it was deleted from there).
        placed = p["status"] in ("Scheduled", "Preempted")
        assert (p["node"] in node_names) if placed else p["node"] is None
        for k in ("attempts", "feasibleNodes", "evaluatedNodes"):
            assert is_int(p[k]) and p[k] >= 0
        assert is_num(p["time"]) and isinstance(p["message"], str)
        # reasons: {reason: nodes}, for a pod that did not fit (the FitError's counts)
        assert isinstance(p["reasons"], dict)
        assert all(isinstance(r, str) and r and is_int(n) and n > 0 for r, n in p["reasons"].items())
        # score: the chosen node's {node, total, plugins}
        if p["score"] is not None:
            assert_score(p["score"], node_names)
        if p["status"] == "Scheduled":
            assert p["score"] is not None and p["score"]["node"] == p["node"] and p["reasons"] == {}
        if p["status"] == "Unschedulable":
            assert p["score"] is None and p["reasons"] and p["message"]
            assert max(p["reasons"].values()) <= p["evaluatedNodes"] <= s["nodes"]

    counts = Counter(p["status"] for p in data["placements"])
    assert s["scheduled"] == counts["Scheduled"]
    assert s["unschedulable"] == counts["Unschedulable"]
    assert s["pending"] == counts["Pending"]
    assert s["simulated"] == s["scheduled"] + s["unschedulable"] + s["errors"] + s["waiting"]


# -- fixtures: one run per input, shared ----------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_json() -> dict[str, Any]:
    return run_json()


@pytest.fixture(scope="module")
def demo_input() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    doc = yaml.safe_load(DEMO_CLUSTER.read_text())
    items = doc["items"]
    return [o for o in items if o["kind"] == "Node"], [o for o in items if o["kind"] == "Pod"]


@pytest.fixture(scope="module")
def generated_runs() -> dict[int, dict[str, Any]]:
    return {seed: run_json("--nodes", "200", "--pods", "600", "--seed", str(seed)) for seed in (3, 4)}


# -- the demo ---------------------------------------------------------------------------------------------


def test_demo_text_summary_names_both_profiles_and_the_ip_budget_failures() -> None:
    result = ok(run_cli())
    out = result.stdout
    assert "default-scheduler" in out and "blueking-ip-scheduler" in out
    assert "Unschedulable pods (profile default-scheduler): 3" in out
    assert "Unschedulable pods (profile blueking-ip-scheduler): 6" in out
    assert "no free underlay IP" in out
    assert "analytics/bigmem-1" in out and "Insufficient memory" in out
    assert "Traceback" not in result.output


def test_demo_underlay_pods_beyond_the_ip_budget_are_unschedulable(demo_json: dict[str, Any]) -> None:
    gateways = [p for p in demo_json["placements"] if p["pod"].startswith("trading/gateway-")]
    assert len(gateways) == 70
    assert all(p["profile"] == "blueking-ip-scheduler" for p in gateways)
    status = Counter(p["status"] for p in gateways)
    # Workers 1-6 have 10 underlay IPs each, worker-7 has 4 (annotation): 64 IPs for 70 pods.
    assert status == {"Scheduled": 64, "Unschedulable": 6}
    for p in gateways:
        if p["status"] == "Unschedulable":
            assert "no free underlay IP" in p["message"]
            assert "node(s) had no free underlay IP" in p["reasons"]
    per_node = Counter(p["node"] for p in gateways if p["status"] == "Scheduled")
    budget = {f"worker-{i}": 10 for i in range(1, 7)} | {"worker-7": 4}
    assert set(per_node) <= set(budget)
    for node, n in per_node.items():
        assert n <= budget[node], (node, n)
    assert sum(budget.values()) == 64


def test_demo_the_last_created_gateways_are_the_ones_left_without_an_ip(demo_json: dict[str, Any]) -> None:
    pending = sorted(
        int(p["pod"].rsplit("-", 1)[1])
        for p in demo_json["placements"]
        if p["pod"].startswith("trading/gateway-") and p["status"] == "Unschedulable"
    )
    assert pending == [65, 66, 67, 68, 69, 70]


def test_demo_placements_respect_resources_taints_and_affinity(
    demo_json: dict[str, Any], demo_input: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    nodes, pods = demo_input
    assert_valid_run(nodes, pods, demo_json)
    # The specific verdicts a user of the demo expects.
    by_pod = {p["pod"]: p for p in demo_json["placements"]}
    assert by_pod["analytics/bigmem-1"]["status"] == "Unschedulable"
    assert by_pod["shop/cache-zone-d-1"]["status"] == "Unschedulable"
    assert "node affinity/selector" in by_pod["shop/cache-zone-d-1"]["message"]
    gpu_pods = [p for k, p in by_pod.items() if k.startswith("ml/train-") and p["status"] == "Scheduled"]
    assert gpu_pods and all(p["node"] == "gpu-1" for p in gpu_pods)
    ingress = [by_pod["shop/ingress-1"], by_pod["shop/ingress-2"]]
    assert all(p["status"] == "Scheduled" for p in ingress)
    assert ingress[0]["node"] != ingress[1]["node"]  # both want hostPort 80


def test_demo_json_schema_and_stdout_is_only_json(demo_json: dict[str, Any]) -> None:
    assert_schema(demo_json)
    s = demo_json["summary"]
    assert demo_json["profiles"] == ["default-scheduler", "blueking-ip-scheduler"]
    assert (s["nodes"], s["pods"], s["preBound"], s["simulated"]) == (10, 121, 11, 110)
    assert s["virtualSeconds"] == 0 and s["interrupted"] is False
    assert demo_json["unschedulableReasons"]["node(s) had no free underlay IP"] == 6


def test_demo_out_cluster_loads_again_and_a_second_run_schedules_nothing_new(
    tmp_path: Path, demo_json: dict[str, Any]
) -> None:
    out = tmp_path / "after.yaml"
    ok(run_cli("--out-cluster", out))
    doc = yaml.safe_load(out.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    loaded = load_cluster(out)
    assert len(loaded.nodes) == 10 and len(loaded.pods) == 121
    # The demo's PodDisruptionBudget is carried through (counted as skipped: not a kind asked for here).
    assert loaded.skipped == {"policy/v1 PodDisruptionBudget": 1}
    first_pass = {p["pod"]: p for p in demo_json["placements"]}
    bound = {pod_key(p): p["spec"].get("nodeName") for p in loaded.pods}
    for key, p in first_pass.items():
        assert bound[key] == p["node"], key  # scheduled pods now carry spec.nodeName, failed ones none

    # Chaining: everything placed in the first run is pre-bound now; only the failures are retried.
    again = run_json("--cluster", out, "--config", DEMO_CONFIG)
    s = again["summary"]
    assert s["scheduled"] == 0
    assert s["preBound"] == 11 + demo_json["summary"]["scheduled"]
    assert s["unschedulable"] == demo_json["summary"]["unschedulable"]
    still = {p["pod"] for p in again["placements"]}
    assert still == {k for k, p in first_pass.items() if p["status"] == "Unschedulable"}
    before = {n["name"]: n["requestedAfter"] for n in demo_json["nodes"]}
    assert {n["name"]: n["requestedBefore"] for n in again["nodes"]} == before


def test_the_validity_checker_catches_violations(
    demo_json: dict[str, Any], demo_input: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    """The independent checks are not vacuous: moving one placement onto a bad node is caught."""
    nodes, pods = demo_input
    for pod, bad_node, expected in [
        ("shop/web-1", "control-plane-1", "untolerated taint"),
        ("ml/train-1", "worker-1", "nodeSelector"),
    ]:
        data = json.loads(json.dumps(demo_json))
        pl = next(p for p in data["placements"] if p["pod"] == pod)
        assert pl["status"] == "Scheduled"
        pl["node"] = bad_node
        with pytest.raises(AssertionError, match=expected):
            assert_valid_run(nodes, pods, data)
    data = json.loads(json.dumps(demo_json))
    big = next(p for p in data["placements"] if p["pod"] == "analytics/bigmem-1")
    big.update(status="Scheduled", node="worker-5", score=None)
    with pytest.raises(AssertionError, match=r"requested .* > allocatable"):
        assert_valid_run(nodes, pods, data)


# -- generated clusters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [3, 4])
def test_generated_cluster_json_schema_and_valid_placements(
    generated_runs: dict[int, dict[str, Any]], seed: int
) -> None:
    data = generated_runs[seed]
    assert_schema(data)
    assert data["summary"]["nodes"] == 200
    cluster = generate_cluster(200, 600, seed)
    assert data["summary"]["pods"] == 600 - cluster.terminal_pods
    assert data["summary"]["scheduled"] > 300
    assert_valid_run(cluster.nodes, cluster.pods, data)


def test_same_seed_gives_identical_placements(generated_runs: dict[int, dict[str, Any]]) -> None:
    again = run_json("--nodes", "200", "--pods", "600", "--seed", "3")
    first = generated_runs[3]

    def stable(d: dict[str, Any]) -> dict[str, Any]:
        d = json.loads(json.dumps(d))
        for k in ("wallSeconds", "podsPerSecond"):
            d["summary"].pop(k)
        return d

    assert [(p["pod"], p["status"], p["node"]) for p in again["placements"]] == [
        (p["pod"], p["status"], p["node"]) for p in first["placements"]
    ]
    assert stable(again) == stable(first)


def run_jsonl(*args: str | Path) -> list[dict[str, Any]]:
    result = ok(run_cli("--output", "jsonl", *args))
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_jsonl_streams_the_document_then_one_pod_per_line_with_its_per_node_detail(
    generated_runs: dict[int, dict[str, Any]],
) -> None:
    lines = run_jsonl("--nodes", "200", "--pods", "600", "--seed", "3")
    header, placements = lines[0], lines[1:]
    doc = generated_runs[3]
    assert header["kind"] == "Simulation" and "placements" not in header
    assert {k: v for k, v in header.items() if k != "kind"}["nodes"] == doc["nodes"]
    assert header["unschedulableReasons"] == doc["unschedulableReasons"]
    node_names = {n["name"] for n in doc["nodes"]}
    # Same placements as the one JSON document, each with its per-node detail.
    assert [{k: v for k, v in p.items() if k not in ("kind", "filters", "scores")} for p in placements] == [
        {k: v for k, v in p.items() if k != "time"} | {"time": p["time"]} for p in doc["placements"]
    ]
    for p in placements:
        assert_detail(p, node_names)
    assert any(p["status"] == "Unschedulable" for p in placements)
    assert any(len(p["scores"]) > 1 for p in placements)


def test_json_placement_size_does_not_grow_with_the_nodes(tmp_path: Path) -> None:
    """A pod that fits nowhere costs the same in the JSON on 30 nodes as on 300: its reasons are
    counted, not listed per node (the per-node list is in --output jsonl)."""
    sizes = {}
    for n in (30, 300):
        path = tmp_path / f"c{n}.yaml"
        items = [builders.node(f"node-{i:03d}", "2", "4Gi") for i in range(n)]
        items.append(builders.pod("huge", cpu="64"))
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
        huge = next(p for p in run_json("--cluster", path)["placements"] if p["pod"] == "default/huge")
        assert huge["status"] == "Unschedulable" and huge["reasons"] == {"Insufficient cpu": n}
        sizes[n] = len(re.sub(r"\d+", "N", json.dumps(huge)))  # node counts, uid: one digit run each
        detail = next(p for p in run_jsonl("--cluster", path) if p.get("pod") == "default/huge")
        assert len(detail["filters"]["NodeResourcesFit"]["Insufficient cpu"]) == n
    assert sizes[30] == sizes[300]


# -- the HTML report (a real process) --------------------------------------------------------------------


def test_demo_report_is_self_contained_with_the_four_charts(tmp_path: Path) -> None:
    report = tmp_path / "out.html"
    after = tmp_path / "after.yaml"
    proc = subprocess.run(
        [kubesched_exe(), "simulate", "--report", str(report), "--out-cluster", str(after)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **WIDE},
    )
    assert proc.returncode == 0, proc.stderr
    assert "blueking-ip-scheduler" in proc.stdout and "Traceback" not in proc.stderr
    assert f"report written to {report}" in proc.stderr.replace("\n", "")
    html = report.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["'](?!#|data:)""", html)
    for chart in ("utilisation", "pods-per-node", "scores", "unschedulable-reasons"):
        assert f'data-chart="{chart}"' in html, chart
    assert "no free underlay IP" in html
    assert after.exists() and load_cluster(after).pods


def test_json_output_on_stdout_only_in_a_real_process() -> None:
    proc = subprocess.run(
        [kubesched_exe(), "simulate", "--output", "json", "--nodes", "20", "--pods", "40", "--seed", "1"],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing but the document
    assert_schema(data)
    assert b"Traceback" not in proc.stderr


# -- --explain --------------------------------------------------------------------------------------------


def explain_rows(text: str, nodes: list[str]) -> dict[str, str]:
    """The table line of each node in an explain table rendered without wrapping."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] in nodes:
            rows[cells[0]] = line
    return rows


def test_explain_demo_pod_that_fits_nowhere_names_the_rejecting_plugin_per_node() -> None:
    out = ok(run_cli("--explain", "analytics/bigmem-1")).stdout
    text = out[out.index("Explain analytics/bigmem-1") :]
    assert "0/10 nodes are available" in text
    workers = [f"worker-{i}" for i in range(1, 8)]
    tainted = ["control-plane-1", "gpu-1", "infra-1"]
    rows = explain_rows(text, workers + tainted)
    assert set(rows) == set(workers + tainted)
    for n in workers:
        assert "NodeResourcesFit:" in rows[n] and "Insufficient memory" in rows[n], rows[n]
        assert "fits" not in rows[n]
    for n in tainted:
        assert "TaintToleration: node(s) had untolerated taint(s)" in rows[n], rows[n]


def test_explain_custom_cluster_per_node_rejections_and_a_scheduled_pod() -> None:
    cluster = DATA / "small.yaml"
    nodes = ["small-a", "small-b", "tainted-c"]
    out = ok(run_cli("--cluster", cluster, "--explain", "shop/huge")).stdout
    text = out[out.index("Explain shop/huge") :]
    rows = explain_rows(text, nodes)
    assert "NodeResourcesFit: Insufficient memory" in rows["small-a"]
    assert "NodeResourcesFit: Insufficient memory" in rows["small-b"]
    assert "TaintToleration" in rows["tainted-c"] and "NodeResourcesFit" not in rows["tainted-c"]

    # A bare name works too; a scheduled pod shows every score plugin and the chosen node first.
    data = run_json("--cluster", cluster)
    chosen = next(p for p in data["placements"] if p["pod"] == "shop/web-1")
    assert chosen["status"] == "Scheduled"
    out = ok(run_cli("--cluster", cluster, "--explain", "web-1")).stdout
    text = out[out.index("Explain shop/web-1") :]
    for plugin in ("TaintToleration", "NodeResourcesFit", "NodeResourcesBalancedAllocation"):
        assert plugin in text
    rows = explain_rows(text, nodes)
    order = [n for n in (line.strip("│ ").split("│")[0].strip() for line in text.splitlines()) if n in nodes]
    assert order[0] == chosen["node"]
    assert "fits" in rows["small-a"] and "fits" in rows["small-b"]
    top = chosen["score"]
    assert top["node"] == chosen["node"]
    cells = [c.strip() for c in rows[chosen["node"]].strip("│ ").split("│")]
    assert cells[-1] == str(top["total"])
    for value in top["plugins"].values():
        assert str(value) in cells
    assert "TaintToleration: node(s) had untolerated taint(s)" in rows["tainted-c"]


def test_explain_lists_the_chosen_node_first_even_on_a_tie() -> None:
    nodes = [f"worker-{i}" for i in range(1, 8)]
    for seed in range(4):
        result = ok(run_cli("--output", "json", "--seed", str(seed), "--explain", "shop/ingress-1"))
        chosen = next(p for p in json.loads(result.stdout)["placements"] if p["pod"] == "shop/ingress-1")["node"]
        text = result.stderr  # with --output json the explanation goes to stderr
        order = [n for n in (line.strip("│ ").split("│")[0].strip() for line in text.splitlines()) if n in nodes]
        assert order[0] == chosen, (seed, chosen, order)


def test_explain_names_the_rejecting_plugin_in_an_80_column_terminal() -> None:
    out = ok(run_cli("--explain", "analytics/bigmem-1", env={"COLUMNS": "80"})).stdout
    assert out.count("NodeResourcesFit") >= 7
    assert out.count("TaintToleration") >= 3


def test_explain_with_json_output_keeps_stdout_pure_json() -> None:
    result = ok(run_cli("--output", "json", "--explain", "analytics/bigmem-1"))
    assert_schema(json.loads(result.stdout))
    assert "Explain analytics/bigmem-1" in result.stderr


def test_explain_unknown_pod_is_a_clear_error() -> None:
    result = run_cli("--explain", "nope/nothing")
    assert result.exit_code == 2
    assert "no pod 'nope/nothing'" in result.stderr
    assert "Traceback" not in result.output


# -- bad input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        pytest.param(
            ["--cluster", DATA / "malformed.yaml"], ["malformed.yaml", "line 6", "invalid YAML"], id="malformed-yaml"
        ),
        pytest.param(
            ["--cluster", DATA / "bad_cpu.yaml"],
            ["bad_cpu.yaml", "document 2", "Pod shop/web-1", 'container "app"', "requests.cpu", '"1x"'],
            id="invalid-cpu",
        ),
        pytest.param(
            ["--config", DATA / "unknown_plugin_config.yaml", "--nodes", "3"],
            ["unknown_plugin_config.yaml", "profiles[0].plugins.filter.enabled[0].name", "NoSuchPlugin", "unknown"],
            id="unknown-plugin",
        ),
        pytest.param(
            ["--cluster", DATA / "small.yaml", "--nodes", "3"], ["--cluster", "--nodes", "not both"], id="cluster+nodes"
        ),
        pytest.param(["--pods", "5"], ["--pods", "--nodes"], id="pods-without-nodes"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args: list[str | Path], fragments: list[str]) -> None:
    for output in ("text", "json"):
        result = run_cli("--output", output, *args)
        assert result.exit_code == 2, (result.output, result.exception)
        assert isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("Error: ")
        for f in fragments:
            assert f in lines[0], (f, lines[0])


# -- kinds the simulator skips, schedulerName fallbacks -----------------------------------------------


def test_skipped_kinds_are_reported_in_the_summary() -> None:
    result = ok(run_cli("--cluster", DATA / "small.yaml"))
    assert "skipped 1 apps/v1 Deployment" in result.stdout
    data = run_json("--cluster", DATA / "small.yaml")
    assert data["skippedObjects"] == {"apps/v1 Deployment": 1}
    assert data["summary"]["nodes"] == 3 and data["summary"]["pods"] == 5


def test_unknown_scheduler_name_runs_with_the_first_profile_and_is_reported() -> None:
    data = run_json("--cluster", DATA / "small.yaml")
    assert data["reassignedSchedulerNames"] == {"my-custom-scheduler": 1}
    custom = next(p for p in data["placements"] if p["pod"] == "shop/custom-1")
    assert custom["status"] == "Scheduled" and custom["profile"] == "default-scheduler"
    text = ok(run_cli("--cluster", DATA / "small.yaml")).stdout
    assert "my-custom-scheduler" in text and "--strict-scheduler-name" in text


def test_strict_scheduler_name_leaves_the_pod_pending() -> None:
    data = run_json("--cluster", DATA / "small.yaml", "--strict-scheduler-name")
    assert data["reassignedSchedulerNames"] == {}
    custom = next(p for p in data["placements"] if p["pod"] == "shop/custom-1")
    assert custom["status"] == "Pending" and custom["node"] is None and custom["attempts"] == 0
    assert "my-custom-scheduler" in custom["message"] and "left pending" in custom["message"]
    assert data["summary"]["pending"] == 1
    assert data["summary"]["scheduled"] == 3  # the other pods are unaffected


def test_strict_scheduler_name_text_summary_says_why_a_pod_is_pending() -> None:
    text = ok(run_cli("--cluster", DATA / "small.yaml", "--strict-scheduler-name")).stdout
    assert "my-custom-scheduler" in text


def test_custom_cluster_placements_are_valid() -> None:
    cluster = load_cluster(DATA / "small.yaml")
    data = run_json("--cluster", DATA / "small.yaml")
    assert_schema(data)
    assert_valid_run(cluster.nodes, cluster.pods, data)
    by_pod = {p["pod"]: p for p in data["placements"]}
    assert by_pod["shop/zoned"]["node"] == "small-b"
    assert by_pod["kube-system/infra-agent"]["node"] == "tainted-c"
    assert by_pod["shop/huge"]["status"] == "Unschedulable"


def test_a_cluster_file_without_nodes_or_pods_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "not-a-cluster.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    result = run_cli("--cluster", str(cfg))
    assert result.exit_code == 2
    assert "no Node or Pod objects found" in result.stderr and "KubeSchedulerConfiguration" in result.stderr


@pytest.mark.parametrize("args", [
    ["simulate", "--nodes", "5", "--pods", "5", "--report", "{missing}/report.html"],
    ["simulate", "--nodes", "5", "--pods", "5", "--out-cluster", "{missing}/cluster.yaml"],
    ["capacity", "--nodes", "5", "--pods", "5", "--node-template", "{template}", "--report", "{missing}/c.html"],
])
def test_an_output_file_in_a_missing_directory_is_refused_before_simulating(tmp_path: Path, args: list[str]) -> None:
    """It used to run the whole simulation and then die with a FileNotFoundError traceback."""
    template = tmp_path / "template.yaml"
    template.write_text(yaml.safe_dump(builders.node("big", cpu="64", memory="256Gi")))
    missing = tmp_path / "nope"
    argv = [a.format(missing=missing, template=template) for a in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert f"directory {missing} does not exist" in result.output
    assert "Traceback" not in result.output and not missing.exists()
