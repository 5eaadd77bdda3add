"""A scenario replayed in virtual time (inputs/scenario.py), and the metrics sampled on the way.

The runner (engine/runner.py) asks ``next_time()`` when to wake besides backoffs and Permit
deadlines, and calls ``apply_due(now)`` at every wake: due departures first (freeing what they
held), then node events, then arrivals, each in time order, file order on ties. A pod with a
lifetime is deleted that long after its bind (``pod_bound``). Removing a node deletes the pods
bound to it, as the pod garbage collector deletes the pods of a node that is gone.

``sample(now)`` records the state whenever it changed since the last sample, just before the
clock jumps and at the end: one row per point of virtual time, in columns (``Samples``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.gpu_metrics import GpuMetrics
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.inputs.scenario import NodeEvent, Scenario, arrival_pod
from kubesched.snapshot.gpushare.model import gpu_request_or_none
from kubesched.snapshot.gpushare.shapes import pod_shape
from kubesched.snapshot.gpushare.typical_pods import typical_pods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, MEMORY, NodeTable

__all__ = ["SAMPLE_COLUMNS", "Samples", "Timeline", "allocation_at_demand", "demand_curves", "scenario_input"]

#: Same-time order: what leaves frees room first, then nodes change, then pods arrive.
_DEPART, _NODE, _ARRIVE = 0, 1, 2

SAMPLE_COLUMNS = (
    "t", "arrivedPods", "arrivedGpuMilli", "pendingPods", "boundPods", "cpuAllocation", "memoryAllocation",
    "gpuMilliAllocated", "gpuMilliCapacity", "gpuAllocation", "idleGpuMilli", "fragmentedGpuMilli",
    "unplacedGpuMilli",
)


def scenario_input(scenario: Scenario) -> ClusterInput:
    """The cluster at time 0: the scenario's nodes, no pods (they arrive on the timeline)."""
    return ClusterInput(nodes=list(scenario.nodes), pods=[], objects={}, skipped={}, source=scenario.source,
                        warnings=list(scenario.warnings))


@dataclass
class Samples:
    columns: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in SAMPLE_COLUMNS})

    def add(self, row: dict[str, float]) -> None:
        for c in SAMPLE_COLUMNS:
            self.columns[c].append(row[c])

    def __len__(self) -> int:
        return len(self.columns["t"])


