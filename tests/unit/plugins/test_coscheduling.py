"""Coscheduling units: args (and the deprecated alias), PodGroup parsing, QueueSort, Permit
bookkeeping, the live status hook and the reference configuration."""

from __future__ import annotations

import asyncio
import copy
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from kubesched.config.load import load_config
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.types import QueuedPodInfo
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL, Coscheduling, CoschedulingArgs, parse_pod_group
from kubesched.plugins.coscheduling.args import CoschedulingDeprecationWarning
from kubesched.plugins.coscheduling.podgroup import PodGroupSpecError
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import StaticProfile, node, pod
from unit.plugins.gang_helpers import pod_group

DATA = Path(__file__).parents[1] / "config" / "data"


# -- args ----------------------------------------------------------------------------------------


def test_args_defaults_match_scheduler_plugins() -> None:
    a = CoschedulingArgs()
    assert a.permit_waiting_time_seconds == 60 and a.pod_group_backoff_seconds == 0
    assert a.config_warnings == []


def test_denied_pg_expiration_is_read_as_group_backoff_with_a_deprecation_warning() -> None:
    with pytest.warns(CoschedulingDeprecationWarning, match="deniedPGExpirationTimeSeconds is deprecated"):
        a = CoschedulingArgs.model_validate({"permitWaitingTimeSeconds": 10, "deniedPGExpirationTimeSeconds": 3})
    assert a.permit_waiting_time_seconds == 10 and a.pod_group_backoff_seconds == 3
    assert len(a.config_warnings) == 1
    assert a == CoschedulingArgs(permitWaitingTimeSeconds=10, podGroupBackoffSeconds=3)


def test_explicit_group_backoff_wins_over_the_deprecated_alias() -> None:
    with pytest.warns(CoschedulingDeprecationWarning):
        a = CoschedulingArgs.model_validate({"podGroupBackoffSeconds": 5, "deniedPGExpirationTimeSeconds": 3})
    assert a.pod_group_backoff_seconds == 5


@pytest.mark.parametrize(
    "raw", [{"permitWaitingTimeSeconds": -1}, {"podGroupBackoffSeconds": -2}, {"permitWaitingTime": 3}]
)
def test_invalid_args_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CoschedulingArgs.model_validate(raw)


@pytest.mark.parametrize("name", ["ref_coscheduling_v1beta2.yaml", "ref_coscheduling_v1beta3.yaml"])
def test_reference_configuration_loads_with_the_real_plugin(name: str) -> None:
    with pytest.warns(CoschedulingDeprecationWarning):
        cfg = load_config(DATA / name, builtin_registry())
    p = cfg.profiles[0]
    assert p.plugins["queueSort"] == ["Coscheduling"]
    assert "Coscheduling" in p.plugins["preFilter"] and p.plugins["permit"] == ["Coscheduling"]
    # After DefaultPreemption when the default plugins include it (upstream's order); the
    # default Reserve plugin (VolumeBinding) first, the configuration's appended.
    assert p.plugins["postFilter"][-1] == "Coscheduling" and p.plugins["reserve"][-1] == "Coscheduling"
    args = p.plugin_args["Coscheduling"]
    assert isinstance(args, CoschedulingArgs)
    assert (args.permit_waiting_time_seconds, args.pod_group_backoff_seconds) == (10, 3)


def test_example_configuration_loads_without_warnings() -> None:
    example = Path(__file__).parents[3] / "examples" / "coscheduling.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(example, builtin_registry())
    assert cfg.warnings == []
    assert cfg.profiles[0].plugins["queueSort"] == ["Coscheduling"]


# -- PodGroup ------------------------------------------------------------------------------------


def test_pod_group_parsing() -> None:
    pg = parse_pod_group(pod_group("g", 3, minResources={"cpu": "1500m", "memory": "1Gi"}, scheduleTimeoutSeconds=7))
    assert (pg.key, pg.min_member, pg.schedule_timeout_seconds) == ("default/g", 3, 7)
    assert pg.min_resources == {"cpu": 1500, "memory": 1 << 30}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"minMember": "3"}, "spec.minMember"),
        ({"minMember": 2, "minResources": {"cpu": "lots"}}, "spec.minResources.cpu"),
        ({"minMember": 2, "scheduleTimeoutSeconds": -1}, "spec.scheduleTimeoutSeconds"),
    ],
)
def test_bad_pod_groups_name_the_field(spec: dict[str, Any], field: str) -> None:
    raw = pod_group("g", 1)
    raw["spec"] = spec
    with pytest.raises(PodGroupSpecError, match=field):
        parse_pod_group(raw)


# -- a small scheduler -----------------------------------------------------------------------------


