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

With ``pod_topology=True`` (what ``kubesched simulate --nodes/--pods`` uses) the replicas of each
web app also carry what real Deployments and StatefulSets do, one pattern per app: ~40% soft zone
spreading (``maxSkew 1``, ScheduleAnyway), ~10% hard zone spreading plus soft host spreading, ~15%
preferred anti-affinity on the hostname, ~5% required anti-affinity on the hostname (one replica per
node, as StatefulSets of databases), ~10% preferred affinity to the team's other pods in a zone, the
rest none; selectors match the app's ``app.kubernetes.io/name``. These choices come from a random
stream of their own, so every other field is the same as without them; pre-bound pods are placed
without regard to them (the existing state of a cluster). The benchmarks' SchedulingBasic keeps them
off, as upstream's SchedulingBasic does.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubesched.simulate.gc_pause import paused_gc
from kubesched.simulate.inputs import ClusterInput
from kubesched.snapshot.pod_requests import compute_pod_requests

__all__ = ["PRIORITY_CLASSES", "generate_cluster"]

GIB: Final = 1 << 30
MIB: Final = 1 << 20
REGION: Final = "us-east-1"
ZONES: Final = ("us-east-1a", "us-east-1b", "us-east-1c")
MAX_PODS: Final = 110
GPU: Final = "nvidia.com/gpu"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ARCH_LABEL: Final = "kubernetes.io/arch"
INFRA_LABEL: Final = "node-role.kubernetes.io/infra"
CONTROL_PLANE_LABEL: Final = "node-role.kubernetes.io/control-plane"
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"

#: PriorityClass name -> value, as the generated pods use them.
PRIORITY_CLASSES: Final[dict[str, int]] = {
    "batch-low": 0,
    "standard": 1000,
    "critical-service": 100000,
    "system-cluster-critical": 2000000000,
}

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

_EPOCH: Final = 1748736000  # 2025-06-01T00:00:00Z: the first pod's creationTimestamp
_NODE_EPOCH: Final = _EPOCH - 30 * 86400

