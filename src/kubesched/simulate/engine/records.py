"""What the simulator remembers about each pod: outcome, attempts, why it did not fit (reason →
number of nodes) and the chosen node's score.

Per-node detail — every evaluated node's rejection and the top-k scored nodes — is kept only when
asked for (``Recorder(per_node=True)``: ``--output jsonl``), and then columnar (``Rejections``:
two small integer arrays per pod), expanded to node names only while a pod's line is written. So a
10,000-pod run on 5,000 nodes keeps a few hundred bytes per pod, not the millions of per-node
statuses its scheduling cycles produced."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.framework.clock import Clock
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Preemptor
from kubesched.framework.status import Status
from kubesched.scheduler import ScheduleFailure, ScheduleResult, SchedulerObserver
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
ERROR = "Error"
PRE_BOUND = "PreBound"
PENDING = "Pending"
WAITING = "Waiting"
#: A pod evicted by preemption (deleted from the simulated cluster after its grace period).
PREEMPTED = "Preempted"
#: A pod a PreEnqueue plugin still held back at the end (e.g. spec.schedulingGates): never attempted.
GATED = "Gated"


@dataclass(slots=True)
class ScoredNode:
    node: str
    total: int
    plugins: dict[str, int]


@dataclass(slots=True, frozen=True)
class Rejections:
    """A pod's per-node filter rejections, columnar: the rejected node rows and, for each, an index
    into ``statuses``. Node names are looked up only by ``by_plugin``."""

    rows: npt.NDArray[np.int32]
    codes: npt.NDArray[np.uint16] | npt.NDArray[np.int32]
    statuses: tuple[Status, ...]

    @classmethod
    def of(cls, diagnosis: Diagnosis) -> Rejections | None:
        rows, codes, statuses = diagnosis.node_to_status.rejected()
        if not len(rows):
            return None
        small = codes.astype(np.uint16) if len(statuses) <= np.iinfo(np.uint16).max else codes
        return cls(rows, small, tuple(statuses))

    def __len__(self) -> int:
        return len(self.rows)

    def by_plugin(self, names: Sequence[str]) -> dict[str, dict[str, list[str]]]:
        """{plugin: {reason: [nodes]}}: plugins and reasons in the order they first rejected, nodes
        in evaluation order (one status at a time, not one node at a time)."""
        out: dict[str, dict[str, list[str]]] = {}
        order = np.argsort(self.codes, kind="stable")
        codes = self.codes[order]
        starts = np.flatnonzero(np.diff(codes)) + 1
        for group in np.split(order, starts):
            status = self.statuses[int(self.codes[group[0]])]
            nodes = out.setdefault(status.plugin or "PreFilter", {}).setdefault(status.message, [])
            nodes.extend(names[r] for r in self.rows[group].tolist())
        return out


@dataclass(slots=True)
class PodRecord:
    key: str
    uid: str
    profile: str
    status: str = PENDING
    node: str | None = None
    attempts: int = 0
    message: str = ""
    time: float = 0.0
    feasible_nodes: int = 0
    evaluated_nodes: int = 0
    #: The chosen node's score first; with per-node detail, then the next best up to top-k.
    top_scores: list[ScoredNode] = field(default_factory=list)
    #: A pod that did not fit: how many nodes gave each reason (the FitError's counts), most first.
    reasons: dict[str, int] = field(default_factory=dict)
    #: Every evaluated node's rejection (per-node detail only).
    rejections: Rejections | None = None


@dataclass(slots=True)
class PreemptionRecord:
    """One preemption: who preempted whom on which node, and why (the preemptor's FitError,
    whose ``preemption: ...`` suffix names the node and the number of victims)."""

    preemptor: str
    profile: str
    node: str
    victims: list[str]
    time: float
    reason: str = ""
    #: Lower-priority pods nominated to the node that lost their nomination.
    cleared_nominations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "preemptor": self.preemptor,
            "profile": self.profile,
            "node": self.node,
            "victims": list(self.victims),
            "reason": self.reason,
            "time": round(self.time, 6),
            "clearedNominations": list(self.cleared_nominations),
        }


#: ``NodeToStatus.memo`` key of a failure's reasons as a record lists them (most nodes first).
_REASONS_MEMO = "records/reasons"


class Recorder(SchedulerObserver):
    def __init__(
        self,
        table: NodeTable,
        clock: Clock,
        top_k: int = 5,
        on_attempt: Callable[[PodInfo, str, str | None], None] | None = None,
        max_error_attempts: int = 10,
        give_up: Callable[[PodInfo], None] | None = None,
        per_node: bool = False,
        object_status: Callable[[str, str, str, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        #: Scored nodes kept per pod: the chosen one, or with per-node detail the top k.
        self.top_k = top_k if per_node else 1
        self.per_node = per_node
        self.records: dict[str, PodRecord] = {}
        self.attempts = 0
        self.bound_count = 0
        self._on_attempt = on_attempt
        self._max_error_attempts = max_error_attempts
        self._give_up = give_up
        #: Where status the core writes on declared objects goes (the simulated cluster's objects).
        self._object_status = object_status
        self._errors: dict[str, int] = {}
        #: The first exception behind each distinct error message (plugin bugs), for ``--debug``.
        self.exceptions: dict[str, BaseException] = {}
        self.preemptions: list[PreemptionRecord] = []
        #: Preemptor uid → its preemption whose reason the next failure fills in.
        self._awaiting_reason: dict[str, PreemptionRecord] = {}

    def object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        if self._object_status is not None:
            self._object_status(kind, key, uid, status)

    def record(self, pod: PodInfo, profile: str) -> PodRecord:
        rec = self.records.get(pod.uid)
        if rec is None:
            rec = self.records[pod.uid] = PodRecord(pod.key, pod.uid, profile)
        return rec

    def scheduled(self, pod: PodInfo, profile: str, result: ScheduleResult) -> None:
        if self._on_attempt is not None:
            self._on_attempt(pod, profile, result.node_name)
        rec = self.record(pod, profile)
        rec.attempts += 1
        self.attempts += 1
        rec.status = WAITING
        rec.node = result.node_name
        rec.message = ""
        rec.time = self.clock.now()
        rec.feasible_nodes = result.feasible_nodes
        rec.evaluated_nodes = result.evaluated_nodes
        rec.reasons = {}
        rec.rejections = Rejections.of(result.diagnosis) if self.per_node else None
        rec.top_scores = self._top(result)

    def _top(self, result: ScheduleResult) -> list[ScoredNode]:
        scored = result.scored
        if scored is None:
            return [ScoredNode(result.node_name, 0, {})]
        totals = scored.totals
        names = self.table.names
        # The chosen node comes first, even when ties put other nodes ahead or out of the top k.
        chosen = (scored.rows == self.table.row_of(result.node_name)).nonzero()[0]
        k = min(self.top_k, len(totals))
        if k == 1 and len(chosen):
            # The default (no per-node detail): the chosen node alone; only its values are weighted.
            per_plugin = scored.by_plugin_at(chosen[:1])
            return [ScoredNode(result.node_name, int(totals[chosen[0]]), {p: v[0] for p, v in per_plugin.items()})]
        idx = np.argpartition(-totals, k - 1)[:k] if len(totals) > k else np.arange(len(totals))
        idx = idx[np.argsort(-totals[idx], kind="stable")]
        if len(chosen):
            idx = np.concatenate((chosen[:1], idx[idx != chosen[0]]))[:k]
        rows = scored.rows[idx].tolist()
        per_plugin = scored.by_plugin_at(idx)
        return [
            ScoredNode(names[row], int(totals[i]), {p: v[j] for p, v in per_plugin.items()})
            for j, (i, row) in enumerate(zip(idx.tolist(), rows, strict=True))
        ]

    def preempted(
        self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
        cleared: Sequence[PodInfo], by: Preemptor, in_memory: Collection[str] = (),
    ) -> None:
        rec = PreemptionRecord(
            preemptor.key, profile, node_name, [v.key for v in victims], self.clock.now(),
            cleared_nominations=[p.key for p in cleared],
        )
        self.preemptions.append(rec)
        self._awaiting_reason[preemptor.uid] = rec
        for v in victims:
            victim = self.records.get(v.uid)
            if victim is not None:
                victim.status = PREEMPTED
                victim.message = f"preempted by {preemptor.key} on node {node_name}"
                victim.time = self.clock.now()

    def failed(self, pod: PodInfo, profile: str, failure: ScheduleFailure) -> None:
        if self._on_attempt is not None:
            self._on_attempt(pod, profile, None)
        if self._awaiting_reason:
            preemption = self._awaiting_reason.pop(pod.uid, None)
            if preemption is not None:
                preemption.reason = failure.message
        rec = self.record(pod, profile)
        rec.attempts += 1
        self.attempts += 1
        rec.status = UNSCHEDULABLE if failure.unschedulable else ERROR
        rec.node = None
        rec.message = failure.message
        rec.time = self.clock.now()
        statuses = failure.diagnosis.node_to_status
        reasons = statuses.memo.get(_REASONS_MEMO)
        if reasons is None:  # once per set of statuses (a failed pass adopted by many attempts)
            histogram = statuses.reason_histogram()
            reasons = statuses.memo[_REASONS_MEMO] = dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])))
        rec.reasons = dict(reasons)
        rec.rejections = Rejections.of(failure.diagnosis) if self.per_node else None
        rec.top_scores = []
        rec.feasible_nodes = 0
        rec.evaluated_nodes = len(failure.diagnosis.node_to_status)
        if not failure.unschedulable:
            if failure.status.exception is not None:
                self.exceptions.setdefault(failure.message, failure.status.exception)
            # Errors back off and retry for ever upstream; a replay gives up after a few so it ends.
            n = self._errors[pod.uid] = self._errors.get(pod.uid, 0) + 1
            if n >= self._max_error_attempts and self._give_up is not None:
                rec.message = f"gave up after {n} attempts that ended in an error: {failure.message}"
                self._give_up(pod)

    def bound(self, pod: PodInfo, profile: str, node_name: str) -> None:
        rec = self.record(pod, profile)
        rec.status = SCHEDULED
        rec.node = node_name
        rec.time = self.clock.now()
        self.bound_count += 1


def _score_json(s: ScoredNode) -> dict[str, Any]:
    return {"node": s.node, "total": s.total, "plugins": s.plugins}


def record_to_json(rec: PodRecord) -> dict[str, Any]:
    """A placement as ``--output json`` shows it: the verdict, why the pod did not fit (reason →
    nodes) and the chosen node's score."""
    return {
        "pod": rec.key,
        "uid": rec.uid,
        "profile": rec.profile,
        "status": rec.status,
        "node": rec.node,
        "attempts": rec.attempts,
        "message": rec.message,
        "time": round(rec.time, 6),
        "feasibleNodes": rec.feasible_nodes,
        "evaluatedNodes": rec.evaluated_nodes,
        "reasons": rec.reasons,
        "score": _score_json(rec.top_scores[0]) if rec.top_scores else None,
    }


def record_detail_json(rec: PodRecord, names: Sequence[str]) -> dict[str, Any]:
    """A placement with its per-node detail (``--output jsonl``): ``filters`` {plugin: {reason:
    [nodes]}} over the nodes its last attempt evaluated, and ``scores``, the top-scored nodes with
    the chosen one first."""
    out = record_to_json(rec)
    out["filters"] = rec.rejections.by_plugin(names) if rec.rejections is not None else {}
    out["scores"] = [_score_json(s) for s in rec.top_scores]
    return out
