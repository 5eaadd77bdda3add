"""``kubesched dump --anonymize`` (simulate/inputs/anonymize.py): the same cluster before and after
anonymising schedules the same way — spread, pod (anti-)affinity with namespace selectors, node
affinity by label and by name, taints and tolerations with values, claims bound to local volumes
(a generic ephemeral one included) — while no name, namespace or label value of the original is
left in the file."""

from __future__ import annotations

import copy
import io
import re
from pathlib import Path
from typing import Any

import orjson
import yaml

from kubesched.config.load import load_config
from kubesched.framework.registry import profiles_object_kinds
from kubesched.plugins.builtin import builtin_registry
from kubesched.simulate.engine.records import SCHEDULED, UNSCHEDULABLE
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.anonymize import Anonymizer
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.simulate.inputs.dump_writer import DumpWriter
from kubesched.testing import node

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
TS = iter(range(10_000))


def pod(name: str, namespace: str = "shop", labels: dict[str, str] | None = None, cpu: str = "500m",
        **spec: Any) -> dict[str, Any]:
    n = next(TS)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {},
                     "creationTimestamp": f"2025-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
                     "annotations": {"team.example.com/owner": "alice@example.com"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example.com/shop/web",
                                 "command": ["/bin/web", "--secret=hunter2"], "env": [{"name": "A", "value": "b"}],
                                 "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec},
        "status": {"phase": "Pending", "podIP": "10.0.0.9"},
    }


def namespace(name: str, team: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": team, "kubernetes.io/metadata.name": name}}}


def local_pv(name: str, on: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "shop", "name": claim,
                                  "uid": f"uid-{claim}"},
                     "local": {"path": "/mnt/disks/ssd1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}]}}}}


def bound_pvc(name: str, pv: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": pv,
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}}


def cluster_objects() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [namespace("shop", "blue"), namespace("ops", "red")]
    for zone in "abc":
        for i in range(4):
            name = f"n-{zone}-{i}"
            taints = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}] if name == "n-c-3" else None
            labels = {ZONE: f"zone-{zone}", "pool": "gpu" if name == "n-c-3" else "general"}
            n = node(name, cpu="4", labels=labels, taints=taints)
            n["status"]["addresses"] = [{"type": "InternalIP", "address": "192.168.1.7"}]
            if name == "n-b-1":
                n["status"]["images"] = [{"names": ["registry.example.com/shop/web:latest"], "sizeBytes": 900_000_000}]
            objs.append(n)
    web = {"app": "web"}
    for i in range(13):  # one per untainted hostname (11) and even across zones: two left over
        objs.append(pod(f"web-{i}", labels=web, topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": web}}],
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOSTNAME, "labelSelector": {"matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["web"]}]}}]}}))
    toleration = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    for i in range(3):
        objs.append(pod(f"batch-{i}", cpu="1", nodeSelector={"pool": "gpu"}, tolerations=[toleration]))
    objs.append(pod("batch-wrong", nodeSelector={"pool": "gpu"}, tolerations=[{**toleration, "value": "other"}]))
    objs.append(pod("pinned", cpu="100m", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-a-1"]}]}]}}}))
    friend_term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": web},
                   "namespaceSelector": {"matchLabels": {"team": "blue"}}}
    objs.append(pod("friend", "ops", cpu="100m", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [friend_term]}}))
    objs.append(pod("friend-red", "ops", cpu="100m", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{**friend_term, "namespaceSelector": {
            "matchLabels": {"team": "red"}}}]}}))
    objs.append(pod("friend-listed", "ops", cpu="100m", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ZONE, "labelSelector": {"matchLabels": web},
                                                            "namespaces": ["shop"]}]}}))
    stateful = pod("stateful", cpu="100m", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}])
    claim_spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                  "resources": {"requests": {"storage": "1Gi"}}}
    scratch = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": claim_spec}}}
    eph = pod("eph", cpu="100m", volumes=[scratch])
    objs += [stateful, eph, local_pv("pv-1", "n-b-2", "data-0"), local_pv("pv-2", "n-a-2", "eph-scratch"),
             bound_pvc("data-0", "pv-1"), bound_pvc("eph-scratch", "pv-2", owner=eph)]
    objs.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                 "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
                 "parameters": {"kmsKeyId": "arn:aws:kms:secret"}})
    return objs


async def simulate(objs: list[dict[str, Any]], tmp: Path, name: str,
                   config_path: Path | None = None) -> dict[str, tuple[str, str | None, str]]:
    """pod key → (status, node, message), through a dump file as `kubesched dump` writes it."""
    path = tmp / f"{name}.yaml"
    with path.open("wb") as out:
        writer = DumpWriter(out, "yaml")
        for obj in objs:
            writer.write(obj)
        writer.close()
    registry = builtin_registry()
    config = load_config(config_path, registry)
    cluster = load_cluster(path, profiles_object_kinds(registry, config.profiles))
    result = await Simulation(config, registry, cluster).run()
    return {r.key: (r.status, r.node, r.message) for r in result.records.values()}


