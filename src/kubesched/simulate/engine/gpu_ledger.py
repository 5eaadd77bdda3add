"""Which milli of which GPU each bound pod holds, and the reference's fragmentation measure, for
the replay's metrics over time (engine/timeline.py).

A bound pod's GPUs are the ones its ``alibabacloud.com/gpu-index`` annotation names (written at
PreBind by a GPU-sharing plugin). A pod bound without one (its profile has no such plugin) is
placed as gpushare's own allocator would (hkust-adsl/kubernetes-scheduler-simulator
``pkg/type/open-gpu-share/cache/gpunodeinfo.go`` ``AllocateGpuId``): one GPU, the tightest that
fits (lowest index on ties); several, greedily from GPU 0, as many on one GPU as fit. Demand that
fits no GPU of its node (a GPU pod on a node without enough GPUs) is counted as ``unplaced``.

Fragmentation (``pkg/utils/frag.go`` ``NodeGpuShareFragAmount``, reported by
``pkg/simulator/analysis.go`` ``ClusterGpuFragReport`` as ``frag_gpu_milli``): for each typical
pod shape (``GetTypicalPods``: the most common shapes of the workload covering 95 % of its pods,
CPU-only ones included, as the experiments configure it) weighted by its share, a node's idle GPU
milli counts as fragmented unless the shape fits there (enough CPU left, its model, enough GPUs
with its milli free): then only the GPUs with less than its milli free count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesched.simulate.inputs.gpushare import MILLI, PodGpu, gpu_index, node_gpus, pod_gpu
from kubesched.snapshot.pod import PodInfo

__all__ = ["GpuLedger", "Shape", "typical_shapes"]

#: ``GetTypicalPods`` settings of the experiments (``scripts/generate_config_and_run.py``).
POPULARITY_THRESHOLD = 0.95
#: kube-scheduler's default CPU request of a container without one (``GetNonzeroRequests``).
DEFAULT_MILLI_CPU = 100


@dataclass(frozen=True, slots=True)
class Shape:
    """A pod shape as the reference counts it (``PodResource``): CPU milli and its GPU request."""

    milli_cpu: int
    gpu: PodGpu

    def key(self) -> tuple[int, int, int, str]:
        return (self.milli_cpu, self.gpu.milli, self.gpu.count, "|".join(self.gpu.models))


def pod_shape(pod: PodInfo) -> Shape:
    """The reference's ``GetPodResource``: the non-zero CPU request and the GPU annotations."""
    return Shape(pod.requests.non_zero_milli_cpu or DEFAULT_MILLI_CPU, pod_gpu(pod.raw))


def typical_shapes(shapes: Iterable[Shape]) -> list[tuple[Shape, float]]:
    """The most common shapes covering ``POPULARITY_THRESHOLD`` of the pods, with their shares
    renormalised to 1 (ties in count: the larger shape first, as the reference's reverse sort)."""
    counts = Counter(shapes)
    total = sum(counts.values())
    if not total:
        return []
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0].key()), reverse=True)
    kept: list[tuple[Shape, int]] = []
    covered = 0
    for shape, n in ordered:
        if covered >= POPULARITY_THRESHOLD * total:
            break
        kept.append((shape, n))
        covered += n
    return [(shape, n / covered) for shape, n in kept]


@dataclass
class _Node:
    model: str
    free: list[int]
    cpu_free: int = 0

    @property
    def idle(self) -> int:
        return sum(self.free)


