"""The PodGroup scheduling cycle's public types (kube-scheduler v1.37, GenericWorkload on).

Port of the types k8s.io/kube-scheduler/framework (v1.37.1) gives the group-level extension
points: ``PodGroupInfo`` (the group and its members waiting in the queue), ``PlacementProgress``
(pkg/scheduler/framework/interface.go: how far the group cycle got), ``ProposedAssignment`` /
``PodGroupAssignments`` (where the cycle placed which member) and ``PodGroupPostFilterResult``
(the nominations a PodGroupPostFilter plugin made). The plugin interfaces that take them are in
``framework/interfaces.py`` (``PlacementFeasiblePlugin``, ``PodGroupPostFilterPlugin``); the
cycle that calls them is ``scheduler_podgroup.py`` (upstream schedule_one_podgroup.go).

A pod joins a group through ``spec.schedulingGroup.podGroupName`` (core/v1 PodSchedulingGroup), a
``scheduling.k8s.io`` PodGroup in the pod's namespace; the object itself is read by the plugins
that declare it (GangScheduling), as upstream's plugins read it through their listers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Status
from kubesched.snapshot.pod import PodInfo
from kubesched.snapshot.table import Rows

#: The feature gate that turns the Workload API and the PodGroup cycle on (pkg/features).
GENERIC_WORKLOAD = "GenericWorkload"
#: The alpha gate that tries a group on several placements (PlacementGenerate/PlacementScore).
TOPOLOGY_AWARE_WORKLOAD_SCHEDULING = "TopologyAwareWorkloadScheduling"
#: The alpha gate that schedules a hierarchy of groups (CompositePodGroups over PodGroups) as
#: one entity; upstream makes it depend on GenericWorkload and TopologyAwareWorkloadScheduling.
COMPOSITE_POD_GROUP = "CompositePodGroup"
#: The alpha gate that makes a PodGroup's (or CompositePodGroup's) ``spec.preemptionPolicy`` the
#: group's policy (the members must share it) instead of its members' (pkg/features, v1.37).
POD_GROUP_PREEMPTION_POLICY = "PodGroupPreemptionPolicy"
#: The name shells and ``handle.objects`` know the Workload API's PodGroups by (GangScheduling
#: declares the kind; ``PodGroup`` alone is scheduler-plugins' kind).
POD_GROUP_OBJECTS = "PodGroup.scheduling.k8s.io"
#: The name the Workloads (the templates PodGroups are made from) are known by, for the same reason.
WORKLOAD_OBJECTS = "Workload.scheduling.k8s.io"
#: ... and its CompositePodGroups (``scheduling.k8s.io/v1alpha3``, served with the gate on).
COMPOSITE_POD_GROUP_OBJECTS = "CompositePodGroup.scheduling.k8s.io"
#: Their apiVersions (an object reference to one, e.g. a Preempted event's ``related``).
POD_GROUP_API_VERSION = "scheduling.k8s.io/v1beta1"
COMPOSITE_POD_GROUP_API_VERSION = "scheduling.k8s.io/v1alpha3"
#: errPodGroupUnschedulable (schedule_one_podgroup.go): upstream attaches it as the error of a
#: group's Unschedulable status, so the message a member gets starts with it.
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"


def group_name(pod: PodInfo) -> str | None:
    """``spec.schedulingGroup.podGroupName`` of the pod, None when it names no group."""
    group = pod.spec.get("schedulingGroup")
    if not isinstance(group, dict):
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


#: ``pod.memo`` key of the pod's group key (``spec.schedulingGroup`` is immutable).
_GROUP_KEY_MEMO = "podgroup.key"


def group_key(pod: PodInfo) -> str | None:
    """``namespace/podGroupName`` of the pod's PodGroup, or None for a pod in no group. Kept in
    ``pod.memo`` (shared by the assumed copies): the node table's observers ask on every pod added
    or removed, and a group preemption's reprieve adds and removes the members once per victim."""
    memo = pod.memo
    try:
        return memo[_GROUP_KEY_MEMO]  # type: ignore[no-any-return]
    except KeyError:
        name = group_name(pod)
        key = memo[_GROUP_KEY_MEMO] = f"{pod.namespace}/{name}" if name is not None else None
        return key


def parent_composite_name(raw: dict[str, Any] | None) -> str | None:
    """``spec.parentCompositePodGroupName`` of a PodGroup or CompositePodGroup (None: a root)."""
    parent = ((raw or {}).get("spec") or {}).get("parentCompositePodGroupName")
    return parent if isinstance(parent, str) and parent else None


