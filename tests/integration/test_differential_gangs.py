"""Gangs on the real control plane (issue 15): kubesched's Coscheduling against scheduler-plugins'
own (the real plugin, built from its Go module as ``kube-scheduler-plugins``), the two-gang
starvation case live, and PodGroup Events and status as a user sees them through the apiserver.

* Many gangs competing for a cluster that fits only some of them, the same input for both
  schedulers one after the other: every gang kubesched binds is complete — from a watch of the
  binds, not only at the end — no node is ever over-committed, and kubesched completes at least as
  many gangs as scheduler-plugins' Coscheduling.
* A gang that can never fit (5 × 2 CPU on two 4-CPU nodes) and a small one (3 × 1 CPU), created in
  both orders, podGroupBackoffSeconds 0, 3 and 10: the small gang is bound, the big one stays
  pending with a gang-level reason in a FailedScheduling Event on its PodGroup.
* A finished gang: its PodGroup reports Finished with every member succeeded, and keeps counting
  them after the pods are deleted (as scheduler-plugins' PodGroup controller leaves a finished group).
* Members that finished before kubesched started are counted (it lists unfinished pods only, as
  kube-scheduler, and the finished ones for the plugins that count them); a finished member of a
  gang not yet Finished is no longer counted once deleted.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ApiError, ControlPlane
from kubesched.testing.controlplane.scheduler_plugins import install_pod_group_crd, start_coscheduling_scheduler

from .test_live_plugins import PG_PATH, write_profile
from .test_live_scheduler import InProcess, assert_no_overcommit, pods_in

pytestmark = pytest.mark.integration

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PERMIT_SECONDS = 5
COSCHEDULING = {
    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
    "preFilter": {"enabled": [{"name": "Coscheduling"}]},
    "postFilter": {"enabled": [{"name": "Coscheduling"}]},
    "permit": {"enabled": [{"name": "Coscheduling"}]},
    "reserve": {"enabled": [{"name": "Coscheduling"}]},
}
#: (gang, members, cpu per member) in creation order: 52 CPU asked of a 16-CPU cluster.
GANGS = [("g0", 6, "1"), ("g1", 5, "2"), ("g2", 4, "1"), ("g3", 3, "2"), ("g4", 7, "1"), ("g5", 2, "2"),
         ("g6", 5, "1"), ("g7", 4, "2"), ("g8", 3, "1")]


def _pod_group(cp: ControlPlane, ns: str, name: str, min_member: int) -> None:
    cp.api("POST", PG_PATH.format(ns=ns), {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member},
    })


def _member(cp: ControlPlane, ns: str, name: str, gang: str, cpu: str, scheduler: str,
            selector: dict[str, str], **kw: Any) -> None:
    cp.create_pod(name, ns, scheduler_name=scheduler, requests={"cpu": cpu}, labels={GROUP_LABEL: gang},
                  node_selector=selector, **kw)


class BindWatch:
    """Every bind in a namespace, from a watch (``pod → node`` in the order seen)."""

    def __init__(self, cp: ControlPlane, ns: str) -> None:
        self.cp, self.ns = cp, ns
        self.bound: dict[str, str] = {}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        rv = cp.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()

    def _run(self, rv: str) -> None:
        try:
            while not self._stop.is_set():
                for ev in self.cp.watch(f"/api/v1/namespaces/{self.ns}/pods", timeout=5, resourceVersion=rv):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        raise AssertionError(f"watch error: {obj}")
                    rv = obj["metadata"]["resourceVersion"]
                    node = obj["spec"].get("nodeName")
                    if node and ev["type"] in ("ADDED", "MODIFIED"):
                        self.bound.setdefault(obj["metadata"]["name"], node)
                    if self._stop.is_set():
                        return
        except BaseException as e:
            self.error = e

    def stop(self) -> dict[str, str]:
        self._stop.set()
        self._thread.join(15)
        if self.error is not None:
            raise self.error
        return dict(self.bound)


def _settle(count: Callable[[], int], quiet: float, timeout: float) -> int:
    """Wait until ``count()`` has not changed for ``quiet`` seconds (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def _competing_gangs(cp: ControlPlane, ns: str, scheduler: str, nodes: list[str], selector: dict[str, str],
                     start: Callable[[], Callable[[], None]]) -> dict[str, Any]:
    """The gangs and all their members are created first (members interleaved across gangs, as
    jobs submitted together), then ``start()`` starts the scheduler (it returns its stop): both
    schedulers face the same backlog."""
    for gang, n, _cpu in GANGS:
        _pod_group(cp, ns, gang, n)
    for i in range(max(n for _, n, _ in GANGS)):
        for gang, n, cpu in GANGS:
            if i < n:
                _member(cp, ns, f"{gang}-{i}", gang, cpu, scheduler, selector)
    watch = BindWatch(cp, ns)
    overcommit: list[str] = []
    sampling = threading.Event()

    def sample() -> None:  # no node over-committed at any time, not only at the end
        while not sampling.is_set():
            try:
                assert_no_overcommit(cp, nodes)
            except AssertionError as e:
                overcommit.append(str(e))
            time.sleep(0.3)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stop = start()
    try:
        _settle(lambda: len(watch.bound), quiet=PERMIT_SECONDS + 4, timeout=60)
    finally:
        stop()
        sampling.set()
        sampler.join(5)
        bound = watch.stop()
    sizes = {gang: n for gang, n, _ in GANGS}
    per_gang = {gang: sum(1 for p in bound if p.rsplit("-", 1)[0] == gang) for gang in sizes}
    return {
        "complete": sorted(g for g, k in per_gang.items() if k >= sizes[g]),
        "partial": sorted(g for g, k in per_gang.items() if 0 < k < sizes[g]),
        "bound": len(bound),
        "overcommit": overcommit,
    }


def test_competing_gangs_kubesched_completes_at_least_as_many_as_scheduler_plugins(
    control_plane: ControlPlane, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp = control_plane
    install_pod_group_crd(cp)
    run = f"gangs-{int(time.time() * 1000) % 10**8}"
    selector = {"kubesched.test/group": run}
    nodes = cp.create_nodes(4, prefix=f"{run}-n", cpu="4", memory="16Gi", labels=selector)
    nodes_to_delete += nodes
    args = {"permitWaitingTimeSeconds": PERMIT_SECONDS, "podGroupBackoffSeconds": 1}

    def start_oracle(name: str) -> Callable[[], None]:
        comp = start_coscheduling_scheduler(cp, name, permit_waiting_time_seconds=PERMIT_SECONDS,
                                            pod_group_backoff_seconds=1)
        return lambda: cp.stop_component(comp)

    def start_kubesched(name: str) -> Callable[[], None]:
        cfg = write_profile(tmp_path / "gangs.json", name, COSCHEDULING, [{"name": "Coscheduling", "args": args}])
        sched = InProcess(cfg, cp.kubeconfig).start()

        def stop() -> None:
            assert sched.stop() == 0

        return stop

    outcome: dict[str, dict[str, Any]] = {}
    for who, start in (("scheduler-plugins", start_oracle), ("kubesched", start_kubesched)):
        ns = f"{run}-{who}"
        cp.create_namespace(ns)
        name = f"{who}-{run}"
        started = time.monotonic()
        outcome[who] = _competing_gangs(cp, ns, name, nodes, selector, lambda start=start, name=name: start(name))
        outcome[who]["seconds"] = round(time.monotonic() - started, 1)
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
        cp.wait_for(lambda ns=ns: not pods_in(cp, ns), 60, 0.2, "pods deleted")
    print(f"\n[differential-gangs] scheduler-plugins: {outcome['scheduler-plugins']}"
          f"\n[differential-gangs] kubesched:         {outcome['kubesched']}")
    ours, oracle = outcome["kubesched"], outcome["scheduler-plugins"]
    assert ours["partial"] == [], f"kubesched bound part of a gang: {ours}"
    assert ours["overcommit"] == []
    assert ours["complete"], "kubesched completed no gang"
    assert len(ours["complete"]) >= len(oracle["complete"]), outcome


# Other tests' nodes may share the session's cluster: their "didn't match Pod's node
# affinity/selector" joins the reasons, so only Insufficient cpu is required among them.
BIG_REASON = re.compile(r"^\d/5 members could not be placed: (.+, )?Insufficient cpu(, .+)?$")


def _pod_group_events(cp: ControlPlane, ns: str, group: str) -> list[dict[str, Any]]:
    return [e for e in cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            if e.get("regarding", {}).get("kind") == "PodGroup" and e["regarding"].get("name") == group]


def test_a_gang_that_can_never_fit_does_not_keep_a_small_one_out_live(
    control_plane: ControlPlane, nodes_to_delete: list[str], tmp_path: Path, podgroup_crd: None
) -> None:
    """The issue's two-gang case, against the real apiserver: both creation orders × backoff 0/3/10,
    on the same two 4-CPU nodes one case after another."""
    cp = control_plane
    run = f"two-{int(time.time() * 1000) % 10**8}"
    selector = {"kubesched.test/group": run}
    nodes_to_delete += cp.create_nodes(2, prefix=f"{run}-n", cpu="4", memory="16Gi", labels=selector)
    for backoff in (0, 3, 10):
        # One kubesched per backoff: QueueSort args must be the same in every profile (as upstream).
        scheduler = f"{run}-b{backoff}"
        cfg = write_profile(tmp_path / f"two-{backoff}.json", scheduler, COSCHEDULING, [
            {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": backoff}}])
        sched = InProcess(cfg, cp.kubeconfig).start()
        try:
            for order in (("big", "small"), ("small", "big")):
                _two_gangs(cp, f"{run}-b{backoff}-{order[0]}", scheduler, order, selector,
                           f"backoff {backoff}, {order[0]} first")
        finally:
            assert sched.stop() == 0


def _two_gangs(cp: ControlPlane, ns: str, scheduler: str, order: tuple[str, str], selector: dict[str, str],
               case: str) -> None:
    cp.create_namespace(ns)
    size = {"big": (5, "2"), "small": (3, "1")}
    for g in order:
        _pod_group(cp, ns, g, size[g][0])
    for g in order:
        for i in range(size[g][0]):
            _member(cp, ns, f"{g}-{i}", g, size[g][1], scheduler, selector)

    def bound(group: str) -> int:
        return sum(1 for p in pods_in(cp, ns)
                   if p["spec"].get("nodeName") and p["metadata"]["name"].startswith(f"{group}-"))

    cp.wait_for(lambda: bound("small") == 3, 30, 0.2, f"{case}: the small gang bound")
    ev = cp.wait_for(
        lambda: next((e for e in _pod_group_events(cp, ns, "big")
                      if e["reason"] == "FailedScheduling" and BIG_REASON.match(e["note"])), None),
        90, 0.3, f"{case}: a gang-level FailedScheduling event on PodGroup big")
    assert ev["type"] == "Warning" and ev["reportingController"] == scheduler, ev
    assert bound("big") == 0, f"{case}: part of the big gang was bound"
    scheduled = [e for e in _pod_group_events(cp, ns, "small") if e["reason"] == "Scheduled"]
    assert scheduled and scheduled[0]["note"] == "minMember 3 reached: 3 member(s) placed", scheduled
    for p in pods_in(cp, ns):
        cp.delete_pod(p["metadata"]["name"], ns, grace_period=0)
    cp.wait_for(lambda: not pods_in(cp, ns), 60, 0.2, "pods deleted")



def _job_members(cp: ControlPlane, ns: str, group: str, scheduler_name: str, **placement: Any) -> None:
    """Two members of PodGroup ``group`` (pods ``group-0``, ``group-1``, 1 CPU each), owned by a Job:
    KWOK's pod-complete stage moves Running pods of Jobs to Succeeded. A real, suspended Job, so the
    garbage collector keeps its pods and the Job controller adds none. ``placement``: pod_manifest's
    ``node_name`` or ``node_selector``."""
    job = cp.api("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": group},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}},
    })
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": group, "uid": job["metadata"]["uid"]}]
    for i in range(2):
        pod = cp.pod_manifest(f"{group}-{i}", ns, scheduler_name=scheduler_name, requests={"cpu": "1"},
                              labels={GROUP_LABEL: group}, **placement)
        pod["metadata"]["ownerReferences"] = owner
        cp.api("POST", f"/api/v1/namespaces/{ns}/pods", pod)


def _finishing_gang(cp: ControlPlane, ns: str, nodes_to_delete: list[str], tmp_path: Path, group: str,
                    min_member: int) -> Path:
    """PodGroup ``group`` (``min_member``) and two Job members placed by hand on a node of their own,
    so they run and finish whether or not kubesched runs; the Coscheduling profile's file."""
    name = f"{group}-{ns}"
    (node_name,) = cp.create_nodes(1, prefix=f"{ns}-n", cpu="4", memory="16Gi", labels={"kubesched.test/group": ns})
    nodes_to_delete.append(node_name)
    cfg = write_profile(tmp_path / f"{group}.json", name, COSCHEDULING, [])
    _pod_group(cp, ns, group, min_member)
    _job_members(cp, ns, group, name, node_name=node_name)
    return cfg


def _group_status(cp: ControlPlane, ns: str, group: str) -> dict[str, Any]:
    return dict(cp.get(f"{PG_PATH.format(ns=ns)}/{group}").get("status") or {})


def test_members_that_finished_before_the_scheduler_started_are_counted(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, podgroup_crd: None
) -> None:
    # kubesched run lists only unfinished pods (kube-scheduler's selector); Coscheduling counts
    # finished members, so a finished-pods informer lists those that finished before the start.
    cp, ns = control_plane, cp_namespace
    cfg = _finishing_gang(cp, ns, nodes_to_delete, tmp_path, "done", 2)
    # They finish before any kubesched runs.
    cp.wait_for(lambda: all((p.get("status") or {}).get("phase") == "Succeeded" for p in pods_in(cp, ns))
                and len(pods_in(cp, ns)) == 2, 60, 0.3, "pods Succeeded")
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        def status() -> dict[str, Any]:
            return _group_status(cp, ns, "done")

        cp.wait_for(lambda: status().get("succeeded") == 2, 60, 0.3, "PodGroup succeeded 2")
        assert status()["phase"] == "Finished", status()
    finally:
        assert sched.stop() == 0
        for i in range(2):
            with contextlib.suppress(ApiError):
                cp.delete_pod(f"done-{i}", ns, grace_period=0)


def test_a_deleted_member_of_an_unfinished_gang_is_no_longer_counted(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, podgroup_crd: None
) -> None:
    # scheduler-plugins' PodGroup controller counts the group's pods that exist, until the group is
    # Finished or Failed: two of three members succeeded, then one is deleted (a Job's cleanup).
    cp, ns = control_plane, cp_namespace
    cfg = _finishing_gang(cp, ns, nodes_to_delete, tmp_path, "three", 3)
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        def status() -> dict[str, Any]:
            return _group_status(cp, ns, "three")

        cp.wait_for(lambda: status().get("succeeded") == 2, 60, 0.3, "PodGroup succeeded 2")
        assert status().get("phase") != "Finished", status()
        cp.delete_pod("three-0", ns, grace_period=0)
        cp.wait_for(lambda: status().get("succeeded") == 1, 30, 0.3, "PodGroup succeeded 1")
    finally:
        assert sched.stop() == 0
        with contextlib.suppress(ApiError):
            cp.delete_pod("three-1", ns, grace_period=0)


def test_finished_gang_keeps_its_succeeded_count_after_its_pods_are_deleted(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, podgroup_crd: None
) -> None:
    cp, ns = control_plane, cp_namespace
    name = f"fin-{ns}"
    selector = {"kubesched.test/group": ns}
    nodes_to_delete += cp.create_nodes(2, prefix=f"{ns}-n", cpu="4", memory="16Gi", labels=selector)
    cfg = write_profile(tmp_path / "fin.json", name, COSCHEDULING, [])
    _pod_group(cp, ns, "job", 2)
    sched = InProcess(cfg, cp.kubeconfig).start()
    try:
        _job_members(cp, ns, "job", name, node_selector=selector)

        def status() -> dict[str, Any]:
            return _group_status(cp, ns, "job")

        cp.wait_for(lambda: status().get("phase") == "Finished", 60, 0.3, "PodGroup Finished")
        assert status()["succeeded"] == 2 and status()["occupiedBy"] == f"{ns}/job", status()
        for i in range(2):
            with contextlib.suppress(ApiError):
                cp.delete_pod(f"job-{i}", ns, grace_period=0)
        cp.wait_for(lambda: not pods_in(cp, ns), 30, 0.2, "pods deleted")
        time.sleep(5)  # two status rounds of the leader
        got = status()
        assert got["phase"] == "Finished" and got["succeeded"] == 2, got
    finally:
        assert sched.stop() == 0
