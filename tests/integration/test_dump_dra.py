"""A dump with DRA objects replays in the simulator as the live cluster schedules it.

On the real control plane (kube-controller-manager running): two KWOK nodes whose ResourceSlices
hold two A100s (node 1), a GPU of 8Gi shared by claims (``allowMultipleAllocations``) and a T4 tainted
NoSchedule (node 2); a DeviceClass; claims by name and from a template (the controller stamps it before
the dump); pods for a profile nobody runs yet: some fit (selectors on attributes, capacity shares, a
prioritized list, a toleration), some cannot (three GPUs, a missing DeviceClass, the taint not
tolerated, more than the shared GPU's capacity). Every pod's outcome is the same whatever order the
pods are taken in, so the two runs can be compared pod by pod.

``kubesched dump`` of the cluster, then ``kubesched simulate --cluster dump --out-cluster``; then
``kubesched run`` schedules the live pods. Compared: the pods bound and their nodes, each claim's
allocation (request, node, device, consumed capacity, tolerations), the pending pods' messages word
for word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.testing.controlplane import ControlPlane

from .dra_harness import GROUP, CasePod, DraCase, outcome, outcome_of, watched
from .test_differential_dra_cases import attr, claim, claim_spec, device, device_class, exactly, one, slice_, template
from .test_live_scheduler import InProcess, pods_in, write_config
from .test_live_scheduler import sa_kubeconfig as sa_kubeconfig  # fixture: deploy/scheduler RBAC identity

pytestmark = pytest.mark.integration

TAINT = {"key": "example.com/health", "value": "degraded", "effect": "NoSchedule"}


def _case() -> DraCase:
    node1 = [device(f"gpu-{i}", {"model": "A100", "index": i}, {"memory": "40Gi"}) for i in range(2)]
    node2 = [device("shared-0", {"model": "L4"}, {"memory": "8Gi"}, allowMultipleAllocations=True),
             device("t4-0", {"model": "T4"}, {"memory": "16Gi"}, taints=[TAINT])]

    def share(ns: str, memory: str) -> dict[str, Any]:
        return exactly(ns, f'{attr("model")} == "L4"', capacity={"requests": {"memory": memory}})

    def claims(ns: str, run: str) -> list[tuple[str, dict[str, Any]]]:
        out = one(ns, run, {
            "a100-0": exactly(ns, f'{attr("model")} == "A100" && {attr("index")} == 0'),
            "share-a": share(ns, "3Gi"), "share-b": share(ns, "3Gi"), "share-too-big": share(ns, "9Gi"),
            "tolerant": exactly(ns, f'{attr("model")} == "T4"', tolerations=[{**TAINT, "operator": "Equal"}]),
            "intolerant": exactly(ns, f'{attr("model")} == "T4"'),
            "three-gpus": exactly(ns, count=3),
            "no-class": {**exactly(ns), "deviceClassName": f"{ns}-missing"},
        })
        out.append(template(ns, f"{run}-a100-1", claim_spec(
            [{"name": "gpu", "exactly": exactly(ns, f'{attr("model")} == "A100" && {attr("index")} == 1')}])))
        out.append(claim(ns, f"{run}-fa", claim_spec([{"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": f"{ns}-gpu",
             "selectors": [{"cel": {"expression": f'{attr("model")} == "H100"'}}]},
            {"name": "l4", "deviceClassName": f"{ns}-gpu", "capacity": {"requests": {"memory": "2Gi"}},
             "selectors": [{"cel": {"expression": f'{attr("model")} == "L4"'}}]}]}])))
        return out

    def own(name: str, node: int) -> CasePod:
        return CasePod(name, {"gpu": ("claim", name)}, 1, node)

    return DraCase(
        "dump", 2,
        lambda ns, nodes: [slice_(ns, nodes[0], node1), slice_(ns, nodes[1], node2), device_class(ns)],
        claims,
        [own("a100-0", 1), CasePod("a100-1", {"gpu": ("template", "a100-1")}, 1, 1), own("share-a", 2),
         own("share-b", 2), own("fa", 2), own("tolerant", 2), own("share-too-big", 0), own("intolerant", 0),
         own("three-gpus", 0), own("no-class", 0)])


def test_simulate_of_a_dra_dump_matches_the_live_run(
    control_plane: ControlPlane, cp_namespace: str, sa_kubeconfig: Path, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    case = _case()
    nodes = cp.create_nodes(case.nodes, prefix=f"{ns}-dump-", cpu="8", memory="32Gi", labels={GROUP: ns},
                            wait_ready=False)
    nodes_to_delete += nodes
    cp.wait_for(lambda: set(nodes) <= cp.ready_nodes(), 60, 0.2, "nodes Ready")
    scheduler = f"dump-{ns}"
    config = write_config(tmp_path / "config.json", scheduler)
    case.create_objects(cp, ns, nodes)
    try:
        run = scheduler.split("-")[0]
        case.create_claims(cp, ns, run)
        case.create_pods(cp, ns, scheduler, run)
        # kube-controller-manager stamps the template's claim and names it in the pod's status
        cp.wait_for(lambda: all(p.get("status", {}).get("resourceClaimStatuses") for p in pods_in(cp, ns)
                                if p["metadata"]["name"] == "a100-1"), 60, 0.2, "claim from the template")

        runner = CliRunner()
        dump = tmp_path / "dump.yaml"
        result = runner.invoke(main, ["dump", "--kubeconfig", str(cp.kubeconfig), "--config", str(config),
                                      "-o", str(dump)])
        assert result.exit_code == 0, result.output
        for kind in ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate"):
            assert f" {kind}" in result.output, (kind, result.output)
        out_cluster = tmp_path / "after.yaml"
        sim = runner.invoke(main, ["simulate", "--cluster", str(dump), "--config", str(config), "--output", "json",
                                   "--strict-scheduler-name", "--out-cluster", str(out_cluster), "-q"])
        assert sim.exit_code == 0, sim.output
        placements = {p["pod"].split("/", 1)[1]: p for p in json.loads(sim.stdout)["placements"]
                      if p["pod"].startswith(f"{ns}/")}
        after = yaml.safe_load(out_cluster.read_text())["items"]
        simulated = outcome_of(
            [o for o in after if o.get("kind") == "Pod" and o["metadata"].get("namespace") == ns],
            {o["metadata"]["name"]: o for o in after
             if o.get("kind") == "ResourceClaim" and o["metadata"].get("namespace") == ns},
            nodes, {name: "" if p["status"] == "Scheduled" else str(p.get("message") or "")
                    for name, p in placements.items()})

        sched = InProcess(config, sa_kubeconfig).start()
        try:
            live = watched(cp, ns, lambda _: (case.wait_settled(
                cp, ns, scheduler, {p.name: not p.node for p in case.pods}), outcome(cp, ns, nodes))[1])(scheduler)
        finally:
            assert sched.stop() == 0
    finally:
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
        cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")
        case.delete_objects(cp)
    print(f"\n[dump-dra] live:      {live}\n[dump-dra] simulated: {simulated}")
    expected = {p.name: p.node for p in case.pods}
    assert {n: p["node"] for n, p in live["pods"].items()} == expected
    assert live["problems"] == simulated["problems"] == []
    assert live["claim_overlaps"] == []
    for name in sorted(expected):
        assert simulated["pods"][name] == live["pods"][name], name
    reasons = " ".join(live["pods"][n]["reason"] for n, node in expected.items() if not node)
    for words in ("cannot allocate all claims", f"device class {ns}-missing does not exist"):
        assert words in reasons, words
