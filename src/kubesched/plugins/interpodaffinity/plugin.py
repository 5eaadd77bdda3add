"""InterPodAffinity: required and preferred pod affinity / anti-affinity, with symmetry.

Port of pkg/scheduler/framework/plugins/interpodaffinity (kube-scheduler v1.37): plugin.go
(``EventsToRegister``, ``mergeAffinityTermNamespacesIfNotEmpty``, ``GetNamespaceLabelsSnapshot``),
filtering.go (``PreFilter``, ``AddPod``/``RemovePod`` = ``updateWithPod``, ``Filter``:
``nodeTopologyMatchesAffinity`` with ``satisfiesSelfAffinityCheck``, ``satisfyPodAntiAffinity``,
``satisfyExistingPodsAntiAffinity``) and scoring.go (``PreScore``/``processExistingPod``,
``Score``, ``NormalizeScore``); terms as pkg/scheduler/framework/types.go (``terms.py``).

* PreFilter: a pod that cannot be parsed is UnschedulableAndUnresolvable ``parsing pod: ...``.
  Counts per topology pair (key, value), over all nodes: existing pods whose required
  anti-affinity terms match the incoming pod (namespaceSelector of *their* terms evaluated on the
  incoming pod's namespace labels); existing pods matching *all* the incoming pod's required
  affinity terms (one count per term's topology key); existing pods matching each required
  anti-affinity term. The incoming pod's namespaceSelectors are merged into namespaces from the
  Namespace objects known (``handle.objects("Namespace")``; none known: a selector matches none).
  **Skip** when the pod has no required terms and no existing pod's anti-affinity matches it.
* Filter, in upstream's order and codes:
  ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable) — a term's topology
  key is missing, or some term's domain has no matching pod, unless no such pod exists anywhere
  and the pod matches all its own terms (the first pod of a group);
  ``node(s) didn't match pod anti-affinity rules`` (Unschedulable);
  ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable) — any of the node's
  label pairs is a domain where an existing pod's anti-affinity rejects the pod.
* PreScore (**Skip** when ``ignorePreferredTermsOfExistingPods`` and the pod has no preferred
  terms, or when nothing matched): per topology pair, + weight for each existing pod matching a
  preferred affinity term of the pod, − weight per preferred anti-affinity term; symmetrically
  existing pods' required affinity terms matching the pod (+ ``hardPodAffinityWeight``), their
  preferred affinity (+ weight) and anti-affinity (− weight) terms. Score: the sum over the node's
  label pairs; NormalizeScore: ``int(100 × (s − min) / (max − min))`` (all 0 when max = min).

Columnar and incremental (``kubesched.snapshot.affinity_index``): pods matching the incoming pod's
terms are per-row count columns kept up to date on every pod event, summed per domain with
``np.bincount``; the terms existing pods carry are kept grouped by identical term with the rows
carrying them. A cycle never walks the cluster's pods: a pod without pod (anti-)affinity costs
one registry lookup when no existing pod has required anti-affinity (then Skip), else one term
match per distinct existing anti-affinity term.

Deviations: the InterPodAffinityHostnameFastPath variant is not modelled (it evaluates
``kubernetes.io/hostname`` terms on the node's own pods; the results differ from this, upstream's
general path, only when several nodes share a hostname label value or a node lacks it); the
InPlacePodVerticalScaling "resize deferred" Skip does not apply (kubesched has no resize);
no queueing hints (kubesched's queue has none).
"""

