"""SchedulingGates and the PreEnqueue extension point: the plugin (mirrors upstream
schedulinggates/scheduling_gates_test.go), the queue running PreEnqueue where upstream's does
(backend/queue/scheduling_queue.go runPreEnqueuePlugins), an out-of-tree gate, and gated pods in
the simulator's report."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from kubesched.config.load import load_config
from kubesched.framework import (
    NODE,
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    PodInfo,
    PreEnqueuePlugin,
    Status,
)
from kubesched.framework.clock import FakeClock
from kubesched.plugins.builtin import builtin_registry
from kubesched.plugins.schedulinggates import SchedulingGates
from kubesched.scheduler import Scheduler
from kubesched.simulate.engine.records import GATED, SCHEDULED
from kubesched.simulate.engine.runner import Simulation
from kubesched.simulate.inputs.dump import ClusterInput
from kubesched.simulate.report.json_doc import result_to_json
from kubesched.testing import framework_for, new_plugin, node, pod, pod_info


def gated(name: str, *gates: str, **kw: Any) -> dict[str, Any]:
    return pod(name, cpu="100m", schedulingGates=[{"name": g} for g in gates], **kw)


def ungated(raw: dict[str, Any]) -> PodInfo:
    spec = {k: v for k, v in raw["spec"].items() if k != "schedulingGates"}
    return PodInfo.from_raw({**raw, "spec": spec})


# -- the plugin (scheduling_gates_test.go TestPreEnqueue) ---------------------------------------


def test_pod_without_gates_passes() -> None:
    assert new_plugin(SchedulingGates).pre_enqueue(pod_info("p")) is SUCCESS


def test_pod_with_gates_waits_with_upstreams_message() -> None:
    st = new_plugin(SchedulingGates).pre_enqueue(PodInfo.from_raw(gated("p", "foo", "bar")))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message == "waiting for scheduling gates: [foo bar]"


def test_it_is_in_the_default_profile_at_pre_enqueue() -> None:
    profile = load_config(None, builtin_registry()).profiles[0]
    # As upstream's v1.37 profile: DefaultPreemption holds back a pod whose preemption is under way.
    assert profile.plugins["preEnqueue"] == ["SchedulingGates", "DynamicResources", "DefaultPreemption"]


# -- the scheduler: gated pods are never attempted ------------------------------------------------


def default_scheduler(*plugins: type[PreEnqueuePlugin]) -> tuple[Scheduler, FakeClock]:
    registry = builtin_registry()
    for cls in plugins:
        registry.register(cls)
    stanza = {"preEnqueue": {"enabled": [{"name": cls.name} for cls in plugins]}} if plugins else {}
    config = load_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", "plugins": stanza}],
        },
        registry,
    )
    clock = FakeClock()
    sched = Scheduler.build(config.profiles, registry, clock)
    sched.on_node_add_or_update(node("n1"))
    return sched, clock


def test_a_gated_pod_gets_no_attempt_until_its_last_gate_is_removed() -> None:
    sched, _ = default_scheduler()
    raw = gated("g", "a", "b")
    sched.on_pod_add(PodInfo.from_raw(raw))
    assert sched.queue.counts()["gated"] == 1
    assert not sched.schedule_one(), "nothing active: the gated pod is not popped"
    sched.on_node_add_or_update(node("n2"))  # a cluster event does not release it
    assert not sched.schedule_one()
    one_gate_left = PodInfo.from_raw({**raw, "spec": {**raw["spec"], "schedulingGates": [{"name": "b"}]}})
    sched.on_pod_update(one_gate_left)
    (qpi,) = sched.queue.gated_pods()
    assert qpi.gating_plugin == "SchedulingGates"
    assert qpi.gating_status is not None and qpi.gating_status.message == "waiting for scheduling gates: [b]"
    assert qpi.attempts == 0
    sched.on_pod_update(ungated(raw))
    assert sched.queue.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}
    qpi = sched.queue.pop()
    assert qpi is not None and qpi.pod.name == "g" and qpi.attempts == 1 and not qpi.gated


def test_disabling_scheduling_gates_lets_gated_pods_through() -> None:
    registry = builtin_registry()
    config = load_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "SchedulingGates"}]}}}],
        },
        registry,
    )
    assert config.profiles[0].plugins["preEnqueue"] == ["DynamicResources", "DefaultPreemption"]
    sched = Scheduler.build(config.profiles, registry, FakeClock())
    sched.on_pod_add(PodInfo.from_raw(gated("g", "a")))
    assert sched.queue.counts()["active"] == 1  # upstream too: the apiserver then refuses the bind


# -- an out-of-tree PreEnqueue plugin --------------------------------------------------------------


class QuotaGate(PreEnqueuePlugin):
    """Holds pods of a team until the team's budget label appears on some node: a gate lifted by a
    cluster event it registers, not by the pod's own update."""

    name: ClassVar[str] = "QuotaGate"

    def pre_enqueue(self, pod: PodInfo) -> Status:
        team = pod.labels.get("team")
        if team is None:
            return SUCCESS
        table = self.handle.table
        if any(table.labels[r].get(f"budget/{team}") for r in table.alive_rows()):
            return SUCCESS
        return Status.unschedulable(f"team {team} has no budget yet")

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, "NodeAdd|UpdateNodeLabel"),)