_WEB_TEAMS: Final = ("payments", "search", "checkout", "catalog", "accounts")
_WEB_APPS: Final = ("api", "frontend", "gateway", "auth", "cart", "worker")
_BATCH_TEAMS: Final = ("analytics", "search", "payments", "catalog")
_BATCH_APPS: Final = ("etl", "report", "indexer", "backfill")
_WEB_CPU: Final = ("100m", "200m", "250m", "500m", "500m", "1", "2")
_WEB_MEM: Final = ("128Mi", "256Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
_BATCH_CPU: Final = ("500m", "1", "1", "2", "4")
_BATCH_MEM: Final = ("1Gi", "2Gi", "4Gi", "8Gi", "16Gi")


@dataclass(slots=True)
class _Node:
    name: str
    pool: str  # "general", "gpu", "infra" or "control-plane": which pods may run there
    labels: dict[str, str]
    alloc: dict[str, int]  # cpu in millicores, the rest in units
    used: dict[str, int] = field(default_factory=dict)
    ports: set[int] = field(default_factory=set)
    pods: int = 0


@dataclass(slots=True)
class _PodPlan:
    raw: dict[str, Any]
    pool: str
    node_selector: dict[str, str]
    required: tuple[str, frozenset[str]] | None  # (label key, allowed values)
    host_ports: tuple[int, ...]
    terminal: bool


def generate_cluster(nodes: int, pods: int, seed: int, *, pod_topology: bool = False) -> ClusterInput:
    """A synthetic cluster of exactly ``nodes`` Nodes and ``pods`` Pods; deterministic per seed.
    ``pod_topology``: web apps get spread constraints and pod (anti-)affinity (module docstring)."""
    if nodes < 0 or pods < 0:
        raise ValueError(f"nodes and pods must not be negative, got nodes={nodes} pods={pods}")
    with paused_gc():
        return _generate(nodes, pods, seed, pod_topology)


def _generate(nodes: int, pods: int, seed: int, pod_topology: bool) -> ClusterInput:
    rng = random.Random(seed)
    node_objs, node_state = _generate_nodes(rng, nodes)
    pools = {pool: [n for n in node_state if n.pool == pool] for pool in ("general", "gpu", "infra")}
    plans = _generate_pods(
        rng,
        pods,
        has_gpu=bool(pools["gpu"]),
        has_infra=bool(pools["infra"]),
        has_arm=any(n.labels[ARCH_LABEL] == "arm64" for n in pools["general"]),
    )
    if pod_topology:
        _add_pod_topology(random.Random(seed ^ 0x70_9010), plans)
    terminal = _prebind(rng, plans, pools)
    return ClusterInput(
        nodes=node_objs,
        pods=[p.raw for p in plans],
        objects={"PriorityClass": _priority_classes()},
        skipped={},
        source=f"generated cluster (nodes={nodes}, pods={pods}, seed={seed})",
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


def _uid(rng: random.Random) -> str:
    """``str(uuid.UUID(int=rng.getrandbits(128), version=4))``, without building the UUID."""
    n = rng.getrandbits(128)
    n = (n & ~(0xC000 << 48)) | (0x8000 << 48)  # variant RFC 4122
    n = (n & ~(0xF000 << 64)) | (4 << 76)  # version 4
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class _Weighted:
    """``rng.choices(population, weights)[0]`` with the cumulative weights worked out once: the
    same draw from the same stream (random.choices' own arithmetic), a fraction of the cost."""

    __slots__ = ("_cum", "_hi", "_population", "_total")

    def __init__(self, population: Sequence[Any], weights: Sequence[float]) -> None:
        self._population = population
        self._cum = list(itertools.accumulate(weights))
        self._total = self._cum[-1] + 0.0
        self._hi = len(population) - 1

    def pick(self, rng: random.Random) -> Any:
        return self._population[bisect.bisect(self._cum, rng.random() * self._total, 0, self._hi)]


_GPU_TYPE_PICK: Final = _Weighted(_GPU_TYPES, _GPU_TYPE_WEIGHTS)
_CPU_SIZE_PICK: Final = _Weighted(_CPU_SIZES, _CPU_WEIGHTS)
_GPU_COUNT_PICK: Final = _Weighted(("1", "2", "4"), (70, 20, 10))


def _ts(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


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
        created = _ts(_NODE_EPOCH + i * 7)
        ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": _uid(rng), "creationTimestamp": created, "labels": labels},
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


# -- pods -------------------------------------------------------------------------------------------


def _container(
    name: str,
    image: str,
    cpu: str | None,
    memory: str | None,
    *,
    mem_limit: str | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    limits: dict[str, str] = dict(extra or {})
    if mem_limit:
        limits["memory"] = mem_limit
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources}


def _double(q: str) -> str:
    """A memory quantity twice as large (for limits)."""
    if q.endswith("Gi"):
        return f"{int(q[:-2]) * 2}Gi"
    return f"{int(q[:-2]) * 2}Mi"


@dataclass(slots=True)
class _Shape:
    kind: str  # web, batch, gpu, infra, system, ingress
    team: str
    app: str
    tier: str
    priority_class: str | None
    pool: str
    containers: list[dict[str, Any]]
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    host_ports: tuple[int, ...] = ()
    restart_policy: str = "Always"
    owner_kind: str = "ReplicaSet"
    terminal: bool = False


def _web(rng: random.Random) -> _Shape:
    team, app = rng.choice(_WEB_TEAMS), rng.choice(_WEB_APPS)
    no_requests = rng.random() < 0.05
    cpu = None if no_requests else rng.choice(_WEB_CPU)
    mem = None if no_requests else rng.choice(_WEB_MEM)
    main = _container(
        "app",
        f"registry.example.com/{team}/{app}:1.{rng.randrange(40)}",
        cpu,
        mem,
        mem_limit=_double(mem) if mem and rng.random() < 0.5 else None,
    )
    main["ports"] = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    shape = _Shape("web", team, app, "web", None, "general", [main])
    r = rng.random()
    shape.priority_class = "standard" if r < 0.75 else "critical-service" if r < 0.9 else None
    r = rng.random()
    if r < 0.25 and not no_requests:
        shape.containers.append(_container("envoy", "envoyproxy/envoy:v1.31.0", "100m", "128Mi"))
    elif r < 0.30 and not no_requests:
        sidecar = _container("proxy", "envoyproxy/envoy:v1.31.0", "100m", "128Mi")
        sidecar["restartPolicy"] = "Always"
        shape.init_containers.append(sidecar)
    elif r < 0.40:
        shape.init_containers.append(
            _container(
                "migrate",
                f"registry.example.com/{team}/{app}-migrate:1",
                "200m" if cpu else None,
                "256Mi" if mem else None,
            )
        )
    return shape


def _batch(rng: random.Random) -> _Shape:
    team, app = rng.choice(_BATCH_TEAMS), rng.choice(_BATCH_APPS)
    no_requests = rng.random() < 0.05
    cpu = None if no_requests else rng.choice(_BATCH_CPU)
    mem = None if no_requests else rng.choice(_BATCH_MEM)
    main = _container("job", f"registry.example.com/{team}/{app}:2.{rng.randrange(20)}", cpu, mem)
    shape = _Shape(
        "batch",
        team,
        app,
        "batch",
        "batch-low",
        "general",
        [main],
        restart_policy="OnFailure",
        owner_kind="Job",
        terminal=rng.random() < 0.06,
    )
    if rng.random() < 0.4:
        shape.init_containers.append(
            _container(
                "fetch",
                "registry.example.com/tools/fetch:1",
                None if no_requests else rng.choice(("100m", "500m", "1")),
                None if no_requests else rng.choice(("128Mi", "512Mi", "1Gi")),
            )
        )
    return shape


def _gpu(rng: random.Random) -> _Shape:
    app = rng.choice(("trainer", "inference", "notebook"))
    gpus = _GPU_COUNT_PICK.pick(rng)
    main = _container(
        "cuda",
        f"registry.example.com/ml/{app}:3.{rng.randrange(10)}",
        rng.choice(("1", "2", "4")),
        rng.choice(("4Gi", "8Gi", "16Gi")),
        extra={GPU: gpus},
    )
    shape = _Shape(
        "gpu",
        "ml",
        app,
        "gpu",
        "standard" if app == "inference" else "batch-low",
        "gpu",
        [main],
        owner_kind="Job" if app == "trainer" else "ReplicaSet",
        restart_policy="OnFailure" if app == "trainer" else "Always",
    )
    shape.tolerations.append({"key": GPU, "operator": "Exists", "effect": "NoSchedule"})
    return shape


def _infra(rng: random.Random) -> _Shape:
    app = rng.choice(("prometheus", "loki", "tempo", "alertmanager"))
    main = _container(
        app, f"registry.example.com/platform/{app}:2", rng.choice(("500m", "1", "2")), rng.choice(("2Gi", "4Gi", "8Gi"))
    )
    shape = _Shape(
        "infra",
        "platform",
        app,
        "infra",
        "critical-service",
        "infra",
        [main],
        node_selector={INFRA_LABEL: ""},
        owner_kind="StatefulSet",
    )
    shape.tolerations.append({"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"})
    return shape


def _system(rng: random.Random) -> _Shape:
    app = rng.choice(("coredns", "metrics-server"))
    main = _container(app, f"registry.k8s.io/{app}:v1", "100m", "128Mi", mem_limit="256Mi")
    shape = _Shape("system", "platform", app, "system", "system-cluster-critical", "general", [main])
    shape.tolerations.append({"key": "CriticalAddonsOnly", "operator": "Exists"})
    return shape


def _ingress(rng: random.Random) -> _Shape:
    main = _container("controller", "registry.k8s.io/ingress-nginx/controller:v1.11.2", "500m", "512Mi")
    main["ports"] = [
        {"name": "http", "containerPort": 80, "hostPort": 80, "protocol": "TCP"},
        {"name": "https", "containerPort": 443, "hostPort": 443, "protocol": "TCP"},
    ]
    return _Shape("ingress", "platform", "ingress", "edge", "critical-service", "general", [main], host_ports=(80, 443))


def _place_constraints(
    rng: random.Random, shape: _Shape, spec: dict[str, Any], has_arm: bool
) -> tuple[str, frozenset[str]] | None:
    """nodeSelector / node affinity for web and batch pods; returns the required term if any."""
    r = rng.random()
    if r < 0.08:
        if rng.random() < 0.6:
            shape.node_selector[ZONE_LABEL] = rng.choice(ZONES)
        else:
            shape.node_selector[ARCH_LABEL] = "arm64" if has_arm and rng.random() < 0.3 else "amd64"
        return None
    if r < 0.13:
        if rng.random() < 0.7:
            key, values = ZONE_LABEL, sorted(rng.sample(ZONES, 2))
        else:
            key, values = ARCH_LABEL, ["amd64"]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": values}]}],
                }
            }
        }
        return key, frozenset(values)
    if r < 0.23:
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": rng.choice((10, 50, 100)),
                        "preference": {
                            "matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [rng.choice(ZONES)]}]
                        },
                    }
                ]
            }
        }
    return None


