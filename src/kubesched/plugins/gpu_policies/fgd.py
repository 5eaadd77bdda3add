"""FGD: Fragmentation Gradient Descent — place a pod where it grows the node's GPU
fragmentation the least (USENIX ATC '23, "Beware of Fragmentation").

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/fgd_score.go``
(``Score``, ``calculateGpuShareFragExtendScore``, ``allocateGpuIdBasedOnFGDScore``),
``pkg/type/resource.go`` ``NodeResource.Sub`` (the node after a pod of whole GPUs or none),
``pkg/utils/frag.go`` (the measure: :mod:`.fragmentation`; the target workload:
:mod:`.typical_pods`).

score = int(sigmoid((F(node) - F(node with the pod)) / 1000) * 100), F the fragmentation over the
typical pods. A share pod is tried on every GPU it fits on and the node gets the best GPU's score
(that GPU is the one FGD gives the pod when GpuShare's ``gpuSelMethod`` is ``FGD``, the
reference's setting); a pod of whole GPUs takes the first fully free GPUs, a pod without GPUs
only CPU. A pod with no requests at all scores 100 everywhere.

The typical pods: the ``typicalPods`` args; else the workload a shell announces before the run
(``Plugin.expect_workload``: the simulator replaying a scenario or trace hands every pod that will
arrive, as the reference's ``Simulate`` (``pkg/simulator/core.go``) calls ``SetTypicalPods`` on
the whole pod list before scheduling); else, live, computed once from the pods the scheduler
knows when it first scores (pending and placed).

Differences: a node whose GPU model the pod does not accept scores 0 (the reference returns an
Error, which GpuShare's Filter makes unreachable). The reference takes its typical pods from the
trace before ``TunePodsByNodeTotalResource`` inflates it; a replay announces the inflated
arrivals (random clones of the same pods: the same shapes, frequencies within sampling noise).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import MAX_NODE_SCORE, ScorePlugin, Scores
from kubesched.framework.status import Status
from kubesched.plugins.gpu_policies.common import sigmoid
from kubesched.snapshot.gpushare.fragmentation import NodeStates, fragmentation, state_measure
from kubesched.snapshot.gpushare.ledger import GpuLedger
from kubesched.snapshot.gpushare.model import GPU_MODEL, MILLI, GpuRequest
from kubesched.snapshot.gpushare.resources import NodeResources, accessible, model_access, node_resources
from kubesched.snapshot.gpushare.selection import exclusive_gpus
from kubesched.snapshot.gpushare.shapes import PodShape, pod_shape
from kubesched.snapshot.gpushare.typical_pods import TypicalPod, typical_pods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, IntArray, NodeTable, Rows


class FGDArgs(BaseModel):
    """``typicalPods``: the target workload (shapes and frequencies); omitted, it is computed
    from the pods known at the first score with ``popularityThreshold`` (percent),
    ``increaseStep``, ``includeCpuPods`` and ``gpuResWeight`` (the reference's
    ``typicalPodsConfig``, defaults as its experiments)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    typical_pods: list[TypicalPod] | None = None
    popularity_threshold: int = Field(default=95, ge=1, le=100)
    increase_step: int = Field(default=1, ge=1)
    include_cpu_pods: bool = True
    gpu_res_weight: float = Field(default=0.0, ge=0)


