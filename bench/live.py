"""Live comparison on a real control plane: kubesched (``kubesched run``) vs the real kube-scheduler
(v1.37.1, built from Go modules by hack/cluster/build.sh), and kube-scheduler with and without
``kubesched extender``.

Method (one run = one workload at one size, several rounds, contenders alternated ABBA):

* One control plane per workload (etcd + kube-apiserver + KWOK, ``kubesched.testing.controlplane``)
  with N KWOK nodes shaped like scheduler_perf's node-default (4 cpu, 32Gi, 110 pods), labelled or
  tainted by the workload. The same nodes serve every round of every contender.
* Each round uses a fresh namespace. The harness first creates, in bulk from 8 client threads with
  keep-alive connections (no client-side rate limit): the *init* pods, already bound round-robin to
  the nodes (``spec.nodeName``: they occupy capacity as scheduler_perf's initPods do, without
  being scheduled), then the *measured* pods, pending, with the contender's ``schedulerName``.
  Only then is the scheduler process started (pods are created BEFORE the scheduler runs: the
  benchmark measures draining a backlog, not the creation rate).
* A watch on the namespace's pods (started from the list's resourceVersion, in a harness thread)
  timestamps the first event in which each measured pod has ``spec.nodeName``. Throughput is
  sampled per second from the first bind to the last, as scheduler_perf's SchedulingThroughput
  (average of the samples, nearest-rank p50/p90/p99), plus ``overall`` = pods / span.
* Attempt latency p50/p99: ``scheduler_scheduling_attempt_duration_seconds{result="scheduled"}``
  scraped from each scheduler at the end of the round (kube-scheduler's secure port with the
  admin client certificate; kubesched's health port), quantiles interpolated in the buckets as
  Prometheus' histogram_quantile (both use kube-scheduler's buckets, 1 ms x 2^i).
* Process cost: peak RSS (``VmHWM``) and CPU seconds (``utime+stime``) of each scheduler process
  (and of the extender process), over the whole round (start-up list included) and over the
  scheduling window (first bind → last bind).
* Both schedulers use the same identity (the ``system:kube-scheduler`` client certificate, so the
  same RBAC and API Priority and Fairness flow, exempted from APF throttling by a FlowSchema) and
  the same ``clientConnection`` qps/burst (default 5000/5000 as scheduler_perf, so the client
  rate limiter is not what is measured).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench import common, live_profile, underlay
from bench.templates import (
    HOSTNAME,
    PREEMPTION_HIGH_CLASS,
    PREEMPTION_HIGH_PRIORITY,
    anti_affinity_pod,
    high_priority_pod,
    low_priority_pod,
    moon_zones,
    pod_affinity_pod,
    preferred_anti_affinity_pod,
    spread_pod,
    zone1,
)
from kubesched.testing import controlplane, kwok_node, pod_manifest
from kubesched.testing.controlplane import Component, ControlPlane

KUBESCHED_NAME = "kubesched"
DEFAULT_NAME = "default-scheduler"
MEASURE_LABEL = "bench.kubesched.io/role"
ZONE = "topology.kubernetes.io/zone"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True)
class Size:
    nodes: int
    init_pods: int
    pods: int
    timeout: float  # seconds for one round's measured pods to bind


SIZES = {
    "small": Size(nodes=50, init_pods=50, pods=200, timeout=120),
    "medium": Size(nodes=500, init_pods=500, pods=2000, timeout=600),
    "full": Size(nodes=1000, init_pods=1000, pods=5000, timeout=900),
}


# -- workloads ---------------------------------------------------------------------------------------
@dataclass
class Workload:
    name: str
    description: str
    #: node index -> {"labels": {...}, "taints": [...]}
    node: Callable[[int], dict[str, Any]] = lambda i: {}
    #: measured pod index -> extra fields: spec keys and "labels"
    pod: Callable[[int], dict[str, Any]] = lambda i: {}
    #: init pod index -> extra fields (scheduler_perf's initPods template; {} is pod-default)
    init_pod: Callable[[int], dict[str, Any]] = lambda i: {}
    #: kubesched profile (without schedulerName); {} is the default profile
    kubesched_profile: dict[str, Any] = field(default_factory=dict)
    #: contenders, in round order (ABBA alternation)
    contenders: tuple[str, ...] = ("kube-scheduler", "kubesched")
    #: sizes that differ from SIZES for this workload
    sizes: dict[str, Size] = field(default_factory=dict)
    #: per-namespace setup (PodGroups ...) and per-cluster setup (CRDs, RBAC)
    ns_setup: Callable[[ControlPlane, str, Size], None] | None = None
    cluster_setup: Callable[[ControlPlane], None] | None = None
    note: str = ""
    #: run kube-controller-manager too (it stamps ResourceClaims from templates, as scheduler_perf's
    #: resourceclaim controller does)
    controller_manager: bool = False
    #: kube-controller-manager's extra flags (e.g. a higher client QPS, so the resourceclaim
    #: controller stamps a full-size backlog's claims in seconds, not its default 20 QPS's minutes)
    controller_manager_args: tuple[str, ...] = ()
    #: after the round's pods are created, before the scheduler starts (wait for what a controller
    #: makes for them); after the round's namespace is cleaned up (wait for what it releases)
    after_create: Callable[[ControlPlane, str, Size], None] | None = None
    after_cleanup: Callable[[ControlPlane, str], None] | None = None
    #: feature gates both schedulers run with (kube-scheduler: ``--feature-gates``; kubesched: the
    #: configuration's ``featureGates``), and kube-apiserver's extra flags (gates, runtime-config)
    feature_gates: dict[str, bool] = field(default_factory=dict)
    apiserver_args: tuple[str, ...] = ()


def _taints_node(i: int) -> dict[str, Any]:
    if i % 3 == 0:
        return {"taints": [{"key": "dedicated", "value": "bench", "effect": "NoSchedule"}]}
    if i % 3 == 1:
        return {"taints": [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]}
    return {}


def _affinity_pod(i: int) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}
    required = {"nodeSelectorTerms": [term]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}


GANG = 10


def _gang_pod(i: int) -> dict[str, Any]:
    return {"labels": {POD_GROUP_LABEL: f"gang-{i // GANG:05d}"}}


def _podgroups(c: ControlPlane, ns: str, size: Size) -> None:
    bodies = [
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": f"gang-{g:05d}", "namespace": ns},
            "spec": {"minMember": GANG},
        }
        for g in range(size.pods // GANG)
    ]
    Bulk(c).post_all(lambda b: f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", bodies)


def _coscheduling_cluster(c: ControlPlane) -> None:
    crd = yaml.safe_load((common.ROOT / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
    with contextlib.suppress(controlplane.ApiError):
        c.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    c.wait_for(lambda: c.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups"), 60, 0.5, "PodGroup CRD served")
    # kubesched's access to PodGroups (read, status patches) is granted with the rest of what its
    # configuration needs when it starts (grant_kubesched_rbac).


def profile_from(example: str) -> dict[str, Any]:
    doc = yaml.safe_load((common.ROOT / "examples" / example).read_text())
    prof = dict(doc["profiles"][0])
    prof.pop("schedulerName", None)
    return prof


def _preemption_priority_class(c: ControlPlane) -> None:
    """PreemptionBasic's priority 9999999, as the class the apiserver's Priority admission needs."""
    with contextlib.suppress(controlplane.ApiError):  # left by an earlier run on the same cluster
        c.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": PREEMPTION_HIGH_CLASS}, "value": PREEMPTION_HIGH_PRIORITY})


def _coscheduling_available() -> bool:
    try:
        import kubesched.plugins.coscheduling  # noqa: F401
    except ImportError:
        return False
    return True


WORKLOADS: dict[str, Workload] = {
    "SchedulingBasic": Workload(
        "SchedulingBasic",
        "scheduler_perf SchedulingBasic: pod-default pods (100m cpu, 500Mi) on node-default nodes, default profile",
    ),
    "NodeAffinity": Workload(
        "NodeAffinity",
        "scheduler_perf SchedulingNodeAffinity, with a filter that bites: nodes in zone1/zone2/zone3 round-robin, "
        "pods require zone In [zone1, zone2]",
        node=lambda i: {"labels": {ZONE: f"zone{i % 3 + 1}"}},
        pod=_affinity_pod,
    ),
    "Taints": Workload(
        "Taints",
        "1/3 of the nodes tainted NoSchedule, 1/3 PreferNoSchedule, pods tolerate neither "
        "(TaintToleration filter and score)",
        node=_taints_node,
    ),
    "UnderlayIP": Workload(
        "UnderlayIP",
        "the blueking ip-scheduler policy (examples/ip-scheduler.yaml: UnderlayIP, 10 IPs per node, the only "
        "score plugin) in kubesched; kube-scheduler runs the default profile on the same pods as the baseline",
        kubesched_profile=profile_from("ip-scheduler.yaml"),
        note="kube-scheduler has no UnderlayIP: its column is the default profile (a baseline, not the same policy)",
    ),
    "UnderlayIPPools": Workload(
        "UnderlayIPPools",
        "UnderlayIP with UnderlayIPPools (examples/ip-scheduler.yaml; 10 pools of a /22 over a tenth of the nodes "
        "each: every pod's address picked at Reserve and written with its Binding, pool status patched) against "
        "kubesched's default profile, both `kubesched run` (issue 30: within 10 % of the default profile)",
        kubesched_profile=profile_from("ip-scheduler.yaml"),
        contenders=("kubesched-default", "kubesched"),
        ns_setup=underlay.live_pools,
        note="both contenders are kubesched: its default profile is the baseline of the ratios",
    ),
    "UnderlayIPExtender": Workload(
        "UnderlayIPExtender",
        "kube-scheduler (default profile) with `kubesched extender` serving UnderlayIP alone (as "
        "deploy/extender ships it: kube-scheduler runs the default plugins itself) with the pools of "
        "UnderlayIPPools (filter + prioritize, nodeCacheCapable: every approval held until the bind is seen; and "
        "with the bind verb: the address assigned and written at bind), beside the no-op extender's floor "
        "(bench/noop_extender.py: no capacity check at all)",
        # examples/ip-scheduler.yaml's UnderlayIP arguments; its default filters are kube-scheduler's
        # own here, so the extender serves UnderlayIP only (docs/extender.md, "Serving only your plugins").
        kubesched_profile={**profile_from("ip-scheduler.yaml"), "schedulerName": DEFAULT_NAME,
                           "plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                      "enabled": [{"name": "UnderlayIP"}]}}},
        contenders=("kube-scheduler+noop-extender-cache", "kube-scheduler+extender-cache",
                    "kube-scheduler+extender-bind"),
        ns_setup=underlay.live_pools,
        note="the first contender (the no-op extender) is the baseline of the ratios",
    ),
    "Coscheduling": Workload(
        "Coscheduling",
        f"gangs of {GANG} pods (PodGroup minMember {GANG}) with examples/coscheduling.yaml in kubesched; "
        "kube-scheduler runs the default profile on the same pods as the baseline",
        pod=_gang_pod,
        kubesched_profile=profile_from("coscheduling.yaml"),
        ns_setup=_podgroups,
        cluster_setup=_coscheduling_cluster,
        note="kube-scheduler has no Coscheduling: its column is the default profile (a baseline, not the same policy)",
    ),
    "Gangs": Workload(
        "Gangs",
        f"gangs of {GANG} pods (PodGroup minMember {GANG}), the same policy in both: examples/coscheduling.yaml in "
        "kubesched, scheduler-plugins' own Coscheduling (its cmd/scheduler, bench/gangs.py) with the same args",
        pod=_gang_pod,
        kubesched_profile=profile_from("coscheduling.yaml"),
        ns_setup=_podgroups,
        cluster_setup=_coscheduling_cluster,
        contenders=("scheduler-plugins", "kubesched"),
    ),
    "Extender": Workload(
        "Extender",
        "kube-scheduler (default profile) alone vs with `kubesched extender` (default profile, filter+prioritize) "
        "with nodeCacheCapable true and false, and against a no-op extender (bench/noop_extender.py: the cost "
        "of the extender protocol itself); SchedulingBasic pods",
        contenders=("kube-scheduler", "kube-scheduler+extender-cache", "kube-scheduler+noop-extender-cache",
                    "kube-scheduler+extender-nocache"),
        # 2,000 measured pods at full size: with nodeCacheCapable false every pod's request carries
        # the Node objects of every feasible node, which bounds the round's duration.
        sizes={"full": Size(nodes=1000, init_pods=1000, pods=2000, timeout=900)},
    ),
    "ExtenderFloor": Workload(
        "ExtenderFloor",
        "kube-scheduler (default profile) with the no-op extender (bench/noop_extender.py, the protocol's floor) "
        "vs with `kubesched extender` (default profile, filter+prioritize, nodeCacheCapable true), alternated "
        "round by round in one run; SchedulingBasic pods",
        contenders=("kube-scheduler+noop-extender-cache", "kube-scheduler+extender-cache"),
        # Rounds of tens of seconds each (issue 32 item 4): at 3-6 s rounds (--size small) the
        # no-op's own figure moved x3 from round to round on the loaded machine. 2,000 pods: at
        # load ~25 creating and deleting them already takes minutes per round.
        sizes={"small": Size(nodes=50, init_pods=50, pods=200, timeout=120),
               "medium": Size(nodes=500, init_pods=500, pods=2000, timeout=600),
               "full": Size(nodes=1000, init_pods=1000, pods=5000, timeout=900)},
    ),
    # scheduler_perf topology_spreading/performance-config.yaml and affinity/performance-config.yaml
    # (upstream names: TopologySpreading, PreferredTopologySpreading, SchedulingPodAntiAffinity,
    # SchedulingPreferredPodAntiAffinity, SchedulingPodAffinity). Both schedulers run their default
    # profile, which has PodTopologySpread and InterPodAffinity (score weight 2 each).
    "TopologySpreading": Workload(
        "TopologySpreading",
        "scheduler_perf TopologySpreading: nodes labelled zone moon-1/2/3 round-robin, pod-default init pods, "
        "measured pods pod-with-topology-spreading (maxSkew 5 per zone, DoNotSchedule, color=blue), default profile",
        node=moon_zones,
        pod=spread_pod("DoNotSchedule"),
    ),
    "PreferredTopologySpreading": Workload(
        "PreferredTopologySpreading",
        "scheduler_perf PreferredTopologySpreading: as TopologySpreading with whenUnsatisfiable ScheduleAnyway "
        "(pod-with-preferred-topology-spreading: the constraint scores instead of filtering), default profile",
        node=moon_zones,
        pod=spread_pod("ScheduleAnyway"),
    ),
    "PodAntiAffinity": Workload(
        "PodAntiAffinity",
        "scheduler_perf SchedulingPodAntiAffinity: init and measured pods pod-with-pod-anti-affinity (color=green, "
        "required anti-affinity per kubernetes.io/hostname: one per node), default profile",
        pod=anti_affinity_pod(),
        init_pod=anti_affinity_pod(),
        # One such pod per node: upstream's 5000Nodes_2000Pods (1,000 init) scaled to 1,000 nodes
        # with more measured pods (400 bind in about a second), 200 nodes stay free at the end.
        sizes={"small": Size(nodes=50, init_pods=10, pods=30, timeout=120),
               "full": Size(nodes=1000, init_pods=200, pods=600, timeout=900)},
    ),
    "PreferredPodAntiAffinity": Workload(
        "PreferredPodAntiAffinity",
        "scheduler_perf SchedulingPreferredPodAntiAffinity: init and measured pods "
        "pod-with-preferred-pod-anti-affinity (color=yellow, preferred anti-affinity per hostname, weight 1), "
        "default profile",
        pod=preferred_anti_affinity_pod(),
        init_pod=preferred_anti_affinity_pod(),
    ),
    "PodAffinity": Workload(
        "PodAffinity",
        "scheduler_perf SchedulingPodAffinity: every node in zone1, init and measured pods pod-with-pod-affinity "
        "(color=blue, required affinity to color=blue per zone), default profile",
        node=zone1,
        pod=pod_affinity_pod(),
        init_pod=pod_affinity_pod(),
    ),
    "PreemptionBasic": Workload(
        "PreemptionBasic",
        "scheduler_perf PreemptionBasic (default_preemption): 4 pod-low-priority init pods (900m cpu) on every "
        "node-default node, measured pods pod-high-priority (3970m cpu, priority 9999999 via a PriorityClass): "
        "each measured pod preempts one node's 4 init pods (DefaultPreemption, default profile)",
        pod=high_priority_pod(by_class=True),
        init_pod=low_priority_pod,
        cluster_setup=_preemption_priority_class,
        # upstream's 1000Nodes: 4,000 init pods, 1,000 measured; every node is full for the preemptor.
        sizes={"small": Size(nodes=50, init_pods=200, pods=50, timeout=180),
               "full": Size(nodes=1000, init_pods=4000, pods=1000, timeout=900)},
    ),
}
#: upstream scheduler_perf's names of the workloads named differently here
UPSTREAM_NAMES = {
    "SchedulingNodeAffinity": "NodeAffinity",
    "SchedulingPodAntiAffinity": "PodAntiAffinity",
    "SchedulingPreferredPodAntiAffinity": "PreferredPodAntiAffinity",
    "SchedulingPodAffinity": "PodAffinity",
}
UPSTREAM_WORKLOADS = ("TopologySpreading", "PreferredTopologySpreading", "PodAntiAffinity",
                      "PreferredPodAntiAffinity", "PodAffinity")
LIVE_WORKLOADS = ("SchedulingBasic", "NodeAffinity", "Taints", "UnderlayIP", "Coscheduling", "Gangs",
                  *UPSTREAM_WORKLOADS, "PreemptionBasic")


# -- bulk client -------------------------------------------------------------------------------------
class Bulk:
    """Many requests from a few threads, one keep-alive HTTPS connection per thread (admin)."""

    def __init__(self, c: ControlPlane, threads: int = 8) -> None:
        kc = c.client
        self.host, self.port, self.ctx = kc.host, kc.port, kc.ctx
        self.threads = threads
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self._local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else orjson.dumps(body)
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        for attempt in range(3):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
                continue
            if resp.status == 429 and attempt < 2:  # APF: back off and retry
                time.sleep(0.2)
                continue
            return resp.status, raw
        raise RuntimeError("unreachable")

    def post_all(self, path: Callable[[dict[str, Any]], str], bodies: list[dict[str, Any]]) -> int:
        """POST every body; returns how many failed (409 AlreadyExists counts as done)."""

        def one(b: dict[str, Any]) -> bool:
            status, _ = self.request("POST", path(b), b)
            return status < 300 or status == 409

        with ThreadPoolExecutor(self.threads) as ex:
            failed = sum(1 for ok in ex.map(one, bodies) if not ok)
        if failed:
            raise RuntimeError(f"bulk create: {failed} of {len(bodies)} requests failed")
        return failed


def node_body(name: str, extra: dict[str, Any]) -> dict[str, Any]:
    """scheduler_perf's node-default as a KWOK node: 4 cpu, 32Gi, 110 pods, labelled kubernetes.io/hostname
    (as scheduler_perf's createNodes does); "labels" and "taints" from ``extra``."""
    labels = {HOSTNAME: name, **(extra.get("labels") or {})}
    return kwok_node(name, cpu="4", memory="32Gi", labels=labels, taints=extra.get("taints") or ())


def pod_body(name: str, ns: str, *, role: str, scheduler: str | None = None, node: str | None = None,
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """scheduler_perf's pod-default: one pause container, 100m cpu / 500Mi requests = limits
    (``extra``: "labels", "requests", "claims" the container uses, and spec keys)."""
    extra = dict(extra or {})
    labels = {MEASURE_LABEL: role, **extra.pop("labels", {})}
    res = extra.pop("requests", None) or {"cpu": "100m", "memory": "500Mi"}
    claims = extra.pop("claims", None)
    body = pod_manifest(name, ns, requests=res, limits=res, labels=labels, scheduler_name=scheduler, node_name=node,
                        container_name="pause", ports=(80,), extra_spec=extra)
    if claims:
        body["spec"]["containers"][0]["resources"]["claims"] = [{"name": n} for n in claims]
    return body


# -- watch -------------------------------------------------------------------------------------------
class BindWatcher(threading.Thread):
    """Timestamps (time.monotonic) the first event in which each measured pod is bound. A watch the
    apiserver ends early is resumed from the last resourceVersion seen."""

    def __init__(self, c: ControlPlane, ns: str, resource_version: str, expected: int,
                 on_first: Callable[[], None] | None = None) -> None:
        super().__init__(daemon=True, name=f"watch-{ns}")
        kc = c.client
        self._connect = lambda: http.client.HTTPSConnection(kc.host, kc.port, context=kc.ctx, timeout=3600)
        self.conn: http.client.HTTPSConnection | None = None
        self.ns = ns
        self.rv = resource_version
        self.expected = expected
        self.bound: dict[str, float] = {}
        #: (pod, node) -> when the pod was first seen nominated there (status.nominatedNodeName
        #: while unbound): one preemption each (PreemptionBasic).
        self.nominated: dict[tuple[str, str], float] = {}
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.on_first = on_first
        self._closing = False
        self.end_reason = ""
        self.events = 0
        self.rewatches = 0

    def _path(self) -> str:
        return (
            f"/api/v1/namespaces/{self.ns}/pods?watch=true&timeoutSeconds=3000"
            f"&resourceVersion={self.rv}&labelSelector={MEASURE_LABEL}%3Dmeasure"
        )

    def run(self) -> None:
        try:
            bound = self.bound
            while len(bound) < self.expected and not self._closing:
                self.conn = conn = self._connect()
                conn.request("GET", self._path(), headers={"Accept": "application/json"})
                resp = conn.getresponse()
                if resp.status >= 300:
                    raise RuntimeError(f"watch: HTTP {resp.status}: {resp.read()[:300]!r}")
                while len(bound) < self.expected:
                    line = resp.readline()
                    if not line:
                        break
                    self.events += 1
                    ev = orjson.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                    nominated = (obj.get("status") or {}).get("nominatedNodeName")
                    if nominated and not (obj.get("spec") or {}).get("nodeName"):
                        self.nominated.setdefault((obj["metadata"]["name"], nominated), time.monotonic())
                    if (obj.get("spec") or {}).get("nodeName"):
                        name = obj["metadata"]["name"]
                        if name not in bound:
                            bound[name] = time.monotonic()
                            if len(bound) == 1 and self.on_first is not None:
                                self.on_first()
                conn.close()
                if len(bound) < self.expected and not self._closing:
                    self.rewatches += 1
            self.end_reason = "all bound" if len(bound) >= self.expected else "closed"
        except BaseException as e:
            self.end_reason = f"error: {e!r}"
            if not self._closing:
                self.error = e
        finally:
            self.done.set()

    def close(self) -> None:
        self._closing = True
        conn = self.conn
        with contextlib.suppress(Exception):
            if conn is not None and conn.sock is not None:
                conn.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            if conn is not None:
                conn.close()


# -- contenders --------------------------------------------------------------------------------------
def _arg(comp: Component, flag: str) -> str:
    for a in comp.argv:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    raise KeyError(flag)


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
            return bool(r.status == 200)
    except Exception:
        return False


def kubesched_bin() -> str:
    cand = Path(sys.executable).parent / "kubesched"
    return str(cand) if cand.exists() else "kubesched"


@dataclass
class Running:
    """A started contender: the processes to account and how to read the scheduler's metrics."""

    kind: str
    procs: dict[str, Component]
    metrics_url: str
    metrics_ctx: ssl.SSLContext | None
    scheduler_name: str
    pre_stop: Callable[[Running], None] | None = None

    def scrape(self) -> str:
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=10, context=self.metrics_ctx) as r:
                return str(r.read().decode())
        except Exception as e:
            return f"# scrape failed: {e}\n"


def scheduler_config(c: ControlPlane, path: Path, profile: dict[str, Any], qps: float | None, burst: int | None,
                     extenders: list[dict[str, Any]] | None = None, leader_elect: bool = False,
                     feature_gates: dict[str, bool] | None = None) -> Path:
    """A KubeSchedulerConfiguration; ``qps``/``burst`` None keep the defaults (50/100), and
    ``leader_elect`` the default Lease (each scheduler its own: kubesched names it kubesched).
    ``feature_gates``: kubesched's ``featureGates`` map (kube-scheduler takes them as a flag,
    :func:`gate_flags`)."""
    connection: dict[str, Any] = {"kubeconfig": str(c.scheduler_kubeconfig)}
    if qps is not None:
        connection["qps"] = qps
    if burst is not None:
        connection["burst"] = burst
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": leader_elect},
        "clientConnection": connection,
        "profiles": [profile],
    }
    if extenders:
        cfg["extenders"] = extenders
    if feature_gates:
        cfg["featureGates"] = dict(feature_gates)
    path.write_text(json.dumps(cfg, indent=1) + "\n")
    return path