from __future__ import annotations

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
from kubesched.plugins.interpodaffinity.args import InterPodAffinityArgs
from kubesched.plugins.interpodaffinity.terms import (
    NAME,
    PREFERRED_AFFINITY,
    PREFERRED_ANTI,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI,
    AffinityTerm,
    existing_pod_terms,
    merged_clause,
    namespace_labels,
    parsed_affinity,
)
from kubesched.snapshot.affinity_index import (
    Clause,
    TermGroup,
    TermRegistry,
    match_index,
    pod_matches,
    term_registry,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeInfo, NodeTable, Rows

#: ErrReasonExistingAntiAffinityRulesNotMatch
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
#: ErrReasonAffinityRulesNotMatch
ERR_REASON_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod affinity rules"
#: ErrReasonAntiAffinityRulesNotMatch
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod anti-affinity rules"
PRE_FILTER_STATE_KEY: Final = "PreFilter" + NAME
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME
NAMESPACE_KIND: Final = "Namespace"

_SKIP = Status.skip()
_STATUS_AFFINITY = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_STATUS_ANTI_AFFINITY = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_STATUS_EXISTING_ANTI_AFFINITY = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)

BoolArray = npt.NDArray[np.bool_]
#: topology key → count (or score) per value code of that key in the node table
TopologyCounts = dict[str, IntArray]


# -- topology counts (upstream topologyToMatchedTermCount / scoreMap), by label value code ----------


def _nonempty(m: TopologyCounts) -> bool:
    """``len(map) > 0``: upstream deletes pairs that drop to 0, so the map holds the nonzero ones."""
    return any(bool(np.any(a)) for a in m.values())


def _add_column(m: TopologyCounts, table: NodeTable, key: str, clauses: tuple[Clause, ...], weight: int = 1) -> bool:
    """Add ``weight ×`` the pods matching every clause to the domains of ``key``; whether any such
    pod sits on a node with the key (upstream creates a map entry then)."""
    counts = match_index(table).domain_counts(clauses, key)
    if counts is None:
        return False
    _accumulate(m, key, counts * weight)
    return True


def _add_rows(m: TopologyCounts, table: NodeTable, key: str, group: TermGroup, weight: int) -> bool:
    """Add ``weight ×`` the pods of ``group`` on each row to the domains of ``key``."""
    counts = group.domain_counts(table, key)
    if counts is None:
        return False
    _accumulate(m, key, counts * weight)
    return True


def _accumulate(m: TopologyCounts, key: str, add: IntArray) -> None:
    have = m.get(key)
    if have is None:
        m[key] = add
        return
    if len(have) < len(add):
        have = _padded(have, len(add))
    elif len(add) < len(have):
        add = _padded(add, len(have))
    m[key] = have + add


def _bump(m: TopologyCounts, node: NodeInfo, key: str, value: int) -> None:
    """topologyToMatchedTermCount.update: the node's pair for ``key``, when it has the label."""
    code = int(node.table.label_column(key).codes[node.row])
    if code < 0:
        return
    arr = m.get(key)
    if arr is None or len(arr) <= code:
        arr = _padded(arr if arr is not None else np.zeros(0, dtype=np.int64), code + 1)
    m[key] = arr
    arr[code] += value


def _padded(a: IntArray, size: int) -> IntArray:
    if len(a) >= size:
        return a
    out = np.zeros(size, dtype=np.int64)
    out[: len(a)] = a
    return out


def _lookup(m: TopologyCounts, table: NodeTable, key: str, rows: Rows) -> tuple[BoolArray, IntArray]:
    """(rows whose node has ``key``, the count of their domain)."""
    codes = table.label_column(key).codes[rows]
    has = codes >= 0
    arr = m.get(key)
    if arr is None:
        return has, np.zeros(len(rows), dtype=np.int64)
    lut = _padded(arr, max(int(codes.max(initial=-1)) + 1, 1))
    values: IntArray = np.where(has, lut[np.where(has, codes, 0)], 0)
    return has, values


def _as_pairs(m: TopologyCounts, table: NodeTable) -> dict[tuple[str, str], int]:
    """The counts as upstream's map ``{(key, value): n}`` (nonzero pairs only), for tests and logs."""
    out: dict[tuple[str, str], int] = {}
    for key, arr in m.items():
        names = {c: v for v, c in table.label_column(key).values.items()}
        for code in np.flatnonzero(arr):
            out[(key, names[int(code)])] = int(arr[code])
    return out


