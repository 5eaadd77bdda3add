"""A realistic, seedable synthetic cluster for ``kubesched simulate --nodes N --pods M --seed S``.

``generate_cluster(nodes, pods, seed)`` returns exactly ``nodes`` Nodes and ``pods`` Pods; the same
arguments always give identical objects (all randomness comes from one ``random.Random(seed)``).

Nodes (``node-0001``, ``node-0002``, ...), modelled on a cloud cluster in three zones:

* ``node-0001`` is the control plane (when there are at least two nodes): label
  ``node-role.kubernetes.io/control-plane``, taint ``node-role.kubernetes.io/control-plane:NoSchedule``;
* of the workers, ~10% are GPU nodes (``nvidia.com/gpu`` capacity, taint
  ``nvidia.com/gpu=present:NoSchedule``, label ``nvidia.com/gpu.present=true``), ~3% infra nodes
  (taint ``dedicated=infra:NoSchedule``, label ``node-role.kubernetes.io/infra``) and ~1% are
  cordoned (``spec.unschedulable: true`` plus the ``node.kubernetes.io/unschedulable`` taint the
  node lifecycle controller adds); counts are rounded, so they are exact for a given size;
* sizes 2/4/8/16/32/64 cpu with 4 GiB memory per cpu, ~15% memory-optimised (8 GiB per cpu),
  ~15% arm64 (the rest amd64), 110 pods, 100Gi ephemeral-storage; ``status.allocatable`` is the
  capacity minus a kubelet reservation (cpu ``80m + 10m`` per core, memory
  ``255Mi + 11Mi * maxPods + 100Mi`` eviction threshold, as EKS computes it);
* labels ``kubernetes.io/hostname``, ``kubernetes.io/os=linux``, ``kubernetes.io/arch``,
  ``node.kubernetes.io/instance-type`` (AWS-like names), ``topology.kubernetes.io/region`` and
  ``topology.kubernetes.io/zone`` (``us-east-1a/b/c``).

Pods (``<team>-<app>-<n>``, namespace = team, in creation order with strictly increasing
``creationTimestamp``, deterministic uuid ``metadata.uid``):

* web services (most pods, ReplicaSet-owned, sometimes with an Envoy sidecar or a native sidecar
  init container) and batch jobs (Job-owned, often with an init container, some already
  ``Succeeded``), cpu 100m-4 and memory 128Mi-16Gi, ~5% without any requests;
* PriorityClasses ``batch-low`` (0), ``standard`` (1000), ``critical-service`` (100000) and a few
  ``system-cluster-critical`` (2000000000) platform pods; ``spec.priority`` is filled in as the
  Priority admission plugin would;
* some with a ``nodeSelector`` (zone or arch), some with required or preferred node affinity;
* GPU pods (team ``ml``) tolerating the GPU taint and requesting ``nvidia.com/gpu``; infra pods
  tolerating ``dedicated=infra`` and selecting infra nodes; a few ingress pods with hostPorts 80/443;
* ~20% of the pods are attempted to be pre-bound (``spec.nodeName``, phase Running) to a node
  whose taints they tolerate, whose labels match their selector/required affinity, and where
  their requests (``compute_pod_requests``) still fit the allocatable left by the pods bound
  before them, with no hostPort clash; a pod that fits nowhere after a few tries stays pending.
  Terminal (Succeeded) batch pods are bound too but, as in Kubernetes, use no capacity.

GPU and infra pods are only generated when the cluster has GPU or infra nodes.

With ``gangs`` (``kubesched simulate --gangs SPEC``) the cluster also has Workload API gangs: a
Workload, its PodGroup and pending member pods per gang, besides the ``pods`` above
(``workload_gangs.py``).

With ``pod_topology=True`` (what ``kubesched simulate --nodes/--pods`` uses) the replicas of each
web app also carry what real Deployments and StatefulSets do, one pattern per app: ~40% soft zone
spreading (``maxSkew 1``, ScheduleAnyway), ~10% hard zone spreading plus soft host spreading, ~15%
preferred anti-affinity on the hostname, ~5% required anti-affinity on the hostname (one replica per
node, as StatefulSets of databases), ~10% preferred affinity to the team's other pods in a zone, the
rest none; selectors match the app's ``app.kubernetes.io/name``. These choices come from a random
stream of their own, so every other field is the same as without them; pre-bound pods are placed
without regard to them (the existing state of a cluster). The benchmarks' SchedulingBasic keeps them
off, as upstream's SchedulingBasic does.

This module makes the nodes, pre-binds pods and holds ``generate_cluster``; the pods themselves (the
workload shapes, their placement constraints and topology patterns) come from ``workload_shapes.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubesched.api.timestamps import rfc3339
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.gc_pause import paused_gc
from kubesched.simulate.inputs.workload_gangs import GangSpec, generate_gangs
from kubesched.simulate.inputs.workload_shapes import (
    ARCH_LABEL,
    EPOCH,
    GPU,
    INFRA_LABEL,
    PRIORITY_CLASSES,
    ZONE_LABEL,
    ZONES,
    PodPlan,
    Weighted,
    add_pod_topology,
    generate_pods,
    uid,
)
from kubesched.snapshot.pod_requests import compute_pod_requests

__all__ = ["PRIORITY_CLASSES", "generate_cluster"]

GIB: Final = 1 << 30
MIB: Final = 1 << 20
REGION: Final = "us-east-1"
MAX_PODS: Final = 110
CONTROL_PLANE_LABEL: Final = "node-role.kubernetes.io/control-plane"
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"

_SIZE_NAMES: Final = {2: "large", 4: "xlarge", 8: "2xlarge", 16: "4xlarge", 32: "8xlarge", 64: "16xlarge"}
_CPU_SIZES: Final = (2, 4, 8, 16, 32, 64)
_CPU_WEIGHTS: Final = (5, 20, 30, 25, 15, 5)
#: (instance type, cpu, memory GiB, gpus)
_GPU_TYPES: Final = (
    ("g5.2xlarge", 8, 32, 1),
    ("g5.4xlarge", 16, 64, 1),
    ("g5.12xlarge", 48, 192, 4),
    ("p4d.24xlarge", 96, 1152, 8),
)
_GPU_TYPE_WEIGHTS: Final = (40, 30, 20, 10)

_NODE_EPOCH: Final = EPOCH - 30 * 86400


@dataclass(slots=True)
class _Node:
    name: str
    pool: str  # "general", "gpu", "infra" or "control-plane": which pods may run there
    labels: dict[str, str]
    alloc: dict[str, int]  # cpu in millicores, the rest in units
    used: dict[str, int] = field(default_factory=dict)
    ports: set[int] = field(default_factory=set)
    pods: int = 0


def generate_cluster(
    nodes: int, pods: int, seed: int, *, pod_topology: bool = False, gangs: Sequence[GangSpec] = ()
) -> ClusterInput:
    """A synthetic cluster of exactly ``nodes`` Nodes and ``pods`` Pods; deterministic per seed.
    ``pod_topology``: web apps get spread constraints and pod (anti-)affinity (module docstring).
    ``gangs``: Workload API gangs besides (workload_gangs.py), their members added to ``pods``."""
    if nodes < 0 or pods < 0:
        raise ValueError(f"nodes and pods must not be negative, got nodes={nodes} pods={pods}")
    with paused_gc():
        return _generate(nodes, pods, seed, pod_topology, gangs)


def _generate(nodes: int, pods: int, seed: int, pod_topology: bool, gangs: Sequence[GangSpec]) -> ClusterInput:
    rng = random.Random(seed)
    node_objs, node_state = _generate_nodes(rng, nodes)
    pools = {pool: [n for n in node_state if n.pool == pool] for pool in ("general", "gpu", "infra")}
    plans = generate_pods(
        rng,
        pods,
        has_gpu=bool(pools["gpu"]),
        has_infra=bool(pools["infra"]),
        has_arm=any(n.labels[ARCH_LABEL] == "arm64" for n in pools["general"]),
    )
    if pod_topology:
        add_pod_topology(random.Random(seed ^ 0x70_9010), plans)
    terminal = _prebind(rng, plans, pools)
    # After every other pod: generate_pods' clock advances at most 5 s a pod.
    generated = generate_gangs(gangs, seed, created_after=EPOCH + 5 * pods)
    source = f"nodes={nodes}, pods={pods}, seed={seed}"
    if gangs:
        source += f", gangs={sum(g.count for g in gangs)} ({len(generated.pods)} pods)"
    return ClusterInput(
        nodes=node_objs,
        pods=[p.raw for p in plans] + generated.pods,
        objects={"PriorityClass": _priority_classes(), **generated.objects},
        skipped={},
        source=f"generated cluster ({source})",
        terminal_pods=terminal,
    )


# -- helpers ----------------------------------------------------------------------------------------


def _priority_classes() -> dict[str, dict[str, Any]]:
    """The PriorityClass objects the generated pods name (the built-in ``system-*`` ones excepted,
    as the apiserver creates those), so a written-out cluster replays through admission."""
    return {
        name: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
               "value": value, "preemptionPolicy": "PreemptLowerPriority"}
        for name, value in PRIORITY_CLASSES.items()
        if not name.startswith("system-")
    }


_GPU_TYPE_PICK: Final = Weighted(_GPU_TYPES, _GPU_TYPE_WEIGHTS)
_CPU_SIZE_PICK: Final = Weighted(_CPU_SIZES, _CPU_WEIGHTS)


def _mi(n: int) -> str:
    return f"{n // MIB}Mi"


# -- nodes ------------------------------------------------------------------------------------------


def _generate_nodes(rng: random.Random, count: int) -> tuple[list[dict[str, Any]], list[_Node]]:
    has_control_plane = count >= 2
    workers = list(range(1 if has_control_plane else 0, count))
    shuffled = workers[:]
    rng.shuffle(shuffled)
    n_gpu = round(0.10 * len(workers))
    n_infra = round(0.03 * len(workers))
    gpu_idx = set(shuffled[:n_gpu])
    infra_idx = set(shuffled[n_gpu : n_gpu + n_infra])
    cordoned = set(rng.sample(workers, round(0.01 * len(workers))))

    objs: list[dict[str, Any]] = []
    state: list[_Node] = []
    for i in range(count):
        name = f"node-{i + 1:04d}"
        zone = ZONES[i % 3] if i < 3 else rng.choice(ZONES)
        taints: list[dict[str, str]] = []
        extra_labels: dict[str, str] = {}
        gpus = 0
        arch = "amd64"
        if has_control_plane and i == 0:
            pool, itype, cpu, mem_gib = "control-plane", "m6i.xlarge", 4, 16
            zone = ZONES[0]
            extra_labels[CONTROL_PLANE_LABEL] = ""
            taints.append({"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"})
        elif i in gpu_idx:
            pool = "gpu"
            itype, cpu, mem_gib, gpus = _GPU_TYPE_PICK.pick(rng)
            extra_labels["nvidia.com/gpu.present"] = "true"
            extra_labels["nvidia.com/gpu.product"] = (
                "NVIDIA-A10G" if itype.startswith("g5") else "NVIDIA-A100-SXM4-40GB"
            )
            extra_labels["nvidia.com/gpu.count"] = str(gpus)
            taints.append({"key": GPU, "value": "present", "effect": "NoSchedule"})
        else:
            pool = "infra" if i in infra_idx else "general"
            cpu = _CPU_SIZE_PICK.pick(rng)
            memory_optimised = rng.random() < 0.15
            if pool == "general" and rng.random() < 0.15:
                arch = "arm64"
            family = ("r" if memory_optimised else "m") + ("7g" if arch == "arm64" else "6i")
            itype = f"{family}.{_SIZE_NAMES[cpu]}"
            mem_gib = cpu * (8 if memory_optimised else 4)
            if pool == "infra":
                extra_labels[INFRA_LABEL] = ""
                taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        unschedulable = i in cordoned
        if unschedulable:
            taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})

        alloc_milli = cpu * 1000 - (80 + 10 * cpu)
        alloc_mem = mem_gib * GIB - (255 + 11 * MAX_PODS + 100) * MIB
        capacity: dict[str, str] = {
            "cpu": str(cpu),
            "memory": f"{mem_gib}Gi",
            "ephemeral-storage": "100Gi",
            "pods": str(MAX_PODS),
        }
        allocatable: dict[str, str] = {
            "cpu": f"{alloc_milli}m",
            "memory": _mi(alloc_mem),
            "ephemeral-storage": "100Gi",
            "pods": str(MAX_PODS),
        }
        if gpus:
            capacity[GPU] = allocatable[GPU] = str(gpus)
        labels = {
            ARCH_LABEL: arch,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": itype,
            "topology.kubernetes.io/region": REGION,
            ZONE_LABEL: zone,
            **extra_labels,
        }
        spec: dict[str, Any] = {"providerID": f"aws:///{zone}/i-{rng.getrandbits(68):017x}"}
        if taints:
            spec["taints"] = taints
        if unschedulable:
            spec["unschedulable"] = True
        created = rfc3339(_NODE_EPOCH + i * 7)
        ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": uid(rng), "creationTimestamp": created, "labels": labels},
                "spec": spec,
                "status": {
                    "capacity": capacity,
                    "allocatable": allocatable,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastTransitionTime": created,
                        }
                    ],
                    "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                    "nodeInfo": {
                        "architecture": arch,
                        "operatingSystem": "linux",
                        "kubeletVersion": "v1.33.1",
                        "containerRuntimeVersion": "containerd://1.7.27",
                        "osImage": "Amazon Linux 2023",
                    },
                },
            }
        )
        alloc = {"cpu": alloc_milli, "memory": alloc_mem, "ephemeral-storage": 100 * GIB, GPU: gpus}
        state.append(_Node(name, pool, labels, alloc, used=dict.fromkeys(alloc, 0)))
    return objs, state


# -- pre-binding ------------------------------------------------------------------------------------


#: Random nodes tried for a pod before it is left pending.
_TRIES: Final = 12


def _eligible(plan: PodPlan, node: _Node) -> bool:
    labels = node.labels
    for k, v in plan.node_selector.items():
        if labels.get(k) != v:
            return False
    if plan.required is not None and labels.get(plan.required[0]) not in plan.required[1]:
        return False
    return not (plan.host_ports and node.ports.intersection(plan.host_ports))


def _prebind(rng: random.Random, plans: list[PodPlan], pools: dict[str, list[_Node]]) -> int:
    """Bind ~20% of the pods (plus the terminal ones) to nodes they fit; returns the terminal count."""
    chosen = set(rng.sample(range(len(plans)), round(0.2 * len(plans))))
    terminal = 0
    for i, plan in enumerate(plans):
        candidates = pools.get(plan.pool) or []
        if plan.terminal:
            # A completed pod ran on a node it was eligible for but, being terminal, uses no capacity.
            terminal += 1
            plan.raw["status"]["phase"] = "Succeeded"
            for _ in range(_TRIES if candidates else 0):
                node = rng.choice(candidates)
                if _eligible(plan, node):
                    _bind(plan, node, phase="Succeeded")
                    break
            continue
        if i not in chosen or not candidates:
            continue
        req = compute_pod_requests(plan.raw)
        need = {
            "cpu": req.milli_cpu,
            "memory": req.memory,
            "ephemeral-storage": req.ephemeral_storage,
            GPU: req.scalar.get(GPU, 0),
        }
        for _ in range(_TRIES):
            node = rng.choice(candidates)
            if node.pods >= MAX_PODS or not _eligible(plan, node):
                continue
            if all(node.used[r] + amount <= node.alloc[r] for r, amount in need.items()):
                for r, amount in need.items():
                    node.used[r] += amount
                node.pods += 1
                node.ports.update(plan.host_ports)
                _bind(plan, node, phase="Running")
                break
    return terminal


def _bind(plan: PodPlan, node: _Node, phase: str) -> None:
    raw = plan.raw
    raw["spec"]["nodeName"] = node.name
    created = raw["metadata"]["creationTimestamp"]
    status = raw["status"]
    status["phase"] = phase
    status["startTime"] = created
    status["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
        {"type": "Ready", "status": "True" if phase == "Running" else "False", "lastTransitionTime": created},
    ]
