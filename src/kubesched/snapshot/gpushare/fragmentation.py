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

from collections.abc import Sequence
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
    States are packed exactly into two int64 keys; when they do not fit (more than 8 GPUs, odd
    values), every state is its own."""
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
    k2 = (((padded[:, 6] << 10) | padded[:, 7]) << 35 | cpu) << 15 | (states.model_codes + 1)
    order = np.lexsort((k2, k1))
    new = np.r_[True, (k1[order][1:] != k1[order][:-1]) | (k2[order][1:] != k2[order][:-1])]
    group = np.cumsum(new) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = group
    return order[new], inverse


def fragmentation(states: NodeStates, pods: Sequence[TypicalPod]) -> np.ndarray:
    """``NodeGpuShareFragAmountScore`` of every state (float64 array). Each bucket is summed over
    the typical pods in order (``cumsum``), and the buckets in the reference's order, as Go adds."""
    n = len(states.cpu_left)
    if n == 0 or not pods:
        return np.zeros(n)
    pick, inverse = _distinct(states)
    free, cpu_left = states.free[pick], states.cpu_left[pick]
    access = states.access[states.model_codes[pick] + 1]  # (S, T)
    p = np.array([t.frequency for t in pods])
    t_cpu = np.array([t.milli_cpu for t in pods], dtype=np.int64)
    t_milli = np.array([t.milli_gpu for t in pods], dtype=np.int64)
    t_count = np.maximum(np.array([t.gpu_count for t in pods], dtype=np.int64), 1)
    # Per distinct milli asked: the free milli of GPUs too small for it, and how many fit it.
    thresholds, which = np.unique(t_milli, return_inverse=True)
    small_by = np.empty((len(free), len(thresholds)))
    fit_by = np.empty((len(free), len(thresholds)), dtype=np.int64)
    for k, milli in enumerate(thresholds.tolist()):
        too_small = free < milli
        small_by[:, k] = np.where(too_small, free, 0).sum(axis=1)
        fit_by[:, k] = free.shape[1] - too_small.sum(axis=1)
    small, fits = small_by[:, which], fit_by[:, which] >= t_count[None, :]
    total = free.sum(axis=1).astype(np.float64)[:, None]
    cpu_ok = cpu_left[:, None] >= t_cpu[None, :]
    gpu_pod = (t_milli > 0)[None, :]
    ok = access & gpu_pod
    pt = p[None, :] * total  # p * all free milli
    zero = np.zeros_like(pt)
    buckets = (
        np.where(ok & ~fits & ~cpu_ok, pt, zero),  # Q1 lack both
        np.where(ok & fits & cpu_ok, p[None, :] * small, np.where(ok & ~fits & cpu_ok, pt, zero)),  # Q2
        np.where(ok & fits & ~cpu_ok, pt, zero),  # Q4 lack CPU
        np.where(~gpu_pod & cpu_ok, pt, zero),  # XL: no GPU asked, CPU enough
        np.where(~gpu_pod & ~cpu_ok, pt, zero),  # XR
        np.where(gpu_pod & ~access, pt, zero),  # NA: model not accepted
    )
    measure = np.zeros(len(free))
    for bucket in buckets:
        measure = measure + np.cumsum(bucket, axis=1)[:, -1]
    result: np.ndarray = measure[inverse]
    return result
