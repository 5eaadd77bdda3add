"""Which GPUs of a node a pod gets, given each GPU's free milli (index order).

Reference (hkust-adsl/kubernetes-scheduler-simulator): ``pkg/simulator/plugin/open_gpu_share.go``
``allocateGpuIdBasedOnBestFit`` / ``...WorstFit`` / ``...RandomFit`` (a share pod takes one GPU:
the tightest, the loosest, or a uniformly random one among those with enough free milli; the
first in index order wins ties) and ``pkg/type/resource.go`` ``AllocateExclusiveGpuId`` (a pod
of whole GPUs takes the first fully free GPUs in index order, whatever the method).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from kubesched.snapshot.gpushare.model import MILLI, GpuRequest

#: The GPU selection methods GpuShare implements itself (``gpuSelMethod``).
BUILTIN_METHODS = ("best", "worst", "random")


def exclusive_gpus(free: Sequence[int], request: GpuRequest) -> tuple[int, ...] | None:
    """``AllocateExclusiveGpuId``: the first ``count`` fully free GPUs, or None."""
    chosen: list[int] = []
    for index, left in enumerate(free):
        if len(chosen) == request.count:
            break
        if left == MILLI:
            chosen.append(index)
    return tuple(chosen) if len(chosen) == request.count else None


def choose_gpus(
    free: Sequence[int], request: GpuRequest, method: str, rng: random.Random | None = None
) -> tuple[int, ...] | None:
    """The GPUs ``method`` (best, worst or random: ``rng`` required) gives the pod, or None when
    it does not fit."""
    if not request.shared:
        return exclusive_gpus(free, request)
    if method == "random" and rng is None:
        raise ValueError("random GPU selection needs an rng")
    chosen = -1
    seen = 0
    for index, left in enumerate(free):
        if left < request.milli:
            continue
        if rng is not None and method == "random":
            seen += 1
            if rng.randrange(seen) == 0:  # reservoir sampling, as rand.Intn(cnt) == 0
                chosen = index
        elif chosen < 0 or (left < free[chosen] if method == "best" else left > free[chosen]):
            chosen = index
    return (chosen,) if chosen >= 0 else None
