"""PodTopologySpread: spread matching pods evenly over topology domains (hard and soft constraints).

Port of pkg/scheduler/framework/plugins/podtopologyspread (kube-scheduler v1.37):
plugin.go (args, defaults, ``EventsToRegister``), filtering.go (``PreFilter``, ``AddPod``/
``RemovePod``, ``Filter``), scoring.go (``PreScore``, ``Score``, ``NormalizeScore``) and
common.go (see ``common.py``).

* PreFilter: the pod's ``DoNotSchedule`` constraints (or, when the pod has no
  topologySpreadConstraints at all, the profile's default constraints with a selector built from
  the Services/RCs/RSs/StatefulSets selecting the pod); **Skip** when there are none. Over *all*
  nodes that carry every constraint's topology key and pass the constraint's node inclusion
  policies (nodeAffinityPolicy, default Honor: the pod's nodeSelector and required node affinity;
  nodeTaintsPolicy, default Ignore: untolerated NoSchedule/NoExecute taints), the number of
  matching pods per domain (same namespace, not terminating, selector matches), the number of
  domains and the global minimum.
* Filter: per constraint in order, a node without the topology key is UnschedulableAndUnresolvable
  "node(s) didn't match pod topology spread constraints (missing required label)"; a node where
  ``matchNum + selfMatch - minMatch > maxSkew`` (minMatch is 0 while there are fewer domains than
  minDomains) is Unschedulable "node(s) didn't match pod topology spread constraints".
* PreFilterExtensions ``add_pod``/``remove_pod`` (updateWithPod): adjust the state for a pod
  hypothetically added/removed on a node (preemption, nominated pods).
* PreScore: the ``ScheduleAnyway`` constraints (or defaults); **Skip** when none or when there are
  no nodes. Feasible nodes missing a topology key are ignored (score 0) unless the constraints
  are the system defaults. Score = Σ round(count × log(domains + 2) + maxSkew − 1) per constraint
  (hostname: the node's own count); NormalizeScore: ``100 × (max + min − s) / max``, ignored
  nodes 0.

Columnar: the per-node match counts are columns kept incrementally by
``kubesched.snapshot.topology`` (one per namespace and selector, updated on every pod add/remove;
never a walk over the cluster's pods per cycle), and so are their sums per domain over the nodes
that count for a constraint (``TopologyIndex.domain_sums``; which nodes count — inclusion policies,
required labels — is kept per node change and pod family by ``NodeLabelCache.counted_domains``):
PreFilter and PreScore read a few domain sums instead of summing over every node. Pods without
constraints (and without default constraints) pay a dict lookup and a Skip.

Deviations: the global minimum kept across ``add_pod``/``remove_pod`` is exact (as upstream's
newest ``MinMatchNum``/``DomainsAtCount``), not the two "critical paths" of older releases; the
InPlacePodVerticalScaling "resize deferred" Skip does not apply (kubesched has no resize).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.objects import ObjectKind
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.helpers.label_selector import SelectorError
from kubesched.plugins.helpers.taints import pod_tolerations, untolerated_mask
from kubesched.plugins.podtopologyspread.args import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULTING,
    PodTopologySpreadArgs,
)
from kubesched.plugins.podtopologyspread.common import (
    HONOR,
    LABEL_HOSTNAME,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    NamespaceIndex,
    NodeLabelCache,
    default_selector,
    domain_counts,
    filter_constraints,
    match_counts,
    own_constraints,
    required_affinity,
    with_selector,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeInfo, NodeTable, Rows

NAME: Final = "PodTopologySpread"
#: ErrReasonConstraintsNotMatch
ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
#: ErrReasonNodeLabelNotMatch
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
PRE_FILTER_STATE_KEY: Final = "PreFilter" + NAME
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME
_MAX_INT32: Final = 2**31 - 1

_SKIP = Status.skip()
_STATUS_SKEW = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
_STATUS_MISSING_LABEL = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
_MEMO_KEY = NAME

BoolArray = npt.NDArray[np.bool_]


def _padded(a: IntArray, size: int) -> IntArray:
    if len(a) >= size:
        return a
    out = np.zeros(size, dtype=a.dtype)
    out[: len(a)] = a
    return out


@dataclass(slots=True)
class PreFilterState:
    """preFilterState: per constraint, the matching pods and presence of each domain (indexed by
    the value code of the constraint's topology key in the node table) and the global minimum."""

    constraints: tuple[Constraint, ...]
    match_num: list[IntArray]
    present: list[BoolArray]
    min_match: list[int]

    def domains(self, i: int) -> int:
        return int(np.count_nonzero(self.present[i]))

    def min_match_num(self, i: int) -> int:
        """minMatchNum: the global minimum, or 0 while there are fewer domains than minDomains."""
        if self.domains(i) < self.constraints[i].min_domains:
            return 0
        return self.min_match[i]

    def update_min(self, i: int) -> None:
        present = self.present[i]
        self.min_match[i] = int(self.match_num[i][present].min()) if present.any() else _MAX_INT32

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            [m.copy() for m in self.match_num],
            [p.copy() for p in self.present],
            list(self.min_match),
        )


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """preScoreState: ignored nodes (a per-row mask over the table, None when there are none), per
    non-hostname constraint the pod count per domain code, and each constraint's normalizing weight."""

    constraints: tuple[Constraint, ...]
    ignored: BoolArray | None
    domain_counts: tuple[IntArray | None, ...]
    weights: tuple[float, ...]

    def clone(self) -> PreScoreState:
        return self