def gate_flags(gates: dict[str, bool]) -> list[str]:
    """kube-scheduler's (and kube-apiserver's) ``--feature-gates=A=true,B=false``; [] for none."""
    return [f"--feature-gates={','.join(f'{k}={str(v).lower()}' for k, v in gates.items())}"] if gates else []


def grant_kubesched_rbac(c: ControlPlane, config: Path | None, extender: bool = False) -> None:
    """Grant system:kube-scheduler, the identity every contender uses here, the rules
    ``kubesched run --print-rbac`` derives from ``config`` (None: the default profile): what its
    plugins declare (UnderlayIP's pools and claims, DynamicResources' ResourceClaimTemplates, ...),
    as deploy/ grants a kubesched deployment. Without them each such informer retries a 403 all
    through the round and its plugin sees none of those objects: until 2026-11-28 the
    UnderlayIPPools and UnderlayIPExtender rounds ran without their pools. One ClusterRole per set
    of rules (named by its digest), made once per cluster."""
    import hashlib

    from kubesched.config.load import load_config
    from kubesched.framework.registry import profiles_object_kinds
    from kubesched.live.rbac import cluster_role
    from kubesched.plugins.builtin import builtin_registry

    registry = builtin_registry()
    cfg = load_config(config, registry, extender=extender)
    rules = cluster_role("", profiles_object_kinds(registry, cfg.profiles, cfg.feature_gates))["rules"]
    name = "bench-kubesched-" + hashlib.sha256(orjson.dumps(rules)).hexdigest()[:10]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "system:kube-scheduler"}]}
    for path, body in (("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
                       ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)):
        try:
            c.api("POST", path, body)
        except controlplane.ApiError as e:
            if e.status != 409:
                raise


