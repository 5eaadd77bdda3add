"""DRA in the simulator: a GPU cluster dump replayed by ``kubesched simulate --cluster``.

The generator writes what `kubesched dump` would save from a cluster where a DRA driver publishes
one ResourceSlice per node (``--gpus`` GPUs each, models and memory varying by node) and every pod
takes one GPU through a ResourceClaimTemplate (scheduler_perf's SchedulingWithResourceClaimTemplate
shape): the DeviceClass selects the driver, each template asks for one device with a memory
selector, so every device judged costs two CEL evaluations. The claims are stamped as
kube-controller-manager's resourceclaim controller would have stamped them before the dump
(``<pod>-gpu-<suffix>``, owned by the pod, named in ``status.resourceClaimStatuses``), so the dump
replays whatever the simulator does about templates itself.

``python -m bench dra [--nodes 500] [--gpus 8] [--pods 1000] [--rounds 1] [--dump FILE] [--no-save]``
runs ``kubesched simulate --cluster DUMP --output json -q`` as a child process and records: the
loop's pods/s (the json document's ``summary.wallSeconds``), the whole command's wall and CPU
seconds, pods bound per CPU second, and how many pods were bound. One record per call is
appended to bench/results/dra-<date>.json. ``--upstream`` generates scheduler_perf's shape instead
(``perf_cluster``: 10 devices per node from resourceslice-basic-devices.yaml, the template without
selectors, half the devices allocated by init claims, as ``5000pods_500nodes``).

``python -m bench dra live --workload SchedulingWithResourceClaimTemplate|ExtendedResource
[--size small|full] [--rounds N] [--contenders kube-scheduler,kubesched]`` runs upstream scheduler_perf's
DRA workloads (test/integration/scheduler_perf/dra/performance-config.yaml and
extendedresource/performance-config.yaml, v1.37.1) side by side with the real kube-scheduler on one
control plane, with bench/live.py's method (pods created before the scheduler starts, binds timed from
a watch, peak RSS and CPU per process; records in bench/results/<date>.json). Differences from
upstream, by necessity of that method: the backlog variant (``5000pods_500nodes`` shape: pods all
pending when the scheduler starts), not the steady-state one (``half_500nodes``: 10 pods kept in the
queue for 10 s); measured pods also request pod-default's 100m/500Mi (upstream's pod has no
requests; a 4-cpu node still takes 40); ExtendedResource has no init pods (upstream schedules 2,500
first; here half the devices stay free instead of a quarter); kube-controller-manager stamps the
claims from the template before the scheduler starts (upstream runs the resourceclaim controller
beside the scheduler).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
MODELS = (("A100", "80Gi"), ("H100", "80Gi"), ("L4", "24Gi"), ("T4", "16Gi"))
#: The template's request selector: a capacity comparison, as DRA examples write it.
SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("16Gi")) >= 0'


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _slice(node: str, index: int, gpus: int) -> dict[str, Any]:
    model, memory = MODELS[index % len(MODELS)]
    devices = [{"name": f"gpu-{g}", "attributes": {"model": {"string": model}, "index": {"int": g}},
                "capacity": {"memory": {"value": memory}}} for g in range(gpus)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}", "uid": f"slice-{node}", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def _claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": SELECTOR}}]}}]}}


def claim_name(pod: str, claim: str) -> str:
    """``<pod>-<claim>-<5 characters>``, the suffix from a hash instead of kube-controller-manager's
    random one, so the dump is the same on every run."""
    return f"{pod}-{claim}-{hashlib.sha256(f'{pod}/{claim}'.encode()).hexdigest()[:5]}"


def cluster(nodes: int, gpus: int, pods: int, namespace: str = "dra") -> list[dict[str, Any]]:
    """The dump's objects: nodes, slices, the class, the template, pods and their stamped claims."""
    names = [f"gpu-node-{i:05d}" for i in range(nodes)]
    items: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        items += [_node(name), _slice(name, i, gpus)]
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "one-gpu", "namespace": namespace}, "spec": {"spec": _claim_spec()}})
    for p in range(pods):
        pod = f"pod-{p:05d}"
        claim = claim_name(pod, "gpu")
        uid = f"uid-{pod}"
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": pod, "namespace": namespace, "uid": uid,
                                   "creationTimestamp": f"2026-01-01T{p // 3600:02d}:{p // 60 % 60:02d}:{p % 60:02d}Z"},
                      "spec": {"schedulerName": "default-scheduler",
                               "containers": [{"name": "c", "image": "pause",
                                               "resources": {"requests": {"cpu": "100m", "memory": "100Mi"},
                                                             "claims": [{"name": "gpu"}]}}],
                               "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
                      "status": {"phase": "Pending", "resourceClaimStatuses": [
                          {"name": "gpu", "resourceClaimName": claim}]}})
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": claim, "namespace": namespace, "uid": f"uid-{claim}",
                                   "resourceVersion": "1",
                                   "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid,
                                                        "controller": True, "blockOwnerDeletion": True}]},
                      "spec": _claim_spec()})
    return items