class PodTopologySpread(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PreFilterExtensions):
    name: ClassVar[str] = NAME
    args_model: ClassVar[type[Any] | None] = PodTopologySpreadArgs
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = (
        ObjectKind("Service", "", "v1", "services"),
        ObjectKind("ReplicationController", "", "v1", "replicationcontrollers"),
        ObjectKind("ReplicaSet", "apps", "v1", "replicasets"),
        ObjectKind("StatefulSet", "apps", "v1", "statefulsets"),
    )

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (podtopologyspread/plugin.go): spreading depends on other pods, so a pod with
        constraints, its own or the profile's defaults (the system defaults included), is not
        signable."""
        if pod.spec.get("topologySpreadConstraints") or self.default_constraints:
            return None
        return ()

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        args = args if args is not None else PodTopologySpreadArgs()
        super().__init__(args, handle)
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        raw_defaults: list[dict[str, Any]] = (
            [dict(c) for c in SYSTEM_DEFAULT_CONSTRAINTS] if self.system_defaulted
            else [c.raw() for c in args.default_constraints]
        )
        self.default_constraints = raw_defaults
        # The defaults' selectors are replaced per pod (buildDefaultConstraints), so only their
        # other fields matter: parse them once per action.
        self._default_hard = filter_constraints(raw_defaults, {}, DO_NOT_SCHEDULE)
        self._default_soft = filter_constraints(raw_defaults, {}, SCHEDULE_ANYWAY)
        self._services = NamespaceIndex()
        self._node_labels = NodeLabelCache()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            # An assigned pod added, deleted or relabelled may change a domain's count.
            ClusterEvent(POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                         "AssignedPodAdd|UpdatePodLabel|Delete"),
            # A node added, deleted, relabelled or retainted may change the domains.
            ClusterEvent(NODE, ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                         | ActionType.UPDATE_NODE_TAINT, "NodeAdd|Delete|UpdateNodeLabel|UpdateNodeTaint"),
        )

    # -- constraints --------------------------------------------------------------------------------
    def _constraints(self, pod: PodInfo, action: str) -> tuple[Constraint, ...]:
        """getConstraints / initPreScoreState: the pod's own constraints for ``action``, else the
        default ones (buildDefaultConstraints). Raises SelectorError."""
        own = own_constraints(pod, action, _MEMO_KEY)
        if own is not None:
            return own
        defaults = self._default_hard if action == DO_NOT_SCHEDULE else self._default_soft
        if not defaults:
            return ()
        objects = self.handle.objects
        for kind in self.object_kinds:  # a loop, not any(generator): this runs for most pods
            if objects(kind.kind):
                break
        else:
            return ()  # no Service or controller to build the selector from: it is empty
        selector = default_selector(pod, self.handle.objects, self._services)
        if selector.empty():
            return ()
        return with_selector(defaults, selector)

    # -- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not pod.spec.get("topologySpreadConstraints") and not self._default_hard:
            return None, _SKIP  # most pods: no constraints of their own, no hard defaults
        try:
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as e:
            what = "obtaining pod's hard" if pod.spec.get("topologySpreadConstraints") else "setting default hard"
            return None, Status.error(f"get constraints from pod: {what} topology spread constraints: {e}")
        if not constraints:
            return None, _SKIP
        state.write(PRE_FILTER_STATE_KEY, self._pre_filter_state(pod, table, constraints))
        return None, SUCCESS

    def _pre_filter_state(self, pod: PodInfo, table: NodeTable, constraints: tuple[Constraint, ...]) -> PreFilterState:
        """calPreFilterState over all nodes of the table (the domain sums come kept up to date
        from the topology index; copied, as add_pod/remove_pod change them in the state)."""
        keys = frozenset(c.topology_key for c in constraints)
        match_num: list[IntArray] = []
        present: list[BoolArray] = []
        s = PreFilterState(constraints, match_num, present, [])
        for c in constraints:
            counted = self._node_labels.counted_domains(table, pod, c, keys)
            sums = domain_counts(table, pod.namespace, c.selector, counted)
            match_num.append(np.zeros(counted.size, dtype=np.int64) if sums is None else sums.copy())
            present.append(counted.present.copy())
            s.min_match.append(0)
            s.update_min(len(match_num) - 1)
        return s

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Verdicts.from_mask(
                np.zeros(len(rows), dtype=np.bool_),
                Status.error(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found"),
            )
        codes = np.zeros(len(rows), dtype=np.int32)
        if not s.constraints:
            return Verdicts(codes, [])
        for i, c in enumerate(s.constraints):
            values = table.label_column(c.topology_key).codes[rows]
            undecided = codes == 0
            missing = values < 0
            codes[undecided & missing] = 2
            self_match = 1 if c.selector.matches(pod.labels) else 0
            lut = _padded(s.match_num[i], max(int(values.max(initial=-1)) + 1, 1))
            match = lut[np.where(missing, 0, values)]
            skew = match + self_match - s.min_match_num(i)
            codes[undecided & ~missing & (skew > c.max_skew)] = 1
        return Verdicts(codes, [_STATUS_SKEW, _STATUS_MISSING_LABEL])

    # -- explain ------------------------------------------------------------------------------------
    def explain_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows
    ) -> Sequence[str] | None:
        """Per node: for each hard constraint its domain, the matching pods there and the skew the
        pod would make (``skew 2 > 1`` rejects); for each soft one the matching pods Score counts."""
        notes: list[list[str]] = [[] for _ in range(len(rows))]
        row_list = rows.tolist()
        pre = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(pre, PreFilterState):
            for i, c in enumerate(pre.constraints):
                col = table.label_column(c.topology_key)
                names = {code: value for value, code in col.values.items()}
                lut = _padded(pre.match_num[i], max(len(col.values), 1))
                extra = (1 if c.selector.matches(pod.labels) else 0) - pre.min_match_num(i)
                for j, r in enumerate(row_list):
                    code = int(col.codes[r])
                    if code < 0:
                        notes[j].append(f"{c.topology_key}: label missing")
                        continue
                    skew = int(lut[code]) + extra
                    verdict = ">" if skew > c.max_skew else "<="
                    notes[j].append(f"{c.topology_key}={names[code]}: {int(lut[code])} matching, "
                                    f"skew {skew} {verdict} {c.max_skew}")
        soft = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(soft, PreScoreState):
            for c, sums in zip(soft.constraints, soft.domain_counts, strict=True):
                col = table.label_column(c.topology_key)
                names = {code: value for value, code in col.values.items()}
                per_node = match_counts(table, pod.namespace, c.selector) if sums is None else None
                for j, r in enumerate(row_list):
                    code = int(col.codes[r])
                    if code < 0:
                        continue
                    if sums is None:
                        n = 0 if per_node is None else int(per_node[r])
                    else:
                        n = int(sums[code]) if code < len(sums) else 0
                    notes[j].append(f"soft {c.topology_key}={names[code]}: {n} matching")
        if not any(notes):
            return None
        return ["; ".join(n) for n in notes]

    # -- PreFilterExtensions ------------------------------------------------------------------------
    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status:
        """AddPod: count ``pod_to_add`` as if it ran on ``node``."""
        return self._update_with_pod(state, pod_to_add, pod, node, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status:
        """RemovePod: stop counting ``pod_to_remove`` on ``node``."""
        return self._update_with_pod(state, pod_to_remove, pod, node, -1)

    def _update_with_pod(
        self, state: CycleState, updated: PodInfo, preemptor: PodInfo, node: NodeInfo, delta: int
    ) -> Status:
        """updateWithPod."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Status.error(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found")
        if updated.namespace != preemptor.namespace:
            return SUCCESS
        table, row = node.table, node.row
        labels = node.labels
        if any(c.topology_key not in labels for c in s.constraints):
            return SUCCESS
        one = np.array([row], dtype=np.intp)
        affinity_ok: bool | None = None
        taints_ok: bool | None = None
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if c.node_affinity_policy == HONOR:
                if affinity_ok is None:
                    affinity_ok = bool(required_affinity(preemptor).match(table, one)[0])
                if not affinity_ok:
                    continue
            if c.node_taints_policy == HONOR:
                if taints_ok is None:
                    taints_ok = not bool(untolerated_mask(table, one, pod_tolerations(preemptor))[0])
                if not taints_ok:
                    continue
            code = int(table.label_column(c.topology_key).codes[row])
            if code >= len(s.match_num[i]):
                s.match_num[i] = _padded(s.match_num[i], code + 1)
                grown = np.zeros(code + 1, dtype=np.bool_)
                grown[: len(s.present[i])] = s.present[i]
                s.present[i] = grown
            s.match_num[i][code] += delta
            s.present[i][code] = True
            s.update_min(i)
        return SUCCESS

    # -- PreScore / Score ---------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        own = bool(pod.spec.get("topologySpreadConstraints"))
        if not own and not self._default_soft:
            return _SKIP
        if len(table) == 0:
            return _SKIP
        try:
            constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as e:
            what = "obtaining pod's soft" if own else "setting default soft"
            return Status.error(f"calculating preScoreState: {what} topology spread constraints: {e}")
        if not constraints:
            return _SKIP
        # Only require that nodes have all the topology labels if using non-system-default
        # spreading rules: nodes without a zone label still get hostname spreading.
        require_all = own or not self.system_defaulted
        required_keys: frozenset[str] = frozenset()
        ignored_rows: BoolArray | None = None
        scored = rows
        if require_all:
            required_keys = frozenset(c.topology_key for c in constraints)
            ignored = ~self._node_labels.keyed(table, required_keys)[rows]
            if ignored.any():
                ignored_rows = np.zeros(len(table.alive), dtype=np.bool_)
                ignored_rows[rows[ignored]] = True
                scored = rows[~ignored]
        per_domain: list[IntArray | None] = []
        weights: list[float] = []
        for c in constraints:
            if c.topology_key == LABEL_HOSTNAME:
                per_domain.append(None)  # per-node counts are read in Score
                weights.append(math.log(len(scored) + 2))
                continue
            # Per row its domain; a node without the key counts under the value "" (Go's zero
            # value), a domain of its own unless some node really has the value "".
            domain_of, size = self._node_labels.domains(table, c.topology_key)
            candidate = np.zeros(size, dtype=np.bool_)
            candidate[domain_of[scored]] = True
            counted = self._node_labels.counted_domains(table, pod, c, required_keys)
            sums = domain_counts(table, pod.namespace, c.selector, counted)
            # Summed over every counted node, then kept for the domains of scored nodes only
            # (each node adds to its own domain: the same as summing the candidates' nodes).
            per_domain.append(np.zeros(size, dtype=np.int64) if sums is None else np.where(candidate, sums, 0))
            weights.append(math.log(int(np.count_nonzero(candidate)) + 2))
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(constraints, ignored_rows, tuple(per_domain), tuple(weights)))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return Status.error(f"error reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found")
        score = np.zeros(len(rows), dtype=np.float64)
        for c, sums, weight in zip(s.constraints, s.domain_counts, s.weights, strict=True):
            col = table.label_column(c.topology_key)
            values = col.codes[rows]
            if sums is None:  # hostname: the node's own matching pods
                counts = match_counts(table, pod.namespace, c.selector)
                cnt = np.zeros(len(rows), dtype=np.int64) if counts is None else counts[rows]
                score += np.where(values >= 0, cnt * weight + float(c.max_skew - 1), 0.0)
                continue
            # The score of each domain, computed once per domain (the same float operations as per
            # node), plus a last entry 0.0 that a node without the key (code -1) reads.
            lut = np.append(_padded(sums, len(col.values)) * weight + float(c.max_skew - 1), 0.0)
            score += lut[values]
        out = np.floor(score + 0.5).astype(np.int64)  # math.Round (scores are >= 0)
        if s.ignored is not None:
            out[_padded_mask(s.ignored, rows)] = 0
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return Status.error(f"error reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found")
        ignored = None if s.ignored is None else _padded_mask(s.ignored, rows)
        valid = scores if ignored is None else scores[~ignored]
        if len(valid) == 0:
            scores[:] = 0
            return SUCCESS
        min_score = int(valid.min())
        max_score = max(int(valid.max()), 0)
        if max_score == 0:
            scores[:] = MAX_NODE_SCORE
        else:
            scores[:] = MAX_NODE_SCORE * (max_score + min_score - scores) // max_score
        if ignored is not None:
            scores[ignored] = 0
        return SUCCESS


def _padded_mask(mask: BoolArray, rows: Rows) -> BoolArray:
    if len(rows) and int(rows.max()) >= len(mask):
        grown = np.zeros(int(rows.max()) + 1, dtype=np.bool_)
        grown[: len(mask)] = mask
        mask = grown
    result: BoolArray = mask[rows]
    return result