GANG_PLUGINS: dict[str, list[str]] = {
    "queueSort": ["Coscheduling"],
    "preFilter": ["NodeResourcesFit", "Coscheduling"],
    "filter": ["NodeResourcesFit"],
    "postFilter": ["Coscheduling"],
    "reserve": ["Coscheduling"],
    "permit": ["Coscheduling"],
    "bind": ["DefaultBinder"],
}


def build(groups: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> tuple[Scheduler, SimulatedCluster, FakeClock]:
    cluster = SimulatedCluster()
    for g in groups:
        cluster.add_object("PodGroup", f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}", g)
    clock = FakeClock(100.0)
    profile = StaticProfile(GANG_PLUGINS, plugin_args={"Coscheduling": CoschedulingArgs(permitWaitingTimeSeconds=10)})
    sched = Scheduler.build([profile], builtin_registry(), clock, client=cluster, seed=1, objects=cluster.kind)
    cluster.attach(sched)
    for n in nodes:
        cluster.add_node(n)
    return sched, cluster, clock


def plugin_of(sched: Scheduler) -> Coscheduling:
    p = sched.frameworks["default-scheduler"].plugins["Coscheduling"]
    assert isinstance(p, Coscheduling)
    return p


def member(name: str, group: str, **kw: Any) -> PodInfo:
    return PodInfo.from_raw(pod(name, cpu="1", labels={POD_GROUP_LABEL: group}, **kw))


def test_queue_sort_keeps_a_group_together_in_group_creation_order() -> None:
    sched, _, _ = build(
        [pod_group("late", 1, created="2026-01-02T00:00:00Z"), pod_group("early", 1, created="2026-01-01T00:00:00Z")],
        [],
    )
    cs = plugin_of(sched)
    pods = [
        member("l1", "late"),
        PodInfo.from_raw(pod("plain-old", cpu="1")),  # created 2026-01-01T00:mm:ss, after "early"
        member("e2", "early"),
        member("l0", "late"),
        member("e1", "early"),
        member("vip", "late", priority=100),
        member("orphan", "missing"),  # no PodGroup: sorted by its own creation time
    ]
    import functools

    qpis = [QueuedPodInfo(pod=p, timestamp=0.0) for p in pods]
    order = sorted(qpis, key=functools.cmp_to_key(lambda a, b: -1 if cs.less(a, b) else (1 if cs.less(b, a) else 0)))
    assert [q.pod.name for q in order] == ["vip", "e1", "e2", "plain-old", "orphan", "l0", "l1"]


def test_first_waiting_member_activates_its_siblings_and_the_last_allows_all() -> None:
    sched, cluster, _ = build([pod_group("g", 3)], [node("n0", cpu="4")])
    cs = plugin_of(sched)
    pods = [member(f"m{i}", "g") for i in range(3)]

    async def go() -> None:
        for p in pods:
            cluster.add_pod(p)
        # Park m1 and m2 in unschedulable as if an earlier attempt failed.
        assert sched.schedule_one()  # m0 → waits, activates the others
        wp = sched.waiting_pods.get(pods[0].uid)
        assert wp is not None and wp.pending_plugins == ["Coscheduling"]
        first = cs.status_updates()["PodGroup"]["default/g"]
        assert first["phase"] == "Scheduling" and first["running"] == 0 and "scheduleStartTime" in first
        assert sched.schedule_one() and sched.schedule_one()
        await sched.drain()

    asyncio.run(go())
    assert sorted(p.name for p in cluster.pods.values() if p.node_name) == ["m0", "m1", "m2"]
    assert cs.status_updates() == {"PodGroup": {"default/g": {"phase": "Scheduled", "scheduled": 3}}}
    assert cs.status_updates() == {}  # only changes are reported


def test_activate_moves_unschedulable_siblings_back() -> None:
    sched, cluster, _ = build([pod_group("g", 2)], [node("n0", cpu="4")])
    a, b = member("a", "g"), member("b", "g")
    cluster.add_pod(a)
    cluster.add_pod(b)
    qb = sched.queue.pop()
    assert qb is not None and qb.pod.name == "a"
    # Pretend b had failed earlier and waits for an event.
    qpi = sched.queue.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = {"Coscheduling"}
    sched.queue.add_unschedulable(qpi, sched.queue.scheduling_cycle + 1)
    assert sched.queue.counts()["unschedulable"] == 1
    plugin_of(sched).handle.activate([b.uid])
    assert sched.queue.counts()["active"] == 1


def test_deleting_a_waiting_member_rejects_the_whole_gang() -> None:
    sched, cluster, _ = build([pod_group("g", 3)], [node("n0", cpu="4")])
    # m2 exists (it counts for minMember) but is gated, so m0 and m1 wait for it.
    pods = [member("m0", "g"), member("m1", "g"), member("m2", "g", schedulingGates=[{"name": "later"}])]

    async def go() -> None:
        for p in pods:
            cluster.add_pod(p)
        sched.schedule_one()
        sched.schedule_one()
        await asyncio.sleep(0)
        assert len(sched.waiting_pods) == 2
        cluster.delete_pod(pods[0].uid)
        await sched.drain()

    asyncio.run(go())
    assert len(sched.waiting_pods) == 0
    assert cluster.binds == 0
    assert int(sched.cache.table.requested[:, 0].sum()) == 0


def test_missing_pod_group_is_unresolvable() -> None:
    sched, cluster, _ = build([], [node("n0")])
    failures: list[str] = []

    class Obs:
        def scheduled(self, *a: Any) -> None: ...
        def bound(self, *a: Any) -> None: ...
        def failed(self, pod: PodInfo, profile: str, failure: Any) -> None:
            failures.append(failure.message)

    sched.observer = Obs()  # type: ignore[assignment]
    cluster.add_pod(member("x", "nope"))
    sched.schedule_one()
    assert failures == ["0/1 nodes are available: PodGroup default/nope not found."]


def test_deprecated_denied_pg_expiration_is_reported_as_a_config_warning() -> None:
    from kubesched.config.load import load_config
    from kubesched.plugins.builtin import builtin_registry

    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "gang",
                "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}},
                "pluginConfig": [{"name": "Coscheduling", "args": {"deniedPGExpirationTimeSeconds": 3}}],
            }
        ],
    }
    with pytest.warns(FutureWarning):
        cfg = load_config(doc, builtin_registry())
    [warning] = [w for w in cfg.warnings if "deniedPGExpirationTimeSeconds" in w]
    assert warning.startswith("profiles[0].pluginConfig[0].args: ")
    assert cfg.profiles[0].plugin_args["Coscheduling"].pod_group_backoff_seconds == 3


