"""Chaos scenarios on pods the scheduler has assumed but not bound yet.

* A node is deleted while a gang's members are assumed on it and wait at Permit (Coscheduling):
  none may be bound to the deleted node; the whole gang binds elsewhere once it is complete.
* A member waiting at Permit is deleted: its resources must be freed (the node has room for the
  gang only then). Pods are deleted while their bind is in flight (a TCP proxy delays kubesched's
  requests): their resources must be freed too, so new pods fill the node.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import yaml

from bench import common
from bench.chaos import FAST_LEASE, Ctx, _result, _wait
from bench.chaos_cluster import (
    GROUP_LABEL,
    Replicas,
    create_nodes,
    delete_group,
    identities,
    pod_bodies,
    post_all,
    write_config,
)
from bench.chaos_watch import InvariantWatch, read_audit
from kubesched.testing.controlplane import ApiError, ControlPlane
from kubesched.testing.tcpproxy import TcpProxy, retarget_kubeconfig

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


def _install_podgroup_crd(cp: ControlPlane) -> None:
    crd = yaml.safe_load((common.ROOT / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
    with contextlib.suppress(ApiError):
        cp.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    cp.wait_for(lambda: cp.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups"), 60, 0.5, "PodGroup CRD served")


def _gang_config(ctx: Ctx, ns: str, sched: str) -> Path:
    doc = yaml.safe_load((common.ROOT / "examples" / "coscheduling.yaml").read_text())
    profile = {**doc["profiles"][0], "schedulerName": sched}
    # A gang rejected at Permit (here: its node deleted, or members deleted) backs off for
    # podGroupBackoffSeconds and then waits for a cluster event or the 5-minute unschedulable
    # flush, upstream as here: without the backoff the retry follows the next event.
    for pc in profile["pluginConfig"]:
        if pc["name"] == "Coscheduling":
            pc["args"]["podGroupBackoffSeconds"] = 0
    return write_config(ctx.workdir / f"{ns}.json", sched, ns, lease=FAST_LEASE, extra={"profiles": [profile]})


def _gang(cp: ControlPlane, ns: str, name: str, min_member: int) -> None:
    cp.api("POST", PODGROUPS.format(ns=ns), {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                             "metadata": {"name": name, "namespace": ns},
                                             "spec": {"minMember": min_member}})


def _members(cp: ControlPlane, ns: str, sched: str, gang: str, names: list[str], *, gated: bool = False) -> None:
    reqs = pod_bodies(ns, ns, names, sched, cpu="1", labels={POD_GROUP_LABEL: gang})
    for _, body in reqs:
        if gated:  # counts as a member (Coscheduling's PreFilter) but is not scheduled until ungated
            body["spec"]["schedulingGates"] = [{"name": "chaos.kubesched.io/hold"}]
    post_all(cp, reqs)


def _ungate(cp: ControlPlane, ns: str, name: str) -> None:
    cp.api("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", {"spec": {"schedulingGates": []}})


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for lbls, value in re.findall(rf"^{name}\{{([^}}]*)\}} ([0-9.e+]+)$", text, re.M):
        if all(f'{k}="{v}"' in lbls for k, v in labels.items()):
            total += float(value)
    return total


def _waiting(cp: ControlPlane, ns: str, sched: str, reps: Replicas, watch: InvariantWatch, names: list[str],
             gated: str) -> None:
    """A gang of 3: members ``names`` and ``gated``, the last gated (it counts as a member but is
    never scheduled, so it never fails, which would make Coscheduling reject the waiting ones).
    Returns once the others are assumed and wait at Permit for the gang: kubesched has seen them,
    none is queued (active, backoff or unschedulable), only the gated one is, none is bound."""
    _wait(lambda: bool(reps.running) and reps.running[0].get("/readyz")[0] == 200, 60, "kubesched ready")
    replica = reps.running[0]
    seen = _metric(replica.get("/metrics")[1], "kubesched_informer_events_total", resource="pods")
    _gang(cp, ns, "g", 3)
    _members(cp, ns, sched, "g", [gated], gated=True)
    _members(cp, ns, sched, "g", names)

    def waiting() -> bool:
        text = replica.get("/metrics")[1]
        queued = sum(_metric(text, "scheduler_pending_pods", queue=q) for q in ("active", "backoff", "unschedulable"))
        return (_metric(text, "kubesched_informer_events_total", resource="pods") >= seen + len(names) + 1
                and queued == 0 and _metric(text, "scheduler_pending_pods", queue="gated") == 1 and watch.bound == 0)

    try:
        _wait(waiting, 60, "members assumed, waiting at Permit")
    except TimeoutError as e:
        notes = [ev.get("note", "") for ev in cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]]
        raise TimeoutError(f"{e}; events: {notes[:3]}") from None


def _notes(cp: ControlPlane, ns: str) -> list[str]:
    """The FailedScheduling messages, oldest first (what a user would read with kubectl)."""
    evs = cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
    evs.sort(key=lambda e: e.get("eventTime") or "")
    failed = [e for e in evs if e.get("reason") == "FailedScheduling"]
    return [f"{e['regarding']['name']}: {e.get('note', '')[:160]}" for e in failed]


def _node_of(cp: ControlPlane, ns: str, name: str) -> str:
    return str(cp.get_pod(name, ns)["spec"].get("nodeName") or "")


def node_deleted_under_permit(ctx: Ctx) -> dict[str, Any]:
    cp, started = ctx.cp, time.monotonic()
    _install_podgroup_crd(cp)
    ns = ctx.group("assumed-node")
    sched = f"kubesched-{ns}"
    [doomed] = create_nodes(cp, ns, 1, cpu="4", memory="16Gi", prefix=f"{ns}-doomed-")
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    reps = Replicas(cp, _gang_config(ctx, ns, sched), 1, ctx.workdir, identities(cp), prefix=f"{ns}-").start()
    figures: dict[str, Any] = {}
    try:
        _waiting(cp, ns, sched, reps, watch, ["m0", "m1"], "m2")
        figures["bound_before_delete"] = watch.bound
        cp.api("DELETE", f"/api/v1/nodes/{doomed}")
        [spare] = create_nodes(cp, ns, 1, cpu="8", memory="16Gi", prefix=f"{ns}-spare-")
        _ungate(cp, ns, "m2")
        figures["gang_bound"] = watch.wait_bound(3, 90)
        figures["nodes"] = sorted({_node_of(cp, ns, m) for m in ("m0", "m1", "m2")})
        figures["none_on_deleted_node"] = doomed not in figures["nodes"]
        if not figures["gang_bound"]:
            figures["failed_scheduling"] = _notes(cp, ns)[:8]
    finally:
        reps.stop()
    report = watch.report()
    figures["spare_node"] = spare
    delete_group(cp, ns)
    return _result("node-deleted-under-permit", "a gang of 3 (Coscheduling), members waiting at Permit",
                   "their node deleted; a new node added; the 3rd member ungated", started, figures, report)


def pods_deleted_at_permit_and_bind(ctx: Ctx, latency: float = 1.0) -> dict[str, Any]:
    cp, started = ctx.cp, time.monotonic()
    _install_podgroup_crd(cp)
    ns = ctx.group("assumed-pod")
    sched = f"kubesched-{ns}"
    [node] = create_nodes(cp, ns, 1, cpu="3", memory="16Gi", prefix=f"{ns}-n")
    watch = InvariantWatch(cp, ns, f"{GROUP_LABEL}={ns}").start()
    proxy = TcpProxy("127.0.0.1", cp.apiserver_port).start()
    direct = identities(cp)

    def via_proxy(identity: str) -> Path:
        return retarget_kubeconfig(direct(identity), proxy.address, ctx.workdir / f"{identity}-proxied.kubeconfig")

    reps = Replicas(cp, _gang_config(ctx, ns, sched), 1, ctx.workdir, via_proxy, prefix=f"{ns}-").start()
    figures: dict[str, Any] = {}
    try:
        # 1. At Permit: w0 and w1 wait with 1 cpu each assumed on the node's 3; both are deleted,
        #    w2 is ungated and w3, w4 join. The gang {w2, w3, w4} needs all 3 cpu: it fits
        #    only if the deleted members' assumed cpu was freed.
        _waiting(cp, ns, sched, reps, watch, ["w0", "w1"], "w2")
        figures["bound_while_waiting"] = watch.bound
        cp.delete_pod("w0", ns)
        cp.delete_pod("w1", ns)
        time.sleep(1.0)
        _members(cp, ns, sched, "g", ["w3", "w4"])
        _ungate(cp, ns, "w2")
        figures["gang_bound_after_waiting_members_were_deleted"] = watch.wait_bound(3, 90)
        if not figures["gang_bound_after_waiting_members_were_deleted"]:
            figures["failed_scheduling"] = _notes(cp, ns)[:8]
        for m in ("w2", "w3", "w4"):
            cp.delete_pod(m, ns)
        _wait(lambda: watch.bound == 0, 60, "gang deleted")

        # 2. In Bind: every request of kubesched takes `latency` more each way; the pods filling the
        #    node are deleted while their binds are on the way, then as many new pods must fit again.
        proxy.latency = latency
        post_all(cp, pod_bodies(ns, ns, [f"b{i}" for i in range(3)], sched, cpu="1"))
        time.sleep(latency * 2.5)  # seen by the informer (+latency), scheduled, binds sent (+latency to arrive)
        for i in range(3):
            cp.delete_pod(f"b{i}", ns)
        proxy.latency = 0.0
        post_all(cp, pod_bodies(ns, ns, [f"c{i}" for i in range(3)], sched, cpu="1"))
        figures["node_refilled_after_deletes_in_bind"] = watch.wait_bound(3, 90)
        bindings = read_audit(ctx.audit, ns)
        figures["binds_answered_404"] = sum(1 for b in bindings if b.pod.startswith("b") and b.code == 404)
        figures["binds_landed_before_delete"] = sum(1 for b in bindings if b.pod.startswith("b") and b.code < 300)
    finally:
        reps.stop()
        proxy.stop()
    report = watch.report()
    figures["node"] = node
    delete_group(cp, ns)
    return _result("pods-deleted-at-permit-and-bind",
                   f"a gang of 3 at Permit; 3 pods filling a node, kubesched's requests delayed {latency:g}s",
                   "a waiting member deleted; pods deleted while their binds were in flight", started, figures, report)
