"""OpportunisticBatching (beta, on by default in v1.37): a pod with the same signature as the pod
scheduled in the cycle just before it is offered that cycle's next-best node as a hint, tried first
like a nominated node, instead of a new Filter search and scoring.

Port of pkg/scheduler/framework/runtime/batch.go (``OpportunisticBatch``) and of the signing in
framework.go (``computeBatchablePlugins``, ``SignPod``), v1.37.1:

* A profile signs pods only when every plugin at PreFilter, Filter, PreScore and Score signs
  (overrides ``Plugin.sign_pod``) and it has no extenders; a pod is signable when every one of
  them gives fragments for it (PodTopologySpread gives none while the profile has default
  constraints, so the default profile, with its system defaults, signs no pod at all).
* After a cycle picks a node from several scored ones, the rest stay in kube-scheduler's heap
  order (framework/sorted_nodes.py) with the pod's signature and the time.
* The next cycle's pod gets a hint when: it is the very next cycle, the last one succeeded, the
  pod is not nominated, its signature is the same, the state is at most 500 ms old. The last
  chosen node, if the pod still fits there, is scored again and competes with the rest (all
  normalised again together); the best is popped as the hint.
* A hint the pod fits is used as is (one feasible node; the rotating start index does not move)
  and the state kept for the next pod; otherwise the cycle searches as usual and stores its own.

The metrics are upstream's counters ``scheduler_batch_attempts_total{profile,result}``,
``scheduler_batch_cache_flushed_total{profile,reason}`` and
``scheduler_batch_rescore_attempts_total{profile}`` (pkg/scheduler/metrics/metrics.go).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interfaces import Plugin
from kubesched.framework.plugin_metrics import CounterFamily
from kubesched.framework.score_totals import ScoredNodes
from kubesched.framework.sorted_nodes import ScoredNode, SortedScoredNodes
from kubesched.snapshot.pod import PodInfo

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework

__all__ = ["MAX_BATCH_AGE_SECONDS", "OPPORTUNISTIC_BATCHING", "OpportunisticBatch", "PodSigner"]

OPPORTUNISTIC_BATCHING = "OpportunisticBatching"
#: batch.go maxBatchAge.
MAX_BATCH_AGE_SECONDS = 0.5

# metrics.go BatchAttempt* and BatchFlush* label values.
HINT_USED, HINT_NOT_USED, NO_HINT = "hint_used", "hint_not_used", "no_hint"
FLUSH_POD_FAILED, FLUSH_POD_SKIPPED, FLUSH_POD_NOMINATED = "pod_failed", "pod_skipped", "pod_nominated"
FLUSH_NODE_MISSING, FLUSH_EMPTY_LIST, FLUSH_EXPIRED = "node_missing", "empty_list", "expired"
FLUSH_POD_INCOMPATIBLE, FLUSH_POD_NOT_BATCHABLE = "pod_incompatible", "pod_not_batchable"
FLUSH_FILTER_ERROR, FLUSH_PRESCORE_ERROR = "filter_error", "prescore_error"
FLUSH_RESCORE_ERROR = "rescore_error"

_MEMO_KEY = "batch.signature"


class PodSigner:
    """A profile's pod signatures (framework.go ``computeBatchablePlugins`` and ``SignPod``)."""

    __slots__ = ("_memo_key", "enabled", "plugins")

    def __init__(self, candidates: list[Plugin]) -> None:
        unique: dict[str, Plugin] = {}
        for p in candidates:
            unique.setdefault(p.name, p)
        #: False when a plugin at PreFilter/Filter/PreScore/Score cannot sign: no pod is signable.
        self.enabled = all(type(p).sign_pod is not Plugin.sign_pod for p in unique.values())
        self.plugins = list(unique.values())
        #: The signature is kept on the PodInfo per signer: profiles sign the same pod differently.
        self._memo_key = f"{_MEMO_KEY}/{id(self)}"

    def sign(self, pod: PodInfo) -> bytes | None:
        """The pod's signature (its scheduler name and every plugin's fragments as one JSON object,
        keys sorted), or None when it cannot be signed. Kept on the PodInfo (a new object on every
        update, as upstream's QueuedPodInfo.Update clears it)."""
        if not self.enabled:
            return None
        memo, key = pod.memo, self._memo_key
        if key in memo:
            cached: bytes | None = memo[key]
            return cached
        sig: dict[str, Any] = {signers.SCHEDULER_NAME: pod.scheduler_name}
        out: bytes | None = None
        for i, p in enumerate(self.plugins):
            fragments = p.sign_pod(pod)
            if fragments is None:
                if i:
                    # Asked first next time: in a profile where one plugin refuses every pod (the
                    # default profile's PodTopologySpread) the others are not asked in vain. The
                    # order does not change a signature: plugins sharing a key give equal values.
                    self.plugins.insert(0, self.plugins.pop(i))
                break
            for name, value in fragments:
                sig[name] = value
        else:
            out = signers.canonical_json(sig).encode()
        memo[key] = out
        return out