_WARMED: set[str] = set()


def _warm_up(src: str) -> None:
    """Write the bytecode cache of ``src`` once per benchmark process, before its first start is
    measured (a pip-installed kubesched has its .pyc files; common.installed_env)."""
    if src not in _WARMED:
        from bench import startup_cost

        startup_cost.warm_up(src)
        _WARMED.add(src)


def start_contender(c: ControlPlane, wl: Workload, kind: str, qps: float | None, burst: int | None, workdir: Path,
                    wrap: list[str] | None = None, leader_elect: bool = False,
                    kubesched_src: str | None = None) -> Running:
    """Start ``kind``; ``wrap`` (e.g. a profiler's argv) prefixes the kubesched command;
    ``kubesched_src`` runs kubesched from that source tree (PYTHONPATH) instead of this one."""
    if kind == "scheduler-plugins":
        from bench import gangs

        return gangs.start_scheduler_plugins(c, wl, qps, burst, workdir)
    if kind in ("kubesched", "kubesched-default"):
        port = controlplane.free_port()
        profile = wl.kubesched_profile if kind == "kubesched" else {}
        cfg = scheduler_config(c, workdir / "kubesched.yaml", {"schedulerName": KUBESCHED_NAME, **profile}, qps,
                               burst, leader_elect=leader_elect, feature_gates=wl.feature_gates)
        grant_kubesched_rbac(c, cfg)
        argv = [*(wrap or []), kubesched_bin(), "run", f"--config={cfg}", f"--health-addr=127.0.0.1:{port}"]
        env = common.installed_env(kubesched_src if kubesched_src is not None else os.environ.get("PYTHONPATH"))
        _warm_up(env.get("PYTHONPATH") or str(common.ROOT / "src"))
        comp = c._add(Component("kubesched", argv, c.logs_dir / "kubesched.log", env))
        return Running(kind, {"scheduler": comp}, f"http://127.0.0.1:{port}/metrics", None, KUBESCHED_NAME)
    procs: dict[str, Component] = {}
    extenders = None
    # "KIND@DIR": the extender's kubesched imported from the src tree DIR (e.g. `git archive REV src`
    # unpacked), so a before/after of the extender runs side by side in one run.
    kind, _, ext_src = kind.partition("@")
    if kind.startswith(("kube-scheduler+extender", "kube-scheduler+noop-extender")):
        cache = not kind.endswith("-nocache")
        eport = controlplane.free_port()
        env = None
        if "noop" in kind:
            argv = [sys.executable, str(common.ROOT / "bench" / "noop_extender.py"), f"--listen=127.0.0.1:{eport}"]
        else:
            argv = [sys.executable, "-m", "kubesched.cli", "extender", f"--listen=127.0.0.1:{eport}",
                    "--log-level=warning"]
            src = Path(ext_src).resolve() if ext_src else common.ROOT / "src"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
            if cache:
                argv.append(f"--kubeconfig={c.scheduler_kubeconfig}")
            if wl.kubesched_profile:  # the workload's profile (schedulerName included), else the default
                ecfg = scheduler_config(c, workdir / "kubesched-extender.yaml", wl.kubesched_profile, qps, burst)
                argv.append(f"--config={ecfg}")
                grant_kubesched_rbac(c, ecfg, extender=True)
            elif cache:
                grant_kubesched_rbac(c, None, extender=True)
        ext = c._add(Component("kubesched-extender", argv, c.logs_dir / "kubesched-extender.log", env))
        procs["extender"] = ext
        try:
            c.wait_for(lambda: ext.alive() and _http_ok(f"http://127.0.0.1:{eport}/readyz"), 60, 0.2, "extender ready")
        except BaseException:
            c.stop_component(ext)
            raise
        extenders = [{
            "urlPrefix": f"http://127.0.0.1:{eport}/",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 1,
            "nodeCacheCapable": cache,
            "ignorable": False,
            **({"bindVerb": "bind"} if kind.endswith("-bind") else {}),
        }]
    cfg = scheduler_config(c, workdir / "kube-scheduler.yaml", {"schedulerName": DEFAULT_NAME}, qps, burst, extenders,
                           leader_elect)
    try:
        comp = c.start_kube_scheduler(cfg, extra_args=["--v=0", *gate_flags(wl.feature_gates)])
    except BaseException:
        for p in procs.values():
            c.stop_component(p)
        raise
    procs["scheduler"] = comp
    url = f"https://127.0.0.1:{_arg(comp, '--secure-port')}/metrics"
    return Running(kind, procs, url, c.pki.admin_tls(), DEFAULT_NAME)


