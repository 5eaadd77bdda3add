"""The PodGroup's ``PodGroupInitiallyScheduled`` condition (framework/podgroup_condition.py) and
how the PodGroup cycle reports it: ports of schedule_one_podgroup_test.go (Kubernetes v1.37.1)
``TestUpdatePodGroupCondition`` (every case but the ones that check the API call itself, covered
by the live writer's test below and the differential test) and the condition of every
``TestSubmitPodGroupAlgorithmResult`` case, then what a user reads on the PodGroup after the
cycle on kubesched's scheduler.

Not ported: the CompositePodGroup cases (no CompositePodGroup here yet).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kubesched.framework.handle import Preemptor
from kubesched.framework.objects import ObjectKind
from kubesched.framework.podgroup_condition import (
    INITIALLY_SCHEDULED,
    PodGroupConditions,
    error_condition,
    result_condition,
    rfc3339,
    updated_condition,
)
from kubesched.framework.status import Status
from kubesched.kube.api import STRATEGIC_MERGE_PATCH
from kubesched.kube.events import EventWriter
from kubesched.plugins.gangscheduling import POD_GROUP
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import pod

from .test_podgroup_cycle import NS, Messages, bound, build, member, pod_group, run

EARLIER = 1_000.0
NOW = 2_000.0


def cond(status: str, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": INITIALLY_SCHEDULED, "status": status, "reason": reason, "message": message, **extra}


def group_with(*conditions: dict[str, Any], generation: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pg", "namespace": "ns1", "uid": "pg-uid"}
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "status": {"conditions": [{**c, "lastTransitionTime": rfc3339(EARLIER)}
                                                        for c in conditions]}}


# -- TestUpdatePodGroupCondition --------------------------------------------------------------------

UPDATE_CASES = [
    # name, existing conditions, the cycle's condition, expected condition, lastTransitionTime kept
    ("set Scheduled condition to True on empty status", [],
     cond("True", "SomeReason", "All required pods have been successfully scheduled"),
     cond("True", "SomeReason", "All required pods have been successfully scheduled"), False),
    ("set Scheduled condition to False with Unschedulable reason", [],
     cond("False", "Unschedulable", "0/3 nodes are available: insufficient cpu"),
     cond("False", "Unschedulable", "0/3 nodes are available: insufficient cpu"), False),
    ("set Scheduled condition to False with SchedulerError reason", [],
     cond("False", "SchedulerError", "Internal scheduling error"),
     cond("False", "SchedulerError", "Internal scheduling error"), False),
    ("transition from Unschedulable to Scheduled", [cond("False", "Unschedulable", "previously unschedulable")],
     cond("True", "Scheduled", "All required pods have been successfully scheduled"),
     cond("True", "Scheduled", "All required pods have been successfully scheduled"), False),
    ("transition from SchedulerError to Scheduled", [cond("False", "SchedulerError", "internal error")],
     cond("True", "Scheduled", "All required pods have been successfully scheduled"),
     cond("True", "Scheduled", "All required pods have been successfully scheduled"), False),
    ("transition from Unschedulable to SchedulerError preserves LastTransitionTime",
     [cond("False", "Unschedulable", "not enough resources")],
     cond("False", "SchedulerError", "internal error"), cond("False", "SchedulerError", "internal error"), True),
    ("transition from SchedulerError to Unschedulable preserves LastTransitionTime",
     [cond("False", "SchedulerError", "internal error")],
     cond("False", "Unschedulable", "not enough resources"), cond("False", "Unschedulable", "not enough resources"),
     True),
    ("Scheduled to Scheduled preserves LastTransitionTime", [cond("True", "Scheduled", "All pods scheduled")],
     cond("True", "Scheduled", "more pods scheduled"), cond("True", "Scheduled", "more pods scheduled"), True),
]


@pytest.mark.parametrize(("existing", "condition", "want", "kept"), [c[1:] for c in UPDATE_CASES],
                         ids=[c[0] for c in UPDATE_CASES])
def test_update_pod_group_condition(existing: list[dict[str, Any]], condition: dict[str, Any],
                                    want: dict[str, Any], kept: bool) -> None:
    new = updated_condition(group_with(*existing), condition, NOW)
    assert new is not None
    assert {k: v for k, v in new.items() if k not in ("lastTransitionTime", "observedGeneration")} == want
    assert new["lastTransitionTime"] == rfc3339(EARLIER if kept else NOW)


@pytest.mark.parametrize("condition", [cond("False", "Unschedulable", "extra pods could not be placed"),
                                       cond("False", "SchedulerError", "internal error")],
                         ids=["do not regress Scheduled to Unschedulable",
                              "do not regress Scheduled to SchedulerError"])
def test_a_true_condition_never_regresses(condition: dict[str, Any]) -> None:
    assert updated_condition(group_with(cond("True", "Scheduled", "All pods scheduled")), condition, NOW) is None


def test_an_unchanged_condition_is_not_written_again() -> None:
    """updatePodGroupCondition patches only when SetStatusCondition changed something."""
    existing = cond("False", "Unschedulable", "not enough resources", observedGeneration=2)
    assert updated_condition(group_with(existing, generation=2), cond("False", "Unschedulable",
                                                                      "not enough resources"), NOW) is None


def test_observed_generation_is_the_pod_groups_generation() -> None:
    existing = cond("False", "Unschedulable", "not enough resources", observedGeneration=1)
    new = updated_condition(group_with(existing, generation=2), cond("False", "Unschedulable",
                                                                     "not enough resources"), NOW)
    assert new is not None and new["observedGeneration"] == 2
    assert new["lastTransitionTime"] == rfc3339(EARLIER)  # the status did not move


# -- TestSubmitPodGroupAlgorithmResult: the condition each result gives -----------------------------

PG_ERR = "pod group is unschedulable"
SUBMIT_CASES = [
    ("All pods feasible", None, Status(), cond("True", "Scheduled", "")),
    ("All pods feasible, but podGroup unschedulable", None, Status.unschedulable("not enough capacity for the gang"),
     cond("False", "Unschedulable", "not enough capacity for the gang")),
    ("All pods unschedulable", None, Status.unschedulable("0/3 nodes are available: insufficient cpu"),
     cond("False", "Unschedulable", "0/3 nodes are available: insufficient cpu")),
    ("Unschedulable for the entire pod group", None, Status.unschedulable("node affinity mismatch"),
     cond("False", "Unschedulable", "node affinity mismatch")),
    ("Error for one pod", None, Status.error("plugin returned error"),
     cond("False", "SchedulerError", "plugin returned error")),
    ("Already Scheduled, successful cycle keeps condition", cond("True", "Scheduled", "All pods scheduled"),
     Status(), cond("True", "Scheduled", "")),
    ("Already Scheduled, rejected cycle does not regress condition", cond("True", "Scheduled", "All pods scheduled"),
     Status.unschedulable("extra pods could not be placed"), cond("True", "Scheduled", "All pods scheduled")),
    ("Already Scheduled, error cycle does not regress condition", cond("True", "Scheduled", "All pods scheduled"),
     Status.error(""), cond("True", "Scheduled", "All pods scheduled")),
    ("PodGroup waiting on preemption", None, Status.unschedulable(PG_ERR, "waiting on preemption"),
     cond("False", "Unschedulable", f"{PG_ERR}, waiting on preemption")),
    ("Different number of pods in result and queue", None,
     Status.error("scheduling error for pod group, some pods were not processed"),
     cond("False", "SchedulerError", "scheduling error for pod group, some pods were not processed")),
]


@pytest.mark.parametrize(("existing", "status", "want"), [c[1:] for c in SUBMIT_CASES],
                         ids=[c[0] for c in SUBMIT_CASES])
def test_submit_pod_group_algorithm_result_condition(existing: dict[str, Any] | None, status: Status,
                                                     want: dict[str, Any]) -> None:
    raw = group_with(*([existing] if existing else []))
    new = updated_condition(raw, result_condition(status), NOW)
    final = new if new is not None else raw["status"]["conditions"][0]
    assert {k: v for k, v in final.items() if k not in ("lastTransitionTime", "observedGeneration")} == want


def test_a_group_that_fails_before_scheduling_gets_a_scheduler_error() -> None:
    """updatePodGroupConditionWithError: the error's text is the message."""
    assert error_condition("boom") == cond("False", "SchedulerError", "boom")


