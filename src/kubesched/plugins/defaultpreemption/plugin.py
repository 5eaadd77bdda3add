"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods from one node to make room.

Port of pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go (Kubernetes
v1.37.1) on top of :mod:`kubesched.framework.preemption` (the Evaluator; the dry run and why it
edits the node table in place are explained there):

* eligibility (``PodEligibleToPreemptOthers``): ``preemptionPolicy: Never`` is not eligible; nor is
  a pod already nominated to a node where a lower-priority pod is terminating because of
  preemption (unless that node is now UnschedulableAndUnresolvable for it);
* candidates: nodes whose Filter status was Unschedulable, tried from a random offset (the
  scheduler's seeded RNG) until ``calculateNumCandidates`` =
  max(nodes × minCandidateNodesPercentage / 100, minCandidateNodesAbsolute), capped at the nodes;
* ``SelectVictimsOnNode``: remove every lower-priority pod, check the pod fits (Filter plugins,
  nominated pods included), then reprieve as many as possible — PDB-violating ones first, then
  the others, most important (priority, then earliest start) first;
* the node: ``pickOneNodeForPreemption`` (fewest PDB violations, lowest highest-victim priority,
  smallest priority sum, fewest victims, latest start of the highest-priority victims, first);
* actuation: ``handle.preempt`` (the scheduler rejects victims waiting at Permit in memory, evicts
  the others through the shell's client, clears lower-priority nominations on the node); the
  pod is nominated to the node and retried once the victims are gone.

Messages are upstream's, prefixed ``preemption: `` (``not eligible due to preemptionPolicy=Never.``,
``0/5 nodes are available: 2 No preemption victims found for incoming pod, 3 Preemption is not
helpful for scheduling.``, ``found a potential placement for pod on node n1, preempting 1 victims``).

Priorities: ``spec.priority`` (upstream ``PodPriority``), as everywhere in kubesched. The
apiserver's Priority admission plugin fills it from the PriorityClass on a real cluster; the
simulator admits its inputs the same way (:mod:`kubesched.api.admission`), so the queue order,
the nominated-pods check and this plugin always agree.

The victim search itself (:func:`kubesched.framework.preemption.select_victims_on_node`) is
shared with the extender's ``preempt`` verb.

With GenericWorkload on it is also a PodGroupPostFilter plugin: a PodGroup whose group cycle failed
preempts for the whole group or not at all (:mod:`kubesched.framework.preemption_podgroup`,
messages prefixed ``pod group preemption: ``).

Not ported: pod-group victims in single-pod preemption, ``IsEligiblePod``/``MoreImportantVictim``
customisation hooks, calling extenders from this plugin. The evictions are sent asynchronously
(tasks of the shell's client) and the preemptor is held at PreEnqueue until they are sent and its
last victim is terminating or gone, as upstream's async executor (SchedulerAsyncPreemption).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.framework.handle import Handle
from kubesched.framework.interfaces import PodGroupPostFilterPlugin, PostFilterPlugin, PreEnqueuePlugin
from kubesched.framework.objects import ObjectKind
from kubesched.framework.podgroup import PodGroupInfo, PodGroupPostFilterResult, PodGroupSchedulingFunc
from kubesched.framework.preemption import NO_VICTIMS_OUTCOME, Evaluator, select_victims_on_node
from kubesched.framework.preemption_batch import select_victims_on_nodes
from kubesched.framework.preemption_order import PodDisruptionBudget
from kubesched.framework.preemption_podgroup import PodGroupEvaluator
from kubesched.framework.status import SUCCESS, Code, Status
from kubesched.framework.types import POD, ActionType, ClusterEvent, PostFilterResult
from kubesched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from kubesched.plugins.helpers.label_selector import SelectorError, label_selector_as_selector
from kubesched.snapshot.pod import PodInfo

NAME = "DefaultPreemption"
WAITING_FOR_PREEMPTION_MSG = "waiting for the preemption for this pod to be finished"
PDB_KIND = "PodDisruptionBudget"


def _check_pdb(raw: dict[str, Any]) -> None:
    status = raw.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    if allowed is not None and not isinstance(allowed, int):
        raise ValueError(f"status.disruptionsAllowed must be an integer, got {allowed!r}")


def parse_pdb(raw: dict[str, Any]) -> PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget as preemption reads it (an invalid selector matches nothing)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    try:
        selector: Any = label_selector_as_selector(spec.get("selector"))
    except SelectorError:
        selector = None
    return PodDisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selector=selector,
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
        disrupted_pods=frozenset((status.get("disruptedPods") or {}).keys()),
    )


def may_preempt(raw_pod: dict[str, Any]) -> bool:
    """Whether a raw (admitted) pod is pending with a priority above 0 and may preempt: a dump with
    such pods but no PodDisruptionBudget is most likely missing them."""
    spec = raw_pod.get("spec") or {}
    phase = (raw_pod.get("status") or {}).get("phase")
    return (not spec.get("nodeName") and phase not in ("Succeeded", "Failed")
            and (spec.get("priority") or 0) > 0 and spec.get("preemptionPolicy") != "Never")


class DefaultPreemption(PreEnqueuePlugin, PostFilterPlugin, PodGroupPostFilterPlugin):
    name: ClassVar[str] = NAME
    args_model: ClassVar[type[Any] | None] = DefaultPreemptionArgs
    object_kinds: ClassVar[tuple[ObjectKind, ...]] = (
        ObjectKind(PDB_KIND, "policy", "v1", "poddisruptionbudgets", validate=_check_pdb,
                   needed_by=may_preempt, when_missing="preemption respects no disruption budget"),
    )

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args if args is not None else DefaultPreemptionArgs(), handle)
        self.evaluator = Evaluator(NAME, handle, self, self.pdbs)
        #: How many placed pods have each priority (a table pod observer). When none is lower than
        #: the preemptor's, every node's SelectVictimsOnNode is "No preemption victims found" without
        #: looking at it: a pod that fits nowhere in a cluster of equals (the common case: every
        #: pod at priority 0) costs one check instead of a pass over thousands of nodes' pods.
        self._priorities: Counter[int] = Counter()
        handle.table.observe_pods(self._count_priority)

    def _count_priority(self, row: int, pod: PodInfo, sign: int) -> None:
        left = self._priorities[pod.priority] + sign
        if left > 0:
            self._priorities[pod.priority] = left
        else:
            del self._priorities[pod.priority]

    # -- PreEnqueue (SchedulerAsyncPreemption, on by default since v1.33) ----------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Hold a preemptor back while its preemption is under way, so it does not preempt the
        same victims again before they are gone (default_preemption.go PreEnqueue)."""
        if self.handle.preemption_running(pod):
            return Status.unresolvable(WAITING_FOR_PREEMPTION_MSG)
        return SUCCESS

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # An assigned pod's deletion (the last victim going) may end the wait (upstream registers
        # it with a Skip hint: the PreEnqueue check is what it is for).
        return (ClusterEvent(POD, ActionType.DELETE, "AssignedPodDelete"),)

    # -- PostFilter ---------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        result, st = self.evaluator.preempt(state, pod, diagnosis)
        if st.message:
            return result, Status(st.code, (f"preemption: {st.message}",), "", st.exception)
        return result, st

    # -- PodGroupPostFilter (GenericWorkload) ------------------------------------------------------
    def pod_group_post_filter(
        self, state: CycleState, group: PodGroupInfo, reschedule: PodGroupSchedulingFunc
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """Preempt for the whole group or not at all (framework/preemption_podgroup.py)."""
        result, st = PodGroupEvaluator(self.handle, self.priority, self.pdbs()).preempt(group, reschedule)
        if st.message:
            return result, Status(st.code, (f"pod group preemption: {st.message}",), "", st.exception)
        return result, st

    # -- the preemption.Interface -------------------------------------------------------------------
    def priority(self, pod: PodInfo) -> int:
        """The pod's priority, ``spec.priority`` (see the module doc)."""
        return pod.priority

    def pdbs(self) -> list[PodDisruptionBudget]:
        return [parse_pdb(raw) for raw in self.handle.objects(PDB_KIND).values()]

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """calculateNumCandidates (int32 arithmetic: the percentage share is floored)."""
        args: DefaultPreemptionArgs = self.args
        n = num_nodes * args.min_candidate_nodes_percentage // 100
        n = max(n, args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """GetOffsetAndNumCandidates: a random offset (the scheduler's seeded RNG) and the count."""
        return self.handle.rng.randrange(num_nodes), self.calculate_num_candidates(num_nodes)

    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """PodEligibleToPreemptOthers."""
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominator = self.handle.nominator
        nominated = nominator.node_of(pod.uid) if nominator is not None else None
        if nominated:
            # An absent status reads as UnschedulableAndUnresolvable (NodeToStatus.Get).
            if nominated_node_status is None or nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            table = self.handle.table
            row = table.row_of(nominated)
            if row is not None:
                prio = self.priority(pod)
                for p in table.pods[row].values():
                    if self.priority(p) < prio and self.handle.terminating_by_preemption(p):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, row: int, pdbs: Sequence[PodDisruptionBudget]
    ) -> tuple[list[PodInfo], int, Status]:
        """SelectVictimsOnNode on a cloned ``state`` (:func:`framework.preemption.select_victims_on_node`)."""
        fwk = self.handle.framework
        if fwk is None:
            return [], 0, Status.error("DefaultPreemption needs the framework's filters (handle.framework)")
        return select_victims_on_node(fwk, self.handle.table, state, pod, row, pdbs, self.priority)

    def no_potential_victims(self, pod: PodInfo) -> bool:
        """No placed pod has a lower priority than ``pod`` (and the framework's filters are there:
        without them the dry run reports an error per node instead)."""
        if self.handle.framework is None:
            return False
        prio = self.priority(pod)
        return all(placed >= prio for placed in self._priorities)

    def select_victims_on_nodes(
        self, state: CycleState, pod: PodInfo, rows: Sequence[int], pdbs: Sequence[PodDisruptionBudget]
    ) -> list[tuple[list[PodInfo], int, Status]] | None:
        """The same for many nodes at once when they cannot affect each other
        (:func:`framework.preemption_batch.select_victims_on_nodes`), else None."""
        fwk = self.handle.framework
        if fwk is None:
            return None
        if self.no_potential_victims(pod):
            return [NO_VICTIMS_OUTCOME] * len(rows)
        return select_victims_on_nodes(fwk, self.handle.table, state, pod, rows, pdbs, self.priority)