def write_dump(path: Path, nodes: int, gpus: int, pods: int) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": cluster(nodes, gpus, pods)}))


def run_once(dump: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kubesched.cli", "simulate", "--cluster", str(dump),
                           "--output", "json", "-q"], capture_output=True, env=env, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"kubesched simulate failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    doc = json.loads(proc.stdout)
    bound = sum(1 for p in doc["placements"] if p.get("node"))
    loop = float(doc["summary"]["wallSeconds"])
    return {"bound": bound, "pending": len(doc["placements"]) - bound, "loop_seconds": round(loop, 2),
            "pods_per_second": round(bound / loop, 1) if loop > 0 else None,
            "wall_seconds": round(wall, 2),
            # The whole process's CPU (start-up and loading included): the figure that holds on a
            # shared, loaded machine, where the loop's wall time mostly measures the other tenants.
            "pods_per_cpu_second": round(bound / cpu, 2) if (cpu := after.ru_utime + after.ru_stime
                                                              - before.ru_utime - before.ru_stime) > 0 else None,
            "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)}


# -- scheduler_perf's shape (test/integration/scheduler_perf/dra/templates, v1.37.1) -----------------

PERF_DRIVER = "test-driver.cdi.k8s.io"
PERF_CLASS = "test-class"
PERF_TEMPLATE = "test-claim-template"
PERF_DEVICES = 10
#: init claims per node, allocated before the measured pods (5000pods_500nodes: 2,500 on 500 nodes)
PERF_INIT_PER_NODE = 5
INIT_NAMESPACE = "dra-init"
EXTENDED_CLASSES = 25
#: kube-controller-manager's client rate: its default (20 QPS, burst 30) took over 11 minutes to
#: stamp the full size's 2,500 claims (a claim and a pod status write each, among its other
#: controllers' calls) before either scheduler started. Not measured (the schedulers are timed
#: from their start, with the backlog ready); it only shortens the bench.
CONTROLLER_MANAGER_ARGS = ("--kube-api-qps=500", "--kube-api-burst=1000")


def perf_slice(node: str, index: int) -> dict[str, Any]:
    """resourceslice-basic-devices.yaml: 10 devices shaped after an Intel GPU, on ``node``."""
    def device(d: int) -> dict[str, Any]:
        root = d % 2
        strings = {"driver": "xe", "resource.k8s.io/pciRoot": str(root), "family": "Arc Pro B-Series",
                   "health": "Healthy", "model": "B60", "pciAddress": f"0000:0{d}:00.0", "pciId": "0xe211",
                   "pciRoot": f"0{root}", "resource.kubernetes.io/pciBusID": f"0000:0{d}:00.0",
                   "resource.kubernetes.io/pciRoot": f"pci0000:0{root}", "type": "gpu"}
        attributes: dict[str, Any] = {k: {"string": v} for k, v in strings.items()}
        attributes |= {"driverVersion": {"version": "1.2.3"}, "sriov": {"bool": True}}
        return {"name": f"basic-device-{d}", "attributes": attributes,
                "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}}

    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"resourceslice-{index}"},
            "spec": {"pool": {"name": f"resourceslice-{index}", "generation": 1, "resourceSliceCount": 1},
                     "driver": PERF_DRIVER, "nodeName": node, "devices": [device(d) for d in range(PERF_DEVICES)]}}


def perf_class(name: str = PERF_CLASS, extended_resource: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{PERF_DRIVER}"'}}]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def perf_claim_spec() -> dict[str, Any]:
    """resourceclaim.yaml / resourceclaimtemplate.yaml (one request, no selectors, no constraints)."""
    return {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": PERF_CLASS}}]}}


def perf_init_claims(nodes: list[str]) -> list[dict[str, Any]]:
    """``PERF_INIT_PER_NODE`` claims per node, allocated to its first devices (allocResourceClaims)."""
    out = []
    for i, node in enumerate(nodes):
        for d in range(PERF_INIT_PER_NODE):
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"test-claim-{i * PERF_INIT_PER_NODE + d}", "namespace": INIT_NAMESPACE},
                        "spec": perf_claim_spec(),
                        "status": {"allocation": {
                            "devices": {"results": [{"request": "req-0", "driver": PERF_DRIVER,
                                                     "pool": f"resourceslice-{i}", "device": f"basic-device-{d}"}]},
                            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}})
    return out