def test_what_was_written_counts_before_the_informer_catches_up() -> None:
    """The informer's copy may predate the last write: the next cycle compares with the write, so
    a repeat is not sent again and True is not regressed by a copy that still says False."""
    conditions = PodGroupConditions()
    stale = group_with()
    assert conditions.update(stale, cond("False", "Unschedulable", "m"), EARLIER) is not None
    assert conditions.update(stale, cond("False", "Unschedulable", "m"), NOW) is None
    first_true = conditions.update(stale, cond("True", "Scheduled", ""), NOW)
    assert first_true is not None and first_true["lastTransitionTime"] == rfc3339(NOW)
    assert conditions.update(stale, cond("False", "Unschedulable", "extra member"), NOW + 1) is None


def test_a_write_the_object_shows_is_forgotten() -> None:
    """Nothing is kept per PodGroup once the informer's copy shows the write (a scheduler that
    runs for months sees many groups come and go)."""
    conditions = PodGroupConditions()
    written = conditions.update(group_with(), cond("False", "Unschedulable", "m"), EARLIER)
    assert written is not None and len(conditions) == 1
    caught_up = group_with()
    caught_up["status"]["conditions"] = [{k: v for k, v in written.items() if k != "observedGeneration"}]
    assert conditions.update(caught_up, cond("False", "Unschedulable", "m"), NOW) is None
    assert len(conditions) == 0


