"""The local control plane itself: real kube-scheduler + KWOK, version pin, watches, 410 Gone."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing import controlplane
from kubesched.testing.controlplane import ApiError, ControlPlane

pytestmark = pytest.mark.integration


def test_real_kube_scheduler_binds_pod_and_kwok_runs_it(
    control_plane: ControlPlane, cp_namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    group = {"kubesched.test/group": f"sched-{cp_namespace}"}
    nodes = cp.create_nodes(3, prefix=f"{cp_namespace}-node-", cpu="4", memory="8Gi", labels=group)
    assert set(nodes) <= cp.ready_nodes()

    cp.create_pod("web", cp_namespace, requests={"cpu": "500m", "memory": "256Mi"}, node_selector=group)
    assert not cp.get_pod("web", cp_namespace)["spec"].get("nodeName")  # nobody schedules it yet

    # A minimal KubeSchedulerConfiguration v1, as a user would write it.
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
        "clientConnection:\n"
        f"  kubeconfig: {cp.scheduler_kubeconfig}\n"
    )
    sched = cp.start_kube_scheduler(config)
    try:
        pod = cp.wait_pod("web", cp_namespace, phase="Running", timeout=60)
    finally:
        cp.stop_component(sched)
    assert pod["spec"]["nodeName"] in nodes
    assert pod["status"]["phase"] == "Running"
    ready = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
    assert ready.get("PodScheduled") == "True"
    assert ready.get("Ready") == "True"
    # The binding was done by the scheduler's own identity, through RBAC (no system:masters).
    events = cp.get(f"/api/v1/namespaces/{cp_namespace}/events")["items"]
    assert any(e.get("reason") == "Scheduled" for e in events), events


def test_version_is_the_pinned_release(control_plane: ControlPlane) -> None:
    pin = controlplane.read_versions()
    v = control_plane.version()
    assert v["gitVersion"] == pin["K8S_VERSION"]
    major, minor, _ = pin["K8S_VERSION"].lstrip("v").split(".")
    assert (v["major"], v["minor"]) == (major, minor)
    assert v["gitTreeState"] == "clean"
    for binary in ("kube-apiserver", "kube-scheduler"):
        out = subprocess.run(
            [str(control_plane.bin_dir / binary), "--version"], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == f"Kubernetes {pin['K8S_VERSION']}", out
    out = subprocess.run(
        [str(control_plane.bin_dir / "etcd"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert f"etcd Version: {pin['ETCD_VERSION'].lstrip('v')}" in out, out


def test_watch_delivers_added_modified_deleted(control_plane: ControlPlane, cp_namespace: str) -> None:
    cp = control_plane
    path = f"/api/v1/namespaces/{cp_namespace}/pods"
    rv = cp.get(path)["metadata"]["resourceVersion"]
    events: queue.Queue[dict[str, Any] | BaseException] = queue.Queue()

    def consume() -> None:
        try:
            for ev in cp.watch(path, timeout=30, resourceVersion=rv, fieldSelector="metadata.name=w"):
                events.put(ev)
                if ev["type"] in ("DELETED", "ERROR"):
                    return
        except BaseException as e:
            events.put(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    cp.create_pod("w", cp_namespace, scheduler_name="nobody-schedules-this")
    cp.api("PATCH", f"{path}/w", {"metadata": {"labels": {"step": "modified"}}})
    cp.delete_pod("w", cp_namespace, grace_period=0)  # unbound pod: deleted at once

    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not seen or seen[-1]["type"] not in ("DELETED", "ERROR"):
        item = events.get(timeout=max(0.1, deadline - time.monotonic()))
        if isinstance(item, BaseException):
            raise item
        seen.append(item)
    t.join(5)
    types = [e["type"] for e in seen]
    assert types[0] == "ADDED" and types[-1] == "DELETED", types
    assert "MODIFIED" in types, types
    modified = [e for e in seen if e["type"] == "MODIFIED"]
    assert any(e["object"]["metadata"].get("labels", {}).get("step") == "modified" for e in modified)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_stale_resource_version_after_compaction_is_410_gone(control_plane: ControlPlane, cp_namespace: str) -> None:
    """After etcd compaction, reading at a compacted resourceVersion fails with 410 Gone.

    How a real cluster behaves, and why the test is shaped this way:
      * kube-apiserver serves most reads and watches from its watch cache, not from etcd. A watch
        from an old RV is answered from the cache's event history for as long as the cache still
        holds that RV (75s+ and up to thousands of events), whether or not etcd was compacted.
        Watch 410s in real clusters come from falling out of that window (see the restart test
        below), not from compaction itself, so asserting "watch after compaction → 410" would be
        testing something a real apiserver does not do.
      * What compaction does break is a read that must see the store *at* an old revision: a
        list with ``resourceVersionMatch=Exact`` (or the legacy ``limit`` + ``resourceVersion``)
        and a paginated list continued with a ``continue`` token. The apiserver serves those
        from its cache snapshots while it can and from etcd otherwise; once it learns the
        compacted revision it drops older snapshots and etcd answers "required revision has been
        compacted", which the apiserver turns into 410 Gone (reason Expired).
      * The apiserver learns the compacted revision from ``compact_rev_key`` (its own compactor
        writes it every --etcd-compaction-interval=5m); ``ControlPlane.compact_etcd`` follows the same
        protocol, and the cacher polls it every 15s, hence the wait below.
    No apiserver flag is changed for this (the watch cache stays on, as in production).
    """
    cp = control_plane
    path = f"/api/v1/namespaces/{cp_namespace}/configmaps"
    for i in range(3):
        cp.api("POST", path, {"metadata": {"name": f"cm-{i}"}, "data": {"v": "0"}})
    first_page = cp.get(path, limit=1)
    token = first_page["metadata"]["continue"]
    old_rv = first_page["metadata"]["resourceVersion"]
    assert token
    # The old RV still works before compaction.
    exact = cp.get(path, resourceVersion=old_rv, resourceVersionMatch="Exact")["items"]
    # (kube-controller-manager also publishes kube-root-ca.crt into every namespace)
    assert sorted(c["metadata"]["name"] for c in exact if c["metadata"]["name"].startswith("cm-")) == [
        "cm-0", "cm-1", "cm-2"]
    for i in range(5):  # advance the store past old_rv
        cp.api("PATCH", f"{path}/cm-0", {"data": {"v": str(i + 1)}})

    compacted = cp.compact_etcd()
    assert compacted > int(old_rv)

    def exact_list_gone() -> ApiError | None:
        try:
            cp.get(path, resourceVersion=old_rv, resourceVersionMatch="Exact")
        except ApiError as e:
            if e.status == 410:
                return e
            raise
        return None

    err = cp.wait_for(exact_list_gone, timeout=60, interval=0.5, message="410 for an exact list at a compacted RV")
    assert err.reason == "Expired", err.body

    with pytest.raises(ApiError) as cont:
        cp.get(path, limit=1, **{"continue": token})
    assert cont.value.status == 410, cont.value.body
    assert cont.value.reason == "Expired"

    # Current reads still work, and a relist gives the new RV to resume from.
    fresh = cp.get(path)
    assert int(fresh["metadata"]["resourceVersion"]) >= compacted
    assert sum(1 for c in fresh["items"] if c["metadata"]["name"].startswith("cm-")) == 3


def test_watch_from_rv_older_than_cache_after_apiserver_restart_gets_410(
    control_plane: ControlPlane, cp_namespace: str
) -> None:
    """A restarted apiserver's watch cache starts at the RV it listed on startup; a client that
    resumes a watch from an older RV gets an ERROR event with a 410 Status (reason Expired) and has
    to relist: the classic reflector path. Also checks that restart_apiserver() keeps the data."""
    cp = control_plane
    path = f"/api/v1/namespaces/{cp_namespace}/configmaps"
    cp.api("POST", path, {"metadata": {"name": "before"}})
    old_rv = cp.get(path)["metadata"]["resourceVersion"]
    for i in range(3):
        cp.api("PATCH", f"{path}/before", {"data": {"i": str(i)}})

    cp.compact_etcd()  # so that etcd cannot serve the old RV either
    cp.restart_apiserver()
    names = [c["metadata"]["name"] for c in cp.get(path)["items"]]
    assert [n for n in names if n != "kube-root-ca.crt"] == ["before"]  # the latter: kube-controller-manager

    def first_event() -> dict[str, Any]:
        for ev in cp.watch(path, timeout=5, resourceVersion=old_rv):
            return ev
        return {}

    ev = cp.wait_for(first_event, timeout=30, interval=0.5, message="a watch event")
    assert ev["type"] == "ERROR", ev
    assert ev["object"]["code"] == 410, ev
    assert ev["object"]["reason"] == "Expired", ev
