"""What one capacity simulation ends with, pod by pod, and which of its pods more nodes of a
template cannot help (simulate/whatif/capacity.py asks; the brute force of the tests asks too).

Preemption victims are what they are in a cluster: **evicted**, then **rescheduled or not**. A
victim with a controller (``ownerReferences`` with ``controller: true``) is created again by it,
pending, with the same name, once the eviction has deleted it (``VictimReplacements``, fed to the
simulation whenever it has nothing else to do), and scheduled like any other pod; its fate is its
replacement's (followed along a chain of preemptions). A victim without a controller is deleted for
good (nothing recreates a bare pod). So a probe of the node search fails for a pod when, at the
end, the pod does not run: a pending pod (or workload replica) not placed, a victim whose
replacement was not placed, a victim deleted for good.

Which of those more nodes cannot help is checked as cluster-autoscaler checks a pending pod against
a node group's template node: PreFilter and Filter against one empty node of the template added to
the final state of the run (``refused_by_empty_template``). A victim deleted for good is beyond help
when its preemptor is (an empty template node would refuse the preemptor, so the preemptor
preempts whatever the count).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.api.timestamps import rfc3339
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.diagnosis import Diagnosis
from kubesched.simulate.engine.records import PRE_BOUND, PREEMPTED, SCHEDULED, PodRecord
from kubesched.simulate.engine.runner import Simulation, SimulationResult
from kubesched.snapshot.pod import PodInfo, raw_pod_uid

if TYPE_CHECKING:
    from kubesched.simulate.whatif.capacity import NodeTemplate

__all__ = [
    "LOST",
    "NOT_RESCHEDULED",
    "RESCHEDULED",
    "Outcome",
    "Victim",
    "VictimReplacements",
    "outcome_of",
    "refused_by_empty_template",
]

#: A victim's fate.
RESCHEDULED, NOT_RESCHEDULED, LOST = "rescheduled", "not rescheduled", "deleted for good"
#: Suffix of a replacement's uid (its name is the victim's).
REPLACEMENT_UID = "~replacement"


def _controller(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def replacement_of(raw: Mapping[str, Any], created: float) -> dict[str, Any]:
    """The pod as its controller creates it again after an eviction: same name and spec, no node,
    pending, created at ``created``, a new uid."""
    new = copy.deepcopy(dict(raw))
    new["spec"] = {k: v for k, v in (new.get("spec") or {}).items() if k != "nodeName"}
    meta = new["metadata"] = dict(new.get("metadata") or {})
    meta["uid"] = raw_pod_uid(dict(raw)) + REPLACEMENT_UID
    meta["creationTimestamp"] = rfc3339(created)
    for gone in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
        meta.pop(gone, None)
    new["status"] = {"phase": "Pending"}
    return new


class VictimReplacements:
    """A simulation feed (``Simulation(feed=...)``) that plays the controllers of evicted pods:
    each time the run is idle, every victim evicted since is created again (when it has a
    controller). ``know`` tells it about pods fed by others (a workload's replicas)."""

    def __init__(self, pods: Iterable[Mapping[str, Any]], created: float) -> None:
        self._raw: dict[str, Mapping[str, Any]] = {raw_pod_uid(dict(p)): p for p in pods}
        self._created = created
        self._handled: set[str] = set()
        #: Victim uid → its replacement's uid.
        self.replacement: dict[str, str] = {}

    def know(self, pods: Iterable[PodInfo]) -> None:
        for pod in pods:
            self._raw[pod.uid] = pod.raw

    def __call__(self, sim: Simulation) -> list[PodInfo]:
        out = []
        for uid, rec in sim.recorder.records.items():
            if rec.status != PREEMPTED or uid in self._handled:
                continue
            self._handled.add(uid)
            raw = self._raw.get(uid)
            if raw is None or _controller(raw) is None:
                continue  # a bare pod: deleted for good
            pod = PodInfo.from_raw(replacement_of(raw, self._created + sim.clock.now()))
            self._raw[pod.uid] = pod.raw
            self.replacement[uid] = pod.uid
            out.append(pod)
        return out


@dataclass(frozen=True)
class Victim:
    """A pod evicted by preemption, and what became of it (of its replacement, if recreated)."""

    pod: str
    preemptor: str
    node: str
    fate: str
    #: Rescheduled: the node it runs on now. Not rescheduled: why. Deleted for good: why.
    detail: str
    #: The uid of the pod that ends the chain (the last replacement, or the victim itself).
    final_uid: str
    preemptor_uid: str = ""

    def to_json(self) -> dict[str, str]:
        return {"pod": self.pod, "preemptor": self.preemptor, "node": self.node, "fate": self.fate,
                "detail": self.detail}


@dataclass
class Outcome:
    """Every pod of one run that does not run at the end, and every preemption victim."""

    #: Pending pods (and workload replicas) not placed: pod → why (the FitError).
    unplaced: dict[str, str] = field(default_factory=dict)
    #: Victims of the input and of the workload, in the order they were evicted (replacements'
    #: own evictions are followed inside the chain, not listed again).
    victims: list[Victim] = field(default_factory=list)
    #: Pod → the uid checked against an empty template node (unplaced pods, victims not back).
    uids: dict[str, str] = field(default_factory=dict)

    @property
    def not_running(self) -> dict[str, str]:
        """Pod → why, for every pod that does not run at the end: unplaced, or evicted and not back."""
        out = dict(self.unplaced)
        for v in self.victims:
            if v.fate != RESCHEDULED:
                out[v.pod] = f"evicted by {v.preemptor} on node {v.node}, {v.fate}: {v.detail}"
        return out

    def counts(self) -> dict[str, int]:
        fates = [v.fate for v in self.victims]
        return {"evicted": len(fates), "rescheduled": fates.count(RESCHEDULED),
                "notRescheduled": fates.count(NOT_RESCHEDULED), "lost": fates.count(LOST)}


def _preemptor_of(rec: PodRecord, result: SimulationResult) -> tuple[str, str]:
    """(preemptor key, node) of a victim's record: the preemption at its eviction time naming it."""
    for p in result.preemptions:
        if p.time == rec.time and rec.key in p.victims:
            return p.preemptor, p.node
    return "?", "?"


def outcome_of(result: SimulationResult, replacements: VictimReplacements, ignore: Iterable[str] = ()
               ) -> Outcome:
    """The end of a run, pod by pod (``ignore``: uids left out, e.g. replicas the question drops)."""
    skip = set(ignore)
    replacement_uids = set(replacements.replacement.values())
    out = Outcome()
    scheduled_uid = {rec.key: rec.uid for rec in result.records.values() if rec.status == SCHEDULED}
    for uid, rec in result.records.items():
        if uid in skip or uid in replacement_uids or rec.status in (SCHEDULED, PRE_BOUND):
            continue
        if rec.status != PREEMPTED:
            out.unplaced[rec.key] = rec.message
            out.uids[rec.key] = uid
            continue
        preemptor, node = _preemptor_of(rec, result)
        final = uid
        while final in replacements.replacement:  # follow the chain of replacements
            final = replacements.replacement[final]
            last = result.records.get(final)
            if last is None or last.status != PREEMPTED:
                break
        last = result.records[final]
        if final == uid:
            fate, detail = LOST, "no controller recreates it"
        elif last.status == SCHEDULED and last.node is not None:
            fate, detail = RESCHEDULED, f"on node {last.node}"
        elif last.status == PREEMPTED:
            fate, detail = LOST, "its replacement was evicted too and has no controller"
        else:
            fate, detail = NOT_RESCHEDULED, last.message
        victim = Victim(rec.key, preemptor, node, fate, detail, final, scheduled_uid.get(preemptor, ""))
        out.victims.append(victim)
        if fate != RESCHEDULED:
            out.uids[rec.key] = final if fate == NOT_RESCHEDULED else victim.preemptor_uid
    return out


def _unbound(pod: PodInfo) -> PodInfo:
    raw = dict(pod.raw)
    raw["spec"] = {k: v for k, v in (raw.get("spec") or {}).items() if k != "nodeName"}
    return PodInfo.from_raw(raw)


def refused_by_empty_template(result: SimulationResult, template: NodeTemplate, outcome: Outcome,
                              pods: Iterable[str]) -> dict[str, str]:
    """Of ``pods`` (keys of pods that do not run at the end of ``result``), those that an empty
    node of ``template``, added to the final state, refuses: pod → the rejection (the plugin and
    its reason). A victim deleted for good is checked through its preemptor (unbound)."""
    sched = result.scheduler
    name = f"{template.name}-probe"
    result.cluster.add_node(template.named(name))
    table = sched.cache.table
    row = table.row_of(name)
    lost = {v.pod: v for v in outcome.victims if v.fate == LOST}
    out: dict[str, str] = {}
    for key in pods:
        uid = outcome.uids.get(key, "")
        pod = result.cluster.pods.get(uid)
        rec = result.records.get(uid)
        if pod is None or rec is None or row is None:
            continue
        fwk = sched.frameworks.get(rec.profile)
        if fwk is None:
            continue
        if pod.node_name:
            pod = _unbound(pod)
        state, diagnosis = CycleState(), Diagnosis()
        rows, st = fwk.pre_filter_rows(state, pod, table.alive_rows(), diagnosis)
        if st.is_success and row in set(rows.tolist()):
            st = fwk.filter_node(state, pod, row)
        elif st.is_success:
            st = diagnosis.node_to_status.get(row) or st
        if not st.is_success:
            why = f"{st.plugin}: {st.message}" if st.plugin else st.message
            if key in lost:
                why = f"evicted by {lost[key].preemptor}, which no such node can take ({why}); {lost[key].detail}"
            out[key] = why
    result.cluster.delete_node(name)
    return out
