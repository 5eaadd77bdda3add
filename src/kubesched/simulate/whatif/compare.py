"""Configuration comparison (``kubesched compare --config A --config B ...``): the same cluster and
seed scheduled with each configuration, and what differs — pods bound, nodes used, how evenly the
requests spread over the nodes, how fragmented the free capacity is left, and which pods landed
elsewhere.

Measures, per configuration, over the schedulable nodes once the run ends:

* utilisation per resource (requested / allocatable of each node): mean, population stddev, min,
  max — a bin-packing profile (MostAllocated) shows a wide spread, a spreading one a narrow one;
* fragmentation: each node's free capacity is the largest pod it could still take; reported are the
  largest free CPU and the largest free memory found on any single node (with the other resource
  free on that node), the total free, and per node (JSON) its free CPU and memory;
* nodes used (running at least one pod), pods bound, unschedulable, preemptions;
* placements that differ: pods whose outcome (the node, or the status when not placed) is not the
  same under every configuration.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.simulate.engine.records import PRE_BOUND, PREEMPTED, SCHEDULED, UNSCHEDULABLE
from kubesched.simulate.engine.runner import SimulationResult
from kubesched.snapshot.table import CPU, MEMORY, PODS

__all__ = ["compare_doc", "run_summary"]

RESOURCES = (("cpu", CPU), ("memory", MEMORY), ("pods", PODS))


def _stats(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"mean": 0.0, "stddev": 0.0, "min": 0.0, "max": 0.0}
    return {
        "mean": round(float(values.mean()), 6),
        "stddev": round(float(values.std()), 6),
        "min": round(float(values.min()), 6),
        "max": round(float(values.max()), 6),
    }


def run_summary(label: str, path: str, result: SimulationResult) -> dict[str, Any]:
    """What one configuration did, plus every pod's outcome (``outcomes``: pod key → node or status)."""
    table = result.scheduler.cache.table
    alive = table.alive_rows()
    rows = alive[~table.unschedulable[alive].astype(bool)]
    names = table.names
    alloc = table.allocatable[rows]
    req = table.requested[rows]
    utilisation, histograms = {}, {}
    for res, col in RESOURCES:
        have = alloc[:, col] > 0
        ratios = req[have, col] / alloc[have, col]
        utilisation[res] = _stats(ratios)
        # Nodes per 10 % band of utilisation (the last band: over 100 %).
        bands = np.where(ratios > 1.0 + 1e-9, 10, np.minimum((ratios * 10 + 1e-9).astype(np.int64), 9))
        histograms[res] = np.bincount(bands, minlength=11).tolist()
    free_cpu = np.maximum(alloc[:, CPU] - req[:, CPU], 0)
    free_mem = np.maximum(alloc[:, MEMORY] - req[:, MEMORY], 0)
    row_list = rows.tolist()
    fragmentation: dict[str, Any] = {"freeCpu": int(free_cpu.sum()), "freeMemory": int(free_mem.sum())}
    if len(rows):
        i, j = int(np.argmax(free_cpu)), int(np.argmax(free_mem))
        fragmentation["largestFreeCpu"] = {"node": names[row_list[i]], "cpu": int(free_cpu[i]),
                                           "memory": int(free_mem[i])}
        fragmentation["largestFreeMemory"] = {"node": names[row_list[j]], "cpu": int(free_cpu[j]),
                                              "memory": int(free_mem[j])}
    fragmentation["freePerNode"] = {
        names[r]: [c, m] for r, c, m in zip(row_list, free_cpu.tolist(), free_mem.tolist(), strict=True)
    }
    status = Counter(rec.status for rec in result.records.values())
    outcomes = {
        rec.key: (rec.node if rec.status == SCHEDULED else rec.status)
        for rec in result.records.values()
        if rec.status != PRE_BOUND
    }
    return {
        "label": label,
        "path": path,
        "profiles": [p.scheduler_name for p in result.config.profiles],
        "scheduled": status[SCHEDULED],
        "unschedulable": status[UNSCHEDULABLE],
        "errors": status["Error"],
        "pending": status["Pending"] + status["Waiting"],
        "preemptions": len(result.preemptions),
        "preempted": status[PREEMPTED],
        "nodesUsed": sum(1 for r in alive.tolist() if table.pods[r]),
        "nodes": len(alive),
        "utilisation": utilisation,
        "utilisationHistogram": histograms,
        "fragmentation": fragmentation,
        "wallSeconds": round(result.wall_seconds, 3),
        "outcomes": outcomes,
    }


def compare_doc(source: str, seed: int, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The comparison document (``--output json``; the terminal and HTML views read it)."""
    keys = sorted(set().union(*(r["outcomes"] for r in runs))) if runs else []
    differences = []
    for key in keys:
        outcomes = [r["outcomes"].get(key) for r in runs]
        if len(set(outcomes)) > 1:
            differences.append({"pod": key, "outcomes": outcomes})
    configs = [{k: v for k, v in r.items() if k != "outcomes"} for r in runs]
    return {
        "kind": "Comparison",
        "schemaVersion": 1,
        "source": source,
        "seed": seed,
        "configs": configs,
        "pods": len(keys),
        "placementsDiffer": len(differences),
        "differences": differences,
    }
