"""NodeAffinity: spec.nodeSelector, required/preferred node affinity and the profile's addedAffinity.

Port of pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go (newest upstream) on top of
k8s.io/component-helpers/scheduling/corev1/nodeaffinity (see plugins/helpers/node_selector.py).

* PreFilter: Skip when the pod has no required node affinity, no spec.nodeSelector and there is
  no added required affinity. When every required term pins metadata.name with In, the result
  narrows to the union over terms of the per-term intersection; an empty union is
  UnschedulableAndUnresolvable "pod affinity terms conflict".
* Filter: the added affinity first ("node(s) didn't match scheduler-enforced node affinity"),
  then nodeSelector AND required terms ("node(s) didn't match Pod's node affinity/selector"),
  both UnschedulableAndUnresolvable. Terms that do not parse match nothing (upstream ignores the
  parse error here "for backwards compatibility").
* PreScore: an Error when the pod's preferred terms do not parse; Skip when the pod has no
  preferred terms and there is no added preferred affinity.
* Score: sum of the weights of the matching preferred terms (pod's and added);
  NormalizeScore: DefaultNormalizeScore(100, reverse=false).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import orjson

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.normalize import default_normalize_score
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import NODE, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.helpers.node_selector import (
    OBJECT_NAME_FIELD,
    NodeSelector,
    PreferredTerm,
    RequiredNodeAffinity,
    compile_node_selector,
    compile_preferred_terms,
    score_preferred,
)
from kubesched.plugins.node_affinity.args import NodeAffinityArgs
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable, Rows

NAME = "NodeAffinity"
#: ErrReasonPod
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
#: errReasonEnforced
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
#: errReasonConflict
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_STATUS_ENFORCED = Status.unresolvable(ERR_REASON_ENFORCED)
_STATUS_POD = Status.unresolvable(ERR_REASON_POD)


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A pod's node affinity compiled once (cached in ``pod.memo["NodeAffinity"]``, and shared by
    the pods of a family through ``_FAMILIES``)."""

    #: True when spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution is set.
    has_required_affinity: bool
    #: True when spec.nodeSelector is present (even empty: a Go non-nil map).
    has_node_selector: bool
    required: RequiredNodeAffinity
    #: Node names the required terms restrict the pod to (PreFilter's narrowing), None for all.
    pinned_node_names: frozenset[str] | None
    #: None when the pod has no preferredDuringSchedulingIgnoredDuringExecution.
    preferred: tuple[PreferredTerm, ...] | None
    preferred_errors: tuple[str, ...]
    #: Canonical JSON of spec.nodeSelector and the required affinity (the Filter's inputs).
    required_signature: bytes


#: Compiled affinities by the exact JSON of their inputs (spec.nodeSelector and
#: spec.affinity.nodeAffinity, key order kept): a Deployment's replicas compile once, not once
#: per pod. ``_compile_spec`` reads nothing else, so equal bytes give an equal result, and the
#: entries hold no cluster state (nothing to invalidate). Bounded: cleared when full.
_FAMILIES: dict[bytes, _Compiled] = {}
_MAX_FAMILIES = 1024


def _compile(pod: PodInfo) -> _Compiled:
    cached = pod.memo.get(NAME)
    if isinstance(cached, _Compiled):
        return cached
    spec = pod.spec
    node_selector = spec.get("nodeSelector")
    node_aff = (spec.get("affinity") or {}).get("nodeAffinity")
    try:
        family: bytes | None = orjson.dumps([node_selector, node_aff])
    except (TypeError, orjson.JSONEncodeError):  # not JSON-shaped: compile it on its own
        family = None
    compiled = _FAMILIES.get(family) if family is not None else None
    if compiled is None:
        compiled = _compile_spec(node_selector, node_aff or {})
        if family is not None:
            if len(_FAMILIES) >= _MAX_FAMILIES:
                _FAMILIES.clear()
            _FAMILIES[family] = compiled
    pod.memo[NAME] = compiled
    return compiled


def _compile_spec(node_selector: Any, node_aff: Any) -> _Compiled:
    req_raw = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    pref_raw = node_aff.get("preferredDuringSchedulingIgnoredDuringExecution")
    preferred: tuple[PreferredTerm, ...] | None = None
    pref_errors: tuple[str, ...] = ()
    if isinstance(pref_raw, list):
        preferred, pref_errors = compile_preferred_terms(pref_raw)
    terms = req_raw.get("nodeSelectorTerms") if isinstance(req_raw, dict) else None
    return _Compiled(
        has_required_affinity=isinstance(req_raw, dict),
        has_node_selector=node_selector is not None,
        required=RequiredNodeAffinity.of({"nodeSelector": node_selector, "affinity": {"nodeAffinity": node_aff}}),
        pinned_node_names=_pinned_node_names(terms) if isinstance(terms, list) and terms else None,
        preferred=preferred,
        preferred_errors=pref_errors,
        required_signature=orjson.dumps([node_selector, req_raw], option=orjson.OPT_SORT_KEYS),
    )


