"""The simulation result as one JSON document (``--output json``); the HTML report and the
terminal summary are rendered from the same document, so the three never disagree."""

from __future__ import annotations

from collections import Counter
from typing import Any

import kubesched
from kubesched.simulate.records import PENDING, PRE_BOUND, PREEMPTED, SCHEDULED, UNSCHEDULABLE, record_to_json
from kubesched.simulate.runner import SimulationResult
from kubesched.snapshot.table import CPU, MEMORY, PODS

SCHEMA_VERSION = 1


def _resources(table: Any, row: int, matrix: Any) -> dict[str, int]:
    # ``matrix`` may predate extended-resource columns added during the run.
    cols = min(len(table.resource_names), matrix.shape[1])
    return {table.resource_names[c]: int(matrix[row, c]) for c in range(cols) if matrix[row, c] or c < 4}


def result_to_json(result: SimulationResult) -> dict[str, Any]:
    sched = result.scheduler
    table = sched.cache.table
    names = table.names
    nodes = []
    for row in table.alive_rows():
        r = int(row)
        name = names[r]
        nodes.append(
            {
                "name": name,
                "labels": table.labels[r],
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in table.taints(r)],
                "unschedulable": bool(table.unschedulable[r]),
                "allocatable": _resources(table, r, table.allocatable),
                "requestedBefore": _resources(table, r, result.requested_before)
                if r < len(result.requested_before)
                else {},
                "requestedAfter": _resources(table, r, table.requested),
                "podsBefore": result.pods_before.get(name, 0),
                "podsAfter": len(table.pods[r]),
            }
        )
    records = list(result.records.values())
    placements = [record_to_json(rec, names) for rec in records if rec.status != PRE_BOUND]
    status_counts = Counter(rec.status for rec in records)
    reasons: Counter[str] = Counter()
    for rec in records:
        if rec.status == UNSCHEDULABLE and rec.diagnosis is not None:
            hist = rec.diagnosis.node_to_status.reason_histogram()
            for reason in hist:
                reasons[reason] += 1
    alive = table.alive_rows()
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
            "simulated": simulated,
            "scheduled": status_counts[SCHEDULED],
            "unschedulable": status_counts[UNSCHEDULABLE],
            "errors": status_counts["Error"],
            "waiting": status_counts["Waiting"],
            "pending": status_counts[PENDING],
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
        "reassignedSchedulerNames": dict(result.reassigned),
        "unschedulableReasons": dict(reasons.most_common()),
        "nodes": nodes,
        "placements": placements,
        "preemptions": [p.to_json() for p in result.preemptions],
    }
    if result.pod_groups:
        # Each PodGroup's status at the end of the run (as the live scheduler would write it) and,
        # for a gang left unplaced, the gang-level reason.
        doc["podGroups"] = result.pod_groups
    return doc