@dataclass(slots=True)
class PodGroupInfo:
    """A PodGroup in the cycle: its key and the members the queue handed over, in the order the
    cycle tries them (upstream PodGroupInfo.UnscheduledPods, PodGroupMemberPodsOrderingFunc).

    With the CompositePodGroup gate, a CompositePodGroup is one too (``composite_pod_group`` set,
    no members of its own): its ``children`` are PodGroups and CompositePodGroups, and its
    ``unscheduled_pods`` are every leaf's (upstream's PodGroupInfo of type CompositePodGroupKeyType).
    """

    namespace: str
    name: str
    unscheduled_pods: list[PodInfo] = field(default_factory=list)
    #: The PodGroup object as the shell tracks it (None when the shell has none, or a composite).
    pod_group: dict[str, Any] | None = None
    #: The CompositePodGroup object, for a composite group.
    composite_pod_group: dict[str, Any] | None = None
    children: list[PodGroupInfo] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_composite(self) -> bool:
        return self.composite_pod_group is not None

    @property
    def entity_key(self) -> str:
        """fwk.EntityKey's string: ``podgroup/ns/name`` or ``compositepodgroup/ns/name`` (a
        PodGroup and a CompositePodGroup may share a name)."""
        return f"{'compositepodgroup' if self.is_composite else 'podgroup'}/{self.key}"

    def leaves(self) -> list[PodGroupInfo]:
        """The PodGroups under this group (itself for a PodGroup), depth first in child order."""
        if not self.is_composite:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]


@dataclass(frozen=True, slots=True)
class PlacementProgress:
    """interface.go PlacementProgress: members still to try and members placed (assumed or bound
    before this cycle, plus those placed in it so far)."""

    remaining: int
    scheduled: int


@dataclass(frozen=True, slots=True)
class ProposedAssignment:
    """One member the group cycle placed: the pod, its node and the cycle state of its attempt."""

    pod: PodInfo
    node_name: str
    state: CycleState


@dataclass(frozen=True, slots=True)
class Placement:
    """fwk.Placement: a named set of nodes (rows of the node table) a group is tried on."""

    name: str
    rows: Rows


@dataclass(frozen=True, slots=True)
class PodGroupAssignments:
    """fwk.PodGroupAssignments: the members a (re)run of the group algorithm placed, and on which
    placement (None outside TopologyAwareWorkloadScheduling's placement search)."""

    proposed: tuple[ProposedAssignment, ...] = ()
    placement: Placement | None = None


#: fwk.PodGroupSchedulingFunc: runs the group algorithm again on the current snapshot (a
#: PodGroupPostFilter plugin calls it with victims removed) and reverts what it assumed.
PodGroupSchedulingFunc = Callable[[], tuple[PodGroupAssignments, Status]]


@dataclass(frozen=True, slots=True)
class PodGroupPostFilterResult:
    """fwk.PodGroupPostFilterResult: member uid → the node it is nominated to."""

    nominations: dict[str, str] = field(default_factory=dict)


#: The group CycleState's key for its members' CycleStates (``member_cycle_states``).
_MEMBER_CYCLE_STATES = "kubesched/podgroup.member-cycle-states"


def record_member_cycle_state(group_state: CycleState, pod: PodInfo, state: CycleState) -> None:
    """The group cycle keeps each member's CycleState of its latest attempt in the group's
    CycleState (the one PodGroupPostFilter plugins get). Upstream's per-pod plugins write what a
    PodGroupPostFilter needs into the PodGroup cycle state themselves (``GetPodGroupSchedulingCycle``,
    e.g. DynamicResources' podsStateData at PreFilter); kubesched hands over the members' states
    instead, so a plugin reads there what its own PreFilter kept."""
    states: dict[str, CycleState] | None = group_state.get(_MEMBER_CYCLE_STATES)
    if states is None:
        states = {}
        group_state.write(_MEMBER_CYCLE_STATES, states)
    states[pod.key] = state


def member_cycle_states(group_state: CycleState) -> Mapping[str, CycleState]:
    """Member ``namespace/name`` → its CycleState in this group cycle (members tried only)."""
    states: dict[str, CycleState] | None = group_state.get(_MEMBER_CYCLE_STATES)
    return states if states is not None else {}


PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


def pod_preemption_policy(pod: PodInfo) -> str:
    """podPreemptionPolicy (schedule_one_podgroup.go): the pod's, PreemptLowerPriority when unset."""
    return str(pod.spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)


def group_preemption_policy(raw: dict[str, Any] | None) -> str:
    """podGroupPreemptionPolicy / resolvePreemptionPolicy with PodGroupPreemptionPolicy on: a
    PodGroup's or CompositePodGroup's ``spec.preemptionPolicy`` (admission fills it from
    ``priorityClassName``), PreemptLowerPriority when unset (a group created with the gate off)."""
    policy = ((raw or {}).get("spec") or {}).get("preemptionPolicy")
    return policy if isinstance(policy, str) and policy else PREEMPT_LOWER_PRIORITY


def pod_group_priority(raw: dict[str, Any] | None) -> int:
    """util.PodGroupPriority: ``spec.priority`` (filled by admission from ``priorityClassName``),
    0 when unset."""
    spec = (raw or {}).get("spec") or {}
    priority = spec.get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else 0