def _pinned_node_names(terms: Sequence[Any]) -> frozenset[str] | None:
    """Node names the required terms restrict the pod to (metadata.name In ...), or None for all."""
    node_names: set[str] | None = None
    for t in terms:
        term_names: set[str] | None = None
        fields = t.get("matchFields") if isinstance(t, dict) else None
        for r in fields if isinstance(fields, list) else []:
            if isinstance(r, dict) and r.get("key") == OBJECT_NAME_FIELD and r.get("operator") == "In":
                # The requirements are ANDed: intersect.
                s = {str(v) for v in r.get("values") or []}
                term_names = s if term_names is None else term_names & s
        if term_names is None:
            # A term without a node-name requirement admits every node (terms are ORed).
            return None
        node_names = term_names if node_names is None else node_names | term_names
    return None if node_names is None else frozenset(node_names)


_SKIP = Status.skip(NAME)


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name: ClassVar[str] = NAME
    args_model: ClassVar[type[Any] | None] = NodeAffinityArgs

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (node_affinity.go): the pod's node affinity and nodeSelector."""
        return ((signers.NODE_AFFINITY, signers.node_affinity_signer(pod)),
                (signers.NODE_SELECTOR, pod.spec.get("nodeSelector")))

    def __init__(self, args: NodeAffinityArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeAffinityArgs()
        super().__init__(args, handle)
        self.added_node_selector: NodeSelector | None = None
        self.added_pref_terms: tuple[PreferredTerm, ...] | None = None
        added = args.added_affinity
        if added is not None:
            required = added.raw_required()
            if required is not None:
                ns = compile_node_selector(required)
                if ns.errors:
                    raise ValueError(
                        "parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: " + "; ".join(ns.errors))
                self.added_node_selector = ns
            preferred = added.raw_preferred()
            if preferred:
                terms, errs = compile_preferred_terms(preferred)
                if errs:
                    raise ValueError(
                        "parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: " + "; ".join(errs))
                self.added_pref_terms = terms

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # Upstream with queueing hints: Node Add | UpdateNodeLabel.
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeAdd|UpdateNodeLabel"),)

    # -- PreFilter / Filter -----------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        spec = pod.spec
        if self.added_node_selector is None and spec.get("nodeSelector") is None and not spec.get("affinity"):
            return None, _SKIP  # most pods: nothing to compile
        c = _compile(pod)
        if not c.has_required_affinity and self.added_node_selector is None and not c.has_node_selector:
            return None, Status.skip()
        names = c.pinned_node_names
        if names is None:
            return None, SUCCESS
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(names), SUCCESS

    def filter_signature(self, state: CycleState, pod: PodInfo) -> Hashable:
        # Filter reads spec.nodeSelector and the required node affinity (plus this plugin's fixed
        # addedAffinity); their canonical JSON names them exactly.
        return _compile(pod).required_signature

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        codes = np.zeros(len(rows), dtype=np.int32)
        candidates = rows
        if self.added_node_selector is not None:
            added_ok = self.added_node_selector.match(table, rows)
            codes[~added_ok] = 1
            idx = np.flatnonzero(added_ok)
            candidates = rows[idx]
        else:
            idx = np.arange(len(rows))
        pod_ok = _compile(pod).required.match(table, candidates)
        codes[idx[~pod_ok]] = 2
        return Verdicts(codes, [_STATUS_ENFORCED, _STATUS_POD])

    # -- PreScore / Score -------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        if self.added_pref_terms is None and not pod.spec.get("affinity"):
            return _SKIP
        c = _compile(pod)
        if c.preferred_errors:
            return Status.error("; ".join(c.preferred_errors))
        if c.preferred is None and self.added_pref_terms is None:
            return Status.skip()
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        c = _compile(pod)
        if c.preferred_errors:
            return Status.error("; ".join(c.preferred_errors))
        scores = np.zeros(len(rows), dtype=np.int64)
        if self.added_pref_terms:
            scores += score_preferred(table, rows, self.added_pref_terms)
        if c.preferred:
            scores += score_preferred(table, rows, c.preferred)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=False, max_priority=MAX_NODE_SCORE)
        return SUCCESS