# -- cycle state -------------------------------------------------------------------------------------


@dataclass(slots=True)
class PreFilterState:
    """preFilterState (upstream's general path)."""

    pod: PodInfo
    #: GetNamespaceLabelsSnapshot of the incoming pod's namespace
    namespace_labels: dict[str, str]
    affinity_terms: tuple[AffinityTerm, ...]
    affinity_clauses: tuple[Clause, ...]
    anti_terms: tuple[AffinityTerm, ...]
    anti_clauses: tuple[Clause, ...]
    #: podMatchesAllAffinityTerms(the pod's own required affinity terms, the pod)
    self_match: bool
    #: existingClusterWideAntiAffinityCounts
    existing_anti: TopologyCounts
    #: clusterWideAffinityCounts
    affinity: TopologyCounts
    #: clusterWideAntiAffinityCounts
    anti: TopologyCounts

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.pod, self.namespace_labels, self.affinity_terms, self.affinity_clauses, self.anti_terms,
            self.anti_clauses, self.self_match,
            {k: v.copy() for k, v in self.existing_anti.items()},
            {k: v.copy() for k, v in self.affinity.items()},
            {k: v.copy() for k, v in self.anti.items()},
        )

    def pairs(self, table: NodeTable) -> dict[str, dict[tuple[str, str], int]]:
        """The three maps as upstream prints them (tests)."""
        return {
            "existingAntiAffinityCounts": _as_pairs(self.existing_anti, table),
            "affinityCounts": _as_pairs(self.affinity, table),
            "antiAffinityCounts": _as_pairs(self.anti, table),
        }


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """preScoreState: the score per topology pair (key → value code → score)."""

    topology_score: TopologyCounts

    def clone(self) -> PreScoreState:
        return self


class InterPodAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PreFilterExtensions):
    name: ClassVar[str] = NAME
    args_model: ClassVar[type[Any] | None] = InterPodAffinityArgs
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = (
        ObjectKind(NAMESPACE_KIND, "", "v1", "namespaces", namespaced=False),
    )

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (interpodaffinity/plugin.go): a pod with inter-pod affinity is not signable;
        otherwise its labels (existing pods' terms may match them), unless
        ignorePreferredTermsOfExistingPods."""
        affinity = pod.affinity
        if affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None:
            return None
        if self.ignore_preferred_terms_of_existing_pods:
            return ()
        return ((signers.LABELS, pod.labels),)

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        args = args if args is not None else InterPodAffinityArgs()
        super().__init__(args, handle)
        self.hard_pod_affinity_weight = args.hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = args.ignore_preferred_terms_of_existing_pods
        # Hook the indexes now, so the first pod does not pay for building them.
        self._registry(handle.table)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            # An assigned pod deleted may free an anti-affinity domain; one added may satisfy an
            # affinity term; a relabelled one either.
            ClusterEvent(POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                         "AssignedPodAdd|UpdatePodLabel|Delete"),
            # A node added or relabelled may bring a topology domain; UpdateNodeTaint as upstream
            # (its preCheck workaround, kubernetes#110175).
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                         "NodeAdd|UpdateNodeLabel|UpdateNodeTaint"),
        )

    @staticmethod
    def _registry(table: NodeTable) -> TermRegistry:
        return term_registry(table, NAME, existing_pod_terms)

    def _namespaces(self) -> Any:
        return self.handle.objects(NAMESPACE_KIND)

    # -- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        parsed = parsed_affinity(pod)
        if parsed.error is not None:
            return None, Status.unresolvable(f"parsing pod: {parsed.error}")
        registry = self._registry(table)
        has_terms = bool(parsed.required_affinity or parsed.required_anti)
        if not has_terms and not registry.has(REQUIRED_ANTI):
            return None, _SKIP  # most pods: nothing of their own, no existing anti-affinity anywhere
        namespaces = self._namespaces()
        ns_labels = namespace_labels(namespaces, pod.namespace)
        existing_anti: TopologyCounts = {}
        for group in registry.groups(REQUIRED_ANTI):
            term: AffinityTerm = group.payload
            if term.matches(pod, ns_labels):
                _add_rows(existing_anti, table, term.topology_key, group, 1)
        if not has_terms and not _nonempty(existing_anti):
            return None, _SKIP
        affinity_clauses = tuple(merged_clause(t, namespaces) for t in parsed.required_affinity)
        anti_clauses = tuple(merged_clause(t, namespaces) for t in parsed.required_anti)
        affinity: TopologyCounts = {}
        if affinity_clauses:
            for t in parsed.required_affinity:
                _add_column(affinity, table, t.topology_key, affinity_clauses)
        anti: TopologyCounts = {}
        for t, clause in zip(parsed.required_anti, anti_clauses, strict=True):
            _add_column(anti, table, t.topology_key, (clause,))
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(
            pod, ns_labels, parsed.required_affinity, affinity_clauses, parsed.required_anti, anti_clauses,
            pod_matches(pod, affinity_clauses), existing_anti, affinity, anti,
        ))
        return None, SUCCESS

    def explain_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows
    ) -> Sequence[str] | None:
        """Per node, the counts Filter decides by, in each of the node's topology domains: pods
        matching the pod's required affinity, its anti-affinity, and existing pods whose
        anti-affinity the pod matches (explain only)."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return None
        notes: list[list[str]] = [[] for _ in range(len(rows))]
        for title, counts in (("affinity", s.affinity), ("anti-affinity", s.anti),
                              ("existing pods' anti-affinity", s.existing_anti)):
            for key, by_code in counts.items():
                col = table.label_column(key)
                names = {code: value for value, code in col.values.items()}
                for j, r in enumerate(rows.tolist()):
                    code = int(col.codes[r])
                    if code >= 0:
                        n = int(by_code[code]) if code < len(by_code) else 0
                        notes[j].append(f"{title} {key}={names[code]}: {n} matching")
        return ["; ".join(n) for n in notes] if any(notes) else None

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Verdicts.from_mask(
                np.zeros(len(rows), dtype=np.bool_),
                Status.error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'),
            )
        codes = np.zeros(len(rows), dtype=np.int32)
        if s.affinity_terms:  # nodeTopologyMatchesAffinity
            keyed = np.ones(len(rows), dtype=np.bool_)
            pods_exist = np.ones(len(rows), dtype=np.bool_)
            for t in s.affinity_terms:
                has, count = _lookup(s.affinity, table, t.topology_key, rows)
                keyed &= has
                pods_exist &= count > 0
            # satisfiesSelfAffinityCheck: no matching pod anywhere, and the pod matches its terms.
            first_of_group = s.self_match and not _nonempty(s.affinity)
            ok = keyed & (pods_exist | first_of_group)
            codes[~ok] = 1
        if s.anti_terms and _nonempty(s.anti):  # satisfyPodAntiAffinity
            bad = np.zeros(len(rows), dtype=np.bool_)
            for t in s.anti_terms:
                has, count = _lookup(s.anti, table, t.topology_key, rows)
                bad |= has & (count > 0)
            codes[(codes == 0) & bad] = 2
        if _nonempty(s.existing_anti):  # satisfyExistingPodsAntiAffinity: any of the node's pairs
            bad = np.zeros(len(rows), dtype=np.bool_)
            for key in s.existing_anti:
                has, count = _lookup(s.existing_anti, table, key, rows)
                bad |= has & (count > 0)
            codes[(codes == 0) & bad] = 3
        return Verdicts(codes, [_STATUS_AFFINITY, _STATUS_ANTI_AFFINITY, _STATUS_EXISTING_ANTI_AFFINITY])

    # -- PreFilterExtensions ------------------------------------------------------------------------
    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status:
        """AddPod: count ``pod_to_add`` as if it ran on ``node``."""
        return self._update_with_pod(state, pod_to_add, node, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status:
        """RemovePod: stop counting ``pod_to_remove`` on ``node``."""
        return self._update_with_pod(state, pod_to_remove, node, -1)

    @staticmethod
    def _update_with_pod(state: CycleState, updated: PodInfo, node: NodeInfo, multiplier: int) -> Status:
        """preFilterState.updateWithPod (general path)."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Status.error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        for t in parsed_affinity(updated).required_anti:
            if t.matches(s.pod, s.namespace_labels):
                _bump(s.existing_anti, node, t.topology_key, multiplier)
        if pod_matches(updated, s.affinity_clauses):
            for t in s.affinity_terms:
                _bump(s.affinity, node, t.topology_key, multiplier)
        for t, clause in zip(s.anti_terms, s.anti_clauses, strict=True):
            if pod_matches(updated, (clause,)):
                _bump(s.anti, node, t.topology_key, multiplier)
        return SUCCESS

    # -- PreScore / Score ---------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        parsed = parsed_affinity(pod)
        has_constraints = parsed.has_preferred
        # Optionally ignore the existing pods' preferences when the pod has no preferred terms.
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return _SKIP
        if parsed.error is not None:
            return Status.error(f"failed to parse pod: {parsed.error}")
        registry = self._registry(table)
        hard = self.hard_pod_affinity_weight
        if not has_constraints and not (
            registry.has(PREFERRED_AFFINITY) or registry.has(PREFERRED_ANTI)
            or (hard > 0 and registry.has(REQUIRED_AFFINITY))
        ):
            return _SKIP  # nothing can score: upstream's "index == -1"
        namespaces = self._namespaces()
        ns_labels = namespace_labels(namespaces, pod.namespace)
        score: TopologyCounts = {}
        touched = False
        # The pod's preferred terms against existing pods (namespaceSelector merged, as upstream).
        for wt in parsed.preferred_affinity:
            clause = merged_clause(wt.term, namespaces)
            touched |= _add_column(score, table, wt.term.topology_key, (clause,), wt.weight)
        for wt in parsed.preferred_anti:
            clause = merged_clause(wt.term, namespaces)
            touched |= _add_column(score, table, wt.term.topology_key, (clause,), -wt.weight)
        # Existing pods' terms against the pod (their namespaceSelector on its namespace's labels).
        if hard > 0:
            for group in registry.groups(REQUIRED_AFFINITY):
                term: AffinityTerm = group.payload
                if term.matches(pod, ns_labels):
                    touched |= _add_rows(score, table, term.topology_key, group, hard)
        for kind, sign in ((PREFERRED_AFFINITY, 1), (PREFERRED_ANTI, -1)):
            for group in registry.groups(kind):
                wt = group.payload
                if wt.term.matches(pod, ns_labels):
                    touched |= _add_rows(score, table, wt.term.topology_key, group, sign * wt.weight)
        if not touched:
            return _SKIP
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(score))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return Status.error(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        out = np.zeros(len(rows), dtype=np.int64)
        for key in s.topology_score:
            _, value = _lookup(s.topology_score, table, key, rows)
            out += value
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, PreScoreState):
            return Status.error(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found')
        if not s.topology_score or len(scores) == 0:
            return SUCCESS
        min_count = int(scores.min())
        diff = int(scores.max()) - min_count
        if diff > 0:
            # float64(MaxNodeScore) * (float64(score-minCount) / float64(maxMinDiff)), then int64().
            scaled = float(MAX_NODE_SCORE) * ((scores - min_count).astype(np.float64) / float(diff))
            scores[:] = np.trunc(scaled).astype(np.int64)
        else:
            scores[:] = 0
        return SUCCESS