@dataclass
class GpuLedger:
    shapes: list[tuple[Shape, float]]
    nodes: dict[str, _Node] = field(default_factory=dict)
    #: pod uid → (node, [(gpu, milli)]).
    held: dict[str, tuple[str, list[tuple[int, int]]]] = field(default_factory=dict)
    allocated: int = 0
    unplaced: int = 0
    #: Per-node fragmented milli, recomputed for the nodes changed since the last ``fragmented()``.
    _frag: dict[str, float] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)

    @property
    def capacity(self) -> int:
        return sum(len(n.free) for n in self.nodes.values()) * MILLI

    def node_changed(self, name: str, raw: dict[str, Any], cpu_free: int) -> None:
        count, model = node_gpus(raw)
        node = self.nodes.get(name)
        if node is None or len(node.free) != count:
            used: Counter[int] = Counter()
            for held_on, gpus in self.held.values():
                if held_on == name:
                    for i, milli in gpus:
                        used[i] += milli
            node = self.nodes[name] = _Node(model, [MILLI - used[i] for i in range(count)])
        node.model, node.cpu_free = model, cpu_free
        self._dirty.add(name)

    def node_deleted(self, name: str) -> None:
        self.nodes.pop(name, None)
        self._frag.pop(name, None)
        self._dirty.discard(name)

    def cpu_changed(self, name: str, cpu_free: int) -> None:
        node = self.nodes.get(name)
        if node is not None:
            node.cpu_free = cpu_free
            self._dirty.add(name)

    def bind(self, pod: PodInfo, cpu_free: int) -> None:
        gpu = pod_gpu(pod.raw)
        node = self.nodes.get(pod.node_name)
        if node is None:
            return
        node.cpu_free = cpu_free
        self._dirty.add(pod.node_name)
        if not gpu.total:
            return
        gpus = self._named(node, gpu, gpu_index(pod.raw)) or _allocate(node.free, gpu)
        if gpus is None:
            self.unplaced += gpu.total
            self.held[pod.uid] = (pod.node_name, [])
            return
        for i, milli in gpus:
            node.free[i] -= milli
        self.allocated += sum(m for _, m in gpus)
        self.held[pod.uid] = (pod.node_name, gpus)

    @staticmethod
    def _named(node: _Node, gpu: PodGpu, index: list[int] | None) -> list[tuple[int, int]] | None:
        if not index or len(index) != gpu.count or any(not 0 <= i < len(node.free) for i in index):
            return None
        return [(i, gpu.milli) for i in index]

    def release(self, pod: PodInfo, cpu_free: int | None) -> None:
        held = self.held.pop(pod.uid, None)
        if held is None:
            return
        name, gpus = held
        node = self.nodes.get(name)
        if not gpus:
            self.unplaced -= pod_gpu(pod.raw).total
        if node is None:
            return
        for i, milli in gpus:
            node.free[i] += milli
        self.allocated -= sum(m for _, m in gpus)
        if cpu_free is not None:
            node.cpu_free = cpu_free
        self._dirty.add(name)

    def idle(self) -> int:
        return sum(n.idle for n in self.nodes.values())

    def fragmented(self) -> float:
        for name in self._dirty:
            node = self.nodes.get(name)
            if node is not None:
                self._frag[name] = node_fragmentation(node.free, node.cpu_free, node.model, self.shapes)
        self._dirty.clear()
        return sum(self._frag.values())


def _allocate(free: list[int], gpu: PodGpu) -> list[tuple[int, int]] | None:
    """``AllocateGpuId`` without a named index."""
    if gpu.count == 1:
        best = None
        for i, f in enumerate(free):
            if f >= gpu.milli and (best is None or f < free[best]):
                best = i
        return None if best is None else [(best, gpu.milli)]
    left = list(free)
    chosen: list[tuple[int, int]] = []
    i = 0
    while i < len(left) and len(chosen) < gpu.count:
        if left[i] >= gpu.milli:
            chosen.append((i, gpu.milli))
            left[i] -= gpu.milli
        else:
            i += 1
    return chosen if len(chosen) == gpu.count else None


def node_fragmentation(free: list[int], cpu_free: int, model: str, shapes: list[tuple[Shape, float]]) -> float:
    """``NodeGpuShareFragAmount(...).FragAmountSumExceptQ3()`` of one node."""
    idle = sum(free)
    if not idle:
        return 0.0
    frag = 0.0
    for shape, share in shapes:
        gpu = shape.gpu
        fits_gpu = gpu.milli > 0 and gpu.accepts(model) and sum(1 for f in free if f >= gpu.milli) >= gpu.count
        if fits_gpu and cpu_free >= shape.milli_cpu:  # Q3: only the GPUs too small for it are lost
            frag += share * sum(f for f in free if f < gpu.milli)
        else:  # Q1, Q2, Q4, XL, XR, no access: every idle milli
            frag += share * idle
    return frag