def _demand_percent(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the arrived GPU demand in whole percent of the capacity (NaN: no capacity), and
    the capacity."""
    cols = samples.columns
    capacity = np.asarray(cols["gpuMilliCapacity"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        arrived = np.where(capacity > 0, np.asarray(cols["arrivedGpuMilli"]) / capacity * 100, np.nan)
    return np.round(arrived), capacity


def _mean_at(rounded: np.ndarray, values: np.ndarray, percent: int) -> float | None:
    """The mean of ``values`` over the samples whose demand rounds to ``percent`` (else within one
    point of it), rounded to 0.01; None when no sample is that close."""
    hit = rounded == percent
    if not hit.any():
        hit = (rounded >= percent - 1) & (rounded <= percent + 1)
    return round(float(values[hit].mean()), 2) if hit.any() else None


def _gpu_allocation_percent(samples: Samples, capacity: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(capacity > 0,
                        np.round(np.asarray(samples.columns["gpuMilliAllocated"]) / capacity * 100, 2), np.nan)


def allocation_at_demand(samples: Samples, percent: int) -> float | None:
    """GPU allocation (%) when the arrived GPU demand is ``percent`` % of the capacity, as the
    reference's ``experiments/analysis/merge_alloc_discrete.py``: the mean allocation of the
    samples whose demand rounds to it (else within one point of it), rounded to 0.01."""
    rounded, capacity = _demand_percent(samples)
    if not len(capacity):
        return None
    return _mean_at(rounded, _gpu_allocation_percent(samples, capacity), percent)


def demand_curves(samples: Samples) -> dict[str, dict[int, float]]:
    """Against the arrived GPU demand, every whole percent from 1 to the last sample's: the GPU
    allocation (%) as ``allocation_at_demand`` reads it, and the fragmentation ratio (%: fragmented
    GPU milli of the idle GPU milli, 0 when none is idle) read the same way. A percent no sample
    comes within one point of is left out (a jump in demand: one pod asking for many GPUs)."""
    rounded, capacity = _demand_percent(samples)
    curves: dict[str, dict[int, float]] = {"gpuAllocation": {}, "fragmentationRatio": {}}
    if not len(capacity) or np.isnan(rounded).all():
        return curves
    allocation = _gpu_allocation_percent(samples, capacity)
    idle = np.asarray(samples.columns["idleGpuMilli"], dtype=float)
    fragmented = np.asarray(samples.columns["fragmentedGpuMilli"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(idle > 0, np.round(fragmented / idle * 100, 2), 0.0)
    for percent in range(1, int(np.nanmax(rounded)) + 1):
        for name, values in (("gpuAllocation", allocation), ("fragmentationRatio", ratio)):
            value = _mean_at(rounded, values, percent)
            if value is not None:
                curves[name][percent] = value
    return curves


#: Up to this many rows changed since the last sample, the CPU and memory sums are moved row by
#: row in Python (numpy's per-call cost is the work for a row or two).
_FEW_ROWS = 16


class Timeline:
    def __init__(self, scenario: Scenario, cluster: SimulatedCluster, table: NodeTable,
                 now: Callable[[], float], admit: Callable[[PodInfo], bool],
                 queue_length: Callable[[], int]) -> None:
        self.scenario = scenario
        self._cluster = cluster
        self._table = table
        self._now = now
        #: Called with each arriving pod before the cluster gets it (records it, fixes its
        #: profile; False: it matches no profile and stays out).
        self._admit = admit
        self._queue_length = queue_length
        self._seq = itertools.count()
        self._heap: list[tuple[float, int, int, Any]] = []
        for i, arrival in enumerate(scenario.arrivals):
            self._push(arrival.at, _ARRIVE, i)
        for event in scenario.node_events:
            self._push(event.at, _NODE, event)
        self.total_arrivals = len(scenario.arrivals)
        self._lifetimes: dict[str, float] = {}
        #: Every arrival's pod as parsed before the run (its template: no arrival time, no uid), for
        #: the typical pods here and the workload the runner announces to the plugins.
        self.arrival_pods = [PodInfo.from_raw(a.pod) for a in scenario.arrivals]
        self.gpu = GpuMetrics(table, typical_pods(pod_shape(p) for p in self.arrival_pods))
        self.samples = Samples()
        self.arrived = 0
        self.arrived_gpu_milli = 0
        self.departed = 0
        self.bound = 0
        self.deleted_with_node = 0
        self._changed = True
        #: (table generation, CPU and memory allocation) of the last sample: an arrival that only
        #: waits in the queue changes neither.
        self._ratios: tuple[int, float, float] = (-1, 0.0, 0.0)
        #: (table node generation, CPU and memory allocatable of the alive nodes).
        self._allocatable: tuple[int, int, int] = (-1, 0, 0)
        #: CPU and memory requested on the alive nodes, and per row, as of ``row_clock``
        #: ``_requested_clock`` (of node generation ``_requested_generation``): moved by the rows
        #: the table's change log says changed since (``_requested``).
        self._requested_generation = -1
        self._requested_clock = -1
        self._requested_rows = np.zeros((2, 0), dtype=np.int64)
        self._requested_totals = (0, 0)
        cluster.watchers.append(self)

    def _push(self, at: float, rank: int, payload: Any) -> None:
        heapq.heappush(self._heap, (at, rank, next(self._seq), payload))

    # -- the replay ---------------------------------------------------------------------------------
    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def apply_due(self, now: float) -> int:
        """Apply every event due at ``now``; how many."""
        n = 0
        while self._heap and self._heap[0][0] <= now:
            _, rank, _, payload = heapq.heappop(self._heap)
            n += 1
            if rank == _DEPART:
                if payload in self._cluster.pods:
                    self.departed += 1
                    self._cluster.delete_pod(payload)
            elif rank == _NODE:
                self._node_event(payload)
            else:
                arrival = self.scenario.arrivals[payload]
                pod = PodInfo.from_raw(arrival_pod(arrival, payload))
                if arrival.lifetime is not None:
                    self._lifetimes[pod.uid] = arrival.lifetime
                self.arrived += 1
                request = gpu_request_or_none(pod)  # kept in the pod's memo for GpuShare
                self.arrived_gpu_milli += request.total_milli if request is not None else 0
                if self._admit(pod):
                    self._cluster.add_pod(pod)
        return n

    def _node_event(self, event: NodeEvent) -> None:
        cluster = self._cluster
        if event.action == "add":
            assert event.node is not None
            cluster.add_node(event.node)
            return
        raw = cluster.nodes.get(event.name)
        if raw is None:
            return  # removed before: nothing to change
        if event.action == "remove":
            for pod in [p for p in cluster.pods.values() if p.node_name == event.name]:
                self.deleted_with_node += 1
                cluster.delete_pod(pod.uid)
            cluster.delete_node(event.name)
            return
        spec = dict(raw.get("spec") or {})
        spec["unschedulable"] = event.action == "cordon"
        cluster.add_node({**raw, "spec": spec})

    # -- ClusterWatcher -----------------------------------------------------------------------------
    def pod_added(self, pod: PodInfo) -> None:
        self._changed = True

    def pod_bound(self, pod: PodInfo) -> None:
        self._changed = True
        self.bound += 1
        lifetime = self._lifetimes.pop(pod.uid, None)
        if lifetime is not None:
            self._push(self._now() + lifetime, _DEPART, pod.uid)

    def pod_deleted(self, pod: PodInfo) -> None:
        self._changed = True
        self.bound -= 1 if pod.node_name else 0
        self._lifetimes.pop(pod.uid, None)

    def node_changed(self, raw: dict[str, Any]) -> None:
        self._changed = True

    def node_deleted(self, name: str) -> None:
        self._changed = True

    # -- metrics ------------------------------------------------------------------------------------
    def sample(self, now: float) -> None:
        if not self._changed:
            return
        self._changed = False
        table = self._table
        if self._ratios[0] != table.generation:  # a pod or node came, went or changed since
            alive = table.alive_rows()
            if self._allocatable[0] != table.node_generation:  # only a node change moves these
                self._allocatable = (table.node_generation, int(table.allocatable_by_resource[CPU, alive].sum()),
                                     int(table.allocatable_by_resource[MEMORY, alive].sum()))

            requested = self._requested()

            def ratio(col: int) -> float:  # integer sums: the same whatever order they are taken in
                total = self._allocatable[1 if col == CPU else 2]
                return round(float(requested[0 if col == CPU else 1]) / total, 6) if total else 0.0

            self._ratios = (table.generation, ratio(CPU), ratio(MEMORY))
        _, cpu_allocation, memory_allocation = self._ratios
        gpu = self.gpu
        capacity, allocated, idle = gpu.totals()
        self.samples.add({
            "t": now, "arrivedPods": self.arrived, "arrivedGpuMilli": self.arrived_gpu_milli,
            "pendingPods": self._queue_length(), "boundPods": self.bound,
            "cpuAllocation": cpu_allocation, "memoryAllocation": memory_allocation,
            "gpuMilliAllocated": allocated, "gpuMilliCapacity": capacity,
            "gpuAllocation": round(allocated / capacity, 6) if capacity else 0.0,
            "idleGpuMilli": idle, "fragmentedGpuMilli": round(gpu.fragmented(), 2),
            "unplacedGpuMilli": gpu.unplaced(),
        })

    def _requested(self) -> tuple[int, int]:
        """CPU and memory requested on the alive nodes: summed again after a node change (or
        when many rows changed), else moved by each row the table's change log says changed since
        the last call (every pod counted on or taken off a row touches it). Integers: the same
        sums in any order."""
        table = self._table
        changed = np.flatnonzero(table.row_versions > self._requested_clock)
        self._requested_clock = table.row_clock
        kept = self._requested_rows
        if self._requested_generation != table.node_generation or len(changed) > _FEW_ROWS \
                or kept.shape[1] < len(table.alive):
            self._requested_generation = table.node_generation
            alive = table.alive_rows()
            kept = self._requested_rows = table.requested_by_resource[[CPU, MEMORY]].copy()
            self._requested_totals = (int(kept[0, alive].sum()), int(kept[1, alive].sum()))
            return self._requested_totals
        cpu_total, memory_total = self._requested_totals
        requested, alive_mask = table.requested_by_resource, table.alive
        for row in changed.tolist():
            if not alive_mask[row]:
                continue
            cpu, memory = int(requested[CPU, row]), int(requested[MEMORY, row])
            cpu_total += cpu - int(kept[0, row])
            memory_total += memory - int(kept[1, row])
            kept[0, row], kept[1, row] = cpu, memory
        self._requested_totals = (cpu_total, memory_total)
        return self._requested_totals

    def to_json(self) -> dict[str, Any]:
        """The ``timeline`` member of the simulation document."""
        last = {c: v[-1] for c, v in self.samples.columns.items() if v}
        return {
            "source": self.scenario.source,
            "sequential": self.scenario.sequential,
            "arrivals": self.total_arrivals,
            "arrived": self.arrived,
            "departed": self.departed,
            "deletedWithNode": self.deleted_with_node,
            "nodeEvents": len(self.scenario.node_events),
            "typicalShapes": len(self.gpu.typical),
            "gpuAllocationAtArrivedDemand": {
                "100": allocation_at_demand(self.samples, 100),
                "130": allocation_at_demand(self.samples, 130),
            },
            "final": last,
            "samples": self.samples.columns,
        }
