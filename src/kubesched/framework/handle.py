"""What plugins get from the framework (upstream framework.Handle): the node table, the clock,
waiting pods, and the shell's cluster client for plugins that must talk to the cluster."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kubesched.framework.clock import Clock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.preemption_order import pod_terminating_by_preemption
from kubesched.framework.waiting import WaitingPods
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import NodeTable

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework


class BindConflictError(Exception):
    """The pod is already bound (HTTP 409) — forget it, it is not ours to place any more."""


class PodGoneError(Exception):
    """The pod no longer exists (HTTP 404)."""


#: CycleState key: annotations PreBind plugins put on the pod's Binding (``add_binding_annotations``).
BINDING_ANNOTATIONS = "Binding/annotations"


def add_binding_annotations(state: CycleState, annotations: Mapping[str, str]) -> None:
    """Have the binder send ``annotations`` with the Binding: the apiserver copies a Binding's
    annotations onto the pod as it sets spec.nodeName (pkg/registry/core/pod/storage/storage.go,
    ``BindingREST.Create`` → ``assignPod``), so they land with the bind and never on a pod whose
    bind failed. For what a node agent must read from the pod (e.g. UnderlayIP's address)."""
    have: dict[str, str] = dict(state.get(BINDING_ANNOTATIONS) or {})
    have.update(annotations)
    state.write(BINDING_ANNOTATIONS, have)


class ClusterClient(Protocol):
    """The I/O a shell provides to the core. The simulator implements it in memory."""

    async def bind(self, pod: PodInfo, node_name: str, annotations: Mapping[str, str] | None = None) -> None:
        """Bind via pods/binding, with ``annotations`` on the Binding (copied onto the pod). Raises
        BindConflictError, PodGoneError or another exception."""
        ...

    async def annotate_pod(self, pod: PodInfo, annotations: Mapping[str, str]) -> None:
        """Merge ``annotations`` into the pod's ``metadata.annotations`` (live: a JSON merge patch
        of the pod; the simulator: its stored pod), e.g. GpuShare's ``gpu-index`` at PreBind, which
        a device plugin reads. Raises PodGoneError when the pod is gone, another exception when the
        write fails."""
        ...


@dataclass(frozen=True, slots=True)
class Preemptor:
    """Who preempts, as upstream's preemption executor names it to the victims
    (framework/preemption/executor.go ``ExecutorPreemptor``): the victim's ``Preempted`` event
    says ``Preempted by <type> <uid> on node <candidate>`` and relates to ``related``, its
    ``DisruptionTarget`` condition ``<schedulerName>: preempting to accommodate a higher priority
    <type>``. A pod preempting (DefaultPreemption's PostFilter): type ``pod``, the pod's uid, the
    node. A PodGroup preempting as a group (podgrouppreemption.go): type ``podgroup``, the
    PodGroup's uid, and the candidate ``cluster`` (a group's one candidate spans every node)."""

    type: str
    uid: str
    candidate: str
    scheduler_name: str
    #: The object reference the event relates to (apiVersion, kind, namespace, name, uid); empty:
    #: none. A pod preemptor's event relates to nothing: upstream hands its recorder the executor's
    #: wrapper of the pod, a type the scheme cannot reference (seen on kube-scheduler v1.37.1).
    related: Mapping[str, str]

    @staticmethod
    def of_pod(pod: PodInfo, node_name: str) -> Preemptor:
        return Preemptor("pod", pod.uid, node_name, pod.scheduler_name, {})

    @property
    def event_message(self) -> str:
        return f"Preempted by {self.type} {self.uid} on node {self.candidate}"

    @property
    def disruption_message(self) -> str:
        return f"{self.scheduler_name}: preempting to accommodate a higher priority {self.type}"


class EvictingClient(Protocol):
    """Optional, for preemption: a ClusterClient that also offers ``evict`` (the simulator's does).

    Upstream's preemption executor (pkg/scheduler/framework/preemption/executor.go ``PreemptPod``)
    patches the victim's status with the ``DisruptionTarget`` condition (status True, reason
    ``PreemptionByScheduler``, message ``Preemptor.disruption_message``), deletes it (graceful:
    ``terminationGracePeriodSeconds``) and records a ``Preempted`` event
    (``Preemptor.event_message``). A victim already being deleted is skipped. A client without
    ``evict`` gets no deletions: the scheduler still nominates the preemptor (see
    ``SchedulerObserver.preempted``)."""

    async def evict(self, pod: PodInfo, preemptor: Preemptor) -> None: ...


class Nominator(Protocol):
    """Pods nominated to nodes by preemption (upstream backend/queue/nominator.go), as the queue
    keeps them: ``by_node`` maps node name → {uid: pending pod}."""

    by_node: dict[str, dict[str, PodInfo]]

    def node_of(self, uid: str) -> str | None: ...

    def add(self, pod: PodInfo, node_name: str) -> None: ...

    def delete(self, uid: str) -> None: ...


class DRAResourceCounter(Protocol):
    """Devices behind DRA-backed extended resources at one moment (the claims allocated or in
    flight, the ResourceSlices): what NodeResourcesFit and NodeResourcesBalancedAllocation score
    such a resource with on a node that does not offer it (upstream's ``draPreScoreState``)."""

    def backs(self, resource: str) -> bool:
        """Whether a DeviceClass maps the extended resource ``resource``."""
        ...

    def totals(self, resource: str, node_name: str, labels: Mapping[str, str]) -> tuple[int, int]:
        """(devices of the resource's class on the node, how many of them are allocated)."""
        ...


class SharedDRAManager(Protocol):
    """What DynamicResources shares with other plugins (upstream ``fwk.SharedDRAManager``)."""

    def extended_resource_counter(self, resources: Sequence[str]) -> DRAResourceCounter | None:
        """getDRAPreScoredParams: a counter when a DeviceClass backs any of ``resources``, else None."""
        ...


#: Called by preemption with (preemptor, node name, victims, who preempts: None for the pod
#: itself); set by the Scheduler.
PreemptFn = Callable[[PodInfo, str, Sequence[PodInfo], "Preemptor | None"], None]


class Handle:
    def __init__(
        self,
        table: NodeTable,
        clock: Clock,
        waiting_pods: WaitingPods,
        client: ClusterClient | None = None,
        profile_name: str = "",
        parallelism: int = 16,
        objects: Callable[[str], Mapping[str, dict[str, Any]]] | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        self.waiting_pods = waiting_pods
        self.client = client
        self.profile_name = profile_name
        self.parallelism = parallelism
        self._objects = objects
        self._activate: Callable[[Sequence[str]], None] | None = None
        self._pending: Callable[[], Iterable[PodInfo]] | None = None
        #: Pods nominated per node (node → {uid: pod}); the queue's nominator shares its dict
        #: here, so "is any pod nominated?" is one truthiness check on the filter path.
        self.nominated: dict[str, dict[str, PodInfo]] = {}
        self.nominator: Nominator | None = None
        self._preempt: PreemptFn | None = None
        self._preemption_running: Callable[[PodInfo], bool] | None = None
        self._evicted: Callable[[str], bool] | None = None
        #: The Framework this handle serves (set by Framework.__init__): preemption runs its
        #: Filter plugins (upstream: the framework is the Handle).
        self.framework: Framework | None = None
        #: The scheduler's seeded RNG (preemption's random candidate offset), so a simulation stays
        #: deterministic per seed; a handle without a scheduler gets its own.
        self.rng = random.Random(0)
        #: Set by DynamicResources when the profile has it (upstream's handle always has a DRA
        #: manager; a profile without DynamicResources here has none, so nothing is scored by DRA).
        self.dra_manager: SharedDRAManager | None = None
        #: The scheduler's feature gates (upstream hands plugins feature.Features in New; set by
        #: the Scheduler, read by plugins at call time): e.g. GangScheduling's CompositePodGroup.
        self.feature_gates: Mapping[str, bool] = {}

    def attach_queue(
        self, activate: Callable[[Sequence[str]], None], pending: Callable[[], Iterable[PodInfo]]
    ) -> None:
        """Called by the Scheduler once its queue exists (the handle is built before the queue)."""
        self._activate = activate
        self._pending = pending

    def attach_nominator(self, nominator: Nominator) -> None:
        """Called by the Scheduler: share the queue's nominated pods (upstream PodNominator)."""
        self.nominator = nominator
        self.nominated = nominator.by_node

    def attach_preemption(
        self, preempt: PreemptFn, rng: random.Random, running: Callable[[PodInfo], bool] | None = None,
        evicted: Callable[[str], bool] | None = None,
    ) -> None:
        """Called by the Scheduler: how a PostFilter plugin actuates a preemption, its RNG,
        whether a preemptor's preemption is still under way, and whether a pod's eviction was
        sent though the cache does not show it terminating yet."""
        self._preempt = preempt
        self.rng = rng
        self._preemption_running = running
        self._evicted = evicted

    def terminating_by_preemption(self, pod: PodInfo) -> bool:
        """upstream PodTerminatingByPreemption (being deleted, DisruptionTarget True with reason
        PreemptionByScheduler), or a pod this scheduler has evicted whose deletion the cache has
        not shown yet. kubesched differs here: upstream reads the informer's object alone, so
        while a loaded API server's watch lags (GangPreemptionBasic: 10-18 s on 2 busy cores) its
        victims look alive and the preemptor preempts them again (every call then answers 404)."""
        return pod_terminating_by_preemption(pod) or (self._evicted is not None and self._evicted(pod.uid))

    def preemption_running(self, pod: PodInfo) -> bool:
        """Whether the preemption ``pod`` started — or, when the PodGroup cycle runs, its
        PodGroup started — is still under way (upstream Executor.IsPodRunningPreemption /
        IsPodGroupRunningPreemption): its evictions are still being sent, or the last victim is
        still in the cache and not terminating. DefaultPreemption's PreEnqueue holds the
        preemptor (every member of the group) back meanwhile, so it does not preempt the same
        victims again."""
        return self._preemption_running is not None and self._preemption_running(pod)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """Pods nominated to ``node_name`` (upstream NominatedPodsForNode)."""
        pods = self.nominated.get(node_name)
        return list(pods.values()) if pods else []

    def preempt(
        self, preemptor: PodInfo, node_name: str, victims: Sequence[PodInfo], by: Preemptor | None = None
    ) -> None:
        """Actuate a preemption: victims waiting at Permit are rejected in memory, the others are
        evicted through the shell's client; lower-priority pods nominated to the node lose their
        nomination (upstream executor.go prepareCandidate). ``by``: who the victims are told
        preempted them, when not ``preemptor`` itself on ``node_name`` (a PodGroup preempting as a
        group). Without a scheduler: nothing."""
        if self._preempt is not None:
            self._preempt(preemptor, node_name, victims, by)

    def activate(self, uids: Sequence[str]) -> None:
        """Move the named pending pods to the active queue now (upstream PodsToActivate, used by
        Coscheduling to bring a gang's siblings back when its first member waits at Permit)."""
        if self._activate is not None and uids:
            self._activate(uids)

    def knows_pending_pods(self) -> bool:
        """Whether ``pending_pods`` lists the shell's pending pods (False: no queue attached, so
        an empty listing says nothing)."""
        return self._pending is not None

    def pending_pods(self) -> Iterator[PodInfo]:
        """Pods the scheduler knows of but has not placed: active, backoff, unschedulable and gated
        (not the pod of the current cycle, nor assumed pods, which are in the node table)."""
        if self._pending is not None:
            yield from self._pending()

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """Other cluster objects the shell tracks (e.g. "PodGroup"), keyed "namespace/name"."""
        return self._objects(kind) if self._objects is not None else {}
