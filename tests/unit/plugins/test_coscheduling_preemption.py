"""Coscheduling and DefaultPreemption (issue 14, item 4): a member of a gang waiting at Permit is
a victim only together with its whole gang (``Plugin.eviction_group``), and never when another
waiting member outranks the preemptor. Unit tests on the evaluator, then one simulation."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from kubesched.config.load import load_config_text
from kubesched.framework.clock import FakeClock
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.handle import Preemptor
from kubesched.framework.preemption import eviction_groups
from kubesched.framework.preemption_order import Candidate
from kubesched.framework.runtime import Framework
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL, Coscheduling
from kubesched.plugins.defaultpreemption import DefaultPreemption
from kubesched.scheduler import Scheduler, SchedulerObserver
from kubesched.simulate.engine.cluster import SimulatedCluster
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.report.json_doc import result_to_json
from kubesched.snapshot.pod import PodInfo
from kubesched.testing import node, pod
from unit.plugins.gang_helpers import coscheduling_config, pod_group

CONFIG = coscheduling_config(args="{permitWaitingTimeSeconds: 600, podGroupBackoffSeconds: 60}")


def on(node_name: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node_name}}


def member(name: str, group: str, node_name: str, priority: int = 0, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, priority=priority, labels={POD_GROUP_LABEL: group}, **on(node_name), **spec)


def gated(name: str, group: str) -> dict[str, Any]:
    """A member that exists (it counts towards minMember) but is never scheduled: its gang waits."""
    return pod(name, cpu="1", labels={POD_GROUP_LABEL: group}, schedulingGates=[{"name": "test/hold"}])


def bound(name: str, node_name: str, priority: int = 0, cpu: str = "1") -> dict[str, Any]:
    raw = pod(name, cpu=cpu, priority=priority, node_name=node_name)
    raw["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    return raw


def nodes(*names: str, cpu: str = "2") -> list[dict[str, Any]]:
    return [node(n, cpu=cpu, memory="8Gi", labels={"kubernetes.io/hostname": n}) for n in names]


class Setup:
    """A scheduler with Coscheduling and DefaultPreemption over an in-memory cluster."""

    def __init__(self, node_list: list[dict[str, Any]], pods: list[dict[str, Any]],
                 groups: list[dict[str, Any]]) -> None:
        registry = builtin_registry()
        config = load_config_text(CONFIG, registry)
        self.cluster = SimulatedCluster()
        for g in groups:
            self.cluster.add_object("PodGroup", f"default/{g['metadata']['name']}", g)
        self.sched = Scheduler.build(config.profiles, registry, FakeClock(), client=self.cluster,
                                     objects=self.cluster.kind, seed=0, eager_binding=True)
        self.cluster.attach(self.sched)
        for n in node_list:
            self.cluster.add_node(n)
        for p in pods:
            self.cluster.add_pod(PodInfo.from_raw(p))
        self.fwk: Framework = next(iter(self.sched.frameworks.values()))
        preemption = self.fwk.plugins["DefaultPreemption"]
        assert isinstance(preemption, DefaultPreemption)
        self.preemption = preemption

    def schedule_all(self) -> None:
        while self.sched.schedule_one():
            pass

    def waiting(self) -> set[str]:
        return {wp.pod.name for wp in self.sched.waiting_pods if not wp.decided}

    def dry_run(self, preemptor: dict[str, Any]) -> dict[str, list[str]]:
        p = PodInfo.from_raw(preemptor)
        state = CycleState()
        self.fwk.run_pre_filter(state, p)
        rows = self.fwk.handle.table.alive_rows().tolist()
        out = self.preemption.evaluator.dry_run_preemption(state, p, rows, self.preemption.pdbs(), 0, len(rows))
        return victims(out.candidates)


def victims(cands: list[Candidate]) -> dict[str, list[str]]:
    return {c.node_name: sorted(v.name for v in c.victims) for c in cands}


def test_a_waiting_gang_is_one_victim_group_and_the_node_without_it_is_picked() -> None:
    async def run() -> None:
        s = Setup(
            nodes("n1", "n2", "n3"),
            [member("g-0", "g", "n1"), member("g-1", "g", "n2"), gated("g-2", "g"), bound("plain", "n3")],
            [pod_group("g", 3)],
        )
        s.schedule_all()
        assert s.waiting() == {"g-0", "g-1"}  # g-2 is gated: the gang waits at Permit
        high = pod("high", cpu="2", priority=100)
        # Taking g-0 on n1 releases g-1 on n2 too: both are victims of n1 (and of n2).
        assert s.dry_run(high) == {"n1": ["g-0", "g-1"], "n2": ["g-0", "g-1"], "n3": ["plain"]}
        cs = s.fwk.plugins["Coscheduling"]
        assert isinstance(cs, Coscheduling)
        g0 = s.sched.cache.table.pod(next(wp.pod.uid for wp in s.sched.waiting_pods if wp.pod.name == "g-0"))
        assert g0 is not None
        assert sorted(p.name for p in cs.eviction_group(g0) or ()) == ["g-0", "g-1"]
        # The node-pick order then prefers evicting one plain pod to breaking the gang.
        s.cluster.add_pod(PodInfo.from_raw(high))
        s.schedule_all()
        assert s.sched.queue.nominator.node_of(PodInfo.from_raw(high).uid) == "n3"
        assert s.cluster.pods[next(u for u, p in s.cluster.pods.items() if p.name == "plain")].deleting
        assert s.waiting() == {"g-0", "g-1"}  # the gang keeps waiting, untouched

    asyncio.run(run())


def test_a_waiting_gang_with_a_member_that_outranks_the_preemptor_is_not_a_victim() -> None:
    async def run() -> None:
        s = Setup(
            nodes("n1", "n2"),
            [member("g-0", "g", "n1", priority=0), member("g-1", "g", "n2", priority=500), gated("g-2", "g")],
            [pod_group("g", 3)],
        )
        s.schedule_all()
        assert s.waiting() == {"g-0", "g-1"}
        # g-0 alone is of lower priority, but evicting it would release g-1 (priority 500).
        assert s.dry_run(pod("high", cpu="2", priority=100)) == {}
        # A preemptor that outranks every member may take the gang (as a whole).
        assert s.dry_run(pod("top", cpu="2", priority=1000)) == {"n1": ["g-0", "g-1"], "n2": ["g-0", "g-1"]}

    asyncio.run(run())


def test_members_of_a_gang_that_has_its_quorum_are_preempted_one_by_one() -> None:
    async def run() -> None:
        s = Setup(nodes("n1", "n2"), [member("g-0", "g", "n1"), member("g-1", "g", "n2")], [pod_group("g", 2)])
        s.schedule_all()
        assert s.waiting() == set()  # quorum: both bound
        assert s.dry_run(pod("high", cpu="2", priority=100)) == {"n1": ["g-0"], "n2": ["g-1"]}
        table = s.sched.cache.table
        pods = [p for row in table.alive_rows() for p in table.pods[int(row)].values()]
        groups, protected = eviction_groups(s.fwk, pods, 100, lambda p: p.priority)
        assert groups == {} and protected == set()

    asyncio.run(run())


def test_simulation_a_preemptor_evicts_a_plain_pod_rather_than_a_waiting_gang() -> None:
    """Gang `a` (priority 200) holds one member on each node at Permit until its 20 s timeout;
    `high` (priority 100, 3 cpu) fits nowhere meanwhile. Gang `g` (priority 0) waits at Permit on
    n1 and n2, `plain` (priority 0) runs on n3. When `a` times out, `high` has two kinds of
    candidates: n1/n2 (one member of `g`, i.e. the whole gang) or n3 (`plain`): n3, one victim."""
    never = {"priority": 200, "preemptionPolicy": "Never"}  # `a` only holds room, it never preempts
    pods = [
        member("a-0", "a", "n1", **never), member("a-1", "a", "n2", **never), member("a-2", "a", "n3", **never),
        gated("a-3", "a"),
        pod("high", cpu="3", priority=100),
        member("g-0", "g", "n1"), member("g-1", "g", "n2"), gated("g-2", "g"),
        bound("plain", "n3"),
    ]
    groups = [pod_group("a", 4, scheduleTimeoutSeconds=20), pod_group("g", 3)]
    registry = builtin_registry()
    config = load_config_text(CONFIG, registry)
    cluster = ClusterInput(nodes=nodes("n1", "n2", "n3", cpu="3"), pods=pods,
                           objects={"PodGroup": {f"default/{g['metadata']['name']}": g for g in groups}},
                           skipped={}, source="test")
    sim = Simulation(config, registry, cluster, seed=0)

    def guard(_bound: int, _total: int) -> None:
        if sim.clock.now() > 120:  # past the preemption and plain's 30 s grace period
            sim.interrupt()

    sim._progress = guard
    data = result_to_json(asyncio.run(sim.run()))
    assert [(p["preemptor"], p["node"], p["victims"]) for p in data["preemptions"]] == [
        ("default/high", "n3", ["default/plain"])
    ]
    placements = {p["pod"]: p for p in data["placements"]}
    assert placements["default/high"]["status"] == "Scheduled" and placements["default/high"]["node"] == "n3"
    for name in ("g-0", "g-1"):
        assert placements[f"default/{name}"]["status"] != "Preempted"


def test_victims_waiting_at_permit_are_reported_as_rejected_in_memory() -> None:
    """executor.go PreemptPod: a victim waiting at Permit is rejected in memory, without a delete
    (its Preempted event says `` (in kube-scheduler memory).``); the scheduler tells the shell which."""
    reported: list[tuple[list[str], list[str]]] = []

    class Observer(SchedulerObserver):
        def preempted(self, preemptor: PodInfo, profile: str, node_name: str, victims: Sequence[PodInfo],
                      cleared: Sequence[PodInfo], by: Preemptor, in_memory: Collection[str] = ()) -> None:
            reported.append((sorted(v.name for v in victims), sorted(v.name for v in victims if v.uid in in_memory)))

    async def run() -> None:
        s = Setup(nodes("n1", "n2"), [member("g-0", "g", "n1"), member("g-1", "g", "n2"), gated("g-2", "g")],
                  [pod_group("g", 3)])
        s.sched.observer = Observer()
        s.schedule_all()
        assert s.waiting() == {"g-0", "g-1"}
        s.cluster.add_pod(PodInfo.from_raw(pod("high", cpu="2", priority=100)))
        s.schedule_all()
        assert reported == [(["g-0", "g-1"], ["g-0", "g-1"])]
        assert not any(p.deleting for p in s.cluster.pods.values())  # nothing was deleted

    asyncio.run(run())