def perf_cluster(nodes: int, pods: int, namespace: str = "dra") -> list[dict[str, Any]]:
    """SchedulingWithResourceClaimTemplate as a dump: the slices, the class, the allocated init
    claims, the template and the pending pods with their stamped claims."""
    names = [f"scheduler-perf-dra-{i}" for i in range(nodes)]
    items: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        node = _node(name)
        node["status"]["allocatable"] = node["status"]["capacity"] = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        items += [node, perf_slice(name, i)]
    items += [perf_class(), *perf_init_claims(names)]
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": PERF_TEMPLATE, "namespace": namespace}, "spec": {"spec": perf_claim_spec()}})
    for p in range(pods):
        pod = f"test-dra-{p:05d}"
        claim = claim_name(pod, "resource")
        uid = f"uid-{pod}"
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": pod, "namespace": namespace, "uid": uid,
                                   "creationTimestamp": f"2026-01-01T{p // 3600:02d}:{p // 60 % 60:02d}:{p % 60:02d}Z"},
                      "spec": {"schedulerName": "default-scheduler",
                               "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                               "resources": {"claims": [{"name": "resource"}]}}],
                               "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": PERF_TEMPLATE}]},
                      "status": {"phase": "Pending", "resourceClaimStatuses": [
                          {"name": "resource", "resourceClaimName": claim}]}})
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": claim, "namespace": namespace, "uid": f"uid-{claim}",
                                   "resourceVersion": "1",
                                   "annotations": {"resource.kubernetes.io/pod-claim-name": "resource"},
                                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid,
                                                        "controller": True, "blockOwnerDeletion": True}]},
                      "spec": perf_claim_spec()})
    return items


# -- live: side by side with kube-scheduler (bench/live.py's method) ---------------------------------


def _ensure(c: Any, path: str, bodies: list[dict[str, Any]]) -> None:
    from bench.live import Bulk

    Bulk(c).post_all(lambda b: path, bodies)  # 409 (left by an earlier round) counts as done


def _perf_nodes(size: Any) -> list[str]:
    return [f"node-{i:05d}" for i in range(size.nodes)]  # bench/live.py's node names