# -- the cycle, as a user sees it ------------------------------------------------------------------


class Written(Messages):
    def __init__(self) -> None:
        super().__init__()
        self.status: list[tuple[str, str, dict[str, Any]]] = []

    def object_status(self, kind: str, key: str, uid: str, status: Mapping[str, Any]) -> None:
        assert kind == POD_GROUP
        for c in status["conditions"]:
            self.status.append((key, uid, {k: c[k] for k in ("status", "reason", "message")}))


def with_uid(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["uid"] = f"uid-{raw['metadata']['name']}"
    return raw


def test_the_cycle_writes_each_groups_condition_once_per_change() -> None:
    """The differential test's scene: the small gang True/Scheduled, the big one
    False/Unschedulable with the group's message (as kube-scheduler v1.37.1 wrote it there); a
    retry with the same outcome writes nothing."""
    sched, cluster, clock, _ = build([with_uid(pod_group("small", 3)), with_uid(pod_group("big", 5))])
    written = Written()
    sched.observer = written
    for i in range(3):
        cluster.add_pod(member(f"small-{i}", "small", "1"))
    for i in range(5):
        cluster.add_pod(member(f"big-{i}", "big", "2"))
    run(sched)
    assert sorted(written.status) == [
        (f"{NS}/big", "uid-big", {"status": "False", "reason": "Unschedulable", "message": (
            "minCount (5) cannot be satisfied: 2 scheduled, 2 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor")}),
        (f"{NS}/small", "uid-small", {"status": "True", "reason": "Scheduled", "message": ""}),
    ]
    clock.advance(400)  # the unschedulable flush brings the big gang back
    sched.tick()
    run(sched)
    assert len(written.status) == 2


def test_a_scheduled_group_keeps_its_true_condition_when_an_extra_member_cannot_fit() -> None:
    sched, cluster, _, _ = build([with_uid(pod_group("g", 2))], nodes=1)
    written = Written()
    sched.observer = written
    for i in range(2):
        cluster.add_pod(member(f"g-{i}", "g", "2"))
    run(sched)
    assert bound(cluster) == ["g-0", "g-1"]
    cluster.add_pod(member("g-2", "g", "2"))  # no room left on the node
    run(sched)
    assert "g-2" in written.failed_with
    assert [s for _, _, s in written.status] == [{"status": "True", "reason": "Scheduled", "message": ""}]


def test_a_group_whose_members_fail_validation_gets_a_scheduler_error() -> None:
    sched, cluster, _, _ = build([with_uid(pod_group("g", 2))])
    written = Written()
    sched.observer = written
    for i in range(2):
        cluster.add_pod(member(f"g-{i}", "g", "1", priority=1000))
    run(sched)
    assert written.status == [(f"{NS}/g", "uid-g", {"status": "False", "reason": "SchedulerError", "message": (
        "all pods in a single pod group should have the same priority as the pod group's priority, got 1000 and 0")})]


def test_victims_of_a_group_are_told_the_pod_group_preempted_them() -> None:
    """podGroupExecutorPreemptor: the DisruptionTarget condition names a podgroup; the Preempted
    event the PodGroup's uid, on node ``cluster``, related to the PodGroup."""
    sched, cluster, _, _ = build([with_uid(pod_group("hi", 4, priority=100))])
    preemptors: list[Preemptor] = []
    cleared_nominations: list[str] = []

    class Victims(Written):
        def preempted(self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
                      cleared: Sequence[PodInfo], by: Preemptor, in_memory: Any = ()) -> None:
            preemptors.append(by)
            cleared_nominations.extend(p.name for p in cleared)

    written = Victims()
    sched.observer = written
    for i in range(3):
        cluster.add_pod(PodInfo.from_raw(pod(f"low-{i}", cpu="2", namespace=NS, node_name=f"n{i % 2}")))
    # A lower-priority pod nominated to a victim's node keeps its nomination: upstream clears the
    # candidate's, and a group's candidate, ``cluster``, is no node.
    sched.queue.nominator.add(PodInfo.from_raw(pod("mid", cpu="1", namespace=NS)), "n0")
    for i in range(4):
        cluster.add_pod(member(f"hi-{i}", "hi", "2", priority=100))
    run(sched)
    assert {p.event_message for p in preemptors} == {"Preempted by podgroup uid-hi on node cluster"}
    assert cleared_nominations == []
    assert {(p.related["kind"], p.related["name"], p.related["uid"]) for p in preemptors} == {
        ("PodGroup", "hi", "uid-hi")}
    disruptions = {c["message"] for p in cluster.pods.values() if p.name.startswith("low")
                   for c in p.raw["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"}
    assert disruptions == {"default-scheduler: preempting to accommodate a higher priority podgroup"}
    assert written.status[0][2]["reason"] == "Unschedulable"  # waiting on its preemption


def test_a_pod_preempting_alone_is_named_as_a_pod() -> None:
    high = PodInfo.from_raw(pod("high", namespace=NS))
    by = Preemptor.of_pod(high, "n0")
    assert by.event_message == f"Preempted by pod {high.uid} on node n0"
    assert by.disruption_message == "default-scheduler: preempting to accommodate a higher priority pod"
    assert not by.related  # as kube-scheduler's: its recorder cannot reference the pod wrapper


# -- the live writer ---------------------------------------------------------------------------------


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        self.calls.append((method, path, body, kw.get("content_type")))
        return {}


def test_the_live_shell_strategic_merge_patches_the_status_subresource() -> None:
    """PatchPodGroupStatus: a strategic merge patch of podgroups/status (conditions merge by
    type), with the uid so a newer PodGroup of the same name is never patched."""
    kind = ObjectKind("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", name=POD_GROUP)
    condition = {**cond("True", "Scheduled", ""), "lastTransitionTime": rfc3339(NOW)}

    async def go() -> FakeApi:
        api = FakeApi()
        w = EventWriter(api, "kubesched-test")  # type: ignore[arg-type]
        w.start()
        w.object_status(kind, "ns1/pg", "pg-uid", {"conditions": [condition]})
        await w.stop()
        return api

    api = asyncio.run(go())
    assert api.calls == [("PATCH", "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups/pg/status",
                          {"status": {"conditions": [condition]}, "metadata": {"uid": "pg-uid"}},
                          STRATEGIC_MERGE_PATCH)]