def _with(p: PodInfo, node_name: str, phase: str) -> PodInfo:
    raw = copy.deepcopy(p.raw)
    raw["spec"]["nodeName"] = node_name
    raw["status"] = {"phase": phase}
    return PodInfo.from_raw(raw)


def test_pod_group_status_follows_its_members_to_running_finished_and_failed() -> None:
    sched, cluster, _ = build([pod_group("g", 3), pod_group("h", 2)], [node("n0", cpu="8")])
    cs = plugin_of(sched)
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j1"}]
    g = []
    for i in range(3):
        raw = pod(f"m{i}", cpu="1", labels={POD_GROUP_LABEL: "g"})
        raw["metadata"]["ownerReferences"] = owner
        g.append(PodInfo.from_raw(raw))

    async def go() -> None:
        for p in g:
            cluster.add_pod(p)
        first = cs.status_updates()["PodGroup"]
        # All members exist, none tried yet; h has no member yet.
        assert first["default/g"] == {
            "phase": "PreScheduling", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0,
            "occupiedBy": "default/train",
        }
        assert first["default/h"]["phase"] == "Pending"
        while sched.schedule_one():
            await sched.drain()

    asyncio.run(go())
    st = cs.status_updates()["PodGroup"]["default/g"]
    assert st["phase"] == "Scheduled" and st["scheduled"] == 3 and "scheduleStartTime" in st
    bound_g = [cluster.pods[p.uid] for p in g]
    for p in bound_g:
        sched.on_pod_update(_with(p, p.node_name, "Running"))
    assert cs.status_updates()["PodGroup"]["default/g"] == {"phase": "Running", "running": 3}
    sched.on_pod_update(_with(bound_g[0], bound_g[0].node_name, "Succeeded"))
    assert cs.status_updates()["PodGroup"]["default/g"] == {"running": 2, "succeeded": 1}  # still Running
    sched.on_pod_update(_with(bound_g[1], bound_g[1].node_name, "Failed"))
    assert cs.status_updates()["PodGroup"]["default/g"] == {"phase": "Failed", "running": 1, "failed": 1}
    # The group's finished pods no longer hold resources.
    assert int(sched.cache.table.requested[:, 0].sum()) == 1000

    # A gang whose members all succeed is Finished.
    sched2, _, _ = build([pod_group("f", 2)], [node("n0", cpu="8")])
    cs2 = plugin_of(sched2)
    for i in range(2):
        sched2.on_pod_add(_with(member(f"f{i}", "f"), "n0", "Succeeded"))
    assert cs2.status_updates()["PodGroup"]["default/f"]["phase"] == "Finished"
    assert cs2.pod_group_status("default/f") == {
        "phase": "Finished", "scheduled": 2, "running": 0, "succeeded": 2, "failed": 0
    }


