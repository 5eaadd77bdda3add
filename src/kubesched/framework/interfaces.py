"""The extension points: one class per point, as k8s.io/kube-scheduler/framework/interface.go.

A plugin class subclasses ``Plugin`` and every extension-point class it implements. The runtime
learns which points a plugin serves from these base classes, so a plugin enabled under
``multiPoint`` runs at all of them.

Filter and Score have two forms. The per-node form (``filter`` / ``score``) is the upstream shape
and the easiest to write; the batch form (``filter_batch`` / ``score_batch``) receives numpy row
indexes into the node table and returns one array for all of them. Implement either; the default
of each is written in terms of the other, so a plugin must override at least one of the pair
(checked when the registry is built). The runtime always calls the batch form.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.objects import ObjectEvent, ObjectKind
from kubesched.framework.plugin_metrics import MetricFamily
from kubesched.framework.podgroup import (
    Placement,
    PlacementProgress,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from kubesched.framework.status import SUCCESS, Status
from kubesched.framework.types import (
    EVENT_WILDCARD,
    ClusterEvent,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
    Verdicts,
)
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeInfo, NodeTable, Rows

if TYPE_CHECKING:
    from kubesched.framework.diagnosis import Diagnosis
    from kubesched.framework.handle import Handle

Scores = npt.NDArray[np.int64]

#: Score range after normalisation (upstream framework.MinNodeScore / MaxNodeScore).
MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100


class Plugin:
    """Base of every plugin. ``name`` is the name used in configuration and in the registry.

    Plugins are built once per profile with ``(args, handle)``; ``args`` is the validated
    pydantic model named by ``args_model`` (None when the plugin takes no args).
    """

    name: ClassVar[str] = ""
    args_model: ClassVar[type[Any] | None] = None
    #: Cluster objects besides nodes and pods that the plugin reads through
    #: ``handle.objects(kind)``: every shell feeds them (framework/objects.py).
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = ()

    def __init__(self, args: Any, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def events_to_register(self) -> Sequence[ClusterEvent]:
        """Cluster events that may make a pod this plugin rejected schedulable (EnqueueExtensions).

        The default, every event, is always correct but retries pods more often than needed.
        """
        return (EVENT_WILDCARD,)

    async def start(self) -> None:
        """Called by a shell before scheduling starts (background work such as metric polling)."""

    async def stop(self) -> None:
        """Called by a shell at shutdown."""

    def explain_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows
    ) -> Sequence[str] | None:
        """Optional, for ``explain`` only (never on the scheduling path): one short note per row on
        what this plugin saw there, from the CycleState its PreFilter/PreScore wrote — e.g. a
        topology domain's matching pods and the skew the pod would make. None: nothing to add."""
        return None

    def explain_wait(self, pod: PodInfo) -> str | None:
        """Optional, for ``explain`` only: why ``pod`` waits whatever the nodes say, e.g. for the
        gang it belongs to (``waiting for PodGroup ns/name: minCount 5, 2 members exist``, or the
        group's failure). None (default): this plugin does not hold the pod."""
        return None

    def pod_terminated(self, pod: PodInfo) -> None:
        """A pod reached Succeeded or Failed (the cache then drops it, so no table shows it any
        more): for plugins that count finished pods, e.g. a PodGroup's succeeded members."""

    def finished_pod_deleted(self, pod: PodInfo) -> None:
        """A Succeeded or Failed pod (one ``pod_terminated`` reported) was deleted: plugins that
        count finished pods count those that exist, and forget this one (else what they keep
        grows with every pod that ever finished). Called only on plugins that override
        ``pod_terminated``, by a shell that watches finished pods."""

    def expect_workload(self, pods: Sequence[PodInfo]) -> None:
        """The pods the shell will submit, all of them, before scheduling starts — called only by
        a shell that knows them ahead (the simulator replaying a scenario or trace: every arrival,
        clones of ``--inflate`` included), never live. For policies tuned to a target workload
        (e.g. FGD's typical pod shapes, which its reference computes from the whole pod list
        before the run). Pods are not yet in any table; do not keep references to schedule with."""

    def object_report(self) -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
        """For kinds this plugin declares: kind → object key → fields worth showing in the
        simulator's report and JSON (e.g. each PodGroup's phase and counts). {} by default."""
        return {}

    def status_updates(self) -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
        """For kinds declared with ``writes_status``: kind → {object key → changed status fields}
        since the last call. The live leader merge-patches them into the status subresource."""
        return {}

    def object_events(self) -> Sequence[ObjectEvent]:
        """Events about objects of kinds this plugin declares, or about pods (``POD_KIND``), since
        the last call (e.g. a PodGroup's gang-level failure). The live leader posts each as an
        ``events.k8s.io/v1`` Event regarding that object. The plugin keeps the volume down (repeats
        rate-limited, a bounded buffer: shells that post no Events never call this)."""
        return ()

    def metric_families(self) -> Sequence[MetricFamily]:
        """Metrics the plugin records itself, as upstream's plugins record into kube-scheduler's
        metrics (framework/plugin_metrics.py): a shell serving metrics reads them at scrape time.
        () by default."""
        return ()

    def eviction_group(self, pod: PodInfo) -> Sequence[PodInfo] | None:
        """Preemption: the pods that must be evicted together with ``pod`` — all of them or none
        (``pod`` included), e.g. a gang waiting at Permit, whose members are released together
        anyway. The evaluator takes ``pod`` as a victim only if every pod of the group may be
        preempted, and then reports the whole group as victims. None (default): ``pod`` alone."""
        return None

    def sign_pod(self, pod: PodInfo) -> Sequence[tuple[str, Any]] | None:
        """OpportunisticBatching (upstream SignPlugin.SignPod, framework/batch.py): what this
        plugin's verdicts and scores read from the pod, as (signer name, JSON value) fragments
        (framework/signers.py), so pods with equal fragments from every plugin are scheduled alike
        on the same nodes; ``()`` when it reads nothing of the pod; None when the pod cannot be
        signed (e.g. it has inter-pod affinity). A plugin at PreFilter, Filter, PreScore or Score
        that does not override this turns signatures off for its whole profile."""
        return None

    def filter_outcome_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Opt in to the reuse of a failed Filter pass (framework/filter_outcome.py): what this
        plugin's PreFilter and Filter read besides the pod's shape (``filter_outcome.pod_shape``:
        its namespace, labels, annotations, spec and other metadata, not its name, uid, creation
        time or status) and the node table (any change to it moves ``table.generation``), as a
        value that changes whenever that does: ``()`` when they read nothing else, a counter of
        state the plugin keeps itself (bumped on every change). Their verdicts and messages must
        then be the same for two pods of one shape. None (the default): they read more (API
        objects through ``handle.objects``, the pod's identity or status, the clock, ...), and no
        Filter pass is reused while this plugin's PreFilter or Filter runs. A plugin with a
        ``filter_signature`` for the pod is covered by that and not asked."""
        return None

    def filter_row_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Opt in to incremental Filter passes (framework/filter_rows.py: a pod shape's verdicts
        kept per node and judged again only on the nodes changed since): like
        ``filter_outcome_key``, what this plugin's PreFilter and Filter read besides the pod's
        shape and the node table, but for a plugin whose verdict on a node reads nothing but that
        node's row — its Node, accounting columns and pods, and state kept per row that marks the
        row changed in the table's change log (``NodeTable.touch_row``, as the GPU ledger does)
        whenever it changes. ``()`` when it reads nothing else. None (the default): no
        incremental pass while this plugin's PreFilter or Filter runs. A plugin with a
        ``filter_signature`` for the pod is covered by that and not asked."""
        return None

    def share_background_state(self, started: Plugin) -> None:
        """Use the background state of ``started``, an instance of the same plugin with the same
        args that a shell started. The extender builds one framework per node table it serves
        and starts only the first; a plugin that polls (e.g. RealUsage) points its cache here."""


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Whether a pending pod may enter the active queue (upstream PreEnqueuePlugin).

        Called when the pod is added or updated and when an event would move it back to the
        queue, before any scheduling attempt. Success lets it through; any other Status keeps it
        *gated*: out of the active queue, no attempt, no FitError, until an update of the pod or
        a cluster event this plugin registered (``events_to_register``) lets it pass. Must be
        cheap and must not depend on the nodes (it runs outside the scheduling cycle)."""
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """True when ``a`` should be scheduled before ``b``. Exactly one per scheduler."""
        raise NotImplementedError

    #: Optional speed-up: a plugin may define ``sort_key(qpi)`` returning a value whose natural
    #: order agrees with ``less`` (key(a) < key(b) exactly when less(a, b)); the queue then orders
    #: pods by key. Leave it None to order by ``less``.
    sort_key: Callable[[QueuedPodInfo], Any] | None = None


class PreFilterExtensions:
    """Incremental updates of PreFilter state when the runtime adds/removes pods hypothetically
    (preemption and nominated pods). Mutate only the CycleState given."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[PreFilterResult | None, Status]:
        """Compute per-pod state, reject the pod early, narrow the candidate nodes, or return Skip
        so this plugin's Filter is not run for this pod."""
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    #: True when the Filter verdict on a node depends only on that node's row of the table (the
    #: Node, its accounting columns and ``table.pods[row]``), never on pods on other nodes (e.g.
    #: per-zone counts) nor on an index kept by a pod observer. Preemption's dry run and the
    #: nominated pods' pass then judge many nodes in one ``filter_batch`` call, the pods of every
    #: node taken off (or put on) together. False (the default) is always correct; a plugin with a
    #: ``filter_signature`` counts as node-local anyway.
    filter_node_local: ClassVar[bool] = False

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Whether the pod fits on one node: Success, Unschedulable(AndUnresolvable) with reasons, or Error."""
        verdicts = self.filter_batch(state, pod, node.table, np.array([node.row], dtype=np.intp))
        code = int(verdicts.codes[0])
        return SUCCESS if code == 0 else verdicts.statuses[code - 1]

    def filter_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Verdicts:
        """Verdicts for many nodes at once (rows of ``table``)."""
        return Verdicts.from_statuses(len(rows), (self.filter(state, pod, NodeInfo(table, int(row))) for row in rows))

    def filter_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Opt in to verdict caching by returning a key that captures everything this plugin's
        Filter reads from the pod (and from the cycle state it wrote for it).

        Return a key only if the verdicts depend on nothing but that key and the Node objects'
        metadata, spec and allocatable (not status conditions or other heartbeat fields), not on
        the pods placed on the nodes, nor on time or outside data. Pods with equal keys then share
        verdicts computed once over all nodes, until a node is added, removed, or changes in those
        fields. Only a run of such plugins at the start of the Filter list is cached. None (the
        default) evaluates the plugin on every attempt.
        """
        return None


class PostFilterPlugin(Plugin):
    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Called when no node fits (e.g. preemption). Success may nominate a node."""
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Status:
        """Prepare scoring over the feasible rows; Skip means this plugin's Score is not run."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """Score one feasible node. Values must be within 0–100 after NormalizeScore."""
        scores = self.score_batch(state, pod, node.table, np.array([node.row], dtype=np.intp))
        if isinstance(scores, Status):
            return 0, scores
        return int(scores[0]), SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows) -> Scores | Status:
        """Scores for many feasible rows at once, or an error Status."""
        out = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            s, st = self.score(state, pod, NodeInfo(table, int(row)))
            if not st.is_success:
                return st
            out[i] = s
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Rows, scores: Scores) -> Status:
        """Optional NormalizeScore: rewrite ``scores`` in place (aligned with ``rows``)."""
        return SUCCESS


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Claim plugin-held resources for the assumed placement."""
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Release what reserve claimed. Must be idempotent: it may run after a failed reserve."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """Success, a rejection, or Wait with a timeout in seconds (capped at 15 minutes)."""
        raise NotImplementedError


class PlacementFeasiblePlugin(Plugin):
    """A Permit plugin that also judges a PodGroup in its group cycle (upstream
    framework.PlacementFeasiblePlugin; not an extension point of its own: the Permit plugins that
    implement it are asked). Called before the first member is tried and after each one."""

    def placement_feasible(self, state: CycleState, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        """Success: the group's constraints are met; Wait: they may be once more members are
        tried; Unschedulable: they cannot be, whatever the remaining members do (the cycle stops)."""
        raise NotImplementedError


class PodGroupPostFilterPlugin(Plugin):
    """Called when a PodGroup's cycle fails (upstream fwk.PodGroupPostFilterPlugin), e.g. to
    preempt for the whole group."""

    def pod_group_post_filter(
        self, state: CycleState, group: PodGroupInfo, reschedule: PodGroupSchedulingFunc
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """``reschedule`` runs the group algorithm again on the table as it is now (with victims
        taken off, say) and undoes what it assumed. Success: the group waits for the preemption
        (the result nominates its members' nodes)."""
        raise NotImplementedError


class PlacementGeneratePlugin(Plugin):
    """TopologyAwareWorkloadScheduling: splits the nodes a group may use into placements, each
    tried in turn (upstream fwk.PlacementGeneratePlugin; only the first configured one runs)."""

    def generate_placements(
        self, state: CycleState, group: PodGroupInfo, parent: Placement
    ) -> tuple[list[Placement], Status]:
        """The placements to try within ``parent`` (all nodes); ``[parent]`` when the group has no
        constraint of this plugin's; none at all fails the group (``no feasible placements found``)."""
        raise NotImplementedError


class PlacementScorePlugin(Plugin):
    """TopologyAwareWorkloadScheduling: scores the placements the group fitted on (upstream
    fwk.PlacementScorePlugin); the highest weighted total wins."""

    def score_placement(
        self, state: CycleState, group: PodGroupInfo, assignments: PodGroupAssignments
    ) -> tuple[int, Status]:
        """The raw score of one placement where the group fitted (``assignments.placement``)."""
        raise NotImplementedError

    def normalize_placement_scores(self, state: CycleState, group: PodGroupInfo, scores: list[int]) -> Status | None:
        """Optional NormalizePlacementScore: rewrite ``scores`` in place (0–100 afterwards). None
        (the default): the plugin has no normalisation."""
        return None


class PreBindPlugin(Plugin):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Bind the pod; return Skip to let the next Bind plugin handle it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Informational, after a successful bind."""
        raise NotImplementedError


#: Configuration names of the extension points, in cycle order, with their classes.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
    "placementGenerate": PlacementGeneratePlugin,
    "placementScore": PlacementScorePlugin,
    "podGroupPostFilter": PodGroupPostFilterPlugin,
}


def extension_points_of(cls: type[Plugin]) -> list[str]:
    return [point for point, base in EXTENSION_POINTS.items() if issubclass(cls, base)]