def _generate_pods(rng: random.Random, count: int, *, has_gpu: bool, has_infra: bool, has_arm: bool) -> list[_PodPlan]:
    kinds: list[tuple[Any, float]] = [(_web, 0.62), (_batch, 0.25), (_system, 0.01), (_ingress, 0.01)]
    if has_gpu:
        kinds.append((_gpu, 0.06))
    if has_infra:
        kinds.append((_infra, 0.03))
    maker = _Weighted([k for k, _ in kinds], [w for _, w in kinds])
    counters: dict[tuple[str, str], int] = {}
    clock = _EPOCH
    plans: list[_PodPlan] = []
    for _ in range(count):
        shape: _Shape = maker.pick(rng)(rng)
        n = counters[(shape.team, shape.app)] = counters.get((shape.team, shape.app), 0) + 1
        name = f"{shape.team}-{shape.app}-{n}"
        clock += rng.randint(1, 5)
        owner = f"{shape.team}-{shape.app}"
        if shape.owner_kind == "ReplicaSet":
            owner += f"-{rng.getrandbits(40):010x}"
        labels = {"app.kubernetes.io/name": f"{shape.team}-{shape.app}", "team": shape.team, "tier": shape.tier}
        spec: dict[str, Any] = {
            "containers": shape.containers,
            "restartPolicy": shape.restart_policy,
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "priority": PRIORITY_CLASSES.get(shape.priority_class or "", 0),
            "preemptionPolicy": "PreemptLowerPriority",  # as the apiserver's Priority admission fills it
        }
        if shape.priority_class:
            spec["priorityClassName"] = shape.priority_class
        if shape.init_containers:
            spec["initContainers"] = shape.init_containers
        required = None
        if shape.kind in ("web", "batch"):
            required = _place_constraints(rng, shape, spec, has_arm)
        if shape.node_selector:
            spec["nodeSelector"] = shape.node_selector
        # The tolerations the DefaultTolerationSeconds admission plugin adds to every pod.
        spec["tolerations"] = [
            *shape.tolerations,
            *(
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ),
        ]
        raw = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": shape.team,
                "uid": _uid(rng),
                "creationTimestamp": _ts(clock),
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1" if shape.owner_kind == "Job" else "apps/v1",
                        "kind": shape.owner_kind,
                        "name": owner,
                        "uid": _uid(rng),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": _qos(shape.containers)},
        }
        plans.append(_PodPlan(raw, shape.pool, shape.node_selector, required, shape.host_ports, shape.terminal))
    return plans


