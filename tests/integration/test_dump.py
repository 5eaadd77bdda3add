"""``kubesched dump`` of the real control plane, then ``simulate --cluster`` of the file: the same
pending pods and the same reasons as ``kubesched explain`` on the live cluster.

A few thousand objects, listed in pages of 50: 200 KWOK nodes (one zone of them tainted), 2,000
pods bound to them in a second namespace (with PodDisruptionBudgets over them), PriorityClasses,
PersistentVolumeClaims, a StorageClass and a PersistentVolume, and 30 pods pending for a profile
nobody runs: some fit, the others cannot (too big, only tainted nodes, a missing claim, a claim of
an Immediate class with no volume, anti-affinity to the bound pods through a namespace selector)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubesched.app.startup import load_scheduler_config
from kubesched.cli import main
from kubesched.kube.api import ApiClient, load_connection
from kubesched.live.explain import explain_live
from kubesched.simulate.inputs.anonymize import Anonymizer
from kubesched.simulate.inputs.dump import load_cluster
from kubesched.testing.controlplane import ApiError, ControlPlane

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NODES_PER_ZONE = 50
BOUND_PODS = 2000
PAGE_SIZE = 50


def in_parallel(calls: list[Callable[[], Any]]) -> None:
    with ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(c) for c in calls]:
            f.result()


@pytest.fixture
def base_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """The namespace of the bound pods, labelled for the anti-affinity's namespace selector."""
    cp = control_plane
    name = f"it-base-{uuid.uuid4().hex[:6]}"
    cp.create_namespace(name, labels={"team": name})
    yield name
    pods = cp.get(f"/api/v1/namespaces/{name}/pods")["items"]
    in_parallel([lambda n=p["metadata"]["name"]: cp.delete_pod(n, name, grace_period=0) for p in pods])
    cp.api("DELETE", f"/api/v1/namespaces/{name}")


def test_simulate_of_a_dump_sees_what_explain_sees_live(
    control_plane: ControlPlane, cp_namespace: str, base_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns, base = control_plane, cp_namespace, base_namespace
    group = {"kubesched.test/group": ns}
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    for z in range(4):
        nodes_to_delete += cp.create_nodes(NODES_PER_ZONE, prefix=f"{ns}-z{z}-", cpu="4", memory="16Gi",
                                           labels={**group, ZONE: f"z{z}"}, taints=[taint] if z == 3 else (),
                                           timeout=180)
    low, high = f"{ns}-low", f"{ns}-high"
    for name, value in ((low, 10), (high, 1000)):
        cp.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value})
    storage_class, immediate = f"{ns}-local", f"{ns}-immediate"
    try:
        for name, mode in ((storage_class, "WaitForFirstConsumer"), (immediate, "Immediate")):
            cp.api("POST", "/apis/storage.k8s.io/v1/storageclasses",
                   {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                    "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": mode})
        cp.api("POST", "/api/v1/persistentvolumes",
               {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{ns}-pv"},
                "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": storage_class, "local": {"path": "/mnt/x"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": HOSTNAME, "operator": "In", "values": [nodes_to_delete[0]]}]}]}}}})
        _populate(cp, ns, base, nodes_to_delete, low, immediate)
        _compare(cp, ns, base, tmp_path)
    finally:
        for path in (f"/apis/scheduling.k8s.io/v1/priorityclasses/{low}",
                     f"/apis/scheduling.k8s.io/v1/priorityclasses/{high}",
                     f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}",
                     f"/apis/storage.k8s.io/v1/storageclasses/{immediate}",
                     f"/api/v1/persistentvolumes/{ns}-pv"):
            with contextlib.suppress(ApiError):
                cp.api("DELETE", path)


def _populate(cp: ControlPlane, ns: str, base: str, nodes: list[str], low: str, immediate: str) -> None:
    group = {"kubesched.test/group": ns}
    untainted = [n for n in nodes if "-z3-" not in n]
    # 2,000 pods bound by name, 300m each: 10 per untainted node leaves 1 CPU of 4 free.
    in_parallel([
        lambda i=i: cp.create_pod(f"base-{i}", base, node_name=untainted[i % len(untainted)],
                                  labels={"tier": "base", "shard": str(i % 5)}, requests={"cpu": "300m"},
                                  priority_class_name=low)
        for i in range(BOUND_PODS)
    ])
    for i in range(5):
        cp.api("POST", f"/apis/policy/v1/namespaces/{base}/poddisruptionbudgets",
               {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"pdb-{i}"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"shard": str(i)}}}})
    for i in range(20):
        cp.api("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
               {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"data-{i}"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": immediate,
                         "resources": {"requests": {"storage": "1Gi"}}}})
    scheduler = f"dump-{ns}"

    def pending(name: str, **kwargs: Any) -> Callable[[], Any]:
        kwargs.setdefault("node_selector", group)
        return lambda: cp.create_pod(name, ns, scheduler_name=scheduler, priority_class_name=low, **kwargs)

    def claim(name: str) -> dict[str, Any]:
        return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}

    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"tier": "base"}},
         "namespaceSelector": {"matchLabels": {"team": base}}}]}}
    calls = [pending(f"fits-{i}", requests={"cpu": "100m"}) for i in range(10)]
    calls += [pending(f"big-{i}", requests={"cpu": "8"}) for i in range(5)]
    calls += [pending(f"infra-{i}", node_selector={**group, ZONE: "z3"}) for i in range(5)]
    calls += [pending(f"claim-missing-{i}", extra_spec=claim(f"nope-{i}")) for i in range(5)]
    calls += [pending(f"claim-class-{i}", extra_spec=claim(f"data-{i}")) for i in range(3)]
    calls += [pending(f"anti-{i}", affinity=anti) for i in range(2)]
    in_parallel(calls)