def test_a_finished_or_failed_groups_status_is_left_as_it_is_once_its_members_are_deleted() -> None:
    # scheduler-plugins' PodGroup controller counts the group's pods that exist, and stops
    # updating a group once Finished or Failed (podgroup_controller.go Reconcile).
    sched, _, _ = build([pod_group("f", 2)], [node("n0", cpu="8")])
    cs = plugin_of(sched)
    done = [_with(member(f"f{i}", "f"), "n0", "Succeeded") for i in range(2)]
    for p in done:
        sched.on_pod_add(p)
    assert cs.status_updates()["PodGroup"]["default/f"]["phase"] == "Finished"
    for p in done:
        sched.on_finished_pod_delete(p)  # the Job's pods cleaned up
    status = cs.pod_group_status("default/f")
    assert status is not None and status["succeeded"] == 0  # deleted pods are no longer counted
    assert "default/f" not in cs.status_updates().get("PodGroup", {})  # but Finished stays published

    # After a restart the object's own status says so: a Failed group whose pods are gone stays Failed.
    failed = pod_group("x", 2)
    failed["status"] = {"phase": "Failed", "failed": 1, "running": 1}
    sched2, _, _ = build([failed, pod_group("y", 2)], [node("n0", cpu="8")])
    updates = plugin_of(sched2).status_updates()["PodGroup"]
    assert "default/x" not in updates and updates["default/y"]["phase"] == "Pending"


def test_member_counting_uses_the_index_not_a_queue_scan() -> None:
    sched, cluster, _ = build([pod_group("g", 3)], [node("n0", cpu="1")])
    cs = plugin_of(sched)
    for i in range(3):
        cluster.add_pod(member(f"m{i}", "g"))
    for i in range(200):
        cluster.add_pod(PodInfo.from_raw(pod(f"plain{i}", cpu="1")))
    scans = 0
    source = cs.members._source

    def counting() -> Any:
        nonlocal scans
        scans += 1
        return source()

    cs.members._source = counting
    p = member("m-new", "g")
    for _ in range(50):
        assert cs.member_count(p, "default/g") == 4
        cs.pre_filter(CycleState(), p, sched.cache.table)
    assert scans <= 1  # one resync on first use (virtual time does not move here)
    assert set(cs.members.pending_of("default/g")) >= {q.uid for q in sched._pending_pods() if q.name.startswith("m")}


def test_younger_gangs_waiting_where_an_older_one_was_refused_give_way_until_its_timeout() -> None:
    """PostFilter of an older gang's member refused on the node where a younger gang waits at
    Permit: the younger gang is rejected and refused at PreFilter while the older one assembles,
    for at most the older one's Permit timeout (give_way.py)."""
    import numpy as np

    from kubesched.framework.diagnosis import Diagnosis
    from kubesched.framework.status import Status

    sched, cluster, clock = build(
        [pod_group("old", 2, created="2026-01-01T00:00:00Z"), pod_group("young", 3, created="2026-01-02T00:00:00Z")],
        [node("n0", cpu="4")],
    )
    cs = plugin_of(sched)
    young = [member("y0", "young"), member("y1", "young"), member("y2", "young", schedulingGates=[{"name": "later"}])]
    old = member("o0", "old")

    async def go() -> None:
        for p in young:
            cluster.add_pod(p)
        sched.schedule_one()
        sched.schedule_one()
        await asyncio.sleep(0)
        assert len(sched.waiting_pods) == 2  # y0 and y1 hold 2 of n0's 4 CPU
        cluster.add_pod(old)
        row = sched.cache.table.row_of("n0")
        assert row is not None
        diagnosis = Diagnosis()
        diagnosis.add_rejections(np.array([row], dtype=np.int32), np.ones(1, dtype=np.int32),
                                 [Status.unschedulable("Insufficient cpu")], 1)
        _, status = cs.post_filter(CycleState(), old, diagnosis)
        assert status.message == ("PodGroup default/old: younger PodGroup(s) default/young waiting at Permit "
                                  "were rejected to make room")
        await sched.drain()

    asyncio.run(go())
    assert len(sched.waiting_pods) == 0 and cluster.binds == 0
    _, status = cs.pre_filter(CycleState(), young[0], sched.cache.table)
    assert status.message == "podGroup default/young gives way to podGroup default/old"
    clock.advance(10)  # the older group's Permit timeout (permitWaitingTimeSeconds)
    _, status = cs.pre_filter(CycleState(), young[0], sched.cache.table)
    assert "gives way" not in status.message
