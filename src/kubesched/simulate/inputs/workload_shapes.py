"""The pods of the synthetic cluster that ``generator.py`` builds (its module docstring describes them):
the workload shapes (web services, batch jobs, GPU, infra, system and ingress pods, with their
containers and priority classes), their nodeSelector / node affinity, the pod plans the pre-binding
works from, and the per-app spread and pod (anti-)affinity patterns of ``pod_topology``.

It also holds what the node half shares with it: the zone, arch, infra and GPU label vocabulary,
the pods' epoch, the deterministic uid and timestamp helpers and ``Weighted`` (a cheap weighted draw
from the one random stream). Every draw is made in the order ``generate_cluster`` has always made it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubesched.api.timestamps import rfc3339

__all__ = [
    "ARCH_LABEL",
    "EPOCH",
    "GPU",
    "HOSTNAME_LABEL",
    "INFRA_LABEL",
    "PRIORITY_CLASSES",
    "ZONES",
    "ZONE_LABEL",
    "PodPlan",
    "Weighted",
    "add_pod_topology",
    "generate_pods",
    "uid",
]

ZONES: Final = ("us-east-1a", "us-east-1b", "us-east-1c")
GPU: Final = "nvidia.com/gpu"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ARCH_LABEL: Final = "kubernetes.io/arch"
INFRA_LABEL: Final = "node-role.kubernetes.io/infra"

#: PriorityClass name -> value, as the generated pods use them.
PRIORITY_CLASSES: Final[dict[str, int]] = {
    "batch-low": 0,
    "standard": 1000,
    "critical-service": 100000,
    "system-cluster-critical": 2000000000,
}

EPOCH: Final = 1748736000  # 2025-06-01T00:00:00Z: the first pod's creationTimestamp

_WEB_TEAMS: Final = ("payments", "search", "checkout", "catalog", "accounts")
_WEB_APPS: Final = ("api", "frontend", "gateway", "auth", "cart", "worker")
_BATCH_TEAMS: Final = ("analytics", "search", "payments", "catalog")
_BATCH_APPS: Final = ("etl", "report", "indexer", "backfill")
_WEB_CPU: Final = ("100m", "200m", "250m", "500m", "500m", "1", "2")
_WEB_MEM: Final = ("128Mi", "256Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
_BATCH_CPU: Final = ("500m", "1", "1", "2", "4")
_BATCH_MEM: Final = ("1Gi", "2Gi", "4Gi", "8Gi", "16Gi")


@dataclass(slots=True)
class PodPlan:
    raw: dict[str, Any]
    pool: str
    node_selector: dict[str, str]
    required: tuple[str, frozenset[str]] | None  # (label key, allowed values)
    host_ports: tuple[int, ...]
    terminal: bool


# -- helpers (the nodes use them too) --------------------------------------------------------------


def uid(rng: random.Random) -> str:
    """``str(uuid.UUID(int=rng.getrandbits(128), version=4))``, without building the UUID."""
    n = rng.getrandbits(128)
    n = (n & ~(0xC000 << 48)) | (0x8000 << 48)  # variant RFC 4122
    n = (n & ~(0xF000 << 64)) | (4 << 76)  # version 4
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Weighted:
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


_GPU_COUNT_PICK: Final = Weighted(("1", "2", "4"), (70, 20, 10))


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


def generate_pods(rng: random.Random, count: int, *, has_gpu: bool, has_infra: bool, has_arm: bool) -> list[PodPlan]:
    kinds: list[tuple[Any, float]] = [(_web, 0.62), (_batch, 0.25), (_system, 0.01), (_ingress, 0.01)]
    if has_gpu:
        kinds.append((_gpu, 0.06))
    if has_infra:
        kinds.append((_infra, 0.03))
    maker = Weighted([k for k, _ in kinds], [w for _, w in kinds])
    counters: dict[tuple[str, str], int] = {}
    clock = EPOCH
    plans: list[PodPlan] = []
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
                "uid": uid(rng),
                "creationTimestamp": rfc3339(clock),
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1" if shape.owner_kind == "Job" else "apps/v1",
                        "kind": shape.owner_kind,
                        "name": owner,
                        "uid": uid(rng),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": _qos(shape.containers)},
        }
        plans.append(PodPlan(raw, shape.pool, shape.node_selector, required, shape.host_ports, shape.terminal))
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


def add_pod_topology(rng: random.Random, plans: list[PodPlan]) -> None:
    names, weights = zip(*_TOPOLOGY_PATTERNS, strict=True)
    patterns = Weighted(names, weights)
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
