"""The resource-allocation scorer shared by NodeResourcesFit's Score and NodeResourcesBalancedAllocation.

Port of ``pkg/scheduler/framework/plugins/noderesources/resource_allocation.go`` plus the scorer
functions of ``least_allocated.go``, ``most_allocated.go``, ``requested_to_capacity_ratio.go`` and
``pkg/scheduler/framework/plugins/helper/shape_score.go``, vectorised over node-table rows: each
function takes ``requested`` / ``allocatable`` matrices of shape (configured resources × rows) and
returns one int64 score per row.

Integer arithmetic is upstream's int64 arithmetic. Go's ``/`` truncates toward zero; numpy's ``//``
floors, so ``//`` is only used where both operands are non-negative and :func:`trunc_div` elsewhere.
Like Go, numpy int64 arithmetic wraps silently on overflow (only reachable with allocatable values
above ~9e16, e.g. exabytes of memory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

# is_extended_resource_name is re-exported for NodeResourcesFit (it used to live here).
from kubesched.api.validation import is_extended_resource_name as is_extended_resource_name
from kubesched.api.validation import is_scalar_resource_name
from kubesched.framework.handle import DRAResourceCounter, Handle
from kubesched.framework.interfaces import MAX_NODE_SCORE
from kubesched.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ResourceSpec,
    UtilizationShapePoint,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import CPU, EPHEMERAL_STORAGE, MEMORY, NodeTable, Rows, column_selector

IntArray = npt.NDArray[np.int64]
#: (requested, allocatable, known_nonzero) → one score per row. Both matrices are (configured
#: resources × rows): one contiguous row per resource, so a step of a scorer is one numpy call over
#: every resource at once (numpy is several times slower on narrow (rows × resources) shapes).
#: ``known_nonzero``: the caller knows every allocatable entry is non-zero (the scorer's fast-path
#: condition), so it need not check.
Scorer = Callable[[IntArray, IntArray, bool], IntArray]

#: requested_to_capacity_ratio.go maxUtilization
MAX_UTILIZATION: Final = 100


def trunc_div(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's int64 ``a / b`` (truncation toward zero) for ``b > 0``."""
    q: IntArray = np.where(a >= 0, a // b, -((-a) // b))
    return q


# -- per-resource scorers (vectorised over rows) ----------------------------------------------------


def _all_nonzero(allocatable: IntArray) -> bool:
    """Every row has every resource (the fast paths' condition). count_nonzero is a plain C loop,
    a few times cheaper than ``ndarray.all()``'s ufunc reduction."""
    return bool(np.count_nonzero(allocatable) == allocatable.size)


def _weighted_average(scores: IntArray, counted: npt.NDArray[np.bool_], weights: IntArray) -> IntArray:
    node_score = np.where(counted, scores * weights, 0).sum(axis=1)
    weight_sum = np.where(counted, weights, 0).sum(axis=1)
    # Both sums are non-negative, so floor division equals Go's truncation.
    out: IntArray = np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))
    return out