async def test_an_anonymised_cluster_schedules_as_the_original(tmp_path: Path) -> None:
    original = cluster_objects()
    anon = Anonymizer("s3cret")
    anonymised = [anon.anonymize(copy.deepcopy(o)) for o in original]

    before = await simulate(original, tmp_path, "before")
    after = await simulate(anonymised, tmp_path, "after")

    # The outcome itself, so that "the same" cannot mean "the same nothing".
    placed = {k: v[1] for k, v in before.items() if v[0] == SCHEDULED}
    assert sum(1 for k in before if k.startswith("shop/web-") and before[k][0] == UNSCHEDULABLE) == 2
    assert len({placed[k] for k in placed if k.startswith("shop/web-")}) == 11  # one web pod per node
    assert {placed[f"shop/batch-{i}"] for i in range(3)} == {"n-c-3"}
    assert before["shop/batch-wrong"][0] == UNSCHEDULABLE and "untolerated taint" in before["shop/batch-wrong"][2]
    assert placed["shop/pinned"] == "n-a-1"
    assert placed["shop/stateful"] == "n-b-2" and placed["shop/eph"] == "n-a-2"
    assert "ops/friend" in placed and "ops/friend-listed" in placed
    assert before["ops/friend-red"][0] == UNSCHEDULABLE

    def anon_key(key: str) -> str:
        ns, _, name = key.partition("/")
        return f"{anon.name(ns)}/{anon.name(name)}"

    expected = {anon_key(k): (status, anon.name(node) if node else node, message)
                for k, (status, node, message) in before.items()}
    assert after == expected


def test_no_identifier_of_the_original_is_left() -> None:
    anon = Anonymizer("s3cret")
    text = orjson.dumps([anon.anonymize(copy.deepcopy(o)) for o in cluster_objects()]).decode()
    for secret in ("shop", "web-", "n-a-1", "blue", "alice", "registry.example.com", "hunter2", "192.168",
                   "10.0.0.9", "data-0", "pv-1", "batch", "gpu", "general", "arn:aws", "/mnt/disks"):
        assert secret not in text, secret
    # Kept: what describes the platform or the request, not the workload.
    for kept in ('"topology.kubernetes.io/zone":"zone-a"', '"cpu":"500m"', '"key":"dedicated"',
                 '"kubernetes.io/no-provisioner"', '"pv.kubernetes.io/bind-completed":"yes"'):
        assert kept in text, kept
    # An ephemeral volume's claim keeps the <pod>-<volume> form the scheduler derives its name by.
    assert f'"name":"{anon.name("eph")}-scratch"' in text


def test_hashes_are_valid_names_stable_for_a_salt_and_differ_between_salts() -> None:
    a, again, other = Anonymizer("one"), Anonymizer("one"), Anonymizer("two")
    hashed = a.name("payments-api-7d9f8-x2x4z")
    assert re.fullmatch(r"x[0-9a-f]{16}", hashed)
    assert again.name("payments-api-7d9f8-x2x4z") == hashed != other.name("payments-api-7d9f8-x2x4z")
    # Kept as they are: nothing to hide, and numbers stay numbers for NodeAffinity's Gt/Lt.
    assert [a.name(n) for n in ("", "default", "kube-system", "system-node-critical", "42")] == [
        "", "default", "kube-system", "system-node-critical", "42"]
    assert a.value(ZONE, "us-east-1a") == "us-east-1a"
    assert a.value(HOSTNAME, "ip-10-0-0-1") == a.name("ip-10-0-0-1")  # a name, hashed as the Node's
    assert a.value("example.com/team", "payments") == a.name("payments")
    # ImageLocality compares normalised names: a pod's "web" is a node's "web:latest".
    assert a.image("web") == a.image("web:latest") != a.image("web:1.2")


def test_the_dump_writer_json_list_and_yaml_stream_load_back(tmp_path: Path) -> None:
    objs = [node("n1"), pod("p1", "default")]
    for fmt in ("json", "yaml"):
        buf = io.BytesIO()
        writer = DumpWriter(buf, fmt)  # type: ignore[arg-type]
        for obj in objs:
            writer.write(obj)
        writer.close()
        path = tmp_path / f"dump.{fmt}"
        path.write_bytes(buf.getvalue())
        loaded = load_cluster(path)
        assert [n["metadata"]["name"] for n in loaded.nodes] == ["n1"]
        assert [p["metadata"]["name"] for p in loaded.pods] == ["p1"]
        # Timestamps stay strings and are read back as the same string.
        assert loaded.pods[0]["metadata"]["creationTimestamp"] == objs[1]["metadata"]["creationTimestamp"]


async def test_an_anonymised_gpu_cluster_allocates_as_the_original(tmp_path: Path) -> None:
    """Dynamic resources (issue 27's GPU cluster): claims, DeviceClasses and node-named pools hashed,
    devices and their attributes kept — the same pods bound to the same nodes, the same left pending."""
    from unit.plugins.dynamicresources import test_simulate as gpu

    gpu.dump(tmp_path / "gpu.yaml")
    original = yaml.safe_load((tmp_path / "gpu.yaml").read_text())["items"]
    anon = Anonymizer("s3cret")
    anonymised = [anon.anonymize(copy.deepcopy(o)) for o in original]
    # DynamicResources is in the default profile (as upstream's): the default configuration.
    (tmp_path / "config.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")

    async def run(objs: list[dict[str, Any]], name: str) -> dict[str, tuple[str, str | None, str]]:
        return await simulate(objs, tmp_path, name, tmp_path / "config.yaml")

    before, after = await run(original, "gpu-before"), await run(anonymised, "gpu-after")
    assert {k.split("/")[1] for k, v in before.items() if v[0] == SCHEDULED} == gpu.s.BOUND
    missing_class = gpu.s.MISSING_CLASS
    assert after == {
        f"{anon.name(k.split('/')[0])}/{anon.name(k.split('/')[1])}": (
            status, anon.name(node) if node else node, message.replace(missing_class, anon.name(missing_class)))
        for k, (status, node, message) in before.items()
    }
