"""DynamicResources end to end in the simulator: `kubesched simulate --cluster` on a dump holding
ResourceSlices, a DeviceClass, ResourceClaims and pods using them (issue 27's GPU cluster,
gpu_scenario.py), with `--out-cluster`: the claims come out allocated on their pod's node, both users
of a shared claim on one node, and the pods left pending say what kube-scheduler says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.testing import node, pod
from unit.plugins.dynamicresources import gpu_scenario as s

NODES = [f"gpu-node-{i}" for i in range(1, 5)]
NOT_HELPFUL = "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."


def dump(path: Path, templates: bool = False) -> None:
    """The GPU cluster; with ``templates``, the ``t4`` pod's claim is a ResourceClaimTemplate the
    simulator stamps (the dump holds no claim for it)."""
    items: list[dict[str, Any]] = []
    for i, name in enumerate(NODES, 1):
        items.append({**node(name, labels={"kubernetes.io/hostname": name}), "apiVersion": "v1", "kind": "Node"})
        items.append(s.resource_slice(name, i))
    items.append(s.device_class())
    from_template = {p.claim for p in s.PODS if p.template} if templates else set()
    items += [s.resource_claim(c, "default") for c in s.CLAIMS if c.name not in from_template]
    items += [s.claim_template(c, "default") for c in s.CLAIMS if c.name in from_template]
    for k, p in enumerate(s.PODS):
        raw = pod(p.name, cpu="100m", **s.pod_claim_fields(p, templates=templates))
        raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        raw["metadata"]["creationTimestamp"] = f"2025-01-01T00:0{p.wave}:{k:02d}Z"  # wave 1 first
        items.append({**raw, "apiVersion": "v1", "kind": "Pod"})
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


@pytest.mark.parametrize("templates", [False, True])
def test_gpu_cluster_allocates_claims_on_their_pods_nodes(tmp_path: Path, templates: bool) -> None:
    dump(tmp_path / "dump.yaml", templates)
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(tmp_path / "dump.yaml"), "--output", "json",
                                       "--out-cluster", str(out), "-q"])
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    placed = {p["pod"].split("/")[1]: p for p in doc["placements"]}
    node_of = {name: p["node"] for name, p in placed.items() if p["node"]}
    assert set(node_of) == s.BOUND
    assert node_of["a100-0"] == node_of["a100-1"] == "gpu-node-1"
    assert node_of["big-mem"] == "gpu-node-2"  # the only device with 20Gi left
    assert node_of["shared-a"] == node_of["shared-b"]
    assert {node_of["shared-a"], node_of["t4"]} == {"gpu-node-3", "gpu-node-4"}
    assert {n: placed[n]["message"] for n in s.PENDING} == {
        "three-gpus": f"0/4 nodes are available: 4 cannot allocate all claims. {NOT_HELPFUL}",
        "a100-late": f"0/4 nodes are available: 4 cannot allocate all claims. {NOT_HELPFUL}",
        "no-class": f"0/4 nodes are available: request gpu: device class {s.MISSING_CLASS} does not exist. "
                    f"{NOT_HELPFUL}",
    }

    objects = yaml.safe_load(out.read_text())["items"]
    claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    if templates:
        # kube-controller-manager's claim: <pod>-<claim>-<5 characters>, owned by the pod, named
        # in its status; the pod and the claim keep the names below.
        pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
        (status,) = pods["t4"]["status"]["resourceClaimStatuses"]
        stamped = claims.pop(status["resourceClaimName"])
        assert status["name"] == "gpu"
        assert stamped["metadata"]["name"].startswith("t4-gpu-") and len(stamped["metadata"]["name"]) == 12
        assert stamped["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
        assert stamped["metadata"]["ownerReferences"][0]["uid"] == placed["t4"]["uid"]
        claims["t4"] = stamped
    devices: list[tuple[str, str]] = []
    for p in s.PODS:
        status = claims[p.claim].get("status") or {}
        if p.name in s.PENDING:
            assert not status.get("allocation"), p.name
            continue
        results = status["allocation"]["devices"]["results"]
        # each device is in the pool of the pod's node (the slices are node-local, pool = node)
        assert {r["pool"] for r in results} == {node_of[p.name]}, p.name
        assert {"resource": "pods", "name": p.name, "uid": placed[p.name]["uid"]} in status["reservedFor"]
        if p.name != "shared-b":
            devices += [(r["pool"], r["device"]) for r in results]
    assert len(devices) == len(set(devices)) == 5  # no device given twice; all five GPUs in use
    assert [r["name"] for r in claims["shared"]["status"]["reservedFor"]] == ["shared-a", "shared-b"]


def test_broken_selectors_are_reasons_on_their_pods_not_a_crash(tmp_path: Path) -> None:
    """A selector that does not compile, or fails on a device, is the pod's reason (naming the
    claim and selector); the other pods are scheduled as usual."""
    items: list[dict[str, Any]] = [{**node(NODES[0], labels={"kubernetes.io/hostname": NODES[0]}),
                                    "apiVersion": "v1", "kind": "Node"}, s.resource_slice(NODES[0], 1),
                                   s.device_class()]
    selectors = {"no-compile": 'device.attributes["gpu.example.com"].model ==',
                 "no-such-key": 'device.attributes["gpu.example.com"].healthy',
                 "fine": s.A100}
    for name, expression in selectors.items():
        items.append(s.resource_claim(s.ClaimSpec(name, selector=expression), "default"))
        raw = pod(name, cpu="100m", resourceClaims=[{"name": "gpu", "resourceClaimName": name}])
        items.append({**raw, "apiVersion": "v1", "kind": "Pod"})
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(tmp_path / "dump.yaml"), "--output", "json", "-q"])
    assert result.exit_code == 0, result.output
    placed = {p["pod"].split("/")[1]: p for p in orjson.loads(result.stdout)["placements"]}
    assert placed["fine"]["node"] == NODES[0]
    assert not placed["no-compile"]["node"] and not placed["no-such-key"]["node"]
    assert "claim default/no-compile: selector #0: CEL compile error: compilation failed" in placed["no-compile"][
        "message"]
    message = placed["no-such-key"]["message"]
    assert message.startswith('gave up after 10 attempts that ended in an error: running "DynamicResources" filter '
                              "plugin: claim default/no-such-key: selector #0 on device gpu.example.com/gpu-node-1/")
    assert "CEL runtime error: no such key: healthy. consider using CEL optional chaining" in message


def test_claim_allocated_where_its_pod_cannot_go_is_deallocated_and_allocated_again(tmp_path: Path) -> None:
    """PostFilter: a claim left allocated on gpu-node-3 by nobody's pod, and a pod that must run on
    gpu-node-4: the claim is deallocated (no pod evicted), then allocated on gpu-node-4."""
    items: list[dict[str, Any]] = []
    for i, name in enumerate(NODES[2:], 3):
        items += [{**node(name, labels={"kubernetes.io/hostname": name}), "apiVersion": "v1", "kind": "Node"},
                  s.resource_slice(name, i)]
    items.append(s.device_class())
    stale = s.resource_claim(s.ClaimSpec("stale", selector=s.T4), "default")
    stale["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": s.DRIVER, "pool": NODES[2], "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODES[2]]}]}]}}}
    items.append(stale)
    raw = pod("needs-node-4", cpu="100m", resourceClaims=[{"name": "gpu", "resourceClaimName": "stale"}])
    raw["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODES[3]}
    items.append({**raw, "apiVersion": "v1", "kind": "Pod"})
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(tmp_path / "dump.yaml"), "--output", "json",
                                       "--out-cluster", str(out), "-q"])
    assert result.exit_code == 0, result.output
    (placed,) = orjson.loads(result.stdout)["placements"]
    assert placed["node"] == NODES[3]
    (claim,) = [o for o in yaml.safe_load(out.read_text())["items"] if o["kind"] == "ResourceClaim"]
    assert [r["pool"] for r in claim["status"]["allocation"]["devices"]["results"]] == [NODES[3]]


def test_extended_resources_backed_by_dra_get_a_claim_in_the_simulator(tmp_path: Path) -> None:
    """A DeviceClass maps example.com/gpu; pods ask for it as an extended resource: the simulator
    creates each pod's claim (``<pod>-extended-resources-`` and 5 characters), allocates it on the
    pod's node, names it in the pod's status, and a pod asking for more than is left stays pending."""
    gpu = "example.com/gpu"
    items: list[dict[str, Any]] = [{**node(NODES[0], labels={"kubernetes.io/hostname": NODES[0]}),
                                    "apiVersion": "v1", "kind": "Node"}, s.resource_slice(NODES[0], 1)]
    cls = s.device_class()
    cls["spec"]["extendedResourceName"] = gpu
    items.append(cls)
    capacity = len(items[1]["spec"]["devices"])
    for name, count in (("one", 1), ("rest", capacity - 1), ("too-many", 1)):
        raw = pod(name, cpu="100m", extra_requests={gpu: str(count)})
        raw["spec"]["containers"][0]["resources"]["limits"] = {gpu: str(count)}
        items.append({**raw, "apiVersion": "v1", "kind": "Pod"})
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(tmp_path / "dump.yaml"), "--output", "json",
                                       "--out-cluster", str(out), "-q"])
    assert result.exit_code == 0, result.output
    placed = {p["pod"].split("/")[1]: p for p in orjson.loads(result.stdout)["placements"]}
    assert placed["one"]["node"] == placed["rest"]["node"] == NODES[0]
    assert not placed["too-many"]["node"]
    assert "cannot allocate all claims" in placed["too-many"]["message"]
    objects = yaml.safe_load(out.read_text())["items"]
    claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    assert len(claims) == 2
    for name, count in (("one", 1), ("rest", capacity - 1)):
        status = pods[name]["status"]["extendedResourceClaimStatus"]
        claim = claims[status["resourceClaimName"]]
        assert claim["metadata"]["name"].startswith(f"{name}-extended-resources-")
        assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
        assert len(claim["status"]["allocation"]["devices"]["results"]) == count
        assert status["requestMappings"] == [{"containerName": "app", "resourceName": gpu,
                                              "requestName": "container-0-request-1"}]
