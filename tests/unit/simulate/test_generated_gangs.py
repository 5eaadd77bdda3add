"""``kubesched simulate --nodes N --gangs SPEC``: generated Workload API gangs (Workload, PodGroup,
members joining by ``spec.schedulingGroup``) that the simulator schedules all or nothing, with the
GenericWorkload gate on; the syntax in ``--help``; a bad spec named by its field. That kube-apiserver
v1.37 accepts the objects as generated is tests/integration/test_generated_gangs_apiserver.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubesched.simulate.inputs.generator import generate_cluster
from kubesched.simulate.inputs.workload_gangs import GangSpecError, parse_gang_spec
from unit.simulate.test_cli_simulate import ok, run_cli, run_json

#: Two gangs that fit anywhere (3 × 100m) and one that fits in no 3-node cluster (40 × 4 CPU:
#: 160 CPU, more than two workers of at most 64), and a gang short of members (2 of minCount 5).
GANGS = ("--gangs", "count=2,members=3,cpu=100m,memory=64Mi", "--gangs", "members=40,cpu=4",
         "--gangs", "members=2,minCount=5,cpu=100m")


def test_generated_gangs_schedule_all_or_nothing() -> None:
    doc = run_json("--nodes", "3", "--pods", "4", *GANGS)
    groups = doc["workloadPodGroups"]
    assert sorted(groups) == ["training/gang-1", "training/gang-2", "training/gang-3", "training/gang-4"]
    placed = Counter(p["pod"].rsplit("-", 1)[0] for p in doc["placements"]
                     if p["pod"].startswith("training/") and p["status"] == "Scheduled")
    # The small gangs entirely, the big one and the short one not at all: no partial gang.
    assert placed == {"training/gang-1": 3, "training/gang-2": 3}
    assert groups["training/gang-1"] == {
        "policy": "gang", "minCount": 3, "members": 3, "placed": 3, "waiting": 0, "pending": 0,
        "condition": {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""}}
    assert (groups["training/gang-3"]["minCount"], groups["training/gang-3"]["placed"]) == (40, 0)
    assert "minCount (40) cannot be satisfied" in groups["training/gang-3"]["reason"]
    assert groups["training/gang-4"]["reason"] == (
        "waiting for PodGroup training/gang-4: minCount 5, 2 members exist")
    # The other generated pods are scheduled as before, besides the gangs.
    assert doc["summary"]["pods"] == 4 + 3 + 3 + 40 + 2


def test_a_basic_group_places_what_fits() -> None:
    doc = run_json("--nodes", "3", "--pods", "0", "--gangs", "members=40,cpu=4,policy=basic")
    assert doc["workloadPodGroups"]["training/gang-1"]["policy"] == "basic"
    placed = sum(1 for p in doc["placements"] if p["status"] == "Scheduled")
    assert 0 < placed < 40  # no gang constraint: as many as fit


def test_generated_objects_are_the_workload_api_v1beta1() -> None:
    cluster = generate_cluster(3, 2, seed=5, gangs=[parse_gang_spec("count=1,members=2,minCount=2,cpu=500m")])
    workload = cluster.objects["Workload.scheduling.k8s.io"]["training/gang-1"]
    group = cluster.objects["PodGroup.scheduling.k8s.io"]["training/gang-1"]
    assert workload["apiVersion"] == group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert workload["spec"] == {
        "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}
    assert group["spec"] == {"workloadRef": {"workloadName": "gang-1", "templateName": "workers"},
                             "schedulingPolicy": {"gang": {"minCount": 2}}}
    members = [p for p in cluster.pods if p["metadata"]["namespace"] == "training"]
    assert [p["metadata"]["name"] for p in members] == ["gang-1-0", "gang-1-1"]
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "gang-1"} for p in members)
    assert all("nodeName" not in p["spec"] for p in members)  # pending, never pre-bound


def test_gangs_leave_the_rest_of_the_generated_cluster_unchanged() -> None:
    plain = generate_cluster(20, 50, seed=3, pod_topology=True)
    with_gangs = generate_cluster(20, 50, seed=3, pod_topology=True, gangs=[parse_gang_spec("members=4")])
    assert orjson.dumps(with_gangs.nodes) == orjson.dumps(plain.nodes)
    assert orjson.dumps(with_gangs.pods[:50]) == orjson.dumps(plain.pods)
    assert len(with_gangs.pods) == 54
    assert with_gangs.source == "generated cluster (nodes=20, pods=50, seed=3, gangs=1 (4 pods))"
    # They arrive after every other pod.
    assert min(p["metadata"]["creationTimestamp"] for p in with_gangs.pods[50:]) > max(
        p["metadata"]["creationTimestamp"] for p in plain.pods)


def test_out_cluster_writes_the_gangs_objects(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    ok(run_cli("--nodes", "2", "--pods", "0", "--gangs", "members=2,cpu=100m", "--out-cluster", out))
    kinds = Counter(i["kind"] for i in yaml.safe_load(out.read_text())["items"])
    assert (kinds["Workload"], kinds["PodGroup"], kinds["Pod"]) == (1, 1, 2)


def test_help_shows_the_syntax() -> None:
    text = " ".join(ok(run_cli("--help")).output.split())
    assert "--gangs count=N,members=M[,minCount=K,policy=gang|basic,cpu=Q,memory=Q,namespace=NS]" in text
    assert "featureGates: {GenericWorkload: true}" in text


@pytest.mark.parametrize(("spec", "message"), [
    ("count=2", "--gangs 'count=2': members is required"),
    ("members=0", "--gangs 'members=0': members must be a positive integer, got '0'"),
    ("members=3,mincount=2", "--gangs 'members=3,mincount=2': unknown field 'mincount' (keys: count, members, "
                             "minCount, policy, cpu, memory, namespace)"),
    ("members=3,cpu=lots", "cpu must be a quantity such as 500m, 2 or 4Gi, got 'lots'"),
    ("members=3,memory=-1Gi", "memory must be a quantity such as 500m, 2 or 4Gi, got '-1Gi'"),
    ("members=3,policy=all", "policy must be gang or basic, got 'all'"),
    ("members=3,policy=basic,minCount=2", "minCount is a gang's: not with policy=basic"),
    ("members=3,namespace=Bad_NS", "namespace must be a DNS label"),
    ("members=3,members=4", "members given twice"),
    ("members", "expected KEY=VALUE, got 'members'"),
])
def test_a_bad_spec_names_the_field(spec: str, message: str) -> None:
    with pytest.raises(GangSpecError) as info:
        parse_gang_spec(spec)
    assert message in str(info.value)
    result = run_cli("--nodes", "2", "--gangs", spec)
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output


def test_the_gate_is_on_without_config_and_required_with_one(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                      "kind": "KubeSchedulerConfiguration"}))
    result = run_cli("--nodes", "2", "--gangs", "members=2", "--config", config)
    assert result.exit_code != 0
    assert f"--config {config} leaves the GenericWorkload feature gate off" in result.output
    assert "add 'featureGates: {GenericWorkload: true}' to it" in result.output
    gated: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                             "featureGates": {"GenericWorkload": True}}
    config.write_text(yaml.safe_dump(gated))
    doc = run_json("--nodes", "2", "--pods", "0", "--gangs", "members=2,cpu=100m", "--config", config)
    assert doc["workloadPodGroups"]["training/gang-1"]["placed"] == 2
    result = run_cli("--gangs", "members=2")
    assert result.exit_code != 0 and "--gangs needs --nodes" in result.output
