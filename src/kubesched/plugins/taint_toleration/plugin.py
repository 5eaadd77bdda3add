"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; untolerated PreferNoSchedule
taints lower the score.

Port of pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go (newest upstream):

* Filter: the first NoSchedule/NoExecute taint no toleration tolerates rejects the node with
  UnschedulableAndUnresolvable "node(s) had untolerated taint(s)". Upstream 1.29–1.34 printed
  the taint ("node(s) had untolerated taint {key: value}"); the newest upstream prints no taint
  so that one status serves every node (pod signing/batching). We follow the newest.
* PreScore keeps the tolerations with effect PreferNoSchedule or empty; Score counts the node's
  PreferNoSchedule taints none of them tolerates; NormalizeScore is DefaultNormalizeScore with
  reverse=true (fewer untolerated taints → higher score).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, Verdicts
from kubesched.plugins.helpers.taints import (
    TAINT_EFFECT_PREFER_NO_SCHEDULE,
    Toleration,
    count_intolerable_taints,
    do_not_schedule_taints_filter,
    pod_tolerations,
    tolerations_key,
    untolerated_mask,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "TaintToleration"
PRE_SCORE_STATE_KEY = "PreScore" + NAME
#: The Filter reason of the newest upstream.
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations_prefer_no_schedule: tuple[Toleration, ...]
    #: Names these tolerations for the per-taint-set counts cached on the table: the pod's
    #: tolerations as JSON (which they are derived from) is cheaper to hash than the tuple.
    counts_key: Hashable

    def clone(self) -> _PreScoreState:
        return self


#: PreScore states by the pod's tolerations_key and the comparison-operators gate: a pure function
#: of both (immutable, nothing to invalidate), shared by the pods of a family. Bounded by clearing
#: when full.
_PRE_SCORE_STATES: dict[tuple[bytes, bool], _PreScoreState] = {}
_MAX_PRE_SCORE_STATES = 1024


def tolerations_prefer_no_schedule(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """getAllTolerationPreferNoSchedule: effect PreferNoSchedule or empty (empty means all effects)."""
    return tuple(t for t in tolerations if not t.effect or t.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE)


_STATUS_UNTOLERATED = Status.unresolvable(ERR_REASON_UNTOLERATED, plugin=NAME)


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin):
    name: ClassVar[str] = NAME
    #: Feature gate TaintTolerationComparisonOperators (Lt/Gt tolerations; alpha, off by default).
    enable_taint_toleration_comparison_operators: ClassVar[bool] = False

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (taint_toleration.go): the pod's tolerations."""
        return ((signers.TOLERATIONS, signers.tolerations_signer(pod)),)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream with queueing hints: Node Add | UpdateNodeTaint, plus the pod's own toleration
        # update (our queue requeues an updated unschedulable pod anyway).
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT, "NodeAdd|UpdateNodeTaint"),)

    def filter_signature(self, state: CycleState, pod: PodInfo) -> Hashable:
        return tolerations_key(pod)  # the taints come from the nodes

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        bad = untolerated_mask(
            table, rows, pod_tolerations(pod), do_not_schedule_taints_filter,
            self.enable_taint_toleration_comparison_operators,
        )
        if not bad.any():
            return Verdicts.all_pass(len(rows))
        return Verdicts.from_mask(~bad, _STATUS_UNTOLERATED)

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        key = (tolerations_key(pod), self.enable_taint_toleration_comparison_operators)
        s = _PRE_SCORE_STATES.get(key)
        if s is None:
            prefer = tolerations_prefer_no_schedule(pod_tolerations(pod))
            s = _PreScoreState(prefer, ("TaintToleration/intolerable", *key))
            if len(_PRE_SCORE_STATES) >= _MAX_PRE_SCORE_STATES:
                _PRE_SCORE_STATES.clear()
            _PRE_SCORE_STATES[key] = s
        state.write(PRE_SCORE_STATE_KEY, s)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return Status.error(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        return count_intolerable_taints(
            table, rows, s.tolerations_prefer_no_schedule, TAINT_EFFECT_PREFER_NO_SCHEDULE,
            self.enable_taint_toleration_comparison_operators, s.counts_key,
        )

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=True, max_priority=MAX_NODE_SCORE)
        return SUCCESS