def stop_contender(c: ControlPlane, run: Running) -> None:
    if run.pre_stop is not None:
        with contextlib.suppress(Exception):
            run.pre_stop(run)
    for comp in (run.procs.get("scheduler"), *[p for k, p in run.procs.items() if k != "scheduler"]):
        if comp is not None:
            c.stop_component(comp)


# -- one round ---------------------------------------------------------------------------------------
def _attempt_latency(text: str) -> dict[str, Any]:
    buckets = common.parse_histogram(text, "scheduler_scheduling_attempt_duration_seconds", {"result": "scheduled"})
    out: dict[str, Any] = {"attempts_scheduled": int(buckets[-1][1]) if buckets else 0}
    for q in (0.5, 0.9, 0.99):
        v = common.histogram_quantile(q, buckets)
        out[f"attempt_p{int(q * 100)}_ms"] = None if v is None else round(v * 1000, 2)
    return out


def run_round(c: ControlPlane, wl: Workload, size: Size, kind: str, rnd: int, nodes: list[str], qps: float,
              burst: int, workdir: Path, wrap: list[str] | None = None, log: Callable[[str], None] = print,
              pre_stop: Callable[[Running], None] | None = None, profile_seconds: float = 0.0) -> dict[str, Any]:
    """One contender drains one round's backlog. ``profile_seconds``: profile the scheduler that
    long from the first bind (bench/live_profile.py), in this round."""
    ns = f"{wl.name.lower()[:12]}-{rnd}-{uuid.uuid4().hex[:6]}"
    c.create_namespace(ns)
    if wl.ns_setup is not None:
        wl.ns_setup(c, ns, size)
    bulk = Bulk(c)
    sched_name = KUBESCHED_NAME if kind in ("kubesched", "kubesched-default") else DEFAULT_NAME
    t0 = time.monotonic()
    init = [pod_body(f"init-{i:05d}", ns, role="init", node=nodes[i % len(nodes)], extra=wl.init_pod(i))
            for i in range(size.init_pods)]
    measured = [pod_body(f"pod-{i:05d}", ns, role="measure", scheduler=sched_name, extra=wl.pod(i))
                for i in range(size.pods)]
    bulk.post_all(lambda b: f"/api/v1/namespaces/{ns}/pods", init + measured)
    if wl.after_create is not None:
        wl.after_create(c, ns, size)
    create_s = time.monotonic() - t0
    lst = c.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{MEASURE_LABEL}=measure")
    already = sum(1 for p in lst["items"] if p["spec"].get("nodeName"))
    if already:
        raise RuntimeError(f"{already} measured pods were bound before the scheduler started")
    load_before = common.loadavg()

    first: dict[str, float] = {}
    holder: dict[str, Running] = {}
    captures: list[live_profile.Capture] = []
    cp_before = control_plane_usage(c)

    def on_first() -> None:
        first["t"] = time.monotonic()
        r = holder.get("run")
        if r is not None:
            for role, comp in r.procs.items():
                if comp.pid:
                    first[f"cpu_{role}"] = common.proc_cpu_seconds(comp.pid) or 0.0
            if profile_seconds > 0:
                captures.append(live_profile.start(r, profile_seconds, workdir, f"{kind}-{rnd}"))

    watcher = BindWatcher(c, ns, lst["metadata"]["resourceVersion"], size.pods, on_first)
    watcher.start()
    t_start = time.monotonic()
    run = start_contender(c, wl, kind, qps, burst, workdir, wrap)
    run.pre_stop = pre_stop
    holder["run"] = run
    rss_series: list[tuple[float, int]] = []
    pid = run.procs["scheduler"].pid
    try:
        deadline = time.monotonic() + size.timeout
        while not watcher.done.wait(0.5):
            if pid:
                rss = common.proc_status_kib(pid, "VmRSS")
                if rss is not None:
                    rss_series.append((round(time.monotonic() - t_start, 1), rss))
            if not run.procs["scheduler"].alive():
                raise RuntimeError(f"{kind} exited:\n{run.procs['scheduler'].tail(30)}")
            if time.monotonic() > deadline:
                log(f"  ! timeout: {len(watcher.bound)}/{size.pods} bound after {size.timeout:.0f}s")
                break
        t_end = time.monotonic()
        if len(watcher.bound) < size.pods:
            lst2 = c.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{MEASURE_LABEL}=measure")
            n_bound = sum(1 for p in lst2["items"] if p["spec"].get("nodeName"))
            log(f"  ! watcher saw {len(watcher.bound)} bound ({watcher.end_reason}, {watcher.events} events, "
                f"{watcher.rewatches} re-watches); "
                f"the apiserver has {n_bound}")
        time.sleep(0.3)  # let the last binds' metrics land
        metrics_text = run.scrape()
        profile = captures[0].finish() if captures else None
        procs: dict[str, Any] = {}
        for role, comp in run.procs.items():
            if not comp.pid:
                continue
            cpu = common.proc_cpu_seconds(comp.pid)
            procs[role] = {
                "peak_rss_mib": round((common.proc_status_kib(comp.pid, "VmHWM") or 0) / 1024, 1),
                "cpu_seconds": None if cpu is None else round(cpu, 2),
                "cpu_seconds_window": None if cpu is None or f"cpu_{role}" not in first
                else round(cpu - first[f"cpu_{role}"], 2),
            }
    finally:
        stop_contender(c, run)
        watcher.close()
        watcher.join(5)
    if watcher.error is not None:
        raise RuntimeError(f"watch failed: {watcher.error}")
    bind_times = list(watcher.bound.values())
    tp = common.throughput(bind_times)
    preemption = _preemption_figures(c, ns, watcher, size) if watcher.nominated else {}
    result: dict[str, Any] = {
        "contender": kind,
        "round": rnd,
        "namespace": ns,
        "bound": len(bind_times),
        "pods": size.pods,
        "create_seconds": round(create_s, 2),
        "watch_restarts": watcher.rewatches,
        "start_to_first_bind_s": round(first["t"] - t_start, 2) if "t" in first else None,
        "start_to_last_bind_s": round(max(bind_times) - t_start, 2) if bind_times else None,
        "throughput": tp,
        **_attempt_latency(metrics_text),
        "processes": procs,
        "loadavg_before": load_before,
        "loadavg_after": common.loadavg(),
        "rss_series_kib": rss_series[:: max(1, len(rss_series) // 120)],
        "wall_seconds": round(t_end - t_start, 2),
        "control_plane": control_plane_usage(c, cp_before),
        **preemption,
    }
    if profile is not None:
        result["profile"] = profile
    t_clean = time.monotonic()
    cleanup_namespace(c, ns, [b["metadata"]["name"] for b in init + measured])
    if wl.after_cleanup is not None:
        wl.after_cleanup(c, ns)
    result["cleanup_seconds"] = round(time.monotonic() - t_clean, 1)
    return result


def control_plane_usage(c: ControlPlane, before: dict[str, Any] | None = None) -> dict[str, Any]:
    """etcd's, kube-apiserver's and KWOK's RSS now, peak RSS since they started (``VmHWM``) and CPU
    seconds (since ``before``, this function's earlier answer, when given)."""
    out: dict[str, Any] = {}
    for comp in (c.etcd, c.apiserver, c.kwok):
        if comp is None or not comp.pid:
            continue
        cpu = common.proc_cpu_seconds(comp.pid)
        prev = (before or {}).get(comp.name, {}).get("cpu_seconds_total")
        out[comp.name] = {
            "rss_mib": round((common.proc_status_kib(comp.pid, "VmRSS") or 0) / 1024, 1),
            "peak_rss_mib": round((common.proc_status_kib(comp.pid, "VmHWM") or 0) / 1024, 1),
            "cpu_seconds_total": None if cpu is None else round(cpu, 2),
            **({"cpu_seconds_round": round(cpu - prev, 2)} if cpu is not None and prev is not None else {}),
        }
    return out


def _preemption_figures(c: ControlPlane, ns: str, watcher: BindWatcher, size: Size) -> dict[str, Any]:
    """Preemptions seen from the watch (a nomination of an unbound pod to a node), per second from
    the first nomination to the last bind; victims = init pods gone or terminating at the end;
    and how long a preemptor waited from its (first) nomination to its bind — the victims' exit
    and the retry, which kube-scheduler and kubesched both go through."""
    first_nomination: dict[str, float] = {}
    for (pod, _node), t in watcher.nominated.items():
        first_nomination[pod] = min(t, first_nomination.get(pod, t))
    waits = sorted(watcher.bound[p] - t for p, t in first_nomination.items() if p in watcher.bound)
    left = c.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{MEASURE_LABEL}=init")["items"]
    standing = sum(1 for p in left if not (p.get("metadata") or {}).get("deletionTimestamp"))
    span = max(watcher.bound.values(), default=0.0) - min(first_nomination.values())

    def pct(q: float) -> float | None:
        return round(1000 * waits[min(len(waits) - 1, int(q * len(waits)))], 1) if waits else None

    return {
        "preemptions": len(watcher.nominated),
        "preemptors": len(first_nomination),
        "victims": size.init_pods - standing,
        "preemptions_per_second": round(len(watcher.nominated) / span, 1) if span > 0 else None,
        "nomination_to_bind_ms": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99)},
    }


