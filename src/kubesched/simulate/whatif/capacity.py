"""Capacity what-ifs, each answered by full simulations with the real profile (custom plugins
included), never by arithmetic on requests:

* ``how_many_fit``: how many more replicas of a pod template fit on the cluster (the question of
  kubernetes-sigs/cluster-capacity). The cluster's own pending pods are scheduled first (and the
  victims of their preemptions, recreated by their controllers, rescheduled or not); then
  replicas are fed in growing batches (64, 128, ... 4,096) into the same run until one does not
  fit. Replicas are identical, so once one fails every later one would fail the same way: the
  rest of its batch is dropped unscheduled. The answer: the count, each node's share, and the
  first failure's FitError (the limiting reason). Replicas never preempt (``preemptionPolicy:
  Never``): the question is what fits in the capacity that is free.
* ``fewest_nodes``: the fewest nodes of a template to add so that every pod runs — every pending
  pod of the cluster, every replica of the workload, and every preemption victim (evicted, then
  rescheduled by its controller) — except the pods no node of the template can help
  (cluster-autoscaler's question). Preemption is what the scheduler does, so it is simulated, and
  its victims count as what they are (capacity_outcome.py): rescheduled, not rescheduled (more
  nodes may help), or deleted for good (a bare pod). A search over node counts: a lower bound from
  the summed requests, doubling until everything runs, then bisection; each probe a full
  simulation. Pods that an empty node of the template refuses (checked as cluster-autoscaler
  checks a pending pod against a node group's template node) cannot be helped by such nodes: those
  refused on the cluster as it is are left out of the question from the start and named with the
  filter's reason; when, later in the doubling, every pod still not running is refused so, adding
  nodes no longer changes the outcome: the doubling stops there, those pods are named too, and
  the bisection finds the fewest nodes that reach that outcome.
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
from kubesched.framework.registry import Registry
from kubesched.simulate.engine.records import SCHEDULED
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.workload import PodTemplate, latest_timestamp
from kubesched.simulate.whatif.capacity_outcome import (
    Outcome,
    Victim,
    VictimReplacements,
    outcome_of,
    refused_by_empty_template,
)
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
    #: Pods the cluster's pending pods preempted, and whether their controllers' replacements were
    #: rescheduled (before the replicas came).
    victims: list[Victim] = field(default_factory=list)


class _ReplicaFeed:
    """Feeds replicas of one template to a simulation in growing batches; on the first failure,
    drops the rest of the batch (identical pods, same state: they would fail alike). Victims of
    preemption, recreated by their controllers, go first whenever there are any."""

    def __init__(self, template: PodTemplate, cluster: ClusterInput, limit: int) -> None:
        self.template = template
        self.classes = _classes(cluster)
        self.created = latest_timestamp(cluster.pods) + 1.0
        self.victims = VictimReplacements(cluster.pods, self.created)
        self.limit = limit
        self.next_index = 0
        self.batch = FIRST_BATCH
        self.uids: set[str] = set()
        self.unattempted: dict[str, None] = {}  # insertion-ordered set
        self.failed_uid: str | None = None
        self.sim: Simulation | None = None

    def __call__(self, sim: Simulation) -> list[PodInfo]:
        self.sim = sim
        replacements = self.victims(sim)
        if replacements:
            return replacements
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
        self.victims.know(pods)
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
    outcome = outcome_of(result, feed.victims, ignore=feed.uids)
    return FitAnswer(
        template=template,
        fits=sum(placed.values()),
        per_node=dict(sorted(placed.items(), key=lambda kv: (-kv[1], kv[0]))),
        message=failed.message if failed is not None else "",
        reasons=dict(failed.reasons) if failed is not None else {},
        slots_exhausted=failed is None,
        seconds=time.perf_counter() - started,
        cluster_unplaced=len(outcome.unplaced),
        victims=outcome.victims,
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
    """One simulation of the search: nodes added, pods that do not run at the end (unplaced, or
    evicted and not rescheduled), preemptions, and whether everything that can run does."""

    nodes: int
    unplaced: int
    preemptions: int
    seconds: float
    #: Victims of those preemptions: evicted, rescheduled (by their controllers), not rescheduled,
    #: deleted for good (see Outcome.counts).
    victims: dict[str, int] = field(default_factory=dict)
    #: Every pod runs but those no node of the template can help (as the search ended knowing them).
    fits: bool = False


@dataclass
class ScaleAnswer:
    template: NodeTemplate
    #: The fewest nodes to add (None: no number up to ``max_nodes`` places everything).
    nodes: int | None
    probes: list[Probe] = field(default_factory=list)
    #: Pods no node of this template can help (pod → why: the filter's reason on an empty node of
    #: the template), left out of the question: refused on the cluster as it is, or refused once
    #: adding nodes stopped changing the outcome (``saturated_at``).
    hopeless: dict[str, str] = field(default_factory=dict)
    #: Pods that do not run at the largest count tried (pod → why), when ``max_nodes`` was reached
    #: first: more nodes might help them.
    unplaced: dict[str, str] = field(default_factory=dict)
    #: The node count at which every pod not running was one no node of the template can help:
    #: adding nodes no longer changes the outcome, so the doubling stopped there (None: it did not).
    saturated_at: int | None = None
    #: Lower bound from the summed requests (no simulation needed to rule out fewer nodes).
    lower_bound: int = 0
    #: Added node → pods the answering run placed on it.
    added_usage: dict[str, int] = field(default_factory=dict)
    #: The preemption victims of the answering run (or of the largest count tried), and their fate.
    victims: list[Victim] = field(default_factory=list)

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
    capacity, summed per resource: a necessary condition, so fewer nodes need not be simulated.
    A running pod that a pending pod may preempt counts as free room (its victim may be deleted for
    good, or be one no template node can take, and then its room is the preemptor's for nothing)."""
    need: Counter[str] = Counter()
    for pod in pending:
        need.update(_requests(pod))
    preempting = max((p.priority for p in pending if p.spec.get("preemptionPolicy") != "Never"), default=None)
    used: dict[str, Counter[str]] = {}
    for raw in cluster.pods:
        node = (raw.get("spec") or {}).get("nodeName")
        pod = PodInfo.from_raw(raw)
        if node and not (preempting is not None and pod.priority < preempting):
            used.setdefault(node, Counter()).update(_requests(pod))
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


