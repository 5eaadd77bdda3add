"""Capacity what-ifs, each answered by full simulations with the real profile (custom plugins
included), never by arithmetic on requests:

* ``how_many_fit``: how many more replicas of a pod template fit on the cluster (the question of
  kubernetes-sigs/cluster-capacity). The cluster's own pending pods are scheduled first; then
  replicas are fed in growing batches (64, 128, ... 4,096) into the same run until one does not
  fit. Replicas are identical, so once one fails every later one would fail the same way: the
  rest of its batch is dropped unscheduled. The answer: the count, each node's share, and the
  first failure's FitError (the limiting reason). Replicas never preempt (``preemptionPolicy:
  Never``): the question is what fits in the capacity that is free.
* ``fewest_nodes``: the fewest nodes of a template to add so that every pending pod of the cluster
  and every replica of the workload is placed, with no preemption (cluster-autoscaler's question).
  A search over node counts: a lower bound from the summed requests, doubling until everything
  fits, then bisection; each probe a full simulation. Pods that an empty node of the template would
  refuse (checked as cluster-autoscaler checks a pending pod against a node group's template node:
  PreFilter and Filter against one empty template node added to the probe's final state) cannot be
  helped by such nodes: refused on the cluster as it is, they are left out of the question and
  named; refused later in the search (say, a zone spread that the other zones cap), the search
  stops there and names them.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.api.quantity import milli_value, value
from kubesched.config.load import SchedulerConfig
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.registry import Registry
from kubesched.simulate.engine.records import PRE_BOUND, SCHEDULED
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.workload import PodTemplate, latest_timestamp
from kubesched.snapshot.pod import PodInfo

__all__ = ["FitAnswer", "NodeTemplate", "ScaleAnswer", "fewest_nodes", "how_many_fit"]

#: Replicas fed per batch: the first, and the most (batches double in between).
FIRST_BATCH, MAX_BATCH = 64, 4096
#: Annotation of a node template giving the cost of one such node (default 1).
COST_ANNOTATION = "kubesched.io/cost"

Progress = Callable[[str], None]


def _classes(cluster: ClusterInput) -> dict[str, dict[str, Any]]:
    return cluster.objects.get("PriorityClass", {})


# -- (a) how many more replicas fit ----------------------------------------------------------------------
@dataclass
class FitAnswer:
    template: PodTemplate
    #: Replicas that fit, in addition to what the cluster runs.
    fits: int
    #: Node → replicas placed there, most first.
    per_node: dict[str, int]
    #: The first replica that did not fit: its FitError, and how many nodes gave each reason.
    message: str
    reasons: dict[str, int]
    #: True when every free pod slot was used before any replica failed.
    slots_exhausted: bool
    seconds: float
    #: Pending pods of the cluster itself that did not fit (scheduled before the replicas).
    cluster_unplaced: int = 0


class _ReplicaFeed:
    """Feeds replicas of one template to a simulation in growing batches; on the first failure,
    drops the rest of the batch (identical pods, same state: they would fail alike)."""

    def __init__(self, template: PodTemplate, cluster: ClusterInput, limit: int) -> None:
        self.template = template
        self.classes = _classes(cluster)
        self.created = latest_timestamp(cluster.pods) + 1.0
        self.limit = limit
        self.next_index = 0
        self.batch = FIRST_BATCH
        self.uids: set[str] = set()
        self.unattempted: dict[str, None] = {}  # insertion-ordered set
        self.failed_uid: str | None = None
        self.sim: Simulation | None = None

    def __call__(self, sim: Simulation) -> list[PodInfo]:
        self.sim = sim
        if self.failed_uid is not None or self.next_index >= self.limit:
            return []
        n = min(self.batch, self.limit - self.next_index)
        self.batch = min(self.batch * 2, MAX_BATCH)
        pods = []
        for i in range(self.next_index, self.next_index + n):
            pod = PodInfo.from_raw(self.template.replica(i, self.created + i, self.classes, never_preempt=True))
            pods.append(pod)
            self.uids.add(pod.uid)
            self.unattempted[pod.uid] = None
        self.next_index += n
        return pods

    def on_attempt(self, pod: PodInfo, profile: str, node: str | None) -> None:
        del profile
        if pod.uid not in self.uids:
            return
        self.unattempted.pop(pod.uid, None)
        if node is None and self.failed_uid is None:
            self.failed_uid = pod.uid
            assert self.sim is not None
            for uid in list(self.unattempted):
                self.sim.cluster.delete_pod(uid)
                self.sim.recorder.records.pop(uid, None)
                self.uids.discard(uid)
            self.unattempted.clear()


def free_pod_slots(cluster: ClusterInput) -> int:
    """Pods the schedulable nodes can still take: allocatable ``pods`` minus the pods bound there."""
    bound = Counter((p.get("spec") or {}).get("nodeName") for p in cluster.pods)
    total = 0
    for n in cluster.nodes:
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        alloc = ((n.get("status") or {}).get("allocatable") or {}).get("pods", 0)
        total += max(0, value(alloc) - bound[(n.get("metadata") or {}).get("name")])
    return total


async def how_many_fit(
    config: SchedulerConfig, registry: Registry, cluster: ClusterInput, template: PodTemplate, seed: int = 0
) -> FitAnswer:
    started = time.perf_counter()
    limit = free_pod_slots(cluster)
    feed = _ReplicaFeed(template, cluster, limit)
    sim = Simulation(config, registry, cluster, seed=seed, feed=feed, on_attempt=feed.on_attempt)
    result = await sim.run()
    placed: Counter[str] = Counter()
    for uid in feed.uids:
        rec = result.records.get(uid)
        if rec is not None and rec.status == SCHEDULED and rec.node is not None:
            placed[rec.node] += 1
    failed = result.records.get(feed.failed_uid) if feed.failed_uid is not None else None
    cluster_unplaced = sum(
        1 for uid, rec in result.records.items()
        if uid not in feed.uids and rec.status not in (SCHEDULED, PRE_BOUND)
    )
    return FitAnswer(
        template=template,
        fits=sum(placed.values()),
        per_node=dict(sorted(placed.items(), key=lambda kv: (-kv[1], kv[0]))),
        message=failed.message if failed is not None else "",
        reasons=dict(failed.reasons) if failed is not None else {},
        slots_exhausted=failed is None,
        seconds=time.perf_counter() - started,
        cluster_unplaced=cluster_unplaced,
    )


# -- (b) fewest nodes to add -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeTemplate:
    """A Node object used as a template: added nodes are named ``<name>-<i>``."""

    name: str
    raw: dict[str, Any]
    cost: float
    where: str

    def node(self, index: int) -> dict[str, Any]:
        return self.named(f"{self.name}-{index}")

    def named(self, name: str) -> dict[str, Any]:
        meta = dict(self.raw.get("metadata") or {})
        meta["name"] = name
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/hostname": name}
        meta.pop("uid", None)
        return {**self.raw, "metadata": meta}

    def allocatable(self) -> dict[str, int]:
        alloc = (self.raw.get("status") or {}).get("allocatable") or {}
        return {str(k): milli_value(v) if k == "cpu" else value(v) for k, v in alloc.items()}


@dataclass
class Probe:
    """One simulation of the search: nodes added, pods left unplaced, preemptions."""

    nodes: int
    unplaced: int
    preemptions: int
    seconds: float


@dataclass
class ScaleAnswer:
    template: NodeTemplate
    #: The fewest nodes to add (None: no number up to ``max_nodes`` places everything).
    nodes: int | None
    probes: list[Probe] = field(default_factory=list)
    #: Pods no node of this template would take even empty (pod → why), left out of the question.
    hopeless: dict[str, str] = field(default_factory=dict)
    #: Pods unplaced at the largest count tried (pod → why), when the search ended without an answer:
    #: ``max_nodes`` reached, or (``stuck``) an empty node of the template refuses every one of them.
    unplaced: dict[str, str] = field(default_factory=dict)
    stuck: bool = False
    #: Lower bound from the summed requests (no simulation needed to rule out fewer nodes).
    lower_bound: int = 0
    #: Added node → pods the fitting run placed on it.
    added_usage: dict[str, int] = field(default_factory=dict)

    @property
    def cost(self) -> float | None:
        return None if self.nodes is None else self.nodes * self.template.cost


def _requests(pod: PodInfo) -> dict[str, int]:
    r = pod.requests
    out = {"cpu": r.milli_cpu, "memory": r.memory, "pods": 1}
    out.update({str(k): int(v) for k, v in (r.scalar or {}).items()})
    return out


def _lower_bound(cluster: ClusterInput, pending: Sequence[PodInfo], template: NodeTemplate) -> int:
    """Fewest template nodes that can hold what the pending pods ask beyond the cluster's free
    capacity, summed per resource: a necessary condition, so fewer nodes need not be simulated."""
    need: Counter[str] = Counter()
    for pod in pending:
        need.update(_requests(pod))
    used: dict[str, Counter[str]] = {}
    for raw in cluster.pods:
        node = (raw.get("spec") or {}).get("nodeName")
        if node:
            used.setdefault(node, Counter()).update(_requests(PodInfo.from_raw(raw)))
    free: Counter[str] = Counter()
    for n in cluster.nodes:
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        on_node = used.get(str((n.get("metadata") or {}).get("name")), Counter())
        for res, amount in NodeTemplate("", n, 0, "").allocatable().items():
            free[res] += max(0, amount - on_node[res])
    per_node = template.allocatable()
    nodes = 0
    for res, amount in need.items():
        missing = amount - free[res]
        if missing > 0 and per_node.get(res, 0) > 0:  # else the template cannot help: the simulation says so
            nodes = max(nodes, math.ceil(missing / per_node[res]))
    return nodes


def _with_nodes(cluster: ClusterInput, template: NodeTemplate, count: int, extra_pods: list[dict[str, Any]]
                ) -> ClusterInput:
    return replace(cluster, nodes=[*cluster.nodes, *(template.node(i) for i in range(count))],
                   pods=[*cluster.pods, *extra_pods], warnings=[])


def _unplaced(result: SimulationResult) -> dict[str, str]:
    return {rec.key: rec.message for rec in result.records.values() if rec.status not in (SCHEDULED, PRE_BOUND)}


def _refused_by_empty_template(result: SimulationResult, template: NodeTemplate) -> dict[str, str]:
    """The unplaced pods that an empty node of ``template``, added to the final state of ``result``,
    would refuse too (cluster-autoscaler's check of a pod against a node group's template node):
    adding such nodes cannot help them. Pod → the rejection."""
    sched = result.scheduler
    name = f"{template.name}-probe"
    result.cluster.add_node(template.named(name))
    table = sched.cache.table
    row = table.row_of(name)
    out: dict[str, str] = {}
    for rec in result.records.values():
        if rec.status in (SCHEDULED, PRE_BOUND):
            continue
        pod = result.cluster.pods.get(rec.uid)
        fwk = sched.frameworks.get(rec.profile)
        if pod is None or fwk is None or row is None:
            continue
        state, diagnosis = CycleState(), Diagnosis()
        rows, st = fwk.pre_filter_rows(state, pod, table.alive_rows(), diagnosis)
        if st.is_success and row in set(rows.tolist()):
            st = fwk.filter_node(state, pod, row)
        elif st.is_success:
            st = diagnosis.node_to_status.get(row) or st
        if not st.is_success:
            out[rec.key] = f"{st.plugin}: {st.message}" if st.plugin else st.message
    result.cluster.delete_node(name)
    return out


async def fewest_nodes(
    config: SchedulerConfig, registry: Registry, cluster: ClusterInput, workload: Sequence[PodTemplate],
    template: NodeTemplate, seed: int = 0, max_nodes: int = 1000, progress: Progress | None = None,
) -> ScaleAnswer:
    classes = _classes(cluster)
    created = latest_timestamp(cluster.pods) + 1.0
    extra: list[dict[str, Any]] = []
    for t in workload:
        for i in range(t.replicas):
            extra.append(t.replica(i, created + len(extra), classes))
    pending = [PodInfo.from_raw(p) for p in [*cluster.pods, *extra] if not (p.get("spec") or {}).get("nodeName")]
    answer = ScaleAnswer(template, None, lower_bound=_lower_bound(cluster, pending, template))
    results: dict[int, SimulationResult] = {}

    async def fits(count: int) -> bool:
        if progress is not None:
            progress(f"{template.name}: simulating with {count:,} node(s) added")
        started = time.perf_counter()
        result = await Simulation(config, registry, _with_nodes(cluster, template, count, extra), seed=seed).run()
        left = _unplaced(result)
        answer.probes.append(Probe(count, len(left), len(result.preemptions), time.perf_counter() - started))
        results[count] = result
        ok = not (set(left) - set(answer.hopeless)) and not result.preemptions
        if not ok and count and not result.preemptions:
            # Pods that even an empty node of the template refuses now: more of them cannot help.
            refused = _refused_by_empty_template(result, template)
            if set(left) - set(answer.hopeless) <= set(refused):
                answer.stuck = True
                answer.unplaced = {pod: refused[pod] for pod in left if pod not in answer.hopeless}
        return ok

    if await fits(0):
        answer.nodes = 0
        return answer
    answer.hopeless = _refused_by_empty_template(results[0], template)
    if not set(_unplaced(results[0])) - set(answer.hopeless) and not results[0].preemptions:
        answer.nodes = 0  # no node of this template helps any pod that is left
        return answer
    lo, hi = 0, max(1, answer.lower_bound)  # lo: known not to be enough
    while not await fits(hi):
        if answer.stuck:
            return answer
        lo, hi = hi, hi * 2
        if hi > max_nodes:
            answer.unplaced = _unplaced(results[lo])
            return answer
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if await fits(mid):
            hi = mid
        else:
            lo = mid
    answer.stuck, answer.unplaced = False, {}  # a probe below the answer may have looked stuck
    answer.nodes = hi
    table = results[hi].scheduler.cache.table
    for i in range(hi):
        name = template.node(i)["metadata"]["name"]
        row = table.row_of(name)
        answer.added_usage[name] = len(table.pods[row]) if row is not None else 0
    return answer
