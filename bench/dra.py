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
appended to bench/results/dra-<date>.json.
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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench dra")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--dump", type=Path, default=None, help="write the dump here (and keep it)")
    ap.add_argument("--note", default="", help="free text kept in the record (e.g. before/after a change)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dump = args.dump or Path(tmp) / "dra-dump.json"
        write_dump(dump, args.nodes, args.gpus, args.pods)
        runs = []
        for _ in range(args.rounds):
            r = run_once(dump)
            r["loadavg"] = common.loadavg()
            runs.append(r)
            print(json.dumps(r))
    record = {"benchmark": "simulator-dra", "workload": "SchedulingWithResourceClaimTemplate (dump replay)",
              "date": common.now_iso(), "commit": common.git_commit(), "command": common.command_line(),
              "machine": common.machine(), "nodes": args.nodes, "gpus_per_node": args.gpus, "pods": args.pods,
              "note": args.note, "runs": runs,
              "pods_per_second_median": common.median(r["pods_per_second"] for r in runs),
              "pods_per_cpu_second_median": common.median(r["pods_per_cpu_second"] for r in runs)}
    if not args.no_save:
        print(f"saved to {common.save_result(record, common.RESULTS / f'dra-{common.today()}.json')}")
    return 0
