"""Values passed between the queue, the runtime and plugins: events, queued pods, results."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntFlag

import numpy as np
import numpy.typing as npt

from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo


class ActionType(IntFlag):
    """What happened to an object (upstream framework.ActionType, events.go)."""

    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_OTHER = 512
    #: status.declaredFeatures of a node changed (upstream UpdateNodeDeclaredFeature).
    UPDATE_NODE_DECLARED_FEATURE = 1024
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN | UPDATE_OTHER
        | UPDATE_NODE_DECLARED_FEATURE
    )
    ALL = ADD | DELETE | UPDATE


#: Resource names used in ClusterEvent. "Pod" means an assigned (bound or assumed) pod; a CRD uses
#: its kind (e.g. "PodGroup").
NODE = "Node"
POD = "Pod"
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: ActionType
    label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether this registered interest covers an incoming event (upstream ClusterEvent.Match)."""
        return (self.resource in (WILDCARD, incoming.resource)) and bool(self.action & incoming.action)


EVENT_NODE_ADD = ClusterEvent(NODE, ActionType.ADD, "NodeAdd")
EVENT_POD_DELETE = ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete")
EVENT_WILDCARD = ClusterEvent(WILDCARD, ActionType.ALL, "WildCardEvent")
#: Pods that stayed unschedulable longer than the maximum are retried on this pseudo-event.
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.ALL, "UnschedulableTimeout")
EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.ALL, "ForceActivate")


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue with its attempt bookkeeping (upstream framework.QueuedPodInfo)."""

    pod: PodInfo
    #: When the pod was last added to the queue or last failed (backoff counts from here).
    timestamp: float
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    #: Plugins that rejected the pod in its last attempt; only events they care about move it.
    unschedulable_plugins: set[str] = field(default_factory=set)
    #: Set when the last failure was an internal error rather than a verdict.
    failed_with_error: bool = False
    #: Gated by a PreEnqueue plugin (e.g. SchedulingGates while spec.schedulingGates is not
    #: empty): the pod waits out of the active queue, without attempts.
    gated: bool = False
    #: The PreEnqueue plugin that gated the pod ("" when none) and its Status (upstream
    #: GatingPlugin); the plugin runs first when the pod is checked again.
    gating_plugin: str = ""
    gating_status: Status | None = None
    #: When the unschedulable flush last re-checked the gated pod (upstream flush timestamp).
    flush_timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter plugin's narrowing of the candidate nodes; None means all nodes."""

    node_names: frozenset[str] | None = None

    @property
    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """A PostFilter plugin's outcome, e.g. a node nominated after preemption."""

    nominated_node_name: str = ""


class Verdicts:
    """Filter verdicts over a batch of candidate rows.

    ``codes[i] == 0`` means candidate i passes; ``codes[i] == k > 0`` means it fails with
    ``statuses[k - 1]``. Sharing one Status among many nodes keeps a 5,000-node failure cheap.
    """

    __slots__ = ("codes", "statuses")

    def __init__(self, codes: npt.NDArray[np.int32], statuses: list[Status]) -> None:
        self.codes = codes
        self.statuses = statuses

    @staticmethod
    def all_pass(n: int) -> Verdicts:
        return Verdicts(np.zeros(n, dtype=np.int32), [])

    @staticmethod
    def from_mask(ok: npt.NDArray[np.bool_], failure: Status) -> Verdicts:
        """Candidates where ``ok`` is False fail with ``failure``."""
        return Verdicts((~ok).astype(np.int32), [failure])

    @staticmethod
    def from_statuses(n: int, statuses: Iterable[Status]) -> Verdicts:
        """Verdicts from one status per candidate (``n`` of them), equal failures sharing a code:
        the batch form of a per-node Filter."""
        distinct: list[Status] = []
        index: dict[Status, int] = {}
        codes = np.zeros(n, dtype=np.int32)
        for i, st in enumerate(statuses):
            if not st.is_success:
                code = index.get(st)
                if code is None:
                    distinct.append(st)
                    code = index[st] = len(distinct)
                codes[i] = code
        return Verdicts(codes, distinct)

    def passed(self) -> npt.NDArray[np.bool_]:
        result: npt.NDArray[np.bool_] = self.codes == 0
        return result