#: (pattern, weight) per web app; see the module docstring.
_TOPOLOGY_PATTERNS: Final = (
    ("soft-zone-spread", 0.40),
    ("hard-zone-spread", 0.10),
    ("preferred-anti-affinity", 0.15),
    ("required-anti-affinity", 0.05),
    ("preferred-team-affinity", 0.10),
    ("none", 0.20),
)


def _topology_of(pattern: str, app: str, team: str) -> dict[str, Any]:
    """The spec fields (``topologySpreadConstraints`` / ``affinity``) of one pattern."""
    own = {"matchLabels": {"app.kubernetes.io/name": app}}

    def spread(key: str, when: str) -> dict[str, Any]:
        return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": own}

    if pattern == "soft-zone-spread":
        return {"topologySpreadConstraints": [spread(ZONE_LABEL, "ScheduleAnyway")]}
    if pattern == "hard-zone-spread":
        return {"topologySpreadConstraints": [spread(ZONE_LABEL, "DoNotSchedule"),
                                              spread(HOSTNAME_LABEL, "ScheduleAnyway")]}
    term = {"labelSelector": own, "topologyKey": HOSTNAME_LABEL}
    if pattern == "preferred-anti-affinity":
        return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}]}}
    if pattern == "required-anti-affinity":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    if pattern == "preferred-team-affinity":
        team_term = {"labelSelector": {"matchLabels": {"team": team}}, "topologyKey": ZONE_LABEL}
        return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": team_term}]}}
    return {}