@dataclass(slots=True)
class _BatchState:
    signature: bytes
    #: The last cycle's scored nodes in heap order, its chosen node already popped. Built from
    #: ``_pending`` when first needed: most stored states are never asked for a hint.
    sorted_nodes: SortedScoredNodes | None
    creation_time: float
    #: (names, totals, chosen) of every node the cycle scored, in the order scored.
    _pending: tuple[list[str], list[int], str] | None = None

    def nodes(self) -> SortedScoredNodes:
        if self.sorted_nodes is None:
            assert self._pending is not None
            names, totals, chosen = self._pending
            scored = [ScoredNode(n, t) for n, t in zip(names, totals, strict=True)]
            heap = SortedScoredNodes(scored)
            if heap.pop().name != chosen:
                # A tie-break other than kube-scheduler's (``heap``) chose another of the best.
                heap = SortedScoredNodes([n for n in scored if n.name != chosen])
            self.sorted_nodes, self._pending = heap, None
        return self.sorted_nodes


class OpportunisticBatch:
    """One profile's batching state (batch.go OpportunisticBatch); time from the framework's clock."""

    def __init__(self, fwk: Framework) -> None:
        self._fwk = fwk
        self._state: _BatchState | None = None
        #: (cycle, chosen node, succeeded) of the last cycle that stored results.
        self._last_cycle: tuple[int, str, bool] = (-2, "", False)
        #: Pods placed on their hint (batchedPods, for tests).
        self.batched_pods = 0
        self.attempts: Counter[str] = Counter()
        self.flushes: Counter[str] = Counter()
        self.rescore_attempts = 0

    # -- the hint --------------------------------------------------------------------------------
    def get_node_hint(self, state: CycleState, pod: PodInfo, signature: bytes | None, cycle: int) -> str:
        """GetNodeHint: a node to try first, or "" (counted as no_hint)."""
        hint = ""
        if self._state_compatible(pod, signature, cycle) and self._refresh_hint_candidates(state, pod):
            assert self._state is not None
            nodes = self._state.nodes()
            if len(nodes):
                hint = nodes.pop().name
        if not hint:
            self.attempts[NO_HINT] += 1
        return hint

    def store_schedule_results(
        self, signature: bytes | None, hinted: str, chosen: str, scored: ScoredNodes | None, cycle: int,
    ) -> None:
        """StoreScheduleResults: remember the cycle; keep the other scored nodes for the next pod
        when this one is signable (``scored``: every node the cycle scored, None when only one
        was feasible)."""
        self._last_cycle = (cycle, chosen, True)
        if hinted and hinted == chosen:
            self.attempts[HINT_USED] += 1
            self.batched_pods += 1
            return
        if hinted:
            self.attempts[HINT_NOT_USED] += 1
        others = 0 if scored is None else len(scored.rows) - 1
        if signature is not None and others > 0:
            assert scored is not None
            names = self._fwk.handle.table.names
            self._state = _BatchState(signature, None, self._fwk.handle.clock.now(),
                                      ([names[r] for r in scored.rows.tolist()], scored.totals.tolist(), chosen))
        else:
            self._flush(FLUSH_EMPTY_LIST if others <= 0 else FLUSH_POD_NOT_BATCHABLE)
            self._state = None

    # -- internals --------------------------------------------------------------------------------
    def _flush(self, reason: str) -> None:
        """logUnusableState: counted; the state itself stays until the next store replaces it
        (so every later pod that cannot use it is counted too, as upstream's metric counts)."""
        self.flushes[reason] += 1

    def _state_compatible(self, pod: PodInfo, signature: bytes | None, cycle: int) -> bool:
        """batchStateCompatible."""
        st = self._state
        if st is None or (st.sorted_nodes is not None and not len(st.sorted_nodes)):
            return False
        last_cycle, _, succeeded = self._last_cycle
        if cycle != last_cycle + 1:
            self._flush(FLUSH_POD_SKIPPED)
        elif not succeeded:
            self._flush(FLUSH_POD_FAILED)
        elif (pod.raw.get("status") or {}).get("nominatedNodeName"):
            self._flush(FLUSH_POD_NOMINATED)
        elif signature is None or signature != st.signature:
            self._flush(FLUSH_POD_INCOMPATIBLE)
        elif self._fwk.handle.clock.now() > st.creation_time + MAX_BATCH_AGE_SECONDS:
            self._flush(FLUSH_EXPIRED)
        else:
            return True
        return False

    def _refresh_hint_candidates(self, state: CycleState, pod: PodInfo) -> bool:
        """refreshHintCandidates: the last chosen node, if the pod still fits it, is scored again
        and competes with the rest; a node gone ends the batch."""
        table = self._fwk.handle.table
        row = table.row_of(self._last_cycle[1])
        if row is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        st = self._fwk.filter_node(state, pod, row)
        if st.is_success:
            return self._rescore_hinted_node(state, pod, row)
        if not st.is_rejected:
            self._flush(FLUSH_FILTER_ERROR)
            return False
        return True

    def _rescore_hinted_node(self, state: CycleState, pod: PodInfo, last_row: int) -> bool:
        """rescoreHintedNode: PreScore over the candidates and the last chosen node, Score and
        NormalizeScore again over all of them (a node's score depends only on it, so scoring the
        cached ones again gives their cached raw scores), the heap rebuilt in upstream's order
        (the cached nodes as the heap holds them, then the rescored one, Randomizer 0)."""
        self.rescore_attempts += 1
        assert self._state is not None
        table = self._fwk.handle.table
        cached = self._state.nodes().unordered()
        rows: list[int] = []
        for node in cached:
            r = table.row_of(node.name)
            if r is None:
                self._flush(FLUSH_NODE_MISSING)
                return False
            rows.append(r)
        rows.append(last_row)
        rows_array = np.array(rows, dtype=np.intp)
        rescore_state = state.clone()
        st = self._fwk.run_pre_score(rescore_state, pod, rows_array)
        if not st.is_success:
            self._flush(FLUSH_PRESCORE_ERROR)
            return False
        scored = self._fwk.run_score(rescore_state, pod, rows_array)
        if not isinstance(scored, ScoredNodes):
            self._flush(FLUSH_RESCORE_ERROR)
            return False
        totals = scored.totals.tolist()
        nodes = [ScoredNode(n.name, totals[i], n.randomizer) for i, n in enumerate(cached)]
        nodes.append(ScoredNode(table.names[last_row], totals[-1]))
        self._state.sorted_nodes = SortedScoredNodes(nodes)
        return True

    def metric_families(self, profile: str) -> list[CounterFamily]:
        """The three counters, for a shell serving /metrics."""
        return [
            CounterFamily("scheduler_batch_attempts", "Counts of results when we attempt to use batching.",
                          ("profile", "result"), {(profile, k): float(v) for k, v in self.attempts.items()}),
            CounterFamily("scheduler_batch_cache_flushed", "Counts of cache flushes by reason.",
                          ("profile", "reason"), {(profile, k): float(v) for k, v in self.flushes.items()}),
            CounterFamily("scheduler_batch_rescore_attempts",
                          "Counts of rescore attempts during opportunistic batching.", ("profile",),
                          {(profile,): float(self.rescore_attempts)}),
        ]
