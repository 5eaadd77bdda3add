"""Workload inflation and the reference's experiment order, seeded.

Both follow hkust-adsl/kubernetes-scheduler-simulator ``pkg/simulator/core.go`` ``Simulate`` and
``pkg/simulator/simulator.go``, which draw from one seeded generator in this order:

1. ``sequential`` (``SortClusterPods`` with ``shufflePod: true``): the pods, sorted by name, in a
   random order; they arrive one after the other and are never deleted (the experiments' pods
   carry no creation or deletion time);
2. ``inflate`` (``TunePodsByNodeTotalResource``, ``-tune 1.3`` in
   ``experiments/run_scripts/generate_run_scripts.py``): while the arrived GPU demand is below
   ``factor`` × the nodes' GPU capacity, clone a random pod of the original workload (sorted by
   name) and add it (``tuneUpPods``); above it, drop random pods until it is not (``tuneDownPods``).
   As there, a clone is added while the demand plus its milli *per GPU* stays within the target,
   then its whole demand (milli × count) is counted: the last clone may overshoot by a few GPUs.

The generator is numpy's (``default_rng(seed)``), not Go's ``math/rand``: the same seed gives the
same workload here, not the reference's workload for that seed.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from kubesched.simulate.inputs.scenario import PodArrival, Scenario, ScenarioError
from kubesched.snapshot.gpushare.model import GPU_COUNT, GPU_MILLI, gpu_demand_milli, raw_gpu_request

__all__ = ["arrived_gpu_demand", "gpu_capacity", "inflate", "sequential"]


def gpu_capacity(scenario: Scenario) -> int:
    """GPU milli of the nodes present at the start (``RecordNodeTotalResource``)."""
    total = 0
    for node in scenario.nodes:
        capacity = (node.get("status") or {}).get("capacity") or {}
        try:
            total += int(str(capacity.get(GPU_MILLI, 0)))
        except ValueError:
            continue
    return total


def arrived_gpu_demand(arrivals: list[PodArrival]) -> int:
    """GPU milli the arrivals ask for in all (``RecordPodTotalResourceReq``)."""
    return sum(gpu_demand_milli(a.pod) for a in arrivals)


def sequential(scenario: Scenario, rng: np.random.Generator) -> Scenario:
    """The pods in a random order (from their name order), one arriving each virtual second from
    time 0, none leaving."""
    pods = sorted((a.pod for a in scenario.arrivals), key=lambda p: str((p.get("metadata") or {}).get("name")))
    order = rng.permutation(len(pods))
    arrivals = [PodArrival(float(i), pods[j]) for i, j in enumerate(order.tolist())]
    return replace(scenario, arrivals=arrivals, sequential=True)


def _clone(pod: dict[str, object], name: str) -> dict[str, object]:
    clone = copy.deepcopy(pod)
    meta = clone.setdefault("metadata", {})
    assert isinstance(meta, dict)
    meta["name"] = name
    meta.pop("uid", None)
    return clone


def inflate(scenario: Scenario, factor: float, rng: np.random.Generator) -> Scenario:
    """The scenario with its arrived GPU demand brought to ``factor`` × the GPU capacity.

    A clone of a timed scenario arrives with its original (same time, same lifetime); in a
    ``sequential`` one the clones arrive after the last pod, one a second, in the order drawn."""
    if factor <= 0:
        raise ScenarioError(f"--inflate {factor:g}: must be a positive factor of the GPU capacity")
    capacity = gpu_capacity(scenario)
    if capacity <= 0:
        raise ScenarioError(f"--inflate: {scenario.source} has no GPU capacity "
                            f"(no node with {GPU_MILLI}/{GPU_COUNT})")
    target = factor * capacity
    arrivals = list(scenario.arrivals)
    demand = arrived_gpu_demand(arrivals)
    if demand > target:  # tuneDownPods
        while demand > target and arrivals:
            gone = arrivals.pop(int(rng.integers(len(arrivals))))
            demand -= gpu_demand_milli(gone.pod)
        return replace(scenario, arrivals=arrivals)
    originals = sorted(scenario.arrivals, key=lambda a: str((a.pod.get("metadata") or {}).get("name")))
    if not any(gpu_demand_milli(a.pod) for a in originals):
        raise ScenarioError(f"--inflate: no pod of {scenario.source} asks for a GPU ({GPU_MILLI} annotation)")
    clones: list[PodArrival] = []
    next_at = (max((a.at for a in arrivals), default=-1.0) + 1.0) if scenario.sequential else 0.0
    while True:  # tuneUpPods
        source = originals[int(rng.integers(len(originals)))]
        gpu = raw_gpu_request(source.pod)
        if demand + (gpu.milli if gpu is not None else 0) > target:
            break
        demand += gpu.total_milli if gpu is not None else 0
        name = f"{(source.pod.get('metadata') or {}).get('name')}-tuned-{len(clones)}"
        if scenario.sequential:
            clones.append(PodArrival(next_at + len(clones), _clone(source.pod, name)))
        else:
            clones.append(PodArrival(source.at, _clone(source.pod, name), source.lifetime))
    inflated = replace(scenario, arrivals=arrivals + clones)
    return inflated if scenario.sequential else inflated.sorted()
