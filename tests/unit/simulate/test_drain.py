"""Drain what-if (simulate/whatif/drain.py, ``kubesched simulate --drain/--drain-selector``): which pods a
drain evicts, keeps or loses (kubectl's drain filters, k8s.io/kubectl/pkg/drain/filters.go), label
selectors in kubectl's syntax (apimachinery labels.Parse), and the command end to end: evicted pods
rescheduled on the remaining nodes without over-commit, the ones that fit nowhere named with the
scheduler's reason, in the terminal, JSON and HTML."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched import testing as builders
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.selector import SelectorSyntaxError, parse_selector
from kubesched.simulate.whatif.drain import LOST_UNMANAGED, STAYS_DAEMONSET, STAYS_MIRROR, DrainError, plan_drain
from unit.simulate.test_cli_simulate import assert_valid_run, ok, run_cli

# -- selectors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("pool=old", {"pool": "old"}, True),
        ("pool==old", {"pool": "new"}, False),
        ("pool!=old", {}, True),  # != matches objects without the label
        ("pool!=old", {"pool": "old"}, False),
        ("zone in (a, b),pool=old", {"zone": "b", "pool": "old"}, True),
        ("zone in (a,b),pool=old", {"zone": "c", "pool": "old"}, False),
        ("zone notin (a,b)", {}, True),
        ("zone notin (a,b)", {"zone": "a"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": "x"}, False),
        ("!gpu", {}, True),
        ("example.com/rack>3", {"example.com/rack": "4"}, True),
        ("example.com/rack<3", {"example.com/rack": "x"}, False),
        ("", {"anything": "x"}, True),
    ],
)
def test_selector_semantics(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ("zone in (a,b", "unbalanced '('"),
        ("zone in ()", "needs at least one value"),
        ("pool=o ld", "is not a label requirement"),
        ("-bad=x", "invalid label key '-bad'"),
        ("pool=" + "x" * 64, "invalid label value"),
        ("rack>high", "needs an integer"),
    ],
)
def test_selector_errors_name_the_bad_part(selector: str, fragment: str) -> None:
    with pytest.raises(SelectorSyntaxError, match=fragment.replace("(", r"\(")):
        parse_selector(selector)


# -- which pods go ------------------------------------------------------------------------------------


def owned(raw: dict[str, Any], kind: str, api_version: str = "apps/v1") -> dict[str, Any]:
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "u", "controller": True}
    ]
    return raw


def drain_cluster() -> ClusterInput:
    nodes = [builders.node(n, cpu="2", memory="4Gi", labels={"pool": pool})
             for n, pool in (("old-1", "old"), ("new-1", "new"), ("new-2", "new"))]
    pods = [
        owned(builders.pod("web-1", cpu="1500m", node_name="old-1"), "ReplicaSet"),
        owned(builders.pod("web-2", cpu="1500m", node_name="old-1"), "ReplicaSet"),
        owned(builders.pod("cache-0", cpu="100m", node_name="old-1", volumes=[{"name": "d", "emptyDir": {}}]),
              "StatefulSet"),
        owned(builders.pod("proxy-old", cpu="100m", node_name="old-1"), "DaemonSet"),
        builders.pod("etcd-old-1", cpu="100m", node_name="old-1"),
        builders.pod("debug", cpu="100m", node_name="old-1"),  # no controller
        owned(builders.pod("done", cpu="100m", node_name="old-1"), "Job", "batch/v1"),
        owned(builders.pod("busy", cpu="1500m", node_name="new-1"), "ReplicaSet"),
        owned(builders.pod("pending", cpu="100m"), "ReplicaSet"),
    ]
    pods[4]["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    pods[6]["status"] = {"phase": "Succeeded"}
    return ClusterInput(nodes=nodes, pods=pods, objects={}, skipped={}, source="test")


def test_drain_evicts_managed_pods_keeps_daemonset_and_mirror_pods_and_loses_bare_ones() -> None:
    cluster = drain_cluster()
    before = copy.deepcopy(cluster)
    after, plan = plan_drain(cluster, ["old-1"])
    assert cluster == before, "the input is not changed"
    assert plan.nodes == ["old-1"]
    assert plan.evicted == {"default/web-1": "old-1", "default/web-2": "old-1", "default/cache-0": "old-1"}
    assert plan.local_storage == ["default/cache-0"]
    assert plan.stay == {"default/proxy-old": STAYS_DAEMONSET, "default/etcd-old-1": STAYS_MIRROR}
    assert plan.lost == {"default/debug": "old-1"}
    assert "--force" in LOST_UNMANAGED

    by_name = {p["metadata"]["name"]: p for p in after.pods}
    assert "debug" not in by_name  # deleted, not recreated
    assert by_name["done"]["spec"]["nodeName"] == "old-1"  # terminal: nothing to do
    assert by_name["proxy-old"]["spec"]["nodeName"] == "old-1"
    for name in ("web-1", "web-2", "cache-0"):
        assert "nodeName" not in by_name[name]["spec"] and by_name[name]["status"] == {"phase": "Pending"}
    # kubectl's order: the node's pods as the API lists them (namespace, then name); recreated after
    # every pod of the input, in that order.
    assert plan.order == {"old-1": ["default/cache-0", "default/debug", "default/web-1", "default/web-2"]}
    stamps = [p["metadata"]["creationTimestamp"] for p in after.pods]
    recreated = [by_name[n]["metadata"]["creationTimestamp"] for n in ("cache-0", "web-1", "web-2")]
    assert recreated == sorted(recreated) and recreated[0] > max(
        p["metadata"]["creationTimestamp"] for p in cluster.pods
    ), stamps
    assert [n["spec"].get("unschedulable", False) for n in after.nodes] == [True, False, False]


def test_drain_by_selector_and_errors() -> None:
    cluster = drain_cluster()
    _, plan = plan_drain(cluster, [], parse_selector("pool=new"))
    assert plan.nodes == ["new-1", "new-2"] and plan.evicted == {"default/busy": "new-1"}
    _, plan = plan_drain(cluster, ["old-1"], parse_selector("pool=new"))
    assert plan.nodes == ["old-1", "new-1", "new-2"]
    with pytest.raises(DrainError, match="no node 'nope'"):
        plan_drain(cluster, ["nope"])
    with pytest.raises(DrainError, match="matches no node"):
        plan_drain(cluster, [], parse_selector("pool=gone"))


# -- the command --------------------------------------------------------------------------------------


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    c = drain_cluster()
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": c.nodes + c.pods}))
    return path


def test_drain_command_reschedules_what_fits_and_names_what_does_not(cluster_file: Path, tmp_path: Path) -> None:
    data = json.loads(ok(run_cli("--cluster", cluster_file, "--drain", "old-1", "--output", "json")).stdout)
    drain = data["drain"]
    assert drain["nodes"] == ["old-1"]
    pods = {p["pod"]: p for p in drain["pods"]}
    assert set(pods) == {"default/web-1", "default/web-2", "default/cache-0"}
    # 2-cpu nodes: new-1 has 1500m taken, new-2 is empty: one 1500m web pod fits (on new-2), the
    # other fits nowhere; the small cache pod fits.
    webs = sorted((pods["default/web-1"]["status"], pods["default/web-2"]["status"]))
    assert webs == ["Scheduled", "Unschedulable"]
    failed = next(p for p in pods.values() if p["status"] == "Unschedulable")
    assert "0/3 nodes are available" in failed["message"] and "1 node(s) were unschedulable" in failed["message"]
    assert failed["reasons"]["Insufficient cpu"] == 2
    assert pods["default/cache-0"]["status"] == "Scheduled" and pods["default/cache-0"]["localStorage"]
    assert (drain["evicted"], drain["rescheduled"], drain["notRescheduled"]) == (3, 2, 1)
    assert [p["pod"] for p in drain["lost"]] == ["default/debug"]
    assert {p["pod"] for p in drain["stay"]} == {"default/proxy-old", "default/etcd-old-1"}
    # Independently checked: nothing placed on the drained node, no node over-committed.
    after, _ = plan_drain(drain_cluster(), ["old-1"])
    assert_valid_run(after.nodes, after.pods, data)
    assert all(p["node"] != "old-1" for p in data["placements"] if p["status"] == "Scheduled")

    text = ok(run_cli("--cluster", cluster_file, "--drain", "old-1")).stdout
    assert "Drain what-if" in text and "1 would not fit anywhere" in text
    assert "Evicted pods that would not fit anywhere: 1" in text and failed["pod"] in text
    assert "default/debug" in text and "--force" in text

    report = tmp_path / "r.html"
    ok(run_cli("--cluster", cluster_file, "--drain-selector", "pool=old", "--report", report))
    html = report.read_text()
    assert 'id="drain"' in html and 'data-chart="drain-destinations"' in html and failed["pod"] in html


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--drain", "old-1,nope"], "--drain: no node 'nope' in the cluster"),
        (["--drain-selector", "pool in (old"], "--drain-selector: unbalanced '('"),
        (["--drain-selector", "pool=gone"], "matches no node"),
    ],
)
def test_drain_bad_input_is_one_clear_line(cluster_file: Path, args: list[str], fragment: str) -> None:
    result = run_cli("--cluster", cluster_file, *args)
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output