def cleanup_namespace(c: ControlPlane, ns: str, pod_names: list[str] | None = None, timeout: float = 300) -> None:
    """Delete the round's pods (and Events, PodGroups) now: nothing garbage-collects here. Pods are
    deleted one by one from 8 threads (a DeleteCollection of 6,000 pods takes minutes)."""
    if pod_names:
        bulk = Bulk(c)
        with ThreadPoolExecutor(bulk.threads) as ex:
            list(ex.map(lambda n: bulk.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{n}?gracePeriodSeconds=0"),
                        pod_names))
    for path in (
        f"/api/v1/namespaces/{ns}/pods",
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
    ):
        with contextlib.suppress(controlplane.ApiError, TimeoutError, OSError):
            c.client.request("DELETE", path, params={"gracePeriodSeconds": 0}, timeout=timeout)
    c.wait_for(lambda: not c.get(f"/api/v1/namespaces/{ns}/pods", limit=1)["items"], timeout, 0.5,
               f"pods of {ns} deleted")
    with contextlib.suppress(controlplane.ApiError):
        c.api("DELETE", f"/api/v1/namespaces/{ns}")


#: Both contenders use the system:kube-scheduler identity. Without this FlowSchema the apiserver's
#: API Priority and Fairness rejects many of kube-scheduler's binds and Events with 429 from the
#: second round on (its flow's queues fill on 2 cores), and the rounds measure that throttling,
#: not scheduling: kube-scheduler fell 432 -> 255 -> 228 pods/s over three rounds with it and held
#: 430 -> 406 -> 385 without (bench/analysis.md).
EXEMPT_FLOW_SCHEMA: dict[str, Any] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "FlowSchema",
    "metadata": {"name": "bench-schedulers-exempt"},
    "spec": {
        "priorityLevelConfiguration": {"name": "exempt"},
        "matchingPrecedence": 50,
        "rules": [{
            "subjects": [{"kind": "User", "user": {"name": "system:kube-scheduler"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                               "clusterScope": True}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        }],
    },
}


def exempt_schedulers_from_apf(c: ControlPlane) -> None:
    try:
        c.client.request("POST", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", EXEMPT_FLOW_SCHEMA)
    except controlplane.ApiError as e:
        if e.status != 409:  # already there (a shared cluster)
            raise


# -- a run -------------------------------------------------------------------------------------------
@contextlib.contextmanager
def cluster_for(wl: Workload, size: Size, workdir: Path, log: Callable[[str], None] = print
                ) -> Iterator[tuple[ControlPlane, list[str]]]:
    controlplane.ensure_binaries(build=True, quiet=True)
    # DeleteCollection of a round's 6,000 pods: 4 workers instead of 1 (cleanup only, not measured).
    c = ControlPlane(workdir / "cluster", apiserver_args=["--delete-collection-workers=4", *wl.apiserver_args])
    try:
        t0 = time.monotonic()
        c.start(with_kwok=True)
        if wl.controller_manager:
            c.start_controller_manager(extra_args=wl.controller_manager_args)
        exempt_schedulers_from_apf(c)
        if wl.cluster_setup is not None:
            wl.cluster_setup(c)
        names = [f"node-{i:05d}" for i in range(size.nodes)]
        Bulk(c).post_all(lambda b: "/api/v1/nodes", [node_body(n, wl.node(i)) for i, n in enumerate(names)])
        want = set(names)
        c.wait_for(lambda: want <= c.ready_nodes(), 120 + size.nodes * 0.1, 1.0, "nodes Ready")
        log(f"  control plane + {size.nodes} KWOK nodes ready in {time.monotonic() - t0:.1f}s ({c.dir})")
        yield c, names
    finally:
        c.stop()
        import shutil  # the store of a full run is ~750 MB; the logs stay for a look afterwards

        shutil.rmtree(c.dir / "etcd-data", ignore_errors=True)


def reshape_nodes(c: ControlPlane, wl: Workload, size: Size, log: Callable[[str], None] = print) -> list[str]:
    """Reuse a running control plane for ``wl``: create missing nodes, set the workload's labels
    and taints on all of them (a merge patch; the smoke test runs every workload on one cluster)."""
    exempt_schedulers_from_apf(c)
    if wl.cluster_setup is not None:
        wl.cluster_setup(c)
    names = [f"node-{i:05d}" for i in range(size.nodes)]
    existing = {n["metadata"]["name"] for n in c.get("/api/v1/nodes")["items"]}
    bulk = Bulk(c)
    missing = [node_body(n, wl.node(i)) for i, n in enumerate(names) if n not in existing]
    if missing:
        bulk.post_all(lambda b: "/api/v1/nodes", missing)

    def patch(i: int) -> None:
        shape = wl.node(i)
        labels = {ZONE: None, **(shape.get("labels") or {}), HOSTNAME: names[i]}  # null: an earlier zone removed
        body = {"metadata": {"labels": labels},
                "spec": {"taints": shape.get("taints") or None}}
        kc = c.client
        kc.request("PATCH", f"/api/v1/nodes/{names[i]}", body, content_type="application/merge-patch+json")

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(patch, range(len(names))))
    want = set(names)
    c.wait_for(lambda: want <= c.ready_nodes(), 120, 0.5, "nodes Ready")
    return names


def summarize(rounds: list[dict[str, Any]], contenders: tuple[str, ...]) -> dict[str, Any]:
    """Medians per contender, and ratios vs the first contender, paired round by round."""
    per: dict[str, Any] = {}
    for k in contenders:
        rs = [r for r in rounds if r["contender"] == k]
        proc = [r["processes"].get("scheduler", {}) for r in rs]
        ext = [r["processes"].get("extender") for r in rs if r["processes"].get("extender")]
        per[k] = {
            "rounds": len(rs),
            "bound_min": min((r["bound"] for r in rs), default=0),
            "throughput_average": common.median(r["throughput"]["average"] for r in rs),
            "throughput_p50": common.median(r["throughput"]["perc50"] for r in rs),
            "throughput_p90": common.median(r["throughput"]["perc90"] for r in rs),
            "throughput_p99": common.median(r["throughput"]["perc99"] for r in rs),
            "throughput_overall": common.median(r["throughput"]["overall"] for r in rs),
            "attempt_p50_ms": common.median(r.get("attempt_p50_ms") for r in rs),
            "attempt_p99_ms": common.median(r.get("attempt_p99_ms") for r in rs),
            "peak_rss_mib": common.median(p.get("peak_rss_mib") for p in proc),
            "cpu_seconds": common.median(p.get("cpu_seconds") for p in proc),
            "cpu_seconds_window": common.median(p.get("cpu_seconds_window") for p in proc),
            "start_to_last_bind_s": common.median(r.get("start_to_last_bind_s") for r in rs),
        }
        if any("preemptions" in r for r in rs):
            per[k]["preemptions"] = common.median(r.get("preemptions") for r in rs)
            per[k]["victims"] = common.median(r.get("victims") for r in rs)
            per[k]["preemptions_per_second"] = common.median(r.get("preemptions_per_second") for r in rs)
            per[k]["nomination_to_bind_p50_ms"] = common.median(
                (r.get("nomination_to_bind_ms") or {}).get("p50") for r in rs)
            per[k]["nomination_to_bind_p99_ms"] = common.median(
                (r.get("nomination_to_bind_ms") or {}).get("p99") for r in rs)
        if ext:
            per[k]["extender_peak_rss_mib"] = common.median(e.get("peak_rss_mib") for e in ext)
            per[k]["extender_cpu_seconds"] = common.median(e.get("cpu_seconds") for e in ext)
            # From the first bind to the last: the extender's start-up (imports, informer list) left out.
            per[k]["extender_cpu_ms_per_pod_window"] = common.median(
                None if e.get("cpu_seconds_window") is None else round(e["cpu_seconds_window"] * 1000 / r["bound"], 3)
                for e, r in zip(ext, [r for r in rs if r["processes"].get("extender")], strict=True) if r["bound"])
    base = contenders[0]
    ratios: dict[str, Any] = {}
    by_round: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rounds:
        by_round.setdefault(r["round"], {})[r["contender"]] = r
    for k in contenders[1:]:
        tp, tpo, rss, cpu = [], [], [], []
        for pair in by_round.values():
            a, b = pair.get(base), pair.get(k)
            if not a or not b:
                continue
            if a["throughput"]["average"]:
                tp.append(b["throughput"]["average"] / a["throughput"]["average"])
            if a["throughput"]["overall"]:
                tpo.append(b["throughput"]["overall"] / a["throughput"]["overall"])
            ra = a["processes"].get("scheduler", {}).get("peak_rss_mib")
            rb = b["processes"].get("scheduler", {}).get("peak_rss_mib")
            if ra and rb:
                rss.append(rb / ra)
            ca = a["processes"].get("scheduler", {}).get("cpu_seconds_window")
            cb = b["processes"].get("scheduler", {}).get("cpu_seconds_window")
            if ca and cb:
                cpu.append(cb / ca)

        def med(v: list[float]) -> float | None:
            m = common.median(v)
            return None if m is None else round(m, 3)

        ratios[f"{k} / {base}"] = {
            "throughput_average": med(tp),
            "throughput_overall": med(tpo),
            "peak_rss": med(rss),
            "cpu_seconds_window": med(cpu),
            "per_round_throughput": [round(x, 3) for x in tp],
            "throughput_average_min": round(min(tp), 3) if tp else None,
            "throughput_average_max": round(max(tp), 3) if tp else None,
        }
    return {"per_contender": per, "ratios": ratios}


def run_workload(name: str | Workload, size_name: str, rounds: int, qps: float, burst: int, workdir: Path | None = None,
                 save: bool = True, log: Callable[[str], None] = print, cluster: ControlPlane | None = None,
                 contenders: tuple[str, ...] | None = None, size: Size | None = None,
                 profile_seconds: float = 0.0, results: Path | None = None) -> dict[str, Any]:
    """Run ``name`` (one of WORKLOADS, or a Workload defined elsewhere, e.g. bench/dra.py's): on a
    control plane of its own, or on ``cluster`` (nodes reshaped for it). ``contenders`` picks some of
    the workload's (the first stays the baseline of the ratios). ``size``: a custom size (e.g.
    :func:`custom_size`) instead of ``size_name``'s; ``profile_seconds``: profile each contender
    that long from its first bind, every round (bench/live_profile.py); ``results``: the file the
    record is appended to (default bench/results/<date>.json)."""
    wl = name if isinstance(name, Workload) else WORKLOADS[name]
    name = wl.name
    if contenders:
        unknown = [k for k in contenders if k.partition("@")[0] not in wl.contenders]
        if unknown or contenders[0] != wl.contenders[0]:
            raise SystemExit(f"{name}: --contenders must start with {wl.contenders[0]} and name some of "
                             f"{', '.join(wl.contenders)}; got {', '.join(contenders)}")
        wl = replace(wl, contenders=contenders)
    if name in ("Coscheduling", "Gangs") and not _coscheduling_available():
        raise SystemExit(f"{name}: kubesched.plugins.coscheduling is not installed")
    size = size or wl.sizes.get(size_name) or SIZES[size_name]
    import tempfile

    wd = Path(workdir or tempfile.mkdtemp(prefix=f"kubesched-bench-{name.lower()}-"))
    wd.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "benchmark": "live",
        "workload": name,
        "description": wl.description,
        "note": wl.note,
        "size": size_name,
        "nodes": size.nodes,
        "init_pods": size.init_pods,
        "pods": size.pods,
        "qps": qps,
        "burst": burst,
        "pods_created": "before the scheduler starts (bulk, 8 threads, no client rate limit)",
        "date": common.now_iso(),
        "commit": common.git_commit(),
        "command": common.command_line(),
        "machine": common.machine(),
        "versions": common.versions(),
        "contenders": list(wl.contenders),
        "rounds": [],
    }
    log(f"{name} [{size_name}: {size.nodes} nodes, {size.init_pods} init pods, {size.pods} measured pods] "
        f"x {rounds} rounds, qps/burst {qps:g}/{burst}; load {common.loadavg()}")
    ctx: contextlib.AbstractContextManager[tuple[ControlPlane, list[str]]]
    if cluster is None:
        ctx = cluster_for(wl, size, wd, log)
    else:
        ctx = contextlib.nullcontext((cluster, reshape_nodes(cluster, wl, size, log)))
        record["shared_cluster"] = True
    with ctx as (c, nodes):
        record["machine"]["loadavg_cluster_ready"] = common.loadavg()
        for rnd in range(rounds):
            order = wl.contenders if rnd % 2 == 0 else tuple(reversed(wl.contenders))
            for kind in order:
                r = run_round(c, wl, size, kind, rnd, nodes, qps, burst, wd, log=log, profile_seconds=profile_seconds)
                record["rounds"].append(r)
                p = r["processes"].get("scheduler", {})
                e = r["processes"].get("extender")
                ext = f" (extender: rss {e.get('peak_rss_mib')} MiB, cpu {e.get('cpu_seconds')} s)" if e else ""
                log(f"  round {rnd} {kind:32s} bound {r['bound']}/{size.pods}  "
                    f"{r['throughput']['average']:7.1f} pods/s avg (p50 {r['throughput']['perc50']}, "
                    f"overall {r['throughput']['overall']})  attempt p50/p99 {r.get('attempt_p50_ms')}/"
                    f"{r.get('attempt_p99_ms')} ms  rss {p.get('peak_rss_mib')} MiB  cpu {p.get('cpu_seconds')} s"
                    f"{ext}  load {r['loadavg_after']}")
                cp_rss = ", ".join(f"{k} {v['peak_rss_mib']}" for k, v in r["control_plane"].items())
                log(f"    start -> first bind {r['start_to_first_bind_s']} s, "
                    f"-> last bind {r['start_to_last_bind_s']} s; created in {r['create_seconds']} s; "
                    f"control plane peak RSS MiB: {cp_rss}")
                if "preemptions" in r:
                    log(f"    preemptions {r['preemptions']} ({r['preemptors']} preemptors, {r['victims']} victims), "
                        f"{r['preemptions_per_second']}/s; nomination -> bind {r['nomination_to_bind_ms']} ms")
    record["machine"]["loadavg_end"] = common.loadavg()
    record["summary"] = summarize(record["rounds"], wl.contenders)
    for k, v in record["summary"]["ratios"].items():
        log(f"  ratio {k}: throughput {v['throughput_average']} (overall {v['throughput_overall']}), "
            f"peak RSS {v['peak_rss']}, cpu {v['cpu_seconds_window']}")
    if save:
        out = common.save_result(record, results)
        log(f"  -> {out}")
    return record


