"""The per-profile framework: plugin instances per extension point and the code that runs them.

Port of pkg/scheduler/framework/runtime/framework.go, with filters and scores run in batch over
node-table rows. The scheduling algorithm that strings these together lives in scheduler.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.filter_cache import SignatureVerdictCache
from kubesched.framework.handle import BindConflictError, Handle, PodGoneError
from kubesched.framework.interfaces import (
    EXTENSION_POINTS,
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Scores,
)
from kubesched.framework.registry import Registry
from kubesched.framework.score_totals import ScoredNodes, weighted_totals
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import ClusterEvent, PostFilterResult, PreFilterResult, QueuedPodInfo
from kubesched.framework.waiting import WaitingPod
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, Rows

_SUCCESS_CODE, _SKIP_CODE, _ERROR_CODE = Code.SUCCESS, Code.SKIP, Code.ERROR  # Code.X lookups cost more
_BASE_NORMALIZE_SCORE = ScorePlugin.normalize_score

#: Upstream minFeasibleNodesToFind / minFeasibleNodesPercentageToFind (schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class FrameworkError(ValueError):
    """A profile that cannot be built (missing QueueSort/Bind, plugin at a point it does not serve)."""


class ProfileSpec(Protocol):
    """What the runtime needs from a resolved configuration profile (config.load.ResolvedProfile)."""

    @property
    def scheduler_name(self) -> str: ...
    @property
    def plugins(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def score_weights(self) -> Mapping[str, int]: ...
    @property
    def plugin_args(self) -> Mapping[str, Any]: ...
    @property
    def percentage_of_nodes_to_score(self) -> int | None: ...


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """Upstream numFeasibleNodesToFind: adaptive 50 - nodes/125 % (floor 5 %), at least 100 nodes."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        pct = max(pct, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if pct >= 100:
        return num_all_nodes
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


#: How upstream's framework wraps a plugin's error, per extension point (runtime/framework.go).
_ERROR_FORMATS = {
    "PreFilter": 'running PreFilter plugin "{plugin}": {message}',
    "Filter": 'running "{plugin}" filter plugin: {message}',
    "PostFilter": 'running PostFilter plugin "{plugin}": {message}',
    "PreScore": 'running PreScore plugin "{plugin}": {message}',
    "Score": 'running Score plugins: plugin "{plugin}" failed with: {message}',
    "Reserve": 'running Reserve plugin "{plugin}": {message}',
    "Permit": 'running Permit plugin "{plugin}": {message}',
    "PreBind": 'running PreBind plugin "{plugin}": {message}',
    "Bind": 'running Bind plugin "{plugin}": {message}',
}


def plugin_error(point: str, st: Status) -> str:
    """Upstream's wrapping of a plugin's error at ``point``, e.g. ``running "RackCap" filter
    plugin: KeyError: 'r1x' (rackcap.py:42 in filter)`` (an exception a plugin raised becomes an
    Error naming its type and location: ``Status.from_exception``)."""
    if not st.plugin:
        return st.message
    return _ERROR_FORMATS.get(point, "running {point} plugin \"{plugin}\": {message}").format(
        point=point, plugin=st.plugin, message=st.message
    )


def wrapped_error(point: str, st: Status) -> Status:
    """``st`` as an Error whose message is :func:`plugin_error`'s (the exception is kept)."""
    return Status(Code.ERROR, (plugin_error(point, st),), st.plugin, st.exception)


def narrowed_out_status(plugins: Sequence[str]) -> Status:
    """The status of nodes a PreFilterResult left out (schedule_one.go: ``%v`` of the plugin list)."""
    return Status.unresolvable(f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]")


def _on_node(pod: PodInfo, node: str) -> PodInfo:
    """``pod.with_node(node)`` for the nominated pods' pass, made once per nomination (kept in the
    pod's memo) rather than on every attempt of every other pod: with a thousand preemptors
    nominated, each attempt puts them all on their nodes."""
    cached = pod.memo.get("_nominated_on")
    if cached is not None and cached[0] is pod and cached[1] == node:
        placed: PodInfo = cached[2]
        return placed
    placed = pod.with_node(node)
    pod.memo["_nominated_on"] = (pod, node, placed)
    return placed