@dataclass(slots=True)
class _ShapeScores:
    """One pod shape's scores per table row and the ledger version of the row they were
    computed at (-1: never): a node's score reads only that node, so a row is scored again only
    when its pods or GPUs changed. With each score, the state it measured (``_state_keys``: CPU
    left, model, GPU count, free milli per GPU) and the GPU it chose for a share pod: Reserve's
    GPU choice, on the same state, reads it instead of measuring again."""

    versions: IntArray
    scores: IntArray
    best: IntArray
    #: Per row, the state its score was computed in (None: never).
    states: list[tuple[int, ...] | None]
    #: The most GPUs a stored state listed (states list each GPU up to their read's width).
    width: int
    #: (score, best GPU) by node state (``_state_keys``): a row scored again is often in a state
    #: some row was scored in before (nodes of one type, the same pods come and go).
    by_state: dict[tuple[int, ...], tuple[int, int]]

    @classmethod
    def empty(cls, size: int) -> _ShapeScores:
        return cls(np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=np.int64),
                   np.full(size, -1, dtype=np.int64), [None] * size, 0, {})

    def store(self, rows: Rows, versions: IntArray, keys: list[tuple[int, ...]],
              known: list[tuple[int, int]]) -> None:
        """Keep the (score, best GPU) of ``rows`` and the states (``_state_keys``) they were
        measured in."""
        if len(rows) <= _FEW_STATES:  # row by row: numpy's per-call cost is the work for one or two
            for row, version, key, (score, gpu) in zip(rows.tolist(), versions.tolist(), keys, known, strict=True):
                self.versions[row], self.scores[row], self.best[row] = version, score, gpu
                self.states[row] = key
        else:
            self.versions[rows] = versions
            self.scores[rows] = [k[0] for k in known]
            self.best[rows] = [k[1] for k in known]
            states = self.states
            for row, key in zip(rows.tolist(), keys, strict=True):
                states[row] = key
        if keys:
            self.width = max(self.width, max(len(key) for key in keys) - 3)

    def best_for(self, row: int, cpu_left: int, free: IntArray) -> int | None:
        """The GPU chosen for ``row`` if it was scored in exactly this state, else None (GPUs
        past a state's listed ones count as 0 free, up to the widest state stored)."""
        key = self.states[row]
        if key is None or self.versions[row] < 0 or key[0] != cpu_left or len(free) > self.width:
            return None
        stored = list(key[3:])
        stored += [0] * (self.width - len(stored))
        n = len(free)
        if stored[:n] != free.tolist() or any(stored[n:]):
            return None
        return int(self.best[row])


def _no_requests(pod: PodInfo) -> bool:
    r = pod.requests
    return not (r.milli_cpu or r.memory or r.ephemeral_storage or r.scalar)