def _add_pod_topology(rng: random.Random, plans: list[_PodPlan]) -> None:
    names, weights = zip(*_TOPOLOGY_PATTERNS, strict=True)
    patterns = _Weighted(names, weights)
    chosen: dict[str, str] = {}
    for plan in plans:
        meta, spec = plan.raw["metadata"], plan.raw["spec"]
        if meta["ownerReferences"][0]["kind"] != "ReplicaSet" or "nvidia.com/gpu.present" in spec.get(
            "nodeSelector", {}
        ):
            continue
        app = meta["labels"]["app.kubernetes.io/name"]
        pattern = chosen.get(app)
        if pattern is None:
            pattern = chosen[app] = patterns.pick(rng)
        extra = _topology_of(pattern, app, meta["labels"]["team"])
        if "topologySpreadConstraints" in extra:
            spec["topologySpreadConstraints"] = extra["topologySpreadConstraints"]
        for kind in ("podAffinity", "podAntiAffinity"):
            if kind in extra:
                spec.setdefault("affinity", {})[kind] = extra[kind]


def _qos(containers: list[dict[str, Any]]) -> str:
    if not any(c["resources"] for c in containers):
        return "BestEffort"
    for c in containers:
        req, lim = c["resources"].get("requests", {}), c["resources"].get("limits", {})
        if not req or req.get("cpu") != lim.get("cpu") or req.get("memory") != lim.get("memory"):
            return "Burstable"
    return "Guaranteed"


# -- pre-binding ------------------------------------------------------------------------------------


#: Random nodes tried for a pod before it is left pending.
_TRIES: Final = 12


def _eligible(plan: _PodPlan, node: _Node) -> bool:
    labels = node.labels
    for k, v in plan.node_selector.items():
        if labels.get(k) != v:
            return False
    if plan.required is not None and labels.get(plan.required[0]) not in plan.required[1]:
        return False
    return not (plan.host_ports and node.ports.intersection(plan.host_ports))


def _prebind(rng: random.Random, plans: list[_PodPlan], pools: dict[str, list[_Node]]) -> int:
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


def _bind(plan: _PodPlan, node: _Node, phase: str) -> None:
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
