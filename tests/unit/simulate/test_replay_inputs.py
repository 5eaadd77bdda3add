"""The replay's inputs: the YAML/JSON scenario, the openb trace adapter (a small synthetic copy;
the real trace from ../shared/traces/openb when present) and the reference's inflation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kubesched.simulate.inputs.inflation import arrived_gpu_demand, gpu_capacity, inflate, sequential
from kubesched.simulate.inputs.openb import load_openb
from kubesched.simulate.inputs.scenario import ScenarioError, load_replay, load_scenario, parse_scenario
from kubesched.snapshot.gpushare.model import GPU_COUNT, GPU_MILLI, GPU_MODEL, raw_gpu_request

OPENB_FIXTURE = Path(__file__).parent / "data" / "openb"
#: The real trace, beside the repository (never committed: alibaba/clusterdata, research use).
OPENB_TRACE = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "openb"


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}]}}


# -- scenario files -------------------------------------------------------------------------------
def test_scenario_file_in_json_is_read_in_time_order(tmp_path: Path) -> None:
    doc = {
        "kind": "Scenario",
        "nodes": [node("n1")],
        "pods": [{"at": 30, "pod": pod("late")}, {"at": 5, "lifetime": 60, "pod": pod("early")}],
        "nodeEvents": [{"at": 20, "action": "cordon", "node": "n1"}, {"at": 10, "action": "add", "node": node("n2")}],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    scenario = load_scenario(path)
    assert [(a.at, a.pod["metadata"]["name"], a.lifetime) for a in scenario.arrivals] == [
        (5.0, "early", 60.0), (30.0, "late", None)]
    assert [(e.at, e.action, e.name) for e in scenario.node_events] == [(10.0, "add", "n2"), (20.0, "cordon", "n1")]
    assert scenario.nodes[0]["kind"] == "Node"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"pods": [{"at": -1, "pod": pod("p")}]},
         "s.yaml: pods[0]: at must be a non-negative number of seconds, got -1"),
        ({"pods": [{"at": 0, "pod": pod("p"), "lifetime": "1h"}]},
         "s.yaml: pods[0]: lifetime must be a non-negative number of seconds, got '1h'"),
        ({"pods": [{"at": 0, "pod": {"metadata": {}}}]}, "s.yaml: pods[0].pod: metadata.name is required"),
        ({"pods": [{"at": 0, "pod": pod("p"), "replicas": 2}]},
         "s.yaml: pods[0]: unknown field 'replicas' (known: at, pod, lifetime)"),
        ({"nodeEvents": [{"at": 1, "action": "drain", "node": "n"}]},
         "s.yaml: nodeEvents[0]: action must be one of add, remove, cordon, uncordon, got 'drain'"),
        ({"nodeEvents": [{"at": 1, "action": "cordon", "node": "ghost"}]},
         "s.yaml: nodeEvents[0].node: no node 'ghost' in nodes or added by an earlier event"),
        ({"pod": []}, "s.yaml: unknown field 'pod' (known: nodes, pods, nodeEvents)"),
    ],
)
def test_bad_scenario_is_one_line_naming_entry_and_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario({"nodes": [node("n")], **doc} if "nodes" not in doc else doc, "s.yaml")
    assert str(e.value) == message


# -- the openb adapter ----------------------------------------------------------------------------
def test_openb_rows_become_gpushare_nodes_and_pods() -> None:
    scenario = load_openb(OPENB_FIXTURE)
    cpu_node, v100, _ = scenario.nodes
    assert cpu_node["status"]["capacity"] == {"cpu": "32000m", "memory": "262144Mi", "pods": "1001"}
    assert GPU_MODEL not in cpu_node["metadata"]["labels"]
    assert v100["status"]["allocatable"][GPU_COUNT] == "8"
    assert v100["status"]["allocatable"][GPU_MILLI] == "8000"
    assert v100["metadata"]["labels"][GPU_MODEL] == "V100M32"
    by_name = {a.pod["metadata"]["name"]: a for a in scenario.arrivals}
    shared = by_name["openb-pod-0001"]
    assert shared.pod["metadata"]["annotations"] == {GPU_MILLI: "460", GPU_COUNT: "1"}
    assert shared.pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6000m", "memory": "12288Mi"}
    assert (shared.at, shared.lifetime) == (10.0, 480.0)  # runs from scheduled_time 20 to deletion 500
    assert "annotations" not in by_name["openb-pod-0002"].pod["metadata"]  # CPU-only
    request = raw_gpu_request(by_name["openb-pod-0003"].pod)
    assert request is not None and request.models == ("V100M16", "V100M32")
    assert by_name["openb-pod-0004"].lifetime == 20.0  # never scheduled: from creation to deletion


def test_openb_gpu_nodes_only_and_a_pod_list_file() -> None:
    scenario = load_openb(OPENB_FIXTURE / "openb_pod_list_default.csv", gpu_nodes_only=True)
    assert [n["metadata"]["name"] for n in scenario.nodes] == ["openb-node-0001", "openb-node-0002"]
    assert gpu_capacity(scenario) == 10_000


def test_openb_bad_cell_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "openb_node_list_all_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,lots,1,0,\n")
    (tmp_path / "openb_pod_list_default.csv").write_text((OPENB_FIXTURE / "openb_pod_list_default.csv").read_text())
    with pytest.raises(ScenarioError, match=r"openb_node_list_all_node.csv:2 \(n0\): cpu_milli must be a number, "
                                            r"got 'lots'"):
        load_openb(tmp_path)


def test_trace_option_names_the_only_format() -> None:
    with pytest.raises(ScenarioError, match="expected openb:PATH"):
        load_replay(None, "alibaba2020:/x")


def test_openb_real_trace_loads_when_present() -> None:
    if not (OPENB_TRACE / "openb_pod_list_default.csv").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: the openb trace must be at {OPENB_TRACE} (shared/ beside the clone)")
        pytest.skip(f"openb trace not at {OPENB_TRACE} (alibaba/clusterdata cluster-trace-gpu-v2023; not committed)")
    scenario = load_openb(OPENB_TRACE)
    assert (len(scenario.nodes), len(scenario.arrivals)) == (1523, 8152)
    assert gpu_capacity(scenario) == 6212 * 1000
    assert len(load_openb(OPENB_TRACE, gpu_nodes_only=True).nodes) == 1213


# -- inflation ------------------------------------------------------------------------------------
def _names(arrivals: list[Any]) -> list[str]:
    return [a.pod["metadata"]["name"] for a in arrivals]


def test_inflation_reaches_the_factor_and_is_deterministic_per_seed() -> None:
    scenario = load_openb(OPENB_FIXTURE, gpu_nodes_only=True)  # 10 GPUs; 4,710 milli arrive
    one = inflate(scenario, 1.3, np.random.default_rng(7))
    again = inflate(scenario, 1.3, np.random.default_rng(7))
    other = inflate(scenario, 1.3, np.random.default_rng(8))
    assert _names(one.arrivals) == _names(again.arrivals)
    assert _names(one.arrivals) != _names(other.arrivals)
    demand = arrived_gpu_demand(one.arrivals)
    # As tuneUpPods: clones are added while the demand plus a clone's milli per GPU stays within
    # 13,000; the one that would not is not added.
    assert 13_000 - 1000 < demand <= 13_000 + 1000
    clones = [a for a in one.arrivals if "-tuned-" in a.pod["metadata"]["name"]]
    assert clones and all(c.lifetime is not None or c.pod["metadata"]["name"].startswith("openb-pod-0002")
                          for c in clones)
    # a clone of a timed scenario arrives with its original
    original = {a.pod["metadata"]["name"]: a.at for a in scenario.arrivals}
    assert all(c.at == original[c.pod["metadata"]["name"].split("-tuned-")[0]] for c in clones)


def test_inflation_below_the_demand_drops_random_pods() -> None:
    scenario = load_openb(OPENB_FIXTURE, gpu_nodes_only=True)
    smaller = inflate(scenario, 0.2, np.random.default_rng(1))
    assert arrived_gpu_demand(smaller.arrivals) <= 2000 < arrived_gpu_demand(scenario.arrivals)


def test_sequential_order_is_a_seeded_shuffle_and_clones_come_last() -> None:
    scenario = load_openb(OPENB_FIXTURE, gpu_nodes_only=True)
    a = load_replay(None, f"openb:{OPENB_FIXTURE}", "sequential", 1.3, True, seed=3)
    b = load_replay(None, f"openb:{OPENB_FIXTURE}", "sequential", 1.3, True, seed=3)
    assert _names(a.arrivals) == _names(b.arrivals)
    assert a.sequential
    assert [x.at for x in a.arrivals] == [float(i) for i in range(len(a.arrivals))]
    assert all(x.lifetime is None for x in a.arrivals)
    assert sorted(_names(a.arrivals[:5])) == sorted(_names(scenario.arrivals))
    assert all("-tuned-" in n for n in _names(a.arrivals[5:]))
    shuffled = {tuple(_names(sequential(scenario, np.random.default_rng(s)).arrivals)) for s in range(6)}
    assert len(shuffled) > 1
