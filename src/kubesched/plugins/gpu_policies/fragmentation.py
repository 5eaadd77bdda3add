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

from kubesched.plugins.gpu_policies.common import BoolArray
from kubesched.plugins.gpu_policies.typical_pods import TypicalPod
from kubesched.snapshot.table import IntArray


@dataclass(frozen=True, slots=True)
class NodeStates:
    """Node states to measure: CPU left, free milli per GPU (0 for GPUs a node lacks), and for
    each typical pod whether the node's model accepts it (``(states, typical pods)``)."""

    cpu_left: IntArray
    free: IntArray
    access: BoolArray


def fragmentation(states: NodeStates, pods: Sequence[TypicalPod]) -> np.ndarray:
    """``NodeGpuShareFragAmountScore`` of every state (float64 array)."""
    n = len(states.cpu_left)
    if n == 0 or not pods:
        return np.zeros(n)
    # Identical states (same CPU left, same multiset of free GPUs, same access) are measured
    # once: the measure reads only sums and counts over the GPUs.
    key = np.column_stack([states.cpu_left, np.sort(states.free, axis=1), states.access.astype(np.int64)])
    unique, inverse = np.unique(key, axis=0, return_inverse=True)
    g = states.free.shape[1]
    cpu, free, access = unique[:, 0], unique[:, 1 : 1 + g], unique[:, 1 + g :].astype(np.bool_)
    total = free.sum(axis=1).astype(np.float64)
    # Buckets in the reference's order: Q1, Q2, Q4, XL, XR, NA (Q3 is not fragmentation).
    q1, q2, q4, xl, xr, na = (np.zeros(len(unique)) for _ in range(6))
    for t, pod in enumerate(pods):
        p = pod.frequency
        cpu_ok = cpu >= pod.milli_cpu
        if pod.milli_gpu == 0:
            xl += np.where(cpu_ok, p * total, 0.0)
            xr += np.where(cpu_ok, 0.0, p * total)
            continue
        ok = access[:, t]
        na += np.where(ok, 0.0, p * total)
        fits = (free >= pod.milli_gpu).sum(axis=1) >= max(pod.gpu_count, 1)
        small = np.where(free < pod.milli_gpu, free, 0).sum(axis=1).astype(np.float64)
        q3 = ok & fits & cpu_ok
        q2 += np.where(q3, p * small, 0.0) + np.where(ok & ~fits & cpu_ok, p * total, 0.0)
        q4 += np.where(ok & fits & ~cpu_ok, p * total, 0.0)
        q1 += np.where(ok & ~fits & ~cpu_ok, p * total, 0.0)
    measure: np.ndarray = q1 + q2 + q4 + xl + xr + na
    return measure[inverse.reshape(-1)]
