"""The per-profile framework: plugin instances per extension point and the code that runs them.

Port of pkg/scheduler/framework/runtime/framework.go, with filters and scores run in batch over
node-table rows. The scheduling algorithm that strings these together lives in scheduler.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from kubesched.framework.batch import OpportunisticBatch, PodSigner
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.filter_cache import SignatureVerdictCache
from kubesched.framework.filter_outcome import FilterOutcomeCache
from kubesched.framework.filter_points import FilterPoints
from kubesched.framework.filter_rows import RowVerdictStore
from kubesched.framework.handle import BindConflictError, Handle, PodGoneError
from kubesched.framework.interfaces import (
    EXTENSION_POINTS,
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    Plugin,
    PodGroupPostFilterPlugin,
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
from kubesched.snapshot.table import Rows

_SUCCESS_CODE, _SKIP_CODE = Code.SUCCESS, Code.SKIP  # Code.X lookups cost more
_BASE_NORMALIZE_SCORE = ScorePlugin.normalize_score

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


class Framework(FilterPoints):
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
        self.placement_generate = [p for p in plugins.get("placementGenerate", ())
                                   if isinstance(p, PlacementGeneratePlugin)]
        self.placement_score = [p for p in plugins.get("placementScore", ()) if isinstance(p, PlacementScorePlugin)]
        #: PlacementScore weights: the plugin's Score weight when it has one (NodeResourcesFit),
        #: else 1 (PodGroupPodsCount's default multiPoint weight).
        self.placement_score_weights = {p.name: int(score_weights.get(p.name, 1)) for p in self.placement_score}
        self.pod_group_post_filter: list[PodGroupPostFilterPlugin] = list(
            plugins.get("podGroupPostFilter", ()))  # type: ignore[arg-type]
        #: The Permit plugins that also judge a PodGroup's placement (PlacementFeasiblePlugin).
        self.placement_feasible: list[PlacementFeasiblePlugin] = [
            p for p in self.permit if isinstance(p, PlacementFeasiblePlugin)]
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
        #: Failed Filter passes reused for identical pods on an unchanged table.
        self.filter_outcomes = FilterOutcomeCache(self.pre_filter, self.filter)
        #: Per pod shape, the verdicts of the last pass per node, judged again where nodes changed.
        self.row_verdicts = RowVerdictStore(self.pre_filter, self.filter, self.signature_cache)
        #: OpportunisticBatching: the profile's pod signatures and its batch (framework/batch.py).
        self.signer = PodSigner([*self.pre_filter, *self.filter, *self.pre_score, *self.score])
        self.batch = OpportunisticBatch(self)
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
