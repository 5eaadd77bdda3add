"""The GPU fragmentation of nodes measured against a target workload (FGD's measure).

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/utils/frag.go``
``NodeGpuShareFragAmount``, ``NodeGpuShareFragAmountScore``, ``GetNodePodFrag``,
``CanNodeHostPodOnGpuMemory``, ``GetGpuFragMilliByNodeResAndPodRes`` and
``FragAmountSumExceptQ3``.

For each typical pod (frequency p) a node's free GPU milli is classified: if the node can run the
pod (enough CPU, enough GPUs with the pod's milli free, an accepted model: *Q3*), only the GPUs
with less free milli than the pod needs are fragments (counted as Q2); otherwise all its free GPU
milli is (Q1 lack both, Q2 lack GPU, Q4 lack CPU, XL/XR for pods without GPUs, NA no access).
The fragmentation is sum(p * fragment milli) over the buckets but Q3, added bucket by bucket in
the reference's order so the float sums are the reference's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubesched.snapshot.gpushare.resources import BoolArray
from kubesched.snapshot.gpushare.typical_pods import TypicalPod
from kubesched.snapshot.table import IntArray


@dataclass(frozen=True, slots=True)
class NodeStates:
    """Node states to measure: CPU left, free milli per GPU (0 for GPUs a node lacks), and each
    node's GPU model code; ``access[code + 1, t]`` says whether that model accepts typical pod t
    (row 0: no model label)."""

    cpu_left: IntArray
    free: IntArray
    model_codes: IntArray
    access: BoolArray


def _distinct(states: NodeStates) -> tuple[IntArray, IntArray]:
    """(one index per distinct state, the distinct state of each state): the measure reads only
    CPU left, the model and the multiset of free GPU milli, so identical ones are measured once.
    States are packed exactly into three int64 keys (six free values; the last two and the model;
    CPU left), none wider than 60 bits; when they do not fit (more than 8 GPUs, odd values), every
    state is its own."""
    n, g = states.free.shape
    free = np.sort(states.free, axis=1)
    cpu = states.cpu_left + (1 << 30)
    if g > 8 or n == 0 or free.min(initial=0) < 0 or free.max(initial=0) > 1023 or cpu.min() < 0 \
            or cpu.max() >= (1 << 34) or states.model_codes.max(initial=0) >= (1 << 14):
        identity = np.arange(n)
        return identity, identity
    padded = np.zeros((n, 8), dtype=np.int64)
    padded[:, :g] = free
    k1 = np.zeros(n, dtype=np.int64)
    for i in range(6):
        k1 = (k1 << 10) | padded[:, i]
    # 20 + 15 bits: the 7th and 8th free values and the model (packing CPU in as well took 70
    # bits, and the 7th value's high bits overflowed: states differing there were merged).
    k2 = ((padded[:, 6] << 10) | padded[:, 7]) << 15 | (states.model_codes + 1)
    k3 = cpu
    order = np.lexsort((k3, k2, k1))
    k1, k2, k3 = k1[order], k2[order], k3[order]
    new = np.r_[True, (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1]) | (k3[1:] != k3[:-1])]
    group = np.cumsum(new) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = group
    return order[new], inverse


@dataclass(frozen=True, slots=True)
class _Workload:
    """The typical pods as arrays (built once per list: the measure runs once per node change)."""

    pods: Sequence[TypicalPod]
    p: np.ndarray
    t_cpu: IntArray
    gpu_pod: BoolArray
    thresholds: IntArray  # the distinct milli asked
    which: IntArray  # each pod's threshold
    t_count: IntArray
    #: The same as Python values, pod by pod (``_measure_one``: a state or a few cost less in
    #: Python than numpy's per-call overhead): (p, CPU asked as its rank in ``cpu_steps``, asks
    #: GPUs, threshold index, count).
    rows: tuple[tuple[float, int, bool, int, int], ...]
    threshold_values: tuple[int, ...]
    #: The distinct CPU asked, ascending: a node's CPU left matters to the measure only through
    #: which pods it has CPU for, i.e. how many of these it reaches (``cpu_class``).
    cpu_steps: tuple[int, ...]


_WORKLOADS: dict[int, _Workload] = {}


def _workload(pods: Sequence[TypicalPod]) -> _Workload:
    cached = _WORKLOADS.get(id(pods))
    if cached is not None and cached.pods is pods:
        return cached
    t_milli = np.array([t.milli_gpu for t in pods], dtype=np.int64)
    thresholds, which = np.unique(t_milli, return_inverse=True)
    p = np.array([t.frequency for t in pods])
    t_cpu = np.array([t.milli_cpu for t in pods], dtype=np.int64)
    t_count = np.maximum(np.array([t.gpu_count for t in pods], dtype=np.int64), 1)
    which = which.reshape(-1)
    cpu_steps = tuple(sorted(set(t_cpu.tolist())))
    cpu_rank = [cpu_steps.index(c) for c in t_cpu.tolist()]
    workload = _Workload(
        pods=pods, p=p, t_cpu=t_cpu, gpu_pod=t_milli > 0, thresholds=thresholds, which=which, t_count=t_count,
        rows=tuple(zip(p.tolist(), cpu_rank, (t_milli > 0).tolist(), which.tolist(), t_count.tolist(),
                       strict=True)),
        threshold_values=tuple(thresholds.tolist()), cpu_steps=cpu_steps)
    if len(_WORKLOADS) >= 8:  # the list is held, so its id is not reused while cached
        _WORKLOADS.clear()
    _WORKLOADS[id(pods)] = workload
    return workload


#: Below this many states, deduplicating costs more than measuring every one.
_DEDUP_FROM = 64


#: Measured states per target workload (typical pods and model access, by content: the replay's
#: metrics and FGD measure the same nodes against equal workloads): a state's measure depends on
#: nothing else, so a node state seen before (by another node, before a pod came and went, or as
#: the state FGD scored for the pod that then went there) is not measured again. Keyed by the
#: state's CPU class (``StateMeasure``), not its CPU left: states that differ only in CPU the
#: typical pods cannot tell apart share one measure.
_MEMOS: dict[Hashable, dict[tuple[int, ...], float]] = {}
#: Bound on the states one memo keeps (it is emptied when full; the whole openb replay under FGD
#: measures 16,726 distinct states; a state costs a few hundred bytes, so a memo stays under
#: ~10 MiB, which matters in a long-running live scheduler).
MEMO_SIZE = 1 << 15


def _memo(pods: Sequence[TypicalPod], access: np.ndarray) -> dict[tuple[int, ...], float]:
    """The memo of this workload's content (a ``StateMeasure`` is made once per pods list and
    access array, :func:`state_measure`, so this runs that seldom)."""
    content = (tuple(pods), access.shape, access.tobytes())
    memo = _MEMOS.get(content)
    if memo is None:
        if len(_MEMOS) >= 8:
            _MEMOS.clear()
        memo = _MEMOS[content] = {}
    return memo


def state_keys(states: NodeStates) -> list[tuple[int, ...]]:
    """What the measure reads of each state: CPU left, model code and the free milli per GPU in
    ascending order (the measure sees a multiset; the width, GPUs a node lacks counting as 0, is
    the tuple's length)."""
    free = np.sort(states.free, axis=1).tolist()
    return [(cpu, code, *gpus) for cpu, code, gpus in
            zip(states.cpu_left.tolist(), states.model_codes.tolist(), free, strict=True)]


def fragmentation(states: NodeStates, pods: Sequence[TypicalPod]) -> np.ndarray:
    """``NodeGpuShareFragAmountScore`` of every state (float64 array). Each bucket is summed over
    the typical pods in order (``cumsum``), and the buckets in the reference's order, as Go adds.
    A few states (fewer than ``_DEDUP_FROM``) are looked up in the workload's memo first and only
    the ones never seen are measured, one by one in Python (``StateMeasure``); every state's
    measure is the same alone or among others, in Python or with arrays."""
    n = len(states.cpu_left)
    if n == 0 or not pods:
        return np.zeros(n)
    if n >= _DEDUP_FROM:
        return _measure(states, pods)
    measure = state_measure(pods, states.access)
    return np.array([measure.of_key(key) for key in state_keys(states)], dtype=np.float64)


class StateMeasure:
    """The measure of one state at a time, in Python, through the workload's memo: for a state
    or a few, numpy's per-call overhead (~30 calls) is the whole cost of ``_measure``. Every
    value is ``_measure``'s to the bit: the same float operations in the same order (each
    bucket summed over the typical pods in pod order, the buckets in the reference's order;
    a pod outside a bucket adds nothing, as its 0.0 there adds nothing to numpy's cumsum).

    The memo's key is (CPU class, model code, free milli per GPU ascending): the CPU left is
    read only as ``cpu_left >= pod CPU`` per typical pod, so the class, how many of the
    workload's distinct CPU asks it reaches, says the same. Get one with :func:`state_measure`
    (kept per workload and model access)."""

    __slots__ = ("_access_rows", "_cpu_steps", "_memo", "_plans", "_workload")

    def __init__(self, pods: Sequence[TypicalPod], access: np.ndarray) -> None:
        self._workload = _workload(pods) if pods else None
        self._cpu_steps = self._workload.cpu_steps if self._workload is not None else ()
        self._memo = _memo(pods, access)
        self._access_rows: list[list[bool]] = access.tolist()
        #: Per (CPU class, model code): each typical pod's bucket rule, in pod order (``_plan``).
        self._plans: dict[tuple[int, int], tuple[tuple[int, float, int, int], ...]] = {}

    def of(self, cpu_left: int, code: int, free: Sequence[int]) -> float:
        """The measure of a node with ``cpu_left`` milli-CPU, GPU model ``code`` (-1: none) and
        ``free`` milli per GPU (0 for GPUs it lacks; any order)."""
        key = (bisect_right(self._cpu_steps, cpu_left), code, *sorted(free))
        value = self._memo.get(key)
        if value is None:
            value = self._remember(key)
        return value

    def of_key(self, key: tuple[int, ...]) -> float:
        """The measure of a ``state_keys`` key (CPU left, model code, free milli ascending)."""
        return self.of(key[0], key[1], key[2:])

    def _remember(self, key: tuple[int, ...]) -> float:
        memo = self._memo
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        value = memo[key] = self._measure_one(key[0], key[1], key[2:])
        return value

    def _plan(self, cpu_class: int, code: int) -> tuple[tuple[int, float, int, int], ...]:
        """Each typical pod as (rule, p, threshold index, count): 0 a GPU pod the node has CPU
        for and accepts (Q3's fragments or Q2), 1 one it accepts but lacks CPU for (Q4 or Q1),
        2 XL, 3 XR, 4 NA — what the CPU class and the model decide; the GPUs decide the rest."""
        plan = self._plans.get((cpu_class, code))
        if plan is None:
            w = self._workload
            access = self._access_rows[code + 1]
            rules: list[tuple[int, float, int, int]] = []
            for t, (p, rank, gpu_pod, k, count) in enumerate(w.rows if w is not None else ()):
                cpu_ok = rank < cpu_class
                if not gpu_pod:
                    rule = 2 if cpu_ok else 3
                elif not access[t]:
                    rule = 4
                else:
                    rule = 0 if cpu_ok else 1
                rules.append((rule, p, k, count))
            plan = self._plans[(cpu_class, code)] = tuple(rules)
        return plan

    def _measure_one(self, cpu_class: int, code: int, free: Sequence[int]) -> float:
        """``free``: ascending."""
        w = self._workload
        if w is None:
            return 0.0
        total = float(sum(free))
        # Per distinct milli asked (ascending): the free milli of the GPUs too small for it
        # (an integer sum, as exact as summing them one by one), how many fit it.
        small: list[float] = []
        fitting: list[int] = []
        n = len(free)
        j = 0
        below = 0
        for threshold in w.threshold_values:
            while j < n and free[j] < threshold:
                below += free[j]
                j += 1
            small.append(float(below))
            fitting.append(n - j)
        b0 = b1 = b2 = b3 = b4 = b5 = 0.0
        for rule, p, k, count in self._plan(cpu_class, code):
            if rule == 0:
                if fitting[k] >= count:
                    b1 += p * small[k]  # Q2 fragments of Q3
                else:
                    b1 += p * total  # Q2
            elif rule == 1:
                if fitting[k] >= count:
                    b2 += p * total  # Q4
                else:
                    b0 += p * total  # Q1
            elif rule == 2:
                b3 += p * total  # XL
            elif rule == 3:
                b4 += p * total  # XR
            else:
                b5 += p * total  # NA
        return 0.0 + b0 + b1 + b2 + b3 + b4 + b5


#: (id of the pods list, id of the access array) -> (both, held so the ids stay theirs, the measure).
_MEASURES: dict[tuple[int, int], tuple[Sequence[TypicalPod], np.ndarray, StateMeasure]] = {}


def state_measure(pods: Sequence[TypicalPod], access: np.ndarray) -> StateMeasure:
    """The ``StateMeasure`` of this workload and model access (``access`` must not change
    while used: callers keep one per GPU models known)."""
    found = _MEASURES.get((id(pods), id(access)))
    if found is not None and found[0] is pods and found[1] is access:
        return found[2]
    measure = StateMeasure(pods, access)
    if len(_MEASURES) >= 16:
        _MEASURES.clear()
    _MEASURES[(id(pods), id(access))] = (pods, access, measure)
    return measure


def _measure(states: NodeStates, pods: Sequence[TypicalPod]) -> np.ndarray:
    """The measure of every state, no memo; identical states measured once from 64 on."""
    n = len(states.cpu_left)
    w = _workload(pods)
    if n >= _DEDUP_FROM:
        pick, inverse = _distinct(states)
        free, cpu_left, codes = states.free[pick], states.cpu_left[pick], states.model_codes[pick]
    else:
        free, cpu_left, codes = states.free, states.cpu_left, states.model_codes
    access = states.access[codes + 1]  # (S, T)
    # Per distinct milli asked: the free milli of GPUs too small for it, and how many fit it.
    too_small = free[:, :, None] < w.thresholds[None, None, :]  # (S, G, K)
    small = (too_small * free[:, :, None]).sum(axis=1)[:, w.which]
    fits = (free.shape[1] - too_small.sum(axis=1))[:, w.which] >= w.t_count[None, :]
    total = free.sum(axis=1).astype(np.float64)[:, None]
    cpu_ok = cpu_left[:, None] >= w.t_cpu[None, :]
    gpu_pod = w.gpu_pod[None, :]
    ok = access & gpu_pod
    p = w.p[None, :]
    pt = p * total  # p * all free milli
    buckets = np.zeros((6, *pt.shape))
    np.copyto(buckets[0], pt, where=ok & ~fits & ~cpu_ok)  # Q1 lack both
    np.copyto(buckets[1], pt, where=ok & ~fits & cpu_ok)  # Q2 lack GPU ...
    np.copyto(buckets[1], p * small, where=ok & fits & cpu_ok)  # ... and Q2 fragments of Q3
    np.copyto(buckets[2], pt, where=ok & fits & ~cpu_ok)  # Q4 lack CPU
    np.copyto(buckets[3], pt, where=~gpu_pod & cpu_ok)  # XL: no GPU asked, CPU enough
    np.copyto(buckets[4], pt, where=~gpu_pod & ~cpu_ok)  # XR
    np.copyto(buckets[5], pt, where=gpu_pod & ~access)  # NA: model not accepted
    sums = np.cumsum(buckets, axis=2)[:, :, -1]  # (6, S), each summed in pod order
    measure = np.zeros(len(free))
    for bucket in sums:
        measure = measure + bucket
    result: np.ndarray = measure[inverse] if n >= _DEDUP_FROM else measure
    return result