def _compare(cp: ControlPlane, ns: str, base: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": f"dump-{ns}"}],
    }))
    dump = tmp_path / "dump.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["dump", "--kubeconfig", str(cp.kubeconfig), "--config", str(config),
                                  "-o", str(dump), "--page-size", str(PAGE_SIZE)])
    assert result.exit_code == 0, result.output
    loaded = load_cluster(dump, [])
    ours = [p for p in loaded.pods if p["metadata"]["namespace"] in (ns, base)]
    assert len(ours) == BOUND_PODS + 30
    assert sum(1 for n in loaded.nodes if n["metadata"]["name"].startswith(f"{ns}-")) == 4 * NODES_PER_ZONE
    pages = int(result.output.split(" list page")[0].rsplit("(", 1)[1])
    assert pages >= (BOUND_PODS + 30 + 4 * NODES_PER_ZONE) // PAGE_SIZE, result.output
    for kind in ("PriorityClass", "PodDisruptionBudget", "PersistentVolumeClaim", "PersistentVolume",
                 "StorageClass", "Namespace"):
        assert f" {kind}" in result.output, (kind, result.output)

    sim = runner.invoke(main, ["simulate", "--cluster", str(dump), "--config", str(config), "--output", "json",
                               "--strict-scheduler-name"])
    assert sim.exit_code == 0, sim.output
    doc = json.loads(sim.stdout)
    simulated = {p["pod"]: p for p in doc["placements"] if p["pod"].startswith(f"{ns}/")}
    assert len(simulated) == 30

    scheduler_config, registry = load_scheduler_config(config)

    async def explain_all() -> dict[str, Any]:
        api = ApiClient(await load_connection(str(cp.kubeconfig)), None, 0)
        try:
            return {key: (await explain_live(api, scheduler_config, registry, key.split("/")[1], ns)).explanation
                    for key in sorted(simulated)}
        finally:
            await api.close()

    live = asyncio.run(explain_all())
    pending_live = {key for key, ex in live.items() if not ex.feasible}
    pending_sim = {key for key, p in simulated.items() if p["status"] != "Scheduled"}
    assert pending_sim == pending_live
    assert len(pending_live) == 20  # 10 fit; every other one is refused for a reason of its own
    for key in pending_live:
        # The simulator ran PostFilter (preemption) after the filters; explain stops at the filters.
        assert simulated[key]["message"].split(" preemption: ")[0] == live[key].message, key
    reasons = " ".join(live[k].message for k in pending_live)
    for expected in ("Insufficient cpu", "untolerated taint", 'persistentvolumeclaim "nope-0" not found',
                     "anti-affinity", "unbound immediate PersistentVolumeClaims"):
        assert expected in reasons, expected

    # Anonymised, the same cluster schedules the same: the same pods pending for the same reasons.
    anon_dump = tmp_path / "anon.json"
    result = runner.invoke(main, ["dump", "--kubeconfig", str(cp.kubeconfig), "--config", str(config),
                                  "-o", str(anon_dump), "--anonymize", "--salt", "pepper"])
    assert result.exit_code == 0, result.output
    text = anon_dump.read_text()
    # Not as a namespace nor as a label value; the profile's schedulerName (dump-<ns>) is kept.
    assert f'"{ns}"' not in text and base not in text and f"{ns}-z0-" not in text and "base-1" not in text
    sim = runner.invoke(main, ["simulate", "--cluster", str(anon_dump), "--config", str(config), "--output", "json",
                               "--strict-scheduler-name"])
    assert sim.exit_code == 0, sim.output
    anonymised = {p["pod"]: p for p in json.loads(sim.stdout)["placements"]}
    anon = Anonymizer("pepper")
    for key, placement in simulated.items():
        name = key.split("/")[1]
        got = anonymised[f"{anon.name(ns)}/{anon.name(name)}"]
        message = placement["message"]
        for i in range(5):  # the one name a reason shows
            message = message.replace(f'"nope-{i}"', f'"{anon.name(f"nope-{i}")}"')
        assert (got["status"], got["message"]) == (placement["status"], message), key
