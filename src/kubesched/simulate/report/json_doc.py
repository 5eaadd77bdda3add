"""The simulation result as one JSON document (``--output json``); the HTML report and the
terminal summary are rendered from the same document, so the three never disagree.

Each placement carries the pod's verdict, why it did not fit (reason → number of nodes) and the
chosen node's score, so the document grows with the pods, not pods × nodes. The per-node detail
(every evaluated node's rejection, the top-scored nodes) is streamed as JSON Lines by
``write_jsonl`` (``--output jsonl``): the document without its placements on the first line, then
one placement per line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, BinaryIO

import orjson

import kubesched
from kubesched.simulate.engine.records import (
    GATED,
    PENDING,
    PRE_BOUND,
    PREEMPTED,
    SCHEDULED,
    UNSCHEDULABLE,
    record_detail_json,
    record_to_json,
)
from kubesched.simulate.engine.runner import SimulationResult
from kubesched.snapshot.table import CPU, MEMORY, PODS

#: 2: placements carry ``reasons`` and the chosen node's ``score``; ``filters`` and ``scores``
#: (per node) moved to ``--output jsonl``.
SCHEMA_VERSION = 2


def _resource_dicts(table: Any, rows: Any, matrix: Any) -> list[dict[str, int]]:
    """Per row, {resource: amount}: the first four resources always, others when non-zero. Rows
    beyond ``matrix`` get {}; ``matrix`` may predate extended-resource columns added during the
    run (the requests before it: engine/runner.py ``_rows_now``, where a node added during the run
    has zeros)."""
    cols = min(len(table.resource_names), matrix.shape[1])
    resource_names = table.resource_names[:cols]
    inside = rows[rows < matrix.shape[0]]
    values = iter(matrix[inside, :cols].tolist())
    out: list[dict[str, int]] = []
    for row in rows.tolist():
        if row >= matrix.shape[0]:
            out.append({})
            continue
        out.append({r: v for c, (r, v) in enumerate(zip(resource_names, next(values), strict=True)) if v or c < 4})
    return out


def result_to_json(result: SimulationResult, placements: bool = True) -> dict[str, Any]:
    """The document; without ``placements`` its ``placements`` list is left empty (``write_jsonl``
    streams them)."""
    sched = result.scheduler
    table = sched.cache.table
    names = table.names
    alive = table.alive_rows()
    columns = zip(
        alive.tolist(),
        table.unschedulable[alive].tolist(),
        _resource_dicts(table, alive, table.allocatable),
        _resource_dicts(table, alive, result.requested_before),
        _resource_dicts(table, alive, table.requested),
        strict=True,
    )
    nodes = [
        {
            "name": names[r],
            "labels": table.labels[r],
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in table.taints(r)],
            "unschedulable": bool(cordoned),
            "allocatable": allocatable,
            "requestedBefore": before,
            "requestedAfter": after,
            "podsBefore": result.pods_before.get(names[r], 0),
            "podsAfter": len(table.pods[r]),
        }
        for r, cordoned, allocatable, before, after in columns
    ]
    records = list(result.records.values())
    status_counts = Counter(rec.status for rec in records)
    in_table = {n["name"] for n in nodes}
    # Pods bound to a node the input lacks (the loader warned about each): pre-bound, in no node's usage.
    on_missing_nodes = sum(1 for rec in records if rec.status == PRE_BOUND and rec.node not in in_table)
    reasons: Counter[str] = Counter()
    for rec in records:
        if rec.status == UNSCHEDULABLE:
            reasons.update(rec.reasons.keys())
    alloc = table.allocatable[alive]

    def util(matrix: Any, col: int) -> float:
        total = int(alloc[:, col].sum())
        return round(float(matrix[alive][:, col].sum()) / total, 6) if total else 0.0

    simulated = status_counts[SCHEDULED] + status_counts[UNSCHEDULABLE] + status_counts["Error"] + status_counts[
        "Waiting"
    ]
    doc: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "kubeschedVersion": kubesched.__version__,
        "source": result.input.source,
        "profiles": [p.scheduler_name for p in result.config.profiles],
        "summary": {
            "nodes": len(alive),
            "pods": len(records),
            "preBound": status_counts[PRE_BOUND],
            "preBoundOnMissingNodes": on_missing_nodes,
            # Succeeded/Failed pods of the input: neither scheduled nor using capacity, not in ``pods``.
            "terminal": result.input.terminal_pods,
            "simulated": simulated,
            "scheduled": status_counts[SCHEDULED],
            "unschedulable": status_counts[UNSCHEDULABLE],
            "errors": status_counts["Error"],
            "waiting": status_counts["Waiting"],
            "pending": status_counts[PENDING],
            "gated": status_counts[GATED],
            "attempts": result.attempts,
            "virtualSeconds": round(result.virtual_seconds, 6),
            "wallSeconds": round(result.wall_seconds, 6),
            "podsPerSecond": round(simulated / result.wall_seconds, 1) if result.wall_seconds else 0.0,
            "interrupted": result.interrupted,
            "stalled": result.stalled,
            "preemptions": len(result.preemptions),
            "preempted": status_counts[PREEMPTED],
            "utilisationBefore": {
                "cpu": util(result.requested_before, CPU),
                "memory": util(result.requested_before, MEMORY),
                "pods": util(result.requested_before, PODS),
            },
            "utilisationAfter": {
                "cpu": util(table.requested, CPU),
                "memory": util(table.requested, MEMORY),
                "pods": util(table.requested, PODS),
            },
        },
        "skippedObjects": dict(result.input.skipped),
        "inputWarnings": list(result.input.warnings),
        "reassignedSchedulerNames": dict(result.reassigned),
        "unschedulableReasons": dict(reasons.most_common()),
        "nodes": nodes,
        "placements": [record_to_json(rec) for rec in records if rec.status != PRE_BOUND] if placements else [],
        "preemptions": [p.to_json() for p in result.preemptions],
    }
    if result.timeline is not None:
        # The scenario replayed over time: its counts, the GPU allocation at 100 % / 130 % arrived
        # GPU demand (as the FGD simulator's expected results), and the samples in columns.
        doc["timeline"] = result.timeline.to_json()
    if result.pod_groups:
        # Each PodGroup's status at the end of the run (as the live scheduler would write it) and,
        # for a gang left unplaced, the gang-level reason.
        doc["podGroups"] = result.pod_groups
    if result.workload_pod_groups:
        # The same for the Workload API's PodGroups (scheduling.k8s.io), a kind of its own: a
        # group of either API may have the same namespace/name.
        doc["workloadPodGroups"] = result.workload_pod_groups
    if result.workload_composite_pod_groups:
        doc["workloadCompositePodGroups"] = result.workload_composite_pod_groups
    if result.underlay_ip_pools:
        # Each UnderlayIPPool's usage at the end of the run (total, active, reserved, free).
        doc["underlayIPPools"] = result.underlay_ip_pools
    return doc


def write_jsonl(doc: dict[str, Any], result: SimulationResult, out: BinaryIO) -> None:
    """JSON Lines: ``doc`` (the document, ``result_to_json``) without its placements, then one
    placement per line with its per-node detail (``record_detail_json``), each expanded to node
    names only as it is written."""
    header = {"kind": "Simulation", **{k: v for k, v in doc.items() if k != "placements"}}
    out.write(orjson.dumps(header) + b"\n")
    names = result.scheduler.cache.table.names
    for rec in result.records.values():
        if rec.status != PRE_BOUND:
            out.write(orjson.dumps({"kind": "Placement", **record_detail_json(rec, names)}) + b"\n")