class FGD(ScorePlugin):
    name = "FGD"
    args_model = FGDArgs

    def __init__(self, args: FGDArgs | None, handle: Handle) -> None:
        super().__init__(args or FGDArgs(), handle)
        self.args: FGDArgs = self.args
        self._typical: list[TypicalPod] | None = list(self.args.typical_pods) if self.args.typical_pods else None
        self._access_key: tuple[int, int] | None = None
        self._access_lut = np.zeros((0, 0), dtype=np.bool_)
        #: Scores per pod shape, valid while ``_cache_key`` (typical pods, GPU models, nodes) holds.
        self._cache: dict[PodShape, _ShapeScores] = {}
        self._cache_key: tuple[int, int, int, int] | None = None

    def _typical_of(self, pods: Iterable[PodInfo]) -> list[TypicalPod]:
        a = self.args
        return typical_pods((pod_shape(p) for p in pods), a.popularity_threshold, a.increase_step,
                            a.include_cpu_pods, a.gpu_res_weight)

    def expect_workload(self, pods: Sequence[PodInfo]) -> None:
        """The shell's workload (a replay: every pod that will arrive) is the target workload,
        as the reference's ``SetTypicalPods`` computes it from the whole pod list before the run;
        ``typicalPods`` args, when given, still win."""
        if not self.args.typical_pods:
            self._typical = self._typical_of(pods)

    def typical_pods(self, current: PodInfo | None = None) -> list[TypicalPod]:
        """The target workload: the args', the shell's (``expect_workload``), or else computed
        once from the pods known at the first score."""
        if self._typical is None:
            pods = [*self.handle.pending_pods(), *self.handle.table.all_pods(), *([current] if current else [])]
            self._typical = self._typical_of(pods)
        return self._typical

    def _access(self, table: NodeTable, pods: Sequence[TypicalPod]) -> np.ndarray:
        """``model_access`` of the typical pods, kept until a new model appears."""
        key = (id(pods), len(table.label_column(GPU_MODEL).values))
        if self._access_key != key:
            self._access_lut = model_access(table, [typical.gpu_model for typical in pods])
            self._access_key = key
        return self._access_lut

    def _scores(self, table: NodeTable, pod: PodInfo, res: NodeResources) -> tuple[IntArray, IntArray]:
        """(score per row, the best GPU per row for a share pod, -1 otherwise)."""
        shape = pod_shape(pod)
        pods = self.typical_pods(pod)
        access = self._access(table, pods)
        before = fragmentation(NodeStates(res.cpu_left, res.free, res.model_codes, access), pods)
        rows = res.free.shape[0]
        best = np.full(rows, -1, dtype=np.int64)
        if shape.shared:
            # One state per (row, GPU the pod fits on): cpu - pod cpu, that GPU - pod milli.
            fit_rows, fit_gpus = np.nonzero(res.exists & (res.free >= shape.milli_gpu))
            after_free = res.free[fit_rows].copy()
            after_free[np.arange(len(fit_rows)), fit_gpus] -= shape.milli_gpu
            after_cpu = res.cpu_left[fit_rows] - shape.milli_cpu
            after = fragmentation(NodeStates(after_cpu, after_free, res.model_codes[fit_rows], access), pods)
            per_gpu = (sigmoid((before[fit_rows] - after) / 1000) * MAX_NODE_SCORE).astype(np.int64)
            scores = np.zeros(rows, dtype=np.int64)
            # The first GPU with the highest score wins (fgd_score.go: strictly greater replaces).
            order = np.lexsort((fit_gpus, -per_gpu, fit_rows))
            first = order[np.r_[True, fit_rows[order][1:] != fit_rows[order][:-1]]] if len(order) else order
            scores[fit_rows[first]] = per_gpu[first]
            best[fit_rows[first]] = fit_gpus[first]
        else:
            after_cpu, after_free = _sub(res, shape)
            after = fragmentation(NodeStates(after_cpu, after_free, res.model_codes, access), pods)
            scores = (sigmoid((before - after) / 1000) * MAX_NODE_SCORE).astype(np.int64)
        scores[~accessible(table, res.model_codes, shape.gpu_model)] = 0
        return scores, best

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        if _no_requests(pod):
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        return self._cached_scores(table, pod, np.asarray(rows, dtype=np.intp))

    @staticmethod
    def _key(table: NodeTable, pods: list[TypicalPod]) -> tuple[int, int, int, int]:
        """What the cached scores depend on besides each row's pods: the typical pods, the GPU
        models known, the nodes."""
        return id(pods), len(table.label_column(GPU_MODEL).values), table.node_generation, len(table.alive)

    def _cached_scores(self, table: NodeTable, pod: PodInfo, rows: Rows) -> IntArray:
        """``_scores`` of ``rows``, computing only the rows changed since this shape's last score."""
        key = self._key(table, self.typical_pods(pod))
        if key != self._cache_key:
            self._cache.clear()
            self._cache_key = key
        shape = pod_shape(pod)
        cached = self._cache.get(shape)
        if cached is None:
            cached = self._cache[shape] = _ShapeScores.empty(len(table.alive))
        versions = GpuLedger.of(table).versions(rows)
        changed = np.flatnonzero(cached.versions.take(rows) != versions)
        if len(changed):
            stale = rows.take(changed)
            # The usual: the rows a pod or two went to since, read row by row.
            res = node_resources(table, stale) if len(changed) > _FEW_STATES else None
            keys = _state_keys(res) if res is not None else _row_state_keys(table, stale.tolist())
            cached.store(stale, versions.take(changed), keys,
                         self._scores_by_state(table, pod, keys, res, stale, cached.by_state))
        scores: IntArray = cached.scores.take(rows)
        return scores

    def _scores_by_state(
        self, table: NodeTable, pod: PodInfo, keys: list[tuple[int, ...]], res: NodeResources | None, rows: Rows,
        by_state: dict[tuple[int, ...], tuple[int, int]],
    ) -> list[tuple[int, int]]:
        """(score, best GPU) of each row, as ``_scores``, looking each row's state up in
        ``by_state`` first (a score reads only the row's state: CPU left, model, GPU count and
        free milli per GPU in index order; the model's access and the typical pods are those of
        the shape's cache, cleared when they change) and measuring only the states not seen, a
        few in Python (``_scores_of_keys``), more with numpy. ``keys``: the ``_state_keys`` of
        ``rows``; ``res``: their ``node_resources`` (read here if needed and not given)."""
        if len(by_state) >= _STATES_KEPT:
            by_state.clear()
        # The states not seen, each once (nodes of one type in one state are many).
        first_of: dict[tuple[int, ...], int] = {}
        for i, key in enumerate(keys):
            if key not in by_state and key not in first_of:
                first_of[key] = i
        if first_of:
            missing = list(first_of.values())
            if len(missing) <= _FEW_STATES:
                few_scores, few_best = self._scores_of_keys(table, pod, list(first_of))
            else:
                res = node_resources(table, rows) if res is None else res
                sub_scores, sub_best = self._scores(table, pod, _take(res, np.array(missing, dtype=np.intp)))
                few_scores, few_best = sub_scores.tolist(), sub_best.tolist()
            for key, score, gpu in zip(first_of, few_scores, few_best, strict=True):
                by_state[key] = (score, gpu)
        return [by_state[key] for key in keys]

    def _scores_of_keys(
        self, table: NodeTable, pod: PodInfo, keys: list[tuple[int, ...]],
    ) -> tuple[list[int], list[int]]:
        """``_scores`` of a few states (``_state_keys``), state by state in Python: for a few
        rows numpy's per-call overhead is the whole cost. The same values: the measure is
        ``StateMeasure``'s (numpy's to the bit), the after-states are ``_scores``' (a share pod
        on each GPU it fits, first best GPU wins; ``_sub`` for the others), and the sigmoid is
        numpy's, on one array."""
        shape = pod_shape(pod)
        pods = self.typical_pods(pod)
        measure = state_measure(pods, self._access(table, pods))
        allowed = _allowed_codes(table, shape.gpu_model)
        deltas: list[float] = []  # per (state, GPU tried): before - after
        owners: list[int] = []
        gpus: list[int] = []
        for i, (cpu, code, count, *free) in enumerate(keys):
            before = measure.of(cpu, code, free)
            if shape.shared:
                for gpu in range(count):
                    if free[gpu] >= shape.milli_gpu:
                        free[gpu] -= shape.milli_gpu
                        deltas.append(before - measure.of(cpu - shape.milli_cpu, code, free))
                        free[gpu] += shape.milli_gpu
                        owners.append(i)
                        gpus.append(gpu)
            else:
                after_cpu, after_free = _sub_one(cpu, count, free, shape)
                deltas.append(before - measure.of(after_cpu, code, after_free))
                owners.append(i)
                gpus.append(-1)
        per_try = _scores_of_deltas(deltas)
        scores = [0] * len(keys)
        best = [-1] * len(keys)
        seen = [False] * len(keys)
        for i, score, gpu in zip(owners, per_try, gpus, strict=True):
            if not seen[i] or score > scores[i]:  # the first GPU with the highest score wins
                scores[i], best[i], seen[i] = score, gpu, True
        if allowed is not None:
            scores = [score if key[1] in allowed else 0 for score, key in zip(scores, keys, strict=True)]
        return scores, best

    def choose_gpus(self, pod: PodInfo, request: GpuRequest, row: int, free: IntArray) -> tuple[int, ...] | None:
        """GpuShare's ``gpuSelMethod: FGD`` (``allocateGpuIdBasedOnFGDScore``): a share pod gets
        the GPU with the best FGD score, a pod of whole GPUs the first fully free ones."""
        if not request.shared:
            return exclusive_gpus(free.tolist(), request)
        table = self.handle.table
        # Reserve runs with the pod assumed: measure the node as it was before it.
        cpu_left = int(table.available_by_resource[CPU, row]) + (
            pod.requests.milli_cpu if table.pod(pod.uid) is not None else 0)
        valid = self._cache_key == self._key(table, self.typical_pods(pod))
        cached = self._cache.get(pod_shape(pod)) if valid else None
        known = cached.best_for(row, cpu_left, free) if cached is not None else None
        if known is not None:
            return (known,) if known >= 0 and free[known] >= request.milli else None
        res = node_resources(table, np.array([row], dtype=np.intp))
        padded = np.zeros((1, max(res.free.shape[1], len(free))), dtype=np.int64)
        padded[0, : len(free)] = free
        before = NodeResources(
            cpu_left=np.array([cpu_left], dtype=np.int64),
            cpu_capacity=res.cpu_capacity, free=padded,
            exists=np.arange(padded.shape[1])[None, :] < len(free), gpu_count=res.gpu_count,
            model_codes=res.model_codes)
        best = int(self._scores(table, pod, before)[1][0])
        return (best,) if best >= 0 and free[best] >= request.milli else None


