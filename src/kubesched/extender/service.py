"""The plugin adapter: one profile's plugins answering the four extender verbs.

* filter — PreFilter + Filter over every node given (no percentageOfNodesToScore sampling: the
  scheduler asks about each node). A node's message is its first rejecting plugin's reasons joined
  with ", " (upstream Status.Message()); UnschedulableAndUnresolvable rejections go to
  ``FailedAndUnresolvableNodes``, Unschedulable ones to ``FailedNodes``. Passing nodes come back
  as the request's own Node objects (``Nodes``) or names (``NodeNames``), in request order.
* prioritize — PreFilter (for the state Score plugins read; the state filter's PreFilter left for
  the same pod on the node cache when nothing changed since, see _PodCycle) + PreScore + Score;
  the framework normalises each plugin to 0–100 and applies its weight; the weighted total is then
  mapped to the extender range 0–10 (MaxExtenderPriority) as ``total * 10 // (100 * sum of the
  weights of the plugins that scored)``, i.e. the weighted mean score in tenths, rounded down. The
  scheduler then multiplies it by the extender's ``weight`` and by MaxNodeScore/MaxExtenderPriority
  = 10.
* preempt — the profile's own preemption on each candidate node, through the code DefaultPreemption
  runs (``framework.preemption.select_victims_on_node``): kube-scheduler's victims are taken off
  (its filters need them gone), then the fewest more lower-priority pods the profile's filters
  need gone too (PDB-violating ones spared first, priorities and budgets from the profile's
  preemption plugin when it has one); nodes where the pod would still not fit are dropped. The
  answer is always ``NodeNameToMetaVictims`` (UIDs), as upstream expects.
* bind — POST pods/binding through the cluster client (needs ``--kubeconfig`` / in-cluster).

In flight: with a cluster attached, the pod prioritize scored best on a node (or filter's only
passing node) is held there — assumed in the cache, Reserve run — until the watch sees it bound,
elsewhere or gone, a new filter call for it, or ``hold_timeout``; bind holds (and re-checks) the
pod on its node before binding and releases it when the bind fails (extender/holds.py).

Nodes: with ``Nodes`` (nodeCacheCapable: false) the node table is built from the request's Node
objects — kept in an LRU keyed by every node's (name, resourceVersion) so repeated calls over the
same nodes cost a dictionary lookup. With ``NodeNames`` (nodeCacheCapable: true) the extender's own
informer-fed cache is used. When a cluster is attached, the pods bound to each node are in the table
in both modes, so plugins that count pods per node (UnderlayIP) are exact; without one, the table
holds the nodes alone.

This module holds the service and the filter and prioritize verbs; the rest is beside it: requests.py
(deadline, reply, errors, ClusterView), rows.py (row masks, prioritize's encoded entries),
tables.py (the request-table cache), preempt.py and bind.py (those verbs), holds.py (pods in flight).

Everything here is synchronous except bind: a request's computation never interleaves with
another's or with informer updates, so preempt may take victims off the live table and put them back.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
import orjson

from kubesched.extender.ahead import FilterAhead, NextPod, watched_pod
from kubesched.extender.bind import bind_reply
from kubesched.extender.holds import InFlightHolds, prefer
from kubesched.extender.limits import DEFAULT_HOLD_TIMEOUT
from kubesched.extender.preempt import preempt_reply
from kubesched.extender.requests import ClusterView, Deadline, Reply, ServiceError, parse_pod
from kubesched.extender.rows import NameWindow, NameWindows, RowEntries, rows_in, unique_rows
from kubesched.extender.scores import extender_scores
from kubesched.extender.tables import RequestTables, TableEntry
from kubesched.extender.wire import (
    MAX_EXTENDER_PRIORITY,
    ExtenderArgs,
    WireError,
    decode_binding_args,
    decode_extender_args,
    decode_preemption_args,
    encode_binding_result,
    encode_extender_scores,
    encode_filter_result,
)
from kubesched.framework.clock import RealClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Handle
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework, ProfileSpec
from kubesched.framework.status import Code, Status
from kubesched.framework.waiting import WaitingPods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import IntArray, NodeTable, Rows

log = logging.getLogger("kubesched.extender")


@dataclass(slots=True)
class _PodCycle:
    """Filter's PreFilter + Filter run of one pod on the live node cache, and the cache's version
    then (``_version``). While the version is unchanged prioritize scores with this state instead
    of running PreFilter again, and the hold takes Filter's verdict for the chosen node (upstream
    runs PreFilter once per scheduling cycle and Reserves with the same CycleState)."""

    pod: PodInfo
    version: tuple[int, int, int]
    state: CycleState
    passed: Rows  # the rows that passed Filter, ascending
    #: The rows filter answered with, in its request's order: what kube-scheduler sends prioritize
    #: next (with ``unique``, their ``unique_rows(..., inverse=True)`` when already known).
    answered: Rows | None = None
    unique: tuple[Rows, Rows] | None = None
    #: Prioritize's scores for ``answered``, computed ahead (ExtenderService.work_ahead) at
    #: ``version``: valid exactly while the cycle is (same pod, same version, same rows).
    scores: IntArray | None = None


def _all_passed(names: list[str]) -> bytes:
    """The filter answer when every node in ``names`` passed."""
    return encode_filter_result(node_names=names, failed={}, failed_unresolvable={})


class ExtenderService:
    def __init__(
        self,
        profile: ProfileSpec,
        registry: Registry,
        cluster: ClusterView | None = None,
        *,
        table_cache_size: int = 8,
        remembered_pods: int = 4096,
        remembered_nodes: int = 100_000,
        parsed_pods: int = 8,
        hold_timeout: float = DEFAULT_HOLD_TIMEOUT,
    ) -> None:
        self.profile = profile
        self.registry = registry
        self.cluster = cluster
        #: Pods seen in filter/prioritize by UID, so a successful bind can be accounted at once.
        self._recent_pods: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._remembered_pods = remembered_pods
        self._live: Framework | None = None
        #: Parsed pods by their exact JSON (see _parse_pod): the scheduler sends the same pod to
        #: filter, then prioritize (and preempt), so each is parsed and checked once. It schedules
        #: one pod at a time, so a few suffice; kept small because a PodInfo's memo may hold the
        #: last node table it was used with (a per-request table in nodeCacheCapable: false mode).
        self._pods: OrderedDict[bytes, PodInfo] = OrderedDict()
        self._parsed_pods = parsed_pods
        #: NodeNames lists seen (filter's, and the subset a filter passed, which prioritize is
        #: sent) with their rows in the node cache (see _cached_rows).
        self._windows = NameWindows()
        self._row_entries = RowEntries()
        #: The last filter request's JSON value, its decoded arguments and its pod (see _decoded).
        self._last_filter: tuple[Any, ExtenderArgs, PodInfo] | None = None
        #: The last filter's run on the live node cache (see _PodCycle); taken by the next call.
        self._cycle: _PodCycle | None = None
        #: Whether ``work_ahead`` has something to do (see there), and whether that is the next
        #: pod's filter (extender/ahead.py), its result, and the length of the last filter's list.
        self.ahead_due = False
        self._next_due = False
        self._next = NextPod()
        self._last_list = 0
        #: Whether a plugin has asked for pending pods (handle.pending_pods) since the start.
        self._reads_pending = False
        #: Pods approved and maybe being bound (needs the cluster's cache). hold_timeout 0: only
        #: the bind verb holds.
        self.holds = InFlightHolds(cluster.cache, hold_timeout) if cluster is not None else None
        self._hold_approved = hold_timeout > 0
        # Built up front: a profile whose plugins cannot be built fails at start, not per request.
        # Its plugins are the ones started (background work); later frameworks share their state.
        self._primary = self._build_framework(NodeTable())
        self._tables = RequestTables(
            self._build_framework,
            lambda: self.cluster.cache.table if self.cluster is not None else None,
            cache_size=table_cache_size,
            remembered_nodes=remembered_nodes,
        )

    # -- frameworks and tables ---------------------------------------------------------------------
    def _build_framework(self, table: NodeTable) -> Framework:
        objects = self.cluster.objects if self.cluster is not None else None
        handle = Handle(table, RealClock(), WaitingPods(), None, self.profile.scheduler_name, objects=objects)
        if self.cluster is not None:
            # No queue here (kube-scheduler has it): activation is a no-op, pending pods come from
            # the cluster's informer.
            handle.attach_queue(lambda _uids: None, self._pending_pods)
        fwk = Framework.build(self.profile, self.registry, handle, schedules=False)
        primary = getattr(self, "_primary", None)
        if primary is not None:
            for name, plugin in fwk.plugins.items():
                plugin.share_background_state(primary.plugins[name])
        return fwk

    async def start_plugins(self) -> None:
        """Start the plugins' background work (e.g. RealUsage's Prometheus polling) once."""
        for plugin in self._primary.plugins.values():
            await plugin.start()

    async def stop_plugins(self) -> None:
        for plugin in self._primary.plugins.values():
            await plugin.stop()

    def live_framework(self) -> Framework:
        if self.cluster is None:
            raise ServiceError(400, "no cluster attached")
        if self._live is None:
            self._live = self._build_framework(self.cluster.cache.table)
        return self._live

    def _request_table(self, nodes: list[dict[str, Any]], deadline: Deadline) -> tuple[TableEntry, list[str]]:
        return self._tables.table_for(nodes, deadline)

    @property
    def table_builds(self) -> int:
        return self._tables.builds

    @property
    def table_hits(self) -> int:
        return self._tables.hits

    def _remember_pod(self, pod: PodInfo) -> None:
        self._recent_pods[pod.uid] = pod.raw
        self._recent_pods.move_to_end(pod.uid)
        if len(self._recent_pods) > self._remembered_pods:
            self._recent_pods.popitem(last=False)

    def _parse_pod(self, raw: dict[str, Any]) -> PodInfo:
        """parse_pod, once per distinct pod. The key is the pod's JSON as orjson writes it back:
        equal bytes are an equal pod, so the cached PodInfo is exactly what parsing would give
        (and a pod that changed in any field, resourceVersion included, is parsed afresh)."""
        key = orjson.dumps(raw)
        pod = self._pods.get(key)
        if pod is not None:
            self._pods.move_to_end(key)
            return pod
        pod = parse_pod(raw)
        self._pods[key] = pod
        if len(self._pods) > self._parsed_pods:
            self._pods.popitem(last=False)
        return pod

    def _pod_sent(self, raw: Any) -> PodInfo:
        """The request's pod: the one filtered ahead when the request sends that very object (it
        was parsed then, from the watch's copy), else the pod informer's when it is that
        object (ahead.watched_pod), else _parse_pod's. Either way, later requests with the same pod
        JSON get the same PodInfo."""
        pod = self._next.pod_sent(raw)
        if pod is None and self.cluster is not None:
            pod = watched_pod(self.cluster, raw)
        if pod is None:
            return self._parse_pod(raw)
        key = orjson.dumps(raw)
        self._pods[key] = pod
        self._pods.move_to_end(key)
        if len(self._pods) > self._parsed_pods:
            self._pods.popitem(last=False)
        return pod

    def _cached_rows(self, names: list[str]) -> tuple[TableEntry, NameWindow]:
        if self.cluster is None:
            raise WireError(
                "NodeNames given (nodeCacheCapable: true) but this extender keeps no node cache: "
                "start it with --kubeconfig (or in-cluster), or set nodeCacheCapable: false"
            )
        if not self.cluster.synced:
            raise ServiceError(503, "kubesched extender: the node cache has not synced with the cluster yet")
        fwk = self.live_framework()
        table = self.cluster.cache.table
        window = self._windows.window(table, names)
        if not window.all_known:
            unknown = [n for n, r in zip(names, window.rows.tolist(), strict=True) if r < 0]
            shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            raise WireError(f"NodeNames: {len(unknown)} node(s) unknown to the extender's node cache: {shown}")
        return TableEntry(table, fwk), window

    def _view(self, args: ExtenderArgs, deadline: Deadline) -> tuple[TableEntry, Rows, list[str], NameWindow | None]:
        """The table, the rows and names of the request's nodes, and (NodeNames) their window."""
        if args.nodes is not None:
            entry, names = self._request_table(args.nodes, deadline)
            index = entry.table.index
            rows = np.fromiter(map(index.__getitem__, names), dtype=np.intp, count=len(names))
            return entry, rows, names, None
        assert args.node_names is not None
        entry, window = self._cached_rows(args.node_names)
        return entry, window.rows, window.names, window

    # -- pods in flight (extender/holds.py) ---------------------------------------------------------
    def _settle_holds(self, pod: PodInfo) -> None:
        """Before a filter/prioritize answer: expired holds go, and so does this pod's own (the
        scheduler asking again means its previous attempt did not bind)."""
        if self.holds is not None:
            self.holds.expire()
            self.holds.release(pod.uid, "retried")

    def _pending_pods(self) -> Iterator[PodInfo]:
        """``handle.pending_pods()``, noting that the profile's plugins read pending pods (_version)."""
        assert self.cluster is not None
        self._reads_pending = True
        return self.cluster.pending_pods()

    def _version(self) -> tuple[int, int, int]:
        """What a plugin reads from the attached cluster, as a value that changes when any of it
        may have: the node table's generation (nodes, bound pods, holds: every change a plugin can
        read of them), the informers' events but a bound pod's status update (ClusterView.changes)
        and, once some plugin has read them, the pending pods' events (a profile that never asked
        for pending pods holds nothing derived from them)."""
        assert self.cluster is not None
        cluster = self.cluster
        pending = cluster.pending_changes if self._reads_pending else -1
        return cluster.cache.table.generation, cluster.changes, pending

    def _take_cycle(self, pod: PodInfo, fwk: Framework) -> _PodCycle | None:
        """Filter's run for ``pod``, when it is still what PreFilter would compute now."""
        cycle, self._cycle = self._cycle, None
        if cycle is None or cycle.pod is not pod or fwk is not self._live or cycle.version != self._version():
            return None
        return cycle

    def _take_filter_ahead(self, pod: PodInfo, fwk: Framework) -> FilterAhead | None:
        """The run filtered ahead for ``pod``, when it is still what a fresh one would compute."""
        ahead = self._next.take(pod)
        if ahead is None or fwk is not self._live or ahead.version != self._version():
            return None
        return ahead

    def _hold(self, pod: PodInfo, node: str, cycle: _PodCycle | None = None) -> bool:
        """Hold ``pod`` on ``node``, the node the scheduler will most likely bind it to; ``cycle``
        (this pod's, still current) spares the hold its own PreFilter + Filter when ``node``
        passed in it."""
        if self.holds is None or not self._hold_approved:
            return False
        checked = None
        if cycle is not None and cycle.version == self._version():
            row = self.holds.cache.table.row_of(node)
            at = int(np.searchsorted(cycle.passed, row)) if row is not None else len(cycle.passed)
            if at < len(cycle.passed) and cycle.passed[at] == row:
                checked = cycle.state
        st = self.holds.hold(self.live_framework(), pod, node, checked)
        if not st.is_success:
            log.debug("extender: not holding %s on %s: %s", pod.key, node, st.message)
        return st.is_success

    # -- verbs ---------------------------------------------------------------------------------------
    def _decoded(self, data: Any) -> tuple[ExtenderArgs, PodInfo]:
        """A prioritize request's arguments and pod. When the server hands over the very value
        the last filter request decoded from (kube-scheduler sent the same bytes: ExtenderServer._parse),
        filter's decoding and pod are reused; otherwise they are decoded as always."""
        last = self._last_filter
        if last is not None and last[0] is data:
            return last[1], last[2]
        args = decode_extender_args(data)
        return args, self._parse_pod(args.pod)

    def filter(self, data: Any, deadline: Deadline) -> Reply:
        args = decode_extender_args(data)
        pod = self._pod_sent(args.pod)
        self._last_filter = (data, args, pod)
        self._cycle, self.ahead_due, self._next_due = None, False, False
        self._settle_holds(pod)
        entry, rows, names, window = self._view(args, deadline)
        self._remember_pod(pod)
        fwk, table = entry.framework, entry.table
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        candidates = window.unique()[0] if window is not None else unique_rows(rows)[0]
        self._last_list = len(candidates)
        ahead = self._take_filter_ahead(pod, fwk)
        verdicts = ahead.verdicts(candidates) if ahead is not None else None
        rejected: Iterable[tuple[int, Status]]
        if ahead is not None and verdicts is not None:
            state, (ok_rows, rejected), pre_filter_msg = ahead.state, verdicts, ""
        else:
            diagnosis = Diagnosis()
            state = CycleState()
            ok_rows, st = fwk.filter_rows(state, pod, candidates, diagnosis)
            if not st.is_success:
                # kube-scheduler moves on to another pod (with the node cache: its next filter ahead)
                self.ahead_due = self._next_due = fwk is self._live
                return Reply(200, encode_filter_result(error=st.message), "plugin")
            rejected, pre_filter_msg = diagnosis.node_to_status.items(), diagnosis.pre_filter_msg
        cycle = None
        if fwk is self._live and not pre_filter_msg:  # PreFilter passed: its state is reusable
            cycle = _PodCycle(pod, self._version(), state, ok_rows)
        # A few distinct statuses are shared by many rows: decide each one's map and message once.
        node_names = table.names
        per_status: dict[int, tuple[dict[str, str], str]] = {}
        for row, s in rejected:
            dest = per_status.get(id(s))
            if dest is None:
                into = unresolvable if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                dest = per_status[id(s)] = (into, s.message)
            dest[0][node_names[row]] = dest[1]
        # Every candidate passed (the usual case behind the scheduler's own filters): every row
        # sent passed, and the request's list is the answer as it is.
        passing = None if len(ok_rows) == len(candidates) else rows_in(rows, ok_rows)
        deadline.check("filter")
        if len(ok_rows) == 1:
            # The scheduler skips prioritize with one feasible node: this is the one it binds.
            self._hold(pod, node_names[int(ok_rows[0])], cycle)
        elif cycle is not None:
            self._cycle = cycle  # for prioritize
            if len(ok_rows) > 1:  # (none passed: kube-scheduler calls no prioritize)
                cycle.answered = rows if passing is None else rows[passing]
                cycle.unique = window.unique() if window is not None and passing is None else None
                self.ahead_due = True
        if not self.ahead_due:  # no prioritize for this pod: the next filter is for another one
            self.ahead_due = self._next_due = fwk is self._live
        if args.nodes is not None:
            out_nodes = args.nodes if passing is None else list(compress(args.nodes, passing.tolist()))
            return Reply(200, encode_filter_result(nodes=out_nodes, failed=failed, failed_unresolvable=unresolvable))
        assert window is not None
        if passing is None:
            if not failed and not unresolvable:  # (none: every candidate passed)
                return Reply(200, self._windows.passed_answer(window, _all_passed))
            return Reply(200, encode_filter_result(node_names=names, failed=failed, failed_unresolvable=unresolvable))
        out_names = list(compress(names, passing.tolist()))
        self._windows.add(table, out_names, rows[passing])
        return Reply(200, encode_filter_result(node_names=out_names, failed=failed, failed_unresolvable=unresolvable))

    def prioritize(self, data: Any, deadline: Deadline) -> Reply:
        args, pod = self._decoded(data)
        self._settle_holds(pod)
        entry, rows, names, window = self._view(args, deadline)
        self._remember_pod(pod)
        self.ahead_due = False
        cycle = self._take_cycle(pod, entry.framework)
        scores: IntArray | None = None
        if cycle is not None and cycle.scores is not None:
            # (the same rows object when prioritize names the list filter answered with: NameWindows)
            if cycle.answered is rows or (cycle.answered is not None and np.array_equal(cycle.answered, rows)):
                scores = cycle.scores  # computed ahead (work_ahead), at the version of now
            else:  # other nodes than filter passed (another extender narrowed them): the state
                cycle = None  # holds PreScore's writes for those, so start afresh
        if scores is None:
            scores = self.extender_scores(entry.framework, pod, rows, deadline,
                                          cycle.state if cycle is not None else None,
                                          window.unique() if window is not None and len(rows) else None)
        if len(rows):
            best = int(np.argmax(scores))  # the first of the best, in request order
            if self._hold(pod, names[best], cycle):
                prefer(scores, best)
        self.ahead_due = self._next_due = entry.framework is self._live  # the next pod's filter, ahead
        if args.node_names is not None and len(rows) and scores.min() >= 0 and scores.max() <= MAX_EXTENDER_PRIORITY:
            return Reply(200, self._row_entries.encode(entry.table, rows, scores))
        return Reply(200, encode_extender_scores(names, scores))

    def work_ahead(self) -> None:
        """What the next request will most likely need, computed once the last answer went out
        (the server calls this when ``ahead_due``). After filter: prioritize's scores for the nodes
        it passed. kube-scheduler runs its own PreScore and Score plugins before it calls
        prioritize (pkg/scheduler/schedule_one.go ``prioritizeNodes``: extenders are called after
        ``RunScorePlugins``), so this work leaves its synchronous wait. Prioritize uses them only
        for the same pod, the same rows and the same ``_version`` (_take_cycle), i.e. when a fresh
        computation reads exactly what these did; otherwise it computes as always. After
        prioritize (or a filter no prioritize follows): the next pod's filter (_filter_next)."""
        self.ahead_due = False
        cycle = self._cycle
        if cycle is None or cycle.answered is None or cycle.scores is not None:
            if self._next_due:
                self._filter_next()
            return
        if cycle.version != self._version():
            return
        try:
            cycle.scores = self.extender_scores(self.live_framework(), cycle.pod, cycle.answered,
                                                Deadline("prioritize", 60.0), cycle.state, cycle.unique)
        except Exception:  # a plugin's error (or anything) is the request's to report: start afresh then
            log.debug("extender: prioritize not computed ahead", exc_info=True)
            self._cycle = None

    def _filter_next(self) -> None:
        """The next pod's PreFilter + Filter, before kube-scheduler asks (extender/ahead.py)."""
        self._next_due = False
        cluster = self.cluster
        if cluster is None or not cluster.synced or not self._hold_approved:
            self._next.forget()
            return
        self._next.filter_ahead(cluster, self.live_framework(), self._recent_pods, self._last_list, self._version())

    def extender_scores(
        self, fwk: Framework, pod: PodInfo, rows: Rows, deadline: Deadline, pre_filtered: CycleState | None = None,
        unique: tuple[Rows, Rows] | None = None,
    ) -> IntArray:
        """prioritize's answer for ``rows`` (extender/scores.py); a method so a test can tell
        whether prioritize computed it at request time."""
        return extender_scores(fwk, pod, rows, deadline, pre_filtered, unique)

    def preempt(self, data: Any, deadline: Deadline) -> Reply:
        args = decode_preemption_args(data)
        pod = self._parse_pod(args.pod)
        if self.cluster is not None:
            if not self.cluster.synced:
                raise ServiceError(503, "kubesched extender: the node cache has not synced with the cluster yet")
            table, fwk = self.cluster.cache.table, self.live_framework()
        else:
            table = NodeTable()
            for name in args.victims:
                raw = self._tables.last_nodes.get(name)
                if raw is not None:
                    table.upsert_node(raw)
            fwk = self._build_framework(table)
        return preempt_reply(args, pod, table, fwk, deadline)

    async def bind(self, data: Any, deadline: Deadline) -> Reply:
        args = decode_binding_args(data)
        if self.cluster is None:
            return Reply(200, encode_binding_result(
                "kubesched extender: bind needs a cluster connection (start it with --kubeconfig or in-cluster)"
            ), "no_cluster")
        assert self.holds is not None  # made with the cluster
        reply = await bind_reply(args, self.cluster, self.holds, self.live_framework, self._recent_pods)
        if not reply.kind:
            self._recent_pods.pop(args.pod_uid, None)
        return reply