def test_framework_for_runs_an_out_of_tree_pre_enqueue_plugin() -> None:
    fwk = framework_for([QuotaGate])
    assert [p.name for p in fwk.pre_enqueue] == ["QuotaGate"]
    st = fwk.run_pre_enqueue(pod_info("p", labels={"team": "red"}))
    assert st.code == Code.UNSCHEDULABLE and st.plugin == "QuotaGate"
    assert st.message == "team red has no budget yet"
    assert fwk.run_pre_enqueue(pod_info("q")).is_success


def test_an_out_of_tree_gate_is_lifted_by_the_event_it_registered() -> None:
    sched, _ = default_scheduler(QuotaGate)
    sched.on_pod_add(pod_info("p", cpu="100m", labels={"team": "red"}))
    (qpi,) = sched.queue.gated_pods()
    assert qpi.gating_plugin == "QuotaGate"
    # An event the gate did not register leaves the pod gated (and is not even looked at).
    sched.on_node_add_or_update(node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]))
    assert sched.queue.counts()["gated"] == 1
    sched.on_node_add_or_update(node("n1", labels={"budget/red": "10"}))
    assert sched.queue.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}


def test_a_raising_gate_holds_the_pod_with_an_error_naming_it() -> None:
    class Broken(PreEnqueuePlugin):
        name: ClassVar[str] = "Broken"

        def pre_enqueue(self, pod: PodInfo) -> Status:
            raise KeyError("budget")

    fwk = framework_for([Broken])
    st = fwk.run_pre_enqueue(pod_info("p"))
    assert st.code == Code.ERROR and st.plugin == "Broken" and "KeyError" in st.message


def test_gated_pods_are_checked_again_at_the_unschedulable_flush() -> None:
    class Clock(PreEnqueuePlugin):
        """Opens after 400 s of the scheduler's clock: only a timed re-check can lift it."""

        name: ClassVar[str] = "Clock"

        def pre_enqueue(self, pod: PodInfo) -> Status:
            return SUCCESS if self.handle.clock.now() >= 400 else Status.unschedulable("too early")

        def events_to_register(self) -> Sequence[ClusterEvent]:
            return ()

    sched, clock = default_scheduler(Clock)
    sched.on_pod_add(pod_info("p", cpu="100m"))
    clock.set(299)
    sched.tick()
    assert sched.queue.counts()["gated"] == 1
    clock.set(300)
    sched.tick()  # re-checked (5 minutes), still too early: the next check is 5 minutes later
    assert sched.queue.counts()["gated"] == 1
    clock.set(599)
    sched.tick()
    assert sched.queue.counts()["gated"] == 1
    clock.set(600)
    sched.tick()
    assert sched.queue.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}


# -- the simulator ---------------------------------------------------------------------------------


def test_simulator_reports_gated_pods_as_gated_not_unschedulable() -> None:
    config = load_config(None, builtin_registry())
    cluster = ClusterInput(
        nodes=[node("n1")], pods=[pod("a", cpu="100m"), gated("g", "example.com/wait")], objects={}, skipped={},
        source="test",
    )
    result = asyncio.run(Simulation(config, builtin_registry(), cluster, seed=0).run())
    by_name = {rec.key: rec for rec in result.records.values()}
    assert by_name["default/a"].status == SCHEDULED
    g = by_name["default/g"]
    assert (g.status, g.message, g.attempts) == (GATED, "waiting for scheduling gates: [example.com/wait]", 0)
    summary = result_to_json(result)["summary"]
    assert (summary["gated"], summary["unschedulable"], summary["pending"]) == (1, 0, 0)


def test_pre_enqueue_runs_again_when_a_rejected_pod_goes_back_to_the_queue() -> None:
    class Switch(PreEnqueuePlugin):
        """Open until closed: shows where the queue checks (upstream moveToActiveQ/moveToBackoffQ)."""

        name: ClassVar[str] = "Switch"
        open = True

        def pre_enqueue(self, pod: PodInfo) -> Status:
            return SUCCESS if Switch.open else Status.unschedulable("closed")

    sched, clock = default_scheduler(Switch)
    p = pod_info("p", cpu="100m")
    sched.on_pod_add(p)
    qpi = sched.queue.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    sched.queue.add_unschedulable(qpi, sched.queue.scheduling_cycle)
    assert sched.queue.counts()["unschedulable"] == 1
    Switch.open = False
    clock.advance(30)  # past its backoff
    sched.on_node_add_or_update(node("n2"))  # NodeAdd: NodeResourcesFit's pod is moved ...
    assert sched.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}  # ... into the gate
    sched.queue.activate([p.uid])  # upstream Activate checks PreEnqueue too
    assert sched.queue.counts()["gated"] == 1
    Switch.open = True
    sched.queue.activate([p.uid])
    assert sched.queue.counts()["active"] == 1
