"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be.

Port of ``pkg/scheduler/framework/plugins/noderesources/fit.go`` (Filter, PreFilter, PreScore,
Score, EventsToRegister) with the scoring strategies of ``resource_allocation.go``,
``least_allocated.go``, ``most_allocated.go`` and ``requested_to_capacity_ratio.go``.

Filter is computed for all candidate rows at once: every check (pods, cpu, memory,
ephemeral-storage, each requested scalar resource) yields a per-row state — fits / insufficient /
insufficient even on an empty node — and rows are grouped by their combination of states, so one
Status is built per distinct combination, not per node.

Extended resources backed by DRA (DRAExtendedResource, GA and on): a resource a DeviceClass maps
(plugins/helpers/device_classes.py) is not checked on a node whose allocatable lacks it
(``shouldDelegateResourceToDRA``): DynamicResources allocates it there. The DeviceClasses are those the
shell tracks for DynamicResources; a profile without that plugin has none, so nothing is delegated
(upstream's DRA manager exists whatever the profile). A scoring strategy naming such a resource
scores it, on a node whose allocatable lacks it, with the class's devices there as allocatable and
the allocated ones as requested (``draPreScoreState``, resource_allocation.go; counted by
DynamicResources, dynamicresources/extended_scoring.py). Not ported: queueing hints (our queue has
none; the registered events are upstream's non-QueueingHint set) and the SidecarContainers-disabled
PreFilter rejection (the gate is GA).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.framework import signers
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import DRAResourceCounter, Handle
from kubesched.framework.interfaces import (
    FilterPlugin,
    PlacementScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.podgroup import PodGroupAssignments, PodGroupInfo
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import NODE, POD, ActionType, ClusterEvent, PreFilterResult, Verdicts
from kubesched.plugins.helpers.device_classes import DEVICE_CLASS_KIND, extended_resource_classes
from kubesched.plugins.noderesources.args import MOST_ALLOCATED, NodeResourcesFitArgs
from kubesched.plugins.noderesources.resource_allocation import (
    ResourceAllocation,
    Scorer,
    build_scorer,
    is_extended_resource_name,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    IntArray,
    NodeTable,
    Rows,
)

__all__ = ["NodeResourcesFit"]

NAME: Final = "NodeResourcesFit"
PRE_FILTER_STATE_KEY: Final = "PreFilter" + NAME
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME

# Per-check states packed two bits each into one int64 key per row.
# Bit 0: short of the resource now; bit 1: the request exceeds the node's whole allocatable
# (which implies bit 0: evicting every pod would not help, so preemption skips the node).
_FITS, _INSUFFICIENT, _UNRESOLVABLE = 0, 1, 3
_PACKED_CHECKS: Final = 31
#: Up to this many checks the packed keys stay below 4**8 = 65,536 (bincount-sized).
_SMALL_KEY_CHECKS: Final = 8
#: The verdict of one node that fits (shared: Verdicts are never mutated).
_ONE_PASSES: Final = Verdicts.all_pass(1)
#: Up to this many rows, Filter packs their keys in plain Python (``_filter_few_rows``).
_FEW_ROWS: Final = 8
#: A threshold no available amount is below: the columns a pod does not check.
_NEVER_SHORT: Final = int(np.iinfo(np.int64).min)


@dataclass(frozen=True, slots=True)
class _Check:
    """One resource the Filter compares: table column, the pod's amount, and its reason text."""

    column: int
    amount: int
    reason: str
    #: A DeviceClass backs the resource: nodes with none of it leave it to DynamicResources.
    delegable: bool = False


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    checks: tuple[_Check, ...]
    #: fitsRequest's early return: the pod requests nothing but a pod slot.
    requests_nothing: bool
    #: "Too many pods", then each check's reason: a packed key holds two bits per reason.
    reasons: tuple[str, ...]
    #: (column, amount, delegable) of every check: names the "request exceeds the whole allocatable" bits.
    too_big_key: tuple[tuple[int, int, bool], ...]
    #: Per resource column (as many as the table had, × 1): a node is short of it where its
    #: available amount is below this; the pod's amount for a checked column, 1 for the pod slot,
    #: and the lowest int64 (never short) for the rest. Columns added later are not checked.
    thresholds: IntArray

    def clone(self) -> _PreFilterState:
        return self  # immutable, as upstream's Clone returns the same pointer


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: IntArray
    #: draPreScoreState: the devices behind DRA-backed resources of the scoring strategy, or None.
    dra: DRAResourceCounter | None = None

    def clone(self) -> _PreScoreState:
        return self


class _KeyCodes:
    """Per packed key of one reasons tuple: its code in ``statuses`` (0: passes, -1: not seen).
    The one lookup from a packed key to its Status, for a batch of nodes and for one node."""

    __slots__ = ("codes", "reasons", "status_of", "statuses")

    def __init__(
        self, reasons: tuple[str, ...], status_of: Callable[[tuple[int, ...], tuple[str, ...]], Status | None]
    ) -> None:
        self.codes = np.full(4 ** len(reasons), -1, dtype=np.int32)
        self.codes[0] = 0
        self.reasons = reasons
        self.status_of = status_of
        self.statuses: list[Status] = []

    def code(self, key: int) -> int:
        """The key's code, its Status built and appended on first sight (a key with only "too
        big" bits sets no failing reason: it passes)."""
        known = int(self.codes[key])
        if known >= 0:
            return known
        status = self.status_of(tuple((key >> (2 * i)) & 3 for i in range(len(self.reasons))), self.reasons)
        if status is None:
            self.codes[key] = 0
            return 0
        # A new list, not an append: Verdicts already handed out (and kept in Diagnosis) hold the old one.
        self.statuses = [*self.statuses, status]
        self.codes[key] = len(self.statuses)
        return len(self.statuses)


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PlacementScorePlugin):
    """Filter: nodes without room for the pod's requests (cpu, memory, ephemeral-storage, extended
    and hugepages resources, one pod slot). Score: LeastAllocated (default), MostAllocated or
    RequestedToCapacityRatio over the configured resources. PlacementScore
    (TopologyAwareWorkloadScheduling): MostAllocated over a placement's nodes taken together."""

    name = NAME
    args_model = NodeResourcesFitArgs
    filter_node_local = True  # free resources of the node itself

    def sign_pod(self, pod: PodInfo) -> signers.Fragments | None:
        """SignPod (fit.go): the pod's requests; not signable when a DeviceClass backs one of its
        extended resources (DRAExtendedResource: DynamicResources allocates it)."""
        if self._delegable(pod.requests.scalar):
            return None
        return ((signers.RESOURCES, list(pod.requests.key)),)

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesFitArgs()
        super().__init__(args, handle)
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_resource_groups = frozenset(args.ignored_resource_groups)
        s = args.scoring_strategy
        self.allocation = ResourceAllocation(tuple(s.resources), use_requested=False)
        shape = s.requested_to_capacity_ratio.shape if s.requested_to_capacity_ratio is not None else None
        self.scorer: Scorer = build_scorer(s.type, self.allocation.weights, shape)
        #: fit.go placementScorer: MostAllocated over the configured resources, whatever the strategy.
        self.placement_scorer: Scorer = build_scorer(MOST_ALLOCATED, self.allocation.weights, None)
        #: PreFilter states by (table, its column count, the pod's requests, those backed by DRA).
        #: Each entry keeps its table: a freed table's id may be reused by a new table whose
        #: extended-resource columns came in another order (sweeps and capacity searches build many).
        self._pre_filter_states: dict[tuple[int, int, tuple[object, ...], frozenset[str]],
                                      tuple[NodeTable, _PreFilterState]] = {}
        #: Per (table, the checks' columns and amounts): per table row, the packed key bits of
        #: "request exceeds the whole allocatable" of every check.
        self._too_big: dict[
            tuple[int, tuple[tuple[int, int, bool], ...]], tuple[NodeTable, int, npt.NDArray[np.int32]]
        ] = {}
        #: Filter statuses by reasons and packed per-reason states, built on first use.
        self._key_codes: dict[tuple[str, ...], _KeyCodes] = {}

    # -- events -----------------------------------------------------------------------------------
    def events_to_register(self) -> Sequence[ClusterEvent]:
        # fit.go EventsToRegister without queueing hints: a pod leaving (or shrinking in place,
        # InPlacePodVerticalScaling is on by default) frees room; a node added or with more
        # allocatable may fit. Taint/label updates are registered too because upstream does so when
        # hints are off (a Node/Add may have been missed by preCheck, kubernetes#109437).
        return (
            ClusterEvent(POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN, "AssignedPodDeleteOrScaleDown"),
            ClusterEvent(
                NODE,
                ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_TAINT
                | ActionType.UPDATE_NODE_LABEL,
                "NodeAddOrUpdate",
            ),
            # DRAExtendedResource: a pod may wait for a DeviceClass to back its extended resource.
            ClusterEvent(DEVICE_CLASS_KIND, ActionType.ADD | ActionType.UPDATE),
        )

    # -- PreFilter / Filter -----------------------------------------------------------------------
    def _compute_pre_filter_state(self, pod: PodInfo, table: NodeTable, delegable: frozenset[str]) -> _PreFilterState:
        req = pod.requests
        table.request_vector(pod)  # adds table columns for extended resources nobody offers yet
        checks = []
        # fitsRequest order: cpu, memory, ephemeral-storage, then scalar resources. A zero request
        # is never checked (upstream's "podRequest.X > 0 &&" / "rQuant == 0 continue").
        for col, amount, reason in (
            (CPU, req.milli_cpu, "Insufficient cpu"),
            (MEMORY, req.memory, "Insufficient memory"),
            (EPHEMERAL_STORAGE, req.ephemeral_storage, "Insufficient ephemeral-storage"),
        ):
            if amount > 0:
                checks.append(_Check(col, amount, reason))
        for rname, amount in req.scalar.items():
            if amount == 0:
                continue
            # ignoredResources / ignoredResourceGroups only ever skip *extended* resources;
            # hugepages and kubernetes.io/ resources are always checked.
            if is_extended_resource_name(rname) and (
                rname in self.ignored_resources or rname.split("/", 1)[0] in self.ignored_resource_groups
            ):
                continue
            checks.append(_Check(table.resource_column(rname), amount, f"Insufficient {rname}", rname in delegable))
        nothing = req.milli_cpu == 0 and req.memory == 0 and req.ephemeral_storage == 0 and not req.scalar
        if nothing:
            checks = []
        thresholds = np.full((len(table.resource_names), 1), _NEVER_SHORT, dtype=np.int64)
        thresholds[PODS] = 1
        for c in checks:
            thresholds[c.column] = c.amount
        thresholds.flags.writeable = False
        return _PreFilterState(
            tuple(checks), nothing, ("Too many pods", *(c.reason for c in checks)),
            tuple((c.column, c.amount, c.delegable) for c in checks), thresholds,
        )

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        # Pods that request the same share one state (immutable); keyed by table and its column
        # count, as extended resources add columns. Computing a state adds the columns of the
        # pod's scalar resources first and is stored under the count after that; columns are only
        # ever appended, so a state found under the current count is what computing would give.
        req = pod.requests
        delegable = self._delegable(req.scalar)
        key = (id(table), len(table.resource_names), req.key, delegable)
        entry = self._pre_filter_states.get(key)
        if entry is not None and entry[0] is table:
            s = entry[1]
        else:
            s = self._compute_pre_filter_state(pod, table, delegable)
            if len(self._pre_filter_states) >= 1024:
                self._pre_filter_states.clear()
            self._pre_filter_states[key] = (table, s)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, SUCCESS

    def _delegable(self, scalar: Mapping[str, int]) -> frozenset[str]:
        """The pod's scalar resources a DeviceClass backs (shouldDelegateResourceToDRA's mapping)."""
        if not scalar:
            return frozenset()
        classes = self.handle.objects(DEVICE_CLASS_KIND)
        if not classes:
            return frozenset()
        resolver = extended_resource_classes(classes)
        return frozenset(name for name in scalar if name in resolver)

    def filter_outcome_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """PreFilter and Filter read the pod's requests and the table, and the DeviceClasses when
        the pod asks for an extended resource (one a class backs is left to DynamicResources):
        then, while there are DeviceClasses, no failed pass is reused."""
        if pod.requests.scalar and self.handle.objects(DEVICE_CLASS_KIND):
            return None
        return ()

    def filter_row_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """The verdict on a node reads that node's row alone (its free and whole resources), and
        the DeviceClasses as for ``filter_outcome_key``."""
        return self.filter_outcome_key(state, pod)

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            err = Status.error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name)
            return Verdicts(np.ones(len(rows), dtype=np.int32), [err])
        if len(rows) == 1 and len(s.checks) < _SMALL_KEY_CHECKS:
            return self._filter_one_row(s, table, int(rows[0]))
        if len(rows) <= _FEW_ROWS and s.checks and len(s.checks) < _SMALL_KEY_CHECKS:
            return self._filter_few_rows(s, table, rows)
        # One gather of every resource column the state knows (contiguous rows of the resource-major
        # matrix) and one comparison: ``short[column, i]``, candidate i is short of that column.
        thresholds = s.thresholds
        short = table.available_by_resource[: len(thresholds)].take(rows, axis=1) < thresholds
        for c in s.checks:
            if c.delegable:  # nodes without the resource leave it to DynamicResources
                short[c.column] &= table.allocatable_by_resource[c.column].take(rows) > 0
        if not np.count_nonzero(short):
            return Verdicts.all_pass(len(rows))
        checks = s.checks
        # "len(pods)+1 > allowedPodNumber". Never unresolvable upstream (preemption frees slots).
        pods_short = short[PODS]
        if not checks:
            return Verdicts.from_mask(~pods_short, Status(Code.UNSCHEDULABLE, ("Too many pods",), self.name))
        reasons = s.reasons
        if len(reasons) <= _SMALL_KEY_CHECKS:
            # Packed per-reason states of every row (0: fits everything), two bits per reason:
            # the "too big" bits of all checks in one gather, then the "short" bits.
            keys = self._too_big_bits(table, s).take(rows)
            keys |= pods_short
            for i, c in enumerate(checks, start=1):
                keys |= np.left_shift(short[c.column], 2 * i, dtype=np.int32)
            return self._verdicts_of_keys(keys, reasons)
        idx = np.flatnonzero(short.any(axis=0))
        failing_rows = rows[idx]
        whole = table.allocatable_by_resource
        states = [pods_short[idx].astype(np.int64)]
        for c in checks:
            st = short[c.column, idx].astype(np.int64)
            st[(st == 1) & (whole[c.column].take(failing_rows) < c.amount)] = _UNRESOLVABLE
            states.append(st)
        partial = self._verdicts(states, reasons)
        codes = np.zeros(len(rows), dtype=np.int32)
        codes[idx] = partial.codes
        return Verdicts(codes, partial.statuses)

    def _filter_few_rows(self, s: _PreFilterState, table: NodeTable, rows: Rows) -> Verdicts:
        """A few nodes (an incremental pass's changed rows) in plain Python: each row's packed key
        as ``_filter_one_row`` makes it, then what the batch gives for these keys (``all_pass``
        when none is short; else the codes of the reasons' table, new keys registered in the
        batch's order: ascending)."""
        keys = [self._row_key(s, table, row) for row in rows.tolist()]
        if not any(keys):
            return Verdicts.all_pass(len(keys))
        key_codes = self._key_codes_of(s.reasons)
        for key in sorted(set(keys)):
            key_codes.code(key)
        return Verdicts(np.array([key_codes.code(key) for key in keys], dtype=np.int32), key_codes.statuses)

    @staticmethod
    def _row_key(s: _PreFilterState, table: NodeTable, row: int) -> int:
        """One node's packed key (0: fits), as the batch packs it: "too many pods", then per
        check two bits, short of it and (bit + 1) not even the node's whole allocatable."""
        free = table.available[row].tolist()
        key = int(free[PODS] < 1)
        if key == 0 and all(free[c.column] >= c.amount for c in s.checks):
            return 0
        whole = table.allocatable[row].tolist()
        for i, c in enumerate(s.checks, start=1):
            if c.delegable and whole[c.column] <= 0:
                continue  # left to DynamicResources
            if free[c.column] < c.amount:
                key |= 1 << (2 * i)
            if whole[c.column] < c.amount:
                key |= 1 << (2 * i + 1)
        return key

    def _filter_one_row(self, s: _PreFilterState, table: NodeTable, row: int) -> Verdicts:
        """One node in plain Python (preemption's dry run and the extender check nodes one at a
        time, where numpy's per-call cost is most of the work): the same packed key as the batch."""
        key = self._row_key(s, table, row)
        if key == 0:
            return _ONE_PASSES
        key_codes = self._key_codes_of(s.reasons)
        code = key_codes.code(key)
        if code == 0:  # only "too big" bits: cannot happen for a short row, but be exact
            return _ONE_PASSES
        return Verdicts(np.ones(1, dtype=np.int32), [key_codes.statuses[code - 1]])

    def _too_big_bits(self, table: NodeTable, s: _PreFilterState) -> npt.NDArray[np.int32]:
        """Per table row, bit ``2 * i + 1`` set where check i's amount exceeds the node's whole
        allocatable of its column (i from 1, as in the packed keys). Depends on Node objects
        only (allocatable, the rows that exist), so kept until ``node_generation`` moves."""
        key = (id(table), s.too_big_key)
        cached = self._too_big.get(key)
        if cached is not None and cached[0] is table and cached[1] == table.node_generation:
            return cached[2]
        bits = np.zeros(len(table.allocatable), dtype=np.int32)
        for i, c in enumerate(s.checks, start=1):
            whole = table.allocatable_by_resource[c.column]
            too_big = (whole < c.amount) & (whole > 0) if c.delegable else whole < c.amount
            bits |= np.left_shift(too_big, 2 * i + 1, dtype=np.int32)
        if len(self._too_big) >= 512:
            self._too_big.clear()
        self._too_big[key] = (table, table.node_generation, bits)
        return bits

    def _verdicts(self, states: list[IntArray], reasons: tuple[str, ...]) -> Verdicts:
        """Group the failing rows by their combination of per-reason states: one Status each."""
        if len(reasons) > _PACKED_CHECKS:  # a pod requesting > 30 extended resources
            uniq_rows, inverse = np.unique(np.stack(states, axis=1), axis=0, return_inverse=True)
            return self._group([tuple(int(v) for v in r) for r in uniq_rows], inverse.reshape(-1), reasons)
        keys = states[0].copy()
        for i, st in enumerate(states[1:], start=1):
            keys |= st << (2 * i)
        uniq, inverse = np.unique(keys, return_inverse=True)
        combos = [tuple((int(k) >> (2 * i)) & 3 for i in range(len(reasons))) for k in uniq]
        return self._group(combos, inverse.reshape(-1), reasons)

    def _verdicts_of_keys(self, keys: npt.NDArray[np.int32], reasons: tuple[str, ...]) -> Verdicts:
        """Verdicts from small packed keys (key 0 passes): one lookup in the code table of the
        reasons, whose statuses are every key seen so far for them (a status no row of this call
        uses is harmless: rejections are counted per row). Keys not seen yet get their Status
        appended first; a Status depends on the reasons and the key alone, so nothing invalidates
        the table."""
        key_codes = self._key_codes_of(reasons)
        codes = key_codes.codes.take(keys)
        if codes.min() < 0:
            # Not np.unique: without return_* it imports numpy.ma (np.ma.is_masked), ~0.02 s
            # that the first scheduling cycle after a start would wait for (issue 32 item 2).
            for k in sorted(set(keys[codes < 0].tolist())):
                key_codes.code(k)
            codes = key_codes.codes.take(keys)
        return Verdicts(codes, key_codes.statuses)

    def _key_codes_of(self, reasons: tuple[str, ...]) -> _KeyCodes:
        key_codes = self._key_codes.get(reasons)
        if key_codes is None:
            if len(self._key_codes) >= 256:  # 4**len(reasons) int32 each; distinct reasons are few
                self._key_codes.clear()
            key_codes = self._key_codes[reasons] = _KeyCodes(reasons, self._status_of)
        return key_codes

    def _group(
        self, combos: list[tuple[int, ...]], inverse: npt.NDArray[np.intp], reasons: tuple[str, ...]
    ) -> Verdicts:
        codes_of_combo = np.zeros(len(combos), dtype=np.int32)
        statuses: list[Status] = []
        for j, combo in enumerate(combos):  # one iteration per distinct outcome, not per node
            st = self._status_of(combo, reasons)
            if st is not None:
                statuses.append(st)
                codes_of_combo[j] = len(statuses)
        return Verdicts(codes_of_combo[inverse], statuses)

    def _status_of(self, combo: tuple[int, ...], reasons: tuple[str, ...]) -> Status | None:
        failed = tuple(reasons[i] for i, st in enumerate(combo) if st != _FITS)
        if not failed:
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if _UNRESOLVABLE in combo else Code.UNSCHEDULABLE
        return Status(code, failed, self.name)

    # -- PreScore / Score -------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        # Upstream's Fit.PreScore never skips (only BalancedAllocation skips best-effort pods).
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(self.allocation.pod_request_list(pod),
                                                        self.allocation.dra_counter(self.handle)))
        return SUCCESS

    # -- PlacementScore ---------------------------------------------------------------------------
    def score_placement(
        self, state: CycleState, group: PodGroupInfo, assignments: PodGroupAssignments
    ) -> tuple[int, Status]:
        """resource_allocation.go scorePlacement: the proposed members' requests plus what the
        placement's nodes hold, against their allocatable summed, scored MostAllocated."""
        placement = assignments.placement
        table = self.handle.table
        rows = placement.rows if placement is not None else table.alive_rows()
        group_requests = np.zeros(len(self.allocation.weights), dtype=np.int64)
        for a in assignments.proposed:
            group_requests += self.allocation.pod_request_list(a.pod)
        if len(rows) == 0:
            return 0, SUCCESS
        alloc, requested, known_nonzero = self.allocation.allocatable_requested(table, rows, group_requests)
        # Each row's requested carries the group's requests once; the placement carries them once.
        total_requested = requested.sum(axis=1) - group_requests * (len(rows) - 1)
        score = self.placement_scorer(total_requested[:, None], alloc.sum(axis=1)[:, None], known_nonzero)
        return int(score[0]), SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            # Upstream's Score recomputes the requests (and the DRA state) when PreScore did not run.
            s = _PreScoreState(self.allocation.pod_request_list(pod), self.allocation.dra_counter(self.handle))
        alloc, requested, known_nonzero = self.allocation.allocatable_requested(table, rows, s.pod_requests)
        if s.dra is not None and not known_nonzero:
            self.allocation.add_dra_backed(table, rows, s.pod_requests, s.dra, alloc, requested)
        return self.scorer(requested, alloc, known_nonzero)