def least_resource_scorer(weights: IntArray) -> Scorer:
    """least_allocated.go leastResourceScorer / leastRequestedScore:
    ``(capacity - requested) * MaxNodeScore / capacity`` (0 when over capacity), weighted average
    over the resources the node has (allocatable != 0)."""

    weight_total = int(weights.sum())
    #: Weights as a column (resources × 1), or None when all are 1 (nothing to multiply).
    weight_column = None if (weights == 1).all() else weights.reshape(-1, 1)

    def score(requested_by_resource: IntArray, allocatable_by_resource: IntArray, known_nonzero: bool) -> IntArray:
        if weight_total and (known_nonzero or _all_nonzero(allocatable_by_resource)):
            # Every resource counts on every row: a plain weighted average (the common case), all
            # resources in each call. Over capacity, (a - r) * 100 // a is negative: clamp it to 0.
            per = allocatable_by_resource - requested_by_resource
            per *= MAX_NODE_SCORE
            per //= allocatable_by_resource
            np.maximum(per, 0, out=per)
            if weight_column is not None:
                per *= weight_column
            total: IntArray = np.add.reduce(per, axis=0)
            total //= weight_total
            return total
        requested, allocatable = requested_by_resource.T, allocatable_by_resource.T
        has = allocatable != 0
        cap = np.where(has, allocatable, 1)
        per = np.where(requested > allocatable, 0, ((cap - requested) * MAX_NODE_SCORE) // cap)
        return _weighted_average(per, has, weights)

    return score


def most_resource_scorer(weights: IntArray) -> Scorer:
    """most_allocated.go mostResourceScorer / mostRequestedScore: ``requested * MaxNodeScore /
    capacity`` with requested capped at capacity (non-zero defaults can push it above)."""

    def score(requested_by_resource: IntArray, allocatable_by_resource: IntArray, known_nonzero: bool) -> IntArray:
        requested, allocatable = requested_by_resource.T, allocatable_by_resource.T
        has = allocatable != 0
        cap = np.where(has, allocatable, 1)
        per = (np.minimum(requested, cap) * MAX_NODE_SCORE) // cap
        return _weighted_average(per, has, weights)

    return score


def broken_linear_function(shape: Sequence[tuple[int, int]]) -> Callable[[IntArray], IntArray]:
    """helper/shape_score.go BuildBrokenLinearFunction over (utilization, score) points:
    the first point's score below it, the last point's score above it, linear interpolation
    (Go int64 arithmetic) in between."""
    us = np.array([u for u, _ in shape], dtype=np.int64)
    ss = np.array([s for _, s in shape], dtype=np.int64)

    def f(p: IntArray) -> IntArray:
        # First i with p <= us[i] (upstream's loop), len(us) when none.
        i = np.searchsorted(us, p, side="left")
        inner = (i > 0) & (i < len(us))
        lo = np.clip(i - 1, 0, len(us) - 1)
        hi = np.clip(i, 0, len(us) - 1)
        du = np.where(inner, us[hi] - us[lo], 1)
        interp = ss[lo] + trunc_div((ss[hi] - ss[lo]) * (p - us[lo]), du)
        out: IntArray = np.where(i == 0, ss[0], np.where(i >= len(us), ss[-1], interp))
        return out

    return f


def requested_to_capacity_ratio_scorer(weights: IntArray, shape: Sequence[UtilizationShapePoint]) -> Scorer:
    """requested_to_capacity_ratio.go: shape scores 0..MaxCustomPriorityScore scaled to
    0..MaxNodeScore; per-resource ``f(requested * 100 / capacity)`` (``f(100)`` when over capacity);
    only resources scoring > 0 count; the weighted average is rounded (math.Round)."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear_function([(p.utilization, p.score * scale) for p in shape])

    def score(requested_by_resource: IntArray, allocatable_by_resource: IntArray, known_nonzero: bool) -> IntArray:
        requested, allocatable = requested_by_resource.T, allocatable_by_resource.T
        has = allocatable != 0
        cap = np.where(has, allocatable, 1)
        util = np.where(requested > cap, MAX_UTILIZATION, (requested * MAX_UTILIZATION) // cap)
        per = raw(util)
        counted = has & (per > 0)
        node_score = np.where(counted, per * weights, 0).sum(axis=1)
        weight_sum = np.where(counted, weights, 0).sum(axis=1)
        # int64(math.Round(float64(n) / float64(w))) for n, w >= 0: half away from zero, done exactly.
        w = np.maximum(weight_sum, 1)
        out: IntArray = np.where(weight_sum == 0, 0, (2 * node_score + w) // (2 * w))
        return out

    return score


def balanced_resource_scorer(
    requested_by_resource: IntArray, allocatable_by_resource: IntArray, known_nonzero: bool = False
) -> IntArray:
    """balanced_allocation.go balancedResourceScorer: ``(1 - std) * MaxNodeScore`` truncated, where
    std is the standard deviation of the requested/allocatable fractions (capped at 1) of the
    resources with allocatable != 0; ``|f1 - f2| / 2`` for two, 0 for fewer.

    The float operations are done column by column in upstream's order (not with numpy's pairwise
    ``sum``) so results are bit-identical to Go on amd64. The two-resource fast path is elementwise,
    so it also takes arrays with more axes after the resource axis (``balance_with_and_without``).
    """
    if len(allocatable_by_resource) == 2 and (known_nonzero or _all_nonzero(allocatable_by_resource)):
        # The default (cpu, memory) on nodes that have both: |f1 - f2| / 2, same float operations
        # (in place). The result lies in [50, 100], where astype's truncation is np.trunc's.
        fractions = requested_by_resource / allocatable_by_resource
        np.minimum(fractions, 1.0, out=fractions)
        f0 = fractions[0] - fractions[1]
        f0 /= 2
        np.abs(f0, out=f0)
        np.subtract(1, f0, out=f0)
        f0 *= float(MAX_NODE_SCORE)
        fast: IntArray = f0.astype(np.int64)
        return fast
    requested, allocatable = requested_by_resource.T, allocatable_by_resource.T
    n, r = requested.shape
    has = allocatable != 0
    frac = np.where(has, requested / np.where(has, allocatable, 1).astype(np.float64), 0.0)
    frac = np.minimum(frac, 1.0)
    count = has.sum(axis=1)
    total = np.zeros(n)
    first = np.zeros(n)
    second = np.zeros(n)
    seen = np.zeros(n, dtype=np.int64)
    for j in range(r):
        take = has[:, j]
        total = np.where(take, total + frac[:, j], total)
        first = np.where(take & (seen == 0), frac[:, j], first)
        second = np.where(take & (seen == 1), frac[:, j], second)
        seen += take
    mean = total / np.maximum(count, 1)
    sq = np.zeros(n)
    for j in range(r):
        d = frac[:, j] - mean
        sq = np.where(has[:, j], sq + d * d, sq)
    std = np.where(count == 2, np.abs((first - second) / 2),
                   np.where(count > 2, np.sqrt(sq / np.maximum(count, 1)), 0.0))
    out: IntArray = np.trunc((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
    return out


def balance_with_and_without(
    requested_by_resource: IntArray, allocatable_by_resource: IntArray, pod_requests: IntArray,
    known_nonzero: bool = False,
) -> tuple[IntArray, IntArray]:
    """``balanced_resource_scorer`` of each row with the pod (``requested_by_resource`` includes
    it) and without it (the pod's requests taken off), as BalancedAllocation's Score needs both.
    For two resources every row has (the default cpu and memory), both balances go through the
    scorer's fast path as one (resources x 2 x rows) array: the same float operations on each
    element, half the numpy calls (a Score over a few hundred rows is mostly per-call cost)."""
    if len(allocatable_by_resource) == 2 and (known_nonzero or _all_nonzero(allocatable_by_resource)):
        both = np.empty((2, 2, requested_by_resource.shape[1]), dtype=np.int64)
        both[:, 0] = requested_by_resource
        np.subtract(requested_by_resource, pod_requests[:, None], out=both[:, 1])
        balance = balanced_resource_scorer(both, allocatable_by_resource[:, None, :], True)
        return balance[0], balance[1]
    with_pod = balanced_resource_scorer(requested_by_resource, allocatable_by_resource, known_nonzero)
    # The scorer skips resources the node does not have (allocatable 0) whatever their requested
    # value, so subtracting the pod everywhere is safe.
    without_pod = requested_by_resource - pod_requests[:, None]
    return with_pod, balanced_resource_scorer(without_pod, allocatable_by_resource, known_nonzero)


def build_scorer(strategy: str, weights: IntArray, shape: Sequence[UtilizationShapePoint] | None) -> Scorer:
    """fit.go nodeResourceStrategyTypeMap."""
    if strategy == LEAST_ALLOCATED:
        return least_resource_scorer(weights)
    if strategy == MOST_ALLOCATED:
        return most_resource_scorer(weights)
    if strategy == REQUESTED_TO_CAPACITY_RATIO and shape is not None:
        return requested_to_capacity_ratio_scorer(weights, shape)
    raise ValueError(f"scoring strategy {strategy} is not supported")


# -- requested / allocatable per configured resource ----------------------------------------------


class _ColumnPlan:
    """Where ResourceAllocation reads each configured resource in the node table: per resource
    (allocatable column or -1 when not scored, read NonZeroRequested?, column of the used amount)."""

    __slots__ = (
        "alloc_block", "alloc_cols", "nonzero_everywhere", "nonzero_generation", "sources", "used_block",
        "used_from_nonzero",
    )

    def __init__(self, alloc_cols: list[int], nonzero_src: list[int]) -> None:
        self.sources = [
            (col, src >= 0, src if src >= 0 else col) for col, src in zip(alloc_cols, nonzero_src, strict=True)
        ]
        self.alloc_cols = alloc_cols
        #: The common layout: every resource scored, their allocatable columns consecutive and
        #: their used amounts consecutive columns of one matrix (cpu and memory: columns 0 and 1
        #: of both allocatable and nonzero_requested / requested). Then each matrix is read with
        #: one gather of a block of rows; else resource by resource.
        used_cols = [used for _, _, used in self.sources]
        sources_from_nonzero = {nz for _, nz, _ in self.sources}
        contiguous = (
            min(alloc_cols, default=-1) >= 0 and len(sources_from_nonzero) == 1
            and isinstance(column_selector(alloc_cols), slice) and isinstance(column_selector(used_cols), slice)
        )
        self.alloc_block = slice(alloc_cols[0], alloc_cols[0] + len(alloc_cols)) if contiguous else None
        self.used_block = slice(used_cols[0], used_cols[0] + len(used_cols)) if contiguous else None
        self.used_from_nonzero = contiguous and sources_from_nonzero == {True}
        #: Whether every node of the table has a non-zero allocatable of every scored resource, as
        #: of the table's node_generation ``nonzero_generation``: allocatable changes only with
        #: node adds, removals and allocatable updates, all of which bump node_generation, so the
        #: answer holds until it moves. Saves the scorers a check per pod.
        self.nonzero_generation = -1
        self.nonzero_everywhere = False

    def allocatable_nonzero_everywhere(self, table: NodeTable) -> bool:
        if self.nonzero_generation != table.node_generation:
            cols = self.alloc_cols
            self.nonzero_everywhere = min(cols, default=-1) >= 0 and bool(
                (table.allocatable_by_resource[cols].take(table.alive_rows(), axis=1) != 0).all()
            )
            self.nonzero_generation = table.node_generation
        return self.nonzero_everywhere


@dataclass(frozen=True, slots=True)
class ResourceAllocation:
    """resource_allocation.go resourceAllocationScorer minus the scorer function.

    ``use_requested`` picks the node's Requested (BalancedAllocation) instead of NonZeroRequested
    (NodeResourcesFit) for cpu and memory, and the pod's plain requests instead of its non-zero
    requests (upstream's NonMissingContainerRequests of 100m cpu / 200Mi memory per container).
    """

    resources: tuple[ResourceSpec, ...]
    use_requested: bool
    _plans: dict[int, tuple[NodeTable, dict[tuple[int, tuple[bool, ...]], _ColumnPlan]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    _scalar_positions: tuple[int, ...] = field(default=(), compare=False, repr=False)
    _request_lists: dict[tuple[object, ...], IntArray] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Positions of extended resources: whether the pod requests them changes the plan.
        positions = tuple(i for i, r in enumerate(self.resources) if is_scalar_resource_name(r.name))
        object.__setattr__(self, "_scalar_positions", positions)

    def pod_request_list(self, pod: PodInfo) -> IntArray:
        """calculatePodResourceRequestList: the pod's request of each configured resource
        (read-only: shared by the pods that request the same)."""
        req = pod.requests
        cached = self._request_lists.get(req.key)
        if cached is not None:
            return cached
        out = np.zeros(len(self.resources), dtype=np.int64)
        for i, spec in enumerate(self.resources):
            if spec.name == "cpu":
                out[i] = req.milli_cpu if self.use_requested else req.non_zero_milli_cpu
            elif spec.name == "memory":
                out[i] = req.memory if self.use_requested else req.non_zero_memory
            elif spec.name == "ephemeral-storage":
                out[i] = req.ephemeral_storage
            else:
                # Only scalar names are kept by PodRequests here; any other name (e.g. "pods") is
                # never scored anyway (calculateResourceAllocatableRequest returns (0, 0) for it).
                out[i] = req.scalar.get(spec.name, 0)
        out.flags.writeable = False
        if len(self._request_lists) >= 1024:
            self._request_lists.clear()
        self._request_lists[req.key] = out
        return out

    def allocatable_requested(
        self, table: NodeTable, rows: Rows, pod_requests: IntArray
    ) -> tuple[IntArray, IntArray, bool]:
        """score + calculateResourceAllocatableRequest for many rows: (allocatable, requested),
        each (configured resources × rows), and whether every allocatable entry is known to be
        non-zero (the scorers' ``known_nonzero``). A resource that is not scored on a row has 0
        allocatable there (upstream's "only fill the entry when alloc != 0"); the scorers skip such
        entries whatever the requested value, so requested is not masked."""
        plan = self._plan(table, pod_requests)
        if plan.alloc_block is not None and plan.used_block is not None:
            used_by_resource = (
                table.nonzero_requested_by_resource if plan.used_from_nonzero else table.requested_by_resource
            )
            alloc = table.allocatable_by_resource[plan.alloc_block].take(rows, axis=1)
            requested = used_by_resource[plan.used_block].take(rows, axis=1)
            requested += pod_requests[:, None]
            return alloc, requested, plan.allocatable_nonzero_everywhere(table)
        alloc = np.zeros((len(plan.sources), len(rows)), dtype=np.int64)
        requested = np.zeros_like(alloc)
        amounts = pod_requests.tolist()
        for i, ((col, from_nonzero, used_col), amount) in enumerate(zip(plan.sources, amounts, strict=True)):
            if col >= 0:
                used = table.nonzero_requested_by_resource if from_nonzero else table.requested_by_resource
                alloc[i] = table.allocatable_by_resource[col].take(rows)
                requested[i] = used[used_col].take(rows) + amount
        return alloc, requested, plan.allocatable_nonzero_everywhere(table)

    def dra_counter(self, handle: Handle) -> DRAResourceCounter | None:
        """getDRAPreScoredParams: the devices behind the configured resources a DeviceClass maps,
        or None (no DynamicResources in the profile, or no such resource)."""
        manager = handle.dra_manager
        if manager is None or not self._scalar_positions:
            return None
        return manager.extended_resource_counter([self.resources[i].name for i in self._scalar_positions])

    def add_dra_backed(self, table: NodeTable, rows: Rows, pod_requests: IntArray, counter: DRAResourceCounter,
                       alloc: IntArray, requested: IntArray) -> None:
        """calculateResourceAllocatableRequest's DRA branch, in place on ``allocatable_requested``'s
        matrices: a resource the pod requests, that a DeviceClass maps and that a node's allocatable
        lacks (0) counts there as the class's devices on the node (allocatable) and those allocated
        (requested, plus the pod's request). A node without such devices keeps allocatable 0, so
        the resource is not scored there (calculateDRAExtendedResourceAllocatableRequest)."""
        amounts = pod_requests.tolist()
        for i in self._scalar_positions:
            name = self.resources[i].name
            if amounts[i] == 0 or not counter.backs(name):
                continue
            for j in np.flatnonzero(alloc[i] == 0).tolist():
                node = table.node_info(int(rows[j]))
                capacity, allocated = counter.totals(name, node.name, node.labels)
                if capacity > 0:
                    alloc[i, j] = capacity
                    requested[i, j] = allocated + amounts[i]

    def _plan(self, table: NodeTable, pod_requests: IntArray) -> _ColumnPlan:
        """Which table column feeds each configured resource (cached: it changes only with the
        table's columns and, for extended resources, with whether the pod requests them)."""
        positions = self._scalar_positions
        scalar_requested = tuple(bool(pod_requests[i]) for i in positions) if positions else ()
        key = (len(table.resource_names), scalar_requested)
        cache = self._plans.get(id(table))
        if cache is not None and cache[0] is table:
            plan = cache[1].get(key)
            if plan is not None:
                return plan
        else:
            cache = self._plans[id(table)] = (table, {})
        # cpu/memory come from NonZeroRequested unless use_requested; ephemeral-storage and
        # extended resources from Requested. Column -1: not scored (zeros).
        alloc_cols: list[int] = []
        nonzero_src: list[int] = []  # index into nonzero_requested, or -1 to read requested
        for i, spec in enumerate(self.resources):
            name = spec.name
            if name == "cpu" or name == "memory":
                alloc_cols.append(CPU if name == "cpu" else MEMORY)
                nonzero_src.append(-1 if self.use_requested else (0 if name == "cpu" else 1))
            elif name == "ephemeral-storage":
                # Upstream always uses Requested (not NonZeroRequested) for ephemeral-storage.
                alloc_cols.append(EPHEMERAL_STORAGE)
                nonzero_src.append(-1)
            elif is_scalar_resource_name(name) and int(pod_requests[i]) != 0 and name in table.resource_index:
                # An extended resource the pod does not request is not scored at all.
                alloc_cols.append(table.resource_index[name])
                nonzero_src.append(-1)
            else:
                alloc_cols.append(-1)
                nonzero_src.append(-1)
        plan = _ColumnPlan(alloc_cols, nonzero_src)
        cache[1][key] = plan
        return plan

    @property
    def weights(self) -> IntArray:
        return np.array([r.weight for r in self.resources], dtype=np.int64)