#: Bound on the node states kept per pod shape (emptied when full): the openb replay under FGD
#: keeps at most ~1,500 for a shape, and a live scheduler keeps one such dict per pod shape, so
#: the bound holds each to ~1 MiB (a state and its score are a few hundred bytes).
_STATES_KEPT = 1 << 12


def _state_keys(res: NodeResources) -> list[tuple[int, ...]]:
    """Each row's state as FGD's score reads it: CPU left, model code, GPU count, then the free
    milli of each GPU in index order (the GPU chosen is an index)."""
    return [(cpu, code, count, *free) for cpu, code, count, free in zip(
        res.cpu_left.tolist(), res.model_codes.tolist(), res.gpu_count.tolist(), res.free.tolist(), strict=True)]


#: Up to this many states not seen, ``_scores_of_keys`` (Python) scores them, else ``_scores``.
_FEW_STATES = 24


#: ``int(sigmoid(delta / 1000) * 100)`` by delta, as numpy computes it (the same states come back,
#: so the same deltas do); emptied when full.
_SCORE_OF_DELTA: dict[float, int] = {}


def _scores_of_deltas(deltas: list[float]) -> list[int]:
    """``_scores``' per-GPU score of each fragmentation delta: numpy's sigmoid (its exp, on an
    array, as ``_scores`` takes it) for the deltas not seen before, the kept value for the others."""
    known = _SCORE_OF_DELTA
    missing = [d for d in deltas if d not in known]
    if not missing:
        return [known[d] for d in deltas]
    scores = (sigmoid(np.array(missing, dtype=np.float64) / 1000) * MAX_NODE_SCORE).astype(np.int64).tolist()
    fresh = dict(zip(missing, scores, strict=True))
    result = [fresh[d] if d in fresh else known[d] for d in deltas]
    if len(known) >= _STATES_KEPT:
        known.clear()
    known.update(fresh)
    return result