async def simulate_with_nodes(
    config: SchedulerConfig, registry: Registry, cluster: ClusterInput, template: NodeTemplate, count: int,
    extra_pods: list[dict[str, Any]], seed: int = 0,
) -> tuple[SimulationResult, Outcome]:
    """One probe: the cluster with ``count`` nodes of ``template`` added and ``extra_pods`` pending,
    preemption victims recreated by their controllers; its result and how it ends, pod by pod."""
    with_nodes = _with_nodes(cluster, template, count, extra_pods)
    victims = VictimReplacements(with_nodes.pods, latest_timestamp(with_nodes.pods) + 1.0)
    result = await Simulation(config, registry, with_nodes, seed=seed, feed=victims).run()
    return result, outcome_of(result, victims)


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
    answer = ScaleAnswer(template, None)
    runs: dict[int, tuple[SimulationResult, Outcome]] = {}

    async def probe(count: int) -> Outcome:
        if progress is not None:
            progress(f"{template.name}: simulating with {count:,} node(s) added")
        started = time.perf_counter()
        result, outcome = await simulate_with_nodes(config, registry, cluster, template, count, extra, seed)
        answer.probes.append(Probe(count, len(outcome.not_running), len(result.preemptions),
                                   time.perf_counter() - started, outcome.counts()))
        runs[count] = (result, outcome)
        return outcome

    def fits(count: int) -> bool:
        return set(runs[count][1].not_running) <= set(answer.hopeless)

    def added_usage(count: int) -> dict[str, int]:
        table = runs[count][0].scheduler.cache.table
        rows = {name: table.row_of(name) for name in (template.node(i)["metadata"]["name"] for i in range(count))}
        return {name: len(table.pods[row]) if row is not None else 0 for name, row in rows.items()}

    def saturated(count: int, fewer: int | None) -> dict[str, str]:
        """Pod → why, when adding nodes no longer changes the outcome at ``count``: an empty node of
        the template refuses every pod that does not run, and either an added node stays empty (no
        pod took it, so none would take one more) or the same pods did not run with ``fewer``
        (half as many: doubling the nodes changed nothing). Else {}. (An empty template node
        refusing a pod is not enough alone: more nodes can still help it indirectly, by taking the
        pods that keep it off a cluster node.)"""
        result, outcome = runs[count]
        left = list(outcome.not_running)
        unchanged = fewer is not None and set(runs[fewer][1].not_running) == set(left)
        if not count or not (unchanged or 0 in added_usage(count).values()):
            return {}
        refused = refused_by_empty_template(result, template, outcome, left)
        return refused if len(refused) == len(left) else {}

    first = await probe(0)
    if not first.not_running:
        return _finish(answer, 0, runs[0][1], {}, fits)
    # The lower bound leaves out the pods an empty template node refuses now: they need no room on
    # such nodes (and a pod no node can hold would inflate it past the answer).
    refused_now = refused_by_empty_template(runs[0][0], template, first, list(first.not_running))
    helped = [PodInfo.from_raw(p) for p in [*cluster.pods, *extra]
              if not (p.get("spec") or {}).get("nodeName") and _key(p) not in refused_now]
    answer.lower_bound = _lower_bound(cluster, helped, template)
    hi, fewer = min(max(1, answer.lower_bound), max_nodes), None
    while True:  # doubling: up to a count where every pod runs, or where more nodes change nothing
        outcome = await probe(hi)
        if not outcome.not_running:
            break
        hopeless = saturated(hi, fewer)
        if hopeless:
            answer.hopeless, answer.saturated_at = hopeless, hi
            break
        if hi >= max_nodes:
            answer.unplaced = outcome.not_running
            return _finish(answer, None, outcome, {}, fits)
        hi, fewer = min(hi * 2, max_nodes), hi
    # Bisection between the largest count known not to reach that outcome and the smallest known to
    # (the counts below were probed before the hopeless pods were known: judge them again).
    hi = min(n for n in runs if fits(n))
    lo = max((n for n in runs if n < hi and not fits(n)), default=-1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        await probe(mid)
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return _finish(answer, hi, runs[hi][1], added_usage(hi), fits)


def _finish(answer: ScaleAnswer, nodes: int | None, outcome: Outcome, usage: dict[str, int],
            fits: Callable[[int], bool]) -> ScaleAnswer:
    answer.nodes = nodes
    for p in answer.probes:
        p.fits = fits(p.nodes)
    answer.victims = outcome.victims
    answer.added_usage = usage
    return answer


def _key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