def _template_setup(c: Any, ns: str, size: Any) -> None:
    """Slices, the class and the init claims (allocated) once per cluster; the template per round."""
    from kubesched.testing import controlplane

    nodes = _perf_nodes(size)
    _ensure(c, "/apis/resource.k8s.io/v1/resourceslices", [perf_slice(n, i) for i, n in enumerate(nodes)])
    _ensure(c, "/apis/resource.k8s.io/v1/deviceclasses", [perf_class()])
    try:
        c.create_namespace(INIT_NAMESPACE)
    except controlplane.ApiError as e:
        if e.status != 409:
            raise
    path = f"/apis/resource.k8s.io/v1/namespaces/{INIT_NAMESPACE}/resourceclaims"
    have = {x["metadata"]["name"] for x in c.get(path)["items"]}
    for claim in perf_init_claims(nodes):
        if claim["metadata"]["name"] in have:
            continue
        created = c.api("POST", path, {k: v for k, v in claim.items() if k != "status"})
        c.api("PUT", f"{path}/{claim['metadata']['name']}/status", {**created, "status": claim["status"]})
    c.api("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
          {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": PERF_TEMPLATE, "namespace": ns}, "spec": {"spec": perf_claim_spec()}})


def _claims_stamped(c: Any, ns: str, size: Any) -> None:
    """Wait for kube-controller-manager to have made every measured pod's claim."""
    def stamped() -> bool:
        pods = c.get(f"/api/v1/namespaces/{ns}/pods", labelSelector="bench.kubesched.io/role=measure")["items"]
        return sum(1 for p in pods if (p.get("status") or {}).get("resourceClaimStatuses")) >= size.pods

    c.wait_for(stamped, 120 + size.pods * 0.1, 1.0, "claims stamped from the template")


def _claims_released(c: Any, ns: str) -> None:
    """Wait until the round's claims are gone (deallocated and deleted by kube-controller-manager), so
    the next round finds the devices free."""
    c.wait_for(lambda: not c.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", limit=1)["items"],
               300, 1.0, f"claims of {ns} released")


def _extended_setup(c: Any, ns: str, size: Any) -> None:
    nodes = _perf_nodes(size)
    _ensure(c, "/apis/resource.k8s.io/v1/resourceslices", [perf_slice(n, i) for i, n in enumerate(nodes)])
    _ensure(c, "/apis/resource.k8s.io/v1/deviceclasses",
            [perf_class(f"test-class-{i}", f"example.com/gpu-{i}") for i in range(EXTENDED_CLASSES)])


def live_workloads() -> dict[str, Any]:
    from bench.live import Size, Workload

    return {
        "SchedulingWithResourceClaimTemplate": Workload(
            "SchedulingWithResourceClaimTemplate",
            "scheduler_perf SchedulingWithResourceClaimTemplate (5000pods_500nodes shape, backlog): node-with-dra-"
            "test-driver nodes, one ResourceSlice of 10 devices each, half of them allocated by init claims, pods "
            "with one claim from a template (one device of test-class), kube-controller-manager stamping the claims",
            pod=lambda i: {"resourceClaims": [{"name": "resource", "resourceClaimTemplateName": PERF_TEMPLATE}],
                           "claims": ["resource"]},
            ns_setup=_template_setup, controller_manager=True,
            controller_manager_args=CONTROLLER_MANAGER_ARGS, after_create=_claims_stamped,
            after_cleanup=_claims_released,
            sizes={"small": Size(nodes=50, init_pods=0, pods=250, timeout=300),
                   "full": Size(nodes=500, init_pods=0, pods=2500, timeout=1200)}),
        "ExtendedResource": Workload(
            "ExtendedResource",
            "scheduler_perf ExtendedResource Explicit_25classes (5000pods_500nodes shape, no init pods): 25 "
            "DeviceClasses with extendedResourceName example.com/gpu-<i>, pods requesting example.com/gpu-<i % 25>: 1 "
            "(DRA-backed extended resources; the scheduler makes each pod's claim)",
            pod=lambda i: {"requests": {f"example.com/gpu-{i % EXTENDED_CLASSES}": "1"}},
            ns_setup=_extended_setup, controller_manager=True,
            controller_manager_args=CONTROLLER_MANAGER_ARGS, after_cleanup=_claims_released,
            sizes={"small": Size(nodes=50, init_pods=0, pods=250, timeout=300),
                   "full": Size(nodes=500, init_pods=0, pods=2500, timeout=1200)}),
    }


def live_main(argv: list[str]) -> int:
    from bench import live

    workloads = live_workloads()
    ap = argparse.ArgumentParser(prog="python -m bench dra live")
    ap.add_argument("--workload", choices=sorted(workloads), default="SchedulingWithResourceClaimTemplate")
    ap.add_argument("--size", choices=("small", "full"), default="small")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--qps", type=float, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--contenders", default=None, help="e.g. kube-scheduler (baseline first)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    picked = tuple(args.contenders.split(",")) if args.contenders else None
    live.run_workload(workloads[args.workload], args.size, args.rounds, args.qps, args.burst, args.workdir,
                      save=not args.no_save, contenders=picked)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["live"]:
        return live_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench dra")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--dump", type=Path, default=None, help="write the dump here (and keep it)")
    ap.add_argument("--note", default="", help="free text kept in the record (e.g. before/after a change)")
    ap.add_argument("--upstream", action="store_true",
                    help="scheduler_perf's shape (perf_cluster: 10 devices per node, half allocated, no selectors)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dump = args.dump or Path(tmp) / "dra-dump.json"
        if args.upstream:
            dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": perf_cluster(args.nodes,
                                                                                                   args.pods)}))
        else:
            write_dump(dump, args.nodes, args.gpus, args.pods)
        runs = []
        for _ in range(args.rounds):
            r = run_once(dump)
            r["loadavg"] = common.loadavg()
            runs.append(r)
            print(json.dumps(r))
    shape = "scheduler_perf's templates" if args.upstream else "GPUs with a memory selector"
    record = {"benchmark": "simulator-dra", "workload": f"SchedulingWithResourceClaimTemplate (dump replay, {shape})",
              "date": common.now_iso(), "commit": common.git_commit(), "command": common.command_line(),
              "machine": common.machine(), "nodes": args.nodes,
              "gpus_per_node": PERF_DEVICES if args.upstream else args.gpus, "upstream_shape": args.upstream,
              "pods": args.pods,
              "note": args.note, "runs": runs,
              "pods_per_second_median": common.median(r["pods_per_second"] for r in runs),
              "pods_per_cpu_second_median": common.median(r["pods_per_cpu_second"] for r in runs)}
    if not args.no_save:
        print(f"saved to {common.save_result(record, common.RESULTS / f'dra-{common.today()}.json')}")
    return 0