def _allowed_codes(table: NodeTable, gpu_model: str) -> set[int] | None:
    """``accessible``'s model codes for a pod asking ``gpu_model`` (None: any node)."""
    models = [m for m in gpu_model.split("|") if m]
    return set(table.label_column(GPU_MODEL).codes_for(models).tolist()) if models else None


def _sub_one(cpu_left: int, gpu_count: int, free: list[int], shape: PodShape) -> tuple[int, list[int]]:
    """``_sub`` of one node state (``free`` is not changed)."""
    if shape.gpu_count and shape.milli_gpu < MILLI:  # not reached: share pods are scored GPU by GPU
        raise ValueError("_sub takes pods of whole GPUs")
    if cpu_left < shape.milli_cpu or gpu_count < shape.gpu_count:
        return cpu_left, free
    if not shape.gpu_count:
        return cpu_left - shape.milli_cpu, free
    after = list(free)
    taken = 0
    for gpu in range(gpu_count):
        if taken < shape.gpu_count and after[gpu] >= shape.milli_gpu:
            after[gpu] -= shape.milli_gpu
            taken += 1
    return cpu_left - shape.milli_cpu, after


def _row_state_keys(table: NodeTable, rows: list[int]) -> list[tuple[int, ...]]:
    """``_state_keys(node_resources(table, rows))`` read row by row in Python (for a few rows)."""
    cpu_left = table.available_by_resource[CPU]
    codes = table.label_column(GPU_MODEL).codes
    free = GpuLedger.of(table).free_lists(rows)
    return [(int(cpu_left[row]), int(codes[row]), count, *gpus)
            for row, (count, gpus) in zip(rows, free, strict=True)]


def _take(res: NodeResources, picked: Rows) -> NodeResources:
    return NodeResources(
        cpu_left=res.cpu_left[picked], cpu_capacity=res.cpu_capacity[picked], free=res.free[picked],
        exists=res.exists[picked], gpu_count=res.gpu_count[picked], model_codes=res.model_codes[picked])


def _sub(res: NodeResources, shape: PodShape) -> tuple[IntArray, IntArray]:
    """``NodeResource.Sub`` for a pod of whole GPUs or none: CPU taken, then the first fully free
    GPUs (the least-left GPUs that fit, in index order, are the fully free ones); a node without
    enough CPU or GPUs is left as it is (Sub returns early with an error FGD ignores)."""
    cpu_left = res.cpu_left.copy()
    free = res.free.copy()
    ok = (cpu_left >= shape.milli_cpu) & (res.gpu_count >= shape.gpu_count)
    cpu_left[ok] -= shape.milli_cpu
    if shape.gpu_count:
        fitting = res.exists & (free >= shape.milli_gpu) & ok[:, None]
        if shape.milli_gpu < MILLI:  # not reached: share pods are scored GPU by GPU
            raise ValueError("_sub takes pods of whole GPUs")
        take = fitting & (np.cumsum(fitting, axis=1) <= shape.gpu_count)
        free = free - take * shape.milli_gpu
    return cpu_left, free