def custom_size(base: Size, nodes: int | None, pods: int | None, init_pods: int | None,
                timeout: float | None) -> Size | None:
    """``base`` with the counts given on the command line (None where none is given); the
    timeout, unless given, grows with the pods (30 pods/s at least, as kube-scheduler's slowest
    workloads here)."""
    if nodes is None and pods is None and init_pods is None and timeout is None:
        return None
    n = base.nodes if nodes is None else nodes
    m = base.pods if pods is None else pods
    init = min(base.init_pods, n) if init_pods is None else init_pods
    for what, v in (("--nodes", n), ("--pods", m), ("--init-pods", init)):
        if v < (1 if what != "--init-pods" else 0):
            raise SystemExit(f"{what} must be {'>= 0' if what == '--init-pods' else '>= 1'}, got {v}")
    return Size(nodes=n, init_pods=init, pods=m, timeout=timeout or max(base.timeout, m / 30))


def main(argv: list[str], workload: str) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m bench {workload}")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--nodes", type=int, default=None, help="KWOK nodes (overrides --size's)")
    ap.add_argument("--pods", type=int, default=None, help="measured pods (overrides --size's)")
    ap.add_argument("--init-pods", type=int, default=None,
                    help="init pods bound before the round (default: --size's, at most one per node)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds for one round's pods to bind")
    ap.add_argument("--profile-seconds", type=float, default=0.0,
                    help="profile each contender this long from its first bind (py-spy / kube-scheduler's pprof)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--qps", type=float, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--results", type=Path, default=None,
                    help="append the record to this file (default bench/results/<date>.json)")
    ap.add_argument("--contenders", default=None,
                    help="comma-separated subset of the workload's contenders, baseline first "
                         "(e.g. kube-scheduler,kube-scheduler+extender-cache)")
    args = ap.parse_args(argv)
    picked = tuple(args.contenders.split(",")) if args.contenders else None
    names = LIVE_WORKLOADS if workload == "live" else (workload,)
    for n in names:
        if n in ("Coscheduling", "Gangs") and not _coscheduling_available():
            print(f"{n}: skipped (kubesched.plugins.coscheduling missing)")
            continue
        wl = WORKLOADS[n]
        size = custom_size(wl.sizes.get(args.size) or SIZES[args.size], args.nodes, args.pods, args.init_pods,
                           args.timeout)
        run_workload(n, "custom" if size else args.size, args.rounds, args.qps, args.burst,
                     args.workdir / n if args.workdir else None, save=not args.no_save, contenders=picked, size=size,
                     profile_seconds=args.profile_seconds, results=args.results)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:], "SchedulingBasic"))