class Framework:
    def __init__(
        self,
        profile_name: str,
        plugins: Mapping[str, Sequence[Plugin]],
        score_weights: Mapping[str, int],
        handle: Handle,
        percentage_of_nodes_to_score: int | None = None,
        *,
        schedules: bool = True,
    ) -> None:
        self.profile_name = profile_name
        self.handle = handle
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        queue_sort = list(plugins.get("queueSort", ()))
        # A framework that only filters and scores for another scheduler (the extender) neither
        # sorts nor binds: ``schedules=False`` waives both requirements.
        if schedules and len(queue_sort) != 1:
            raise FrameworkError(
                f"profile {profile_name!r}: exactly one queueSort plugin is required, got {len(queue_sort)}"
            )
        if schedules and not plugins.get("bind"):
            raise FrameworkError(f"profile {profile_name!r}: at least one bind plugin is required")
        for point, instances in plugins.items():
            base = EXTENSION_POINTS[point]
            for p in instances:
                if not isinstance(p, base):
                    raise FrameworkError(f"profile {profile_name!r}: plugin {p.name!r} does not extend {point}")
        self.pre_enqueue: list[PreEnqueuePlugin] = list(plugins.get("preEnqueue", ()))  # type: ignore[arg-type]
        self.queue_sort: QueueSortPlugin | None = queue_sort[0] if queue_sort else None  # type: ignore[assignment]
        self.pre_filter: list[PreFilterPlugin] = list(plugins.get("preFilter", ()))  # type: ignore[arg-type]
        self.filter: list[FilterPlugin] = list(plugins.get("filter", ()))  # type: ignore[arg-type]
        self.post_filter: list[PostFilterPlugin] = list(plugins.get("postFilter", ()))  # type: ignore[arg-type]
        self.pre_score: list[PreScorePlugin] = list(plugins.get("preScore", ()))  # type: ignore[arg-type]
        self.score: list[ScorePlugin] = list(plugins.get("score", ()))  # type: ignore[arg-type]
        self.reserve: list[ReservePlugin] = list(plugins.get("reserve", ()))  # type: ignore[arg-type]
        self.permit: list[PermitPlugin] = list(plugins.get("permit", ()))  # type: ignore[arg-type]
        self.pre_bind: list[PreBindPlugin] = list(plugins.get("preBind", ()))  # type: ignore[arg-type]
        self.bind: list[BindPlugin] = list(plugins.get("bind", ()))  # type: ignore[arg-type]
        self.post_bind: list[PostBindPlugin] = list(plugins.get("postBind", ()))  # type: ignore[arg-type]
        self.score_weights = {p.name: int(score_weights.get(p.name, 1)) for p in self.score}
        seen: dict[str, Plugin] = {}
        for instances in plugins.values():
            for p in instances:
                seen.setdefault(p.name, p)
        self.plugins: dict[str, Plugin] = seen
        leading: list[FilterPlugin] = []
        for fp in self.filter:
            if type(fp).filter_signature is FilterPlugin.filter_signature:
                break
            leading.append(fp)
        #: Verdicts of the leading node-object filters, shared by pods with equal signatures.
        self.signature_cache = SignatureVerdictCache(leading)
        handle.framework = self

    # -- building -----------------------------------------------------------------------------
    @staticmethod
    def build(profile: ProfileSpec, registry: Registry, handle: Handle, *, schedules: bool = True) -> Framework:
        """Instantiate each configured plugin once and wire it to every point it is enabled at."""
        instances: dict[str, Plugin] = {}
        by_point: dict[str, list[Plugin]] = {}
        for point, names in profile.plugins.items():
            if point not in EXTENSION_POINTS:
                raise FrameworkError(f"profile {profile.scheduler_name!r}: unknown extension point {point!r}")
            for name in names:
                inst = instances.get(name)
                if inst is None:
                    cls = registry.get(name)
                    if cls is None:
                        raise FrameworkError(
                            f"profile {profile.scheduler_name!r}: plugin {name!r} is not registered; "
                            f"known plugins: {', '.join(registry.names())}"
                        )
                    inst = instances[name] = cls(profile.plugin_args.get(name), handle)
                bucket = by_point.setdefault(point, [])
                if any(p.name == name for p in bucket):
                    raise FrameworkError(
                        f"profile {profile.scheduler_name!r}: plugin {name!r} already registered at {point}"
                    )
                bucket.append(inst)
        return Framework(
            profile.scheduler_name, by_point, profile.score_weights, handle, profile.percentage_of_nodes_to_score,
            schedules=schedules,
        )

    def events_to_register(self) -> dict[str, list[ClusterEvent]]:
        """Per rejecting or gating plugin (PreEnqueue/PreFilter/Filter/Reserve/Permit), the events
        that may help its pods."""
        out: dict[str, list[ClusterEvent]] = {}
        for group in (self.pre_enqueue, self.pre_filter, self.filter, self.reserve, self.permit):
            for p in group:
                out.setdefault(p.name, list(p.events_to_register()))
        return out

    # -- pre-enqueue --------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo, first: str = "") -> Status:
        """Every PreEnqueue plugin until one gates the pod (upstream runPreEnqueuePluginsForPod):
        Success, or the gating plugin's Status with its name. ``first`` (the plugin that gated
        the pod last time) runs first, so a pod stays gated by the same plugin while it is. A
        plugin that raises gates the pod with an Error naming it (the pod is not scheduled with
        an unchecked gate)."""
        plugins = self.pre_enqueue
        if first:
            plugins = sorted(plugins, key=lambda p: p.name != first)
        for p in plugins:
            try:
                st = p.pre_enqueue(pod)
            except Exception as e:
                st = Status.from_exception(e, p.name)
            if not st.is_success:
                return st.with_plugin(p.name)
        return SUCCESS

    # -- queue sort ---------------------------------------------------------------------------
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        assert self.queue_sort is not None, "a framework built with schedules=False has no queue"
        return self.queue_sort.less(a, b)

    @property
    def queue_sort_key(self) -> Callable[[QueuedPodInfo], Any] | None:
        assert self.queue_sort is not None, "a framework built with schedules=False has no queue"
        return self.queue_sort.sort_key

    # -- filtering ----------------------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Run PreFilter plugins (upstream RunPreFilterPlugins).

        Skip disables that plugin's Filter. UnschedulableAndUnresolvable or an error ends the run;
        Unschedulable is remembered and the other plugins still run (kubernetes#119770), so every
        rejecting plugin is in ``state.pre_filter_rejecting``. Plugins that narrowed the node set
        are in ``state.pre_filter_narrowing``.
        """
        result: PreFilterResult | None = None
        table = self.handle.table
        unschedulable: Status | None = None
        for p in self.pre_filter:
            try:
                r, st = p.pre_filter(state, pod, table)
            except Exception as e:  # a plugin bug fails this pod, never the scheduler
                return None, Status.from_exception(e, p.name)
            if st.code == _SKIP_CODE:
                state.skip_filter_plugins.add(p.name)
                continue
            if st.code != _SUCCESS_CODE:
                st = st.with_plugin(p.name)
                state.pre_filter_rejecting[p.name] = st
                if st.code == Code.UNSCHEDULABLE:
                    unschedulable = unschedulable or st
                    continue
                return None, st
            if r is not None and not r.all_nodes:
                state.pre_filter_narrowing.append(p.name)
                result = r if result is None else result.merge(r)
                if not result.node_names:
                    names = state.pre_filter_narrowing
                    msg = (
                        f"node(s) didn't satisfy plugin {names[0]}"
                        if len(names) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                    )
                    rejection = Status.unresolvable(msg, plugin=p.name)
                    state.pre_filter_rejecting.update(dict.fromkeys(names, rejection))
                    return None, rejection
        if unschedulable is not None:
            return None, unschedulable
        return result, SUCCESS

    def pre_filter_rows(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis
    ) -> tuple[Rows, Status]:
        """PreFilter, then the rows it leaves as candidates (upstream findNodesThatFitPod, first half).

        Success: the candidate rows; rows a PreFilterResult left out are recorded in ``diagnosis``
        as ``node(s) didn't satisfy plugin(s) [A B]`` (UnschedulableAndUnresolvable). A rejection:
        no rows, every row recorded with it and ``diagnosis.pre_filter_msg`` set. An error: no rows,
        the error Status (wrap it with :func:`plugin_error`). The scheduler, ``explain``, the
        extender and preemption's dry runs all start here, so they agree on rows and messages.
        """
        pre, st = self.run_pre_filter(state, pod)
        if st.code != _SUCCESS_CODE:
            if st.is_rejected:
                diagnosis.node_to_status.add_all(rows, st)
                diagnosis.pre_filter_msg = st.message
                diagnosis.unschedulable_plugins.update(state.pre_filter_rejecting or (st.plugin,))
            return rows[:0], st
        if pre is None or pre.node_names is None:
            return rows, SUCCESS
        wanted = pre.node_names
        inside = np.fromiter((n in wanted for n in self.handle.table.node_names(rows)), dtype=np.bool_, count=len(rows))
        plugins = sorted(set(state.pre_filter_narrowing))
        diagnosis.unschedulable_plugins.update(plugins)
        if not inside.all():
            diagnosis.node_to_status.add_all(rows[~inside], narrowed_out_status(plugins))
        return rows[inside], SUCCESS

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis) -> tuple[Rows, Status]:
        """PreFilter, then every Filter over all of ``rows`` (no percentageOfNodesToScore sampling):
        the rows that pass (rejections in ``diagnosis``), or an error Status whose message is already
        wrapped as upstream wraps it (``running Filter plugin "X": ...``). For callers that judge
        given nodes (the extender, preemption's dry runs); the scheduling cycle filters in windows."""
        candidates, st = self.pre_filter_rows(state, pod, rows, diagnosis)
        if not st.is_success:
            if st.is_rejected:
                return candidates, SUCCESS
            return candidates, wrapped_error("PreFilter", st)
        passing, st = self.run_filters(state, pod, candidates, diagnosis)
        if not st.is_success:
            return passing, wrapped_error("Filter", st)
        return passing, SUCCESS

    def run_filters(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, *, ascending: bool = False
    ) -> tuple[Rows, Status]:
        """Filter rows through every plugin, stopping at the first rejection per node; returns the
        passing rows (in the order of ``rows``). Rejections are recorded in ``diagnosis`` with the
        rejecting plugin's name. ``ascending``: the caller guarantees that ``rows`` strictly
        increase, which lets cached verdicts answer a run of consecutive rows with slices.

        Nodes with nominated pods of equal or higher priority get upstream's two passes
        (RunFilterPluginsWithNominatedPods, :meth:`filter_node`); when no pod is nominated anywhere
        (the common case) this costs one dict check. When the filters are node-local for this pod
        (:meth:`filters_node_local`) the nominated pods of every such node go on the table
        together for one batch pass, with no CycleState clone."""
        if self.handle.nominated:
            affected = self._nominated_rows(pod, rows)
            if affected is not None:
                if self.filters_node_local(state, pod):
                    return self._run_filters_nominated_together(state, pod, rows, affected, diagnosis)
                return self._run_filters_nominated(state, pod, rows, affected, diagnosis)
        return self._run_filters_batch(state, pod, rows, diagnosis, ascending)

    def filters_node_local(self, state: CycleState, pod: PodInfo) -> bool:
        """Whether a pod added to or removed from one node can change no other node's verdict for
        ``pod`` this cycle: every Filter that runs is ``filter_node_local`` or has a
        ``filter_signature``, and no PreFilter plugin that runs keeps state its
        PreFilterExtensions would update (PodTopologySpread, InterPodAffinity and the volume
        plugins Skip for a pod without constraints, affinity or such volumes)."""
        skipped = state.skip_filter_plugins
        for p in self.pre_filter:
            if p.name not in skipped and p.pre_filter_extensions() is not None:
                return False
        for f in self.filter:
            if f.name in skipped or f.filter_node_local:
                continue
            if f.filter_signature(state, pod) is None:
                return False
        return True

    def _run_filters_nominated_together(
        self, state: CycleState, pod: PodInfo, rows: Rows, affected: Rows, diagnosis: Diagnosis
    ) -> tuple[Rows, Status]:
        table = self.handle.table
        placed: list[PodInfo] = []
        with table.pod_observers_paused():
            try:
                for row in affected.tolist():
                    name = table.names[row]
                    for p in self.handle.nominated[name].values():
                        if p.priority >= pod.priority and p.uid != pod.uid and table.pod(p.uid) is None:
                            placed.append(_on_node(p, name))
                table.add_pods(placed)
                first, st = self._run_filters_batch(state, pod, affected, diagnosis)
            finally:
                table.remove_pods([p.uid for p in placed])
        if not st.is_success:
            return rows[:0], st
        second = rows[~np.isin(rows, affected) | np.isin(rows, first)]
        return self._run_filters_batch(state, pod, second, diagnosis)

    def _nominated_rows(self, pod: PodInfo, rows: Rows) -> Rows | None:
        """Rows of ``rows`` whose node has a nominated pod (other than ``pod``) of equal or
        higher priority, or None."""
        table = self.handle.table
        nominated = self.handle.nominated
        found: list[int] = []
        if len(rows) < len(nominated):  # e.g. preemption's candidates, many preemptors nominated
            names = table.names
            for row in rows.tolist():
                pods = nominated.get(names[row])
                if pods and any(p.priority >= pod.priority and p.uid != pod.uid for p in pods.values()):
                    found.append(row)
            return np.array(found, dtype=np.intp) if found else None
        for node, pods in nominated.items():
            row = table.index.get(node)
            if row is None:
                continue
            if any(p.priority >= pod.priority and p.uid != pod.uid for p in pods.values()):
                found.append(row)
        if not found:
            return None
        affected = rows[np.isin(rows, np.array(found, dtype=np.intp))]
        return affected if len(affected) else None

    def _run_filters_nominated(
        self, state: CycleState, pod: PodInfo, rows: Rows, affected: Rows, diagnosis: Diagnosis
    ) -> tuple[Rows, Status]:
        plain = rows[~np.isin(rows, affected)]
        passing, st = self._run_filters_batch(state, pod, plain, diagnosis)
        if not st.is_success:
            return passing, st
        ok: list[int] = []
        for row in affected.tolist():
            st = self.filter_node(state, pod, row)
            if st.is_success:
                ok.append(row)
            elif st.is_rejected:
                diagnosis.add_rejections(np.array([row], dtype=np.intp), np.ones(1, dtype=np.int32), [st], 1)
            else:
                return rows[:0], st
        if not ok:
            return passing, SUCCESS
        keep = np.isin(rows, np.concatenate((passing, np.array(ok, dtype=np.intp))))
        return rows[keep], SUCCESS

    def filter_node(self, state: CycleState, pod: PodInfo, row: int) -> Status:
        """Every Filter plugin on one node, with the nominated pods (upstream
        RunFilterPluginsWithNominatedPods): when the node has nominated pods of equal or higher
        priority, first with them added (to a clone of ``state``, through PreFilterExtensions, and
        to the node), then without; both must pass. Success, the first rejection, or an Error."""
        nominated = self.handle.nominated.get(self.handle.table.names[row]) if self.handle.nominated else None
        if nominated:
            added = [p for p in nominated.values() if p.priority >= pod.priority and p.uid != pod.uid]
            if added:
                st = self._filter_with_added(state, pod, row, added)
                if not st.is_success:
                    return st
        return self._filter_one(state, pod, row)

    def _filter_one(self, state: CycleState, pod: PodInfo, row: int) -> Status:
        scratch = Diagnosis()
        passing, st = self._run_filters_batch(state, pod, np.array([row], dtype=np.intp), scratch)
        if not st.is_success:
            return st
        if len(passing):
            return SUCCESS
        rejected = scratch.node_to_status.get(row)
        return rejected if rejected is not None else Status.unschedulable()

    def _filter_with_added(self, state: CycleState, pod: PodInfo, row: int, added: list[PodInfo]) -> Status:
        """addGENominatedPods: the pods counted on the node (the table, restored afterwards: the
        cycle is single-threaded) and in a clone of the cycle state, then the filters."""
        table = self.handle.table
        node = NodeInfo(table, row)
        name = table.names[row]
        clone = state.clone()
        placed: list[PodInfo] = []
        try:
            for p in added:
                if table.pod(p.uid) is not None:
                    continue  # already placed (assumed): counted as it is
                assigned = p.with_node(name)
                table.add_pod(assigned)
                placed.append(assigned)
                st = self.run_pre_filter_extension_add_pod(clone, pod, assigned, node)
                if not st.is_success:
                    return st
            return self._filter_one(clone, pod, row)
        finally:
            for p in placed:
                table.remove_pod(p.uid)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        """Every PreFilter plugin's AddPod (plugins skipped this cycle excluded), as upstream
        RunPreFilterExtensionAddPod; an error is wrapped as upstream wraps it."""
        return self._run_pre_filter_extension("AddPod", state, pod, pod_to_add, node)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        """Every PreFilter plugin's RemovePod (upstream RunPreFilterExtensionRemovePod)."""
        return self._run_pre_filter_extension("RemovePod", state, pod, pod_to_remove, node)

    def _run_pre_filter_extension(
        self, which: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status:
        for p in self.pre_filter:
            if p.name in state.skip_filter_plugins:
                continue
            ext = p.pre_filter_extensions()
            if ext is None:
                continue
            call = ext.add_pod if which == "AddPod" else ext.remove_pod
            try:
                st = call(state, pod, other, node)
            except Exception as e:
                st = Status.from_exception(e)
            if not st.is_success:
                return Status.error(f'running {which} on PreFilter plugin "{p.name}": {st.message}', p.name)
        return SUCCESS

    def _run_filters_batch(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, ascending: bool = False
    ) -> tuple[Rows, Status]:
        table = self.handle.table
        plugins = self.filter
        cached = self.signature_cache.verdicts(state, pod, table)
        if cached is not None:
            plugins = plugins[len(self.signature_cache.plugins) :]
            kept = cached.keep_passing(rows, diagnosis, ascending=ascending)
            if not len(kept) and len(rows):
                return kept, SUCCESS
            rows = kept
        skipped = state.skip_filter_plugins
        for p in plugins:
            if p.name in skipped:
                continue
            try:
                verdicts = p.filter_batch(state, pod, table, rows)
            except Exception as e:
                return rows[:0], Status.from_exception(e, p.name)
            if not verdicts.statuses:
                continue
            codes = verdicts.codes
            passing = codes == 0
            kept = rows[passing]
            if len(kept) == len(rows):
                continue
            statuses = verdicts.statuses  # named by their plugin (copies only when one is not)
            if any(s.plugin != p.name for s in statuses):
                statuses = [s.with_plugin(p.name) for s in statuses]
            for code, s in enumerate(statuses, start=1):
                if s.code == _ERROR_CODE and bool((codes == code).any()):
                    return rows[:0], s
            diagnosis.add_rejections(rows, codes, statuses, len(rows) - len(kept))
            rows = kept
            if not len(kept):
                break
        return rows, SUCCESS

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Run PostFilter plugins until one succeeds (upstream: the first Success wins)."""
        reasons: list[str] = []
        #: The last non-None result of a rejecting plugin (upstream: the last non-Noop one).
        result: PostFilterResult | None = None
        rejector = ""
        for p in self.post_filter:
            try:
                r, st = p.post_filter(state, pod, diagnosis)
            except Exception as e:
                return None, Status.from_exception(e, p.name)
            if st.is_success:
                return r, st.with_plugin(p.name)
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, st.with_plugin(p.name)
            if st.is_error:
                return None, st.with_plugin(p.name)
            if r is not None:
                result = r
            reasons.extend(st.reasons)
            rejector = rejector or p.name
        return result, Status.unschedulable(*reasons, plugin=rejector)

    # -- scoring ------------------------------------------------------------------------------
    def run_pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        table = self.handle.table
        for p in self.pre_score:
            try:
                st = p.pre_score(state, pod, table, rows)
            except Exception as e:
                return Status.from_exception(e, p.name)
            if st.code == _SKIP_CODE:
                state.skip_score_plugins.add(p.name)
            elif not st.is_success:
                return st.with_plugin(p.name)
        return SUCCESS

    def run_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> ScoredNodes | Status:
        """Score and normalise every Score plugin, then range-check, weight and total them all
        (upstream RunScorePlugins: the range check comes after every Score and NormalizeScore)."""
        table = self.handle.table
        normalized: dict[str, Scores] = {}
        skipped = state.skip_score_plugins
        for p in self.score:
            if p.name in skipped:
                continue
            try:
                scores = p.score_batch(state, pod, table, rows)
                if isinstance(scores, Status):
                    return scores.with_plugin(p.name)
                # The base NormalizeScore does nothing and succeeds: not called.
                st = (
                    SUCCESS if type(p).normalize_score is _BASE_NORMALIZE_SCORE
                    else p.normalize_score(state, pod, table, rows, scores)
                )
            except Exception as e:
                return Status.from_exception(e, p.name)
            if st.code != _SUCCESS_CODE:
                return st.with_plugin(p.name)
            if scores.dtype != np.int64:  # e.g. int32 from a plugin; floats fail here, as upstream's int64
                scores = scores.astype(np.int64, casting="same_kind")
            normalized[p.name] = scores
        totals = weighted_totals(len(rows), normalized, self.score_weights)
        if isinstance(totals, Status):
            return totals
        return ScoredNodes(rows, totals, normalized, self.score_weights)

    # -- reserve / permit ---------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.reserve:
            try:
                st = p.reserve(state, pod, node_name)
            except Exception as e:
                st = Status.from_exception(e)
            if not st.is_success:
                st = st.with_plugin(p.name)
                return st if st.is_rejected else wrapped_error("Reserve", st)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Unreserve in reverse order, every plugin (upstream RunReservePluginsUnreserve)."""
        for p in reversed(self.reserve):
            p.unreserve(state, pod, node_name)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Success, a rejection, or Wait after registering the pod as waiting."""
        waits: dict[str, float] = {}
        for p in self.permit:
            try:
                st, timeout = p.permit(state, pod, node_name)
            except Exception as e:
                st, timeout = Status.from_exception(e, p.name), 0.0
            if st.is_success:
                continue
            if st.code == Code.WAIT:
                waits[p.name] = timeout
                continue
            if st.is_rejected:
                return st.with_plugin(p.name)
            return wrapped_error("Permit", st.with_plugin(p.name))
        if waits:
            self.handle.waiting_pods.add(WaitingPod(pod, node_name, waits, self.handle.clock.now()))
            return Status.wait(f"waiting at plugin(s) {', '.join(sorted(waits))}")
        return SUCCESS

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        wp = self.handle.waiting_pods.get(pod.uid)
        if wp is None:
            return SUCCESS
        try:
            return await wp.wait()
        finally:
            self.handle.waiting_pods.remove(pod.uid)

    # -- binding ------------------------------------------------------------------------------
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.pre_bind:
            try:
                st = await p.pre_bind(state, pod, node_name)
            except Exception as e:
                st = Status.from_exception(e)
            if st.code == Code.SKIP:
                continue
            if not st.is_success:
                st = st.with_plugin(p.name)
                return st if st.is_rejected else wrapped_error("PreBind", st)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.bind:
            try:
                st = await p.bind(state, pod, node_name)
            except (BindConflictError, PodGoneError):
                raise  # the scheduler's to handle: not a plugin bug
            except Exception as e:
                st = Status.from_exception(e)
            if st.code == Code.SKIP:
                continue
            st = st.with_plugin(p.name)
            return wrapped_error("Bind", st) if st.is_error else st
        return Status.error("no bind plugin bound the pod (all returned Skip)")

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for p in self.post_bind:
            p.post_bind(state, pod, node_name)
