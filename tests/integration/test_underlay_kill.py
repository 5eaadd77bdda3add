"""kill -9 mid-burst loses or duplicates no underlay address (issue 30), on the real control plane.

3 KWOK nodes, one UnderlayIPPool of ``ADDRESSES`` addresses per node, ``PODS`` pods (more than the
pools hold) created at once. The scheduler is killed with SIGKILL as the watch sees the
``KILL_AT``-th bind, started again, and left to finish; then a few bound pods are deleted and the
pending ones must take exactly their addresses. Three of the pods have UnderlayIPClaims pinning
an address (StatefulSet-style fixed IPs): no other pod may ever carry those, and once deleted and
created again they return to them. Twice:

* ``kubesched run`` with UnderlayIP (a subprocess: the restarted one rebuilds the assignments from
  the pods' annotations and the pools' status);
* ``kubesched extender`` serving filter + prioritize + bind behind the real kube-scheduler (QPS 5000),
  killed and restarted on the same port (kube-scheduler's filter calls fail meanwhile, so its pods
  back off and retry).

A watch records every pod event from before the first pod is created, and the whole history is
replayed (``violations``): at no moment do two live pods carry one address, a node carry more
pods than its pool has addresses, a bound pod lack an address or carry one of another node's pool,
or a pod's address change. At the end, each pool's status (written by ``kubesched run``) lists
exactly the bound pods' addresses, and free + active + reserved is the pool's size.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from integration import test_underlay_pools_live as pools_live
from integration.test_extender_burst import BindWatch, _start_scheduler
from integration.test_live_scheduler import Proc, create_pods, make_nodes, pods_in
from kubesched.extender.command import extender_stanza
from kubesched.testing.controlplane import Component, ControlPlane, free_port
from kubesched.testing.kill import Killer

pytestmark = pytest.mark.integration

pools, underlay_crds = pools_live.pools, pools_live.underlay_crds
GROUP_PATH, KEY = pools_live.GROUP_PATH, pools_live.KEY

NODES = 3
ADDRESSES = 12  # per node's pool
PODS = 80
KILL_AT = 6  # SIGKILL as the watch sees this many binds
DELETE_AFTER = 4  # bound pods deleted after the restart: pending ones take their addresses
#: Pods with an UnderlayIPClaim pinning an address of node i's pool (StatefulSet-style fixed IPs).
CLAIMED = {f"p-{i:03d}": (i, f"10.93.{i}.5") for i in range(NODES)}

PROFILE = {
    "multiPoint": {"enabled": [{"name": "UnderlayIP"}]},
    "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "UnderlayIP"}]},
}


def _config(path: Path, scheduler_name: str) -> Path:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "profiles": [{"schedulerName": scheduler_name, "plugins": PROFILE,
                      "pluginConfig": [{"name": "UnderlayIP", "args": {"podSelector": {
                          "matchLabels": {"net": "underlay"}}}}]}],
    }
    path.write_text(json.dumps(doc))
    return path


def _make_pools(cp: ControlPlane, ns: str, nodes: list[str], pools: list[str]) -> dict[str, set[str]]:
    """One pool per node; node → its pool's addresses."""
    pool_of: dict[str, set[str]] = {}
    for i, node in enumerate(nodes):
        addrs = [f"10.93.{i}.{j}" for j in range(1, ADDRESSES + 1)]
        name = f"kill-{ns}-{i}"
        cp.api("POST", f"{GROUP_PATH}/underlayippools", {
            "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": name},
            "spec": {"addresses": addrs, "nodeNames": [node]}})
        pools.append(name)
        pool_of[node] = set(addrs)
    for pod, (i, address) in CLAIMED.items():
        cp.api("POST", f"{GROUP_PATH}/namespaces/{ns}/underlayipclaims", {
            "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPClaim",
            "metadata": {"name": pod, "namespace": ns},
            "spec": {"pool": f"kill-{ns}-{i}", "address": address, "keepDuration": "1h"}})
    return pool_of


PINNED = {address: pod for pod, (_, address) in CLAIMED.items()}


def violations(events: list[tuple[str, dict[str, Any]]], pool_of: dict[str, set[str]]) -> list[str]:
    """Replay every pod event in order; what was ever wrong, at the moment it was."""
    live: dict[str, tuple[str, str]] = {}  # pod name -> (node, address) of bound live pods
    ever: dict[str, str] = {}  # pod uid -> the address it was first seen with
    found: list[str] = []
    for kind, obj in events:
        name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
        node = (obj.get("spec") or {}).get("nodeName") or ""
        address = (obj["metadata"].get("annotations") or {}).get(KEY, "")
        if kind == "DELETED":
            live.pop(name, None)
            continue
        if not node:
            continue
        if not address:
            found.append(f"{name} bound to {node} without an address")
        elif address not in pool_of.get(node, set()):
            found.append(f"{name} on {node} carries {address}, not an address of its node's pool")
        if address in PINNED and PINNED[address] != name:
            found.append(f"{name} carries {address}, pinned by the claim of {PINNED[address]}")
        if ever.setdefault(uid, address) != address:
            found.append(f"{name}'s address changed from {ever[uid]} to {address}")
        live[name] = (node, address)
        holders = [n for n, (_, a) in live.items() if a == address and address]
        if len(holders) > 1:
            found.append(f"{address} held by {sorted(holders)} at once")
        on_node = sum(1 for n_, _ in live.values() if n_ == node)
        if on_node > len(pool_of.get(node, ())):
            found.append(f"{on_node} pods on {node}, its pool has {len(pool_of.get(node, ()))} addresses")
    return found


def _bound(cp: ControlPlane, ns: str) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (p["spec"]["nodeName"], (p["metadata"].get("annotations") or {}).get(KEY, ""))
            for p in pods_in(cp, ns) if p["spec"].get("nodeName")}


def _finish(cp: ControlPlane, ns: str, watch: BindWatch, pool_of: dict[str, set[str]], scheduler_name: str
            ) -> dict[str, tuple[str, str]]:
    """Wait until the pools are full (the claimed pods on their pinned addresses); delete
    DELETE_AFTER other bound pods and wait until pending pods have taken exactly their addresses;
    then delete the claimed pods and create them again: they return to their addresses, which no
    pending pod takes meanwhile. The bound pods at the end."""
    capacity = NODES * ADDRESSES
    cp.wait_for(lambda: len(_bound(cp, ns)) == capacity or None, 120, 0.5, f"{capacity} pods bound after the restart")
    before = _bound(cp, ns)
    nodes = sorted(pool_of)
    assert {p: before.get(p) for p in CLAIMED} == {p: (nodes[i], a) for p, (i, a) in CLAIMED.items()}, before
    victims = sorted(n for n in before if n not in CLAIMED)[:DELETE_AFTER]
    for v in victims:
        cp.delete_pod(v, ns)
    freed = {before[v][1] for v in victims}

    def refilled() -> dict[str, tuple[str, str]] | None:
        now = _bound(cp, ns)
        return now if len(now) == capacity and not set(victims) & set(now) else None

    after = cp.wait_for(refilled, 120, 0.5, "pending pods took the freed addresses")
    newcomers = {n: a for n, (_, a) in after.items() if n not in before}
    assert set(newcomers.values()) == freed, (newcomers, freed)
    for p in CLAIMED:
        cp.delete_pod(p, ns)
    cp.wait_for(lambda: not set(CLAIMED) & {q["metadata"]["name"] for q in pods_in(cp, ns)} or None, 60, 0.25,
                "the claimed pods gone")
    time.sleep(3)  # pending pods retry on the deletions: none may take a claimed address
    create_pods(cp, ns, list(CLAIMED), scheduler_name=scheduler_name, labels={"net": "underlay"},
                requests={"cpu": "10m"})

    def claimed_back() -> dict[str, tuple[str, str]] | None:
        now = _bound(cp, ns)
        return now if set(CLAIMED) <= set(now) else None

    back = cp.wait_for(claimed_back, 120, 0.5, "the claimed pods back")
    assert {p: back[p] for p in CLAIMED} == {p: after[p] for p in CLAIMED}
    time.sleep(3)  # room for a late extra bind
    final = _bound(cp, ns)
    assert final == back == after, (final, after)
    found = violations(watch.events, pool_of)
    assert not found, found[:20]
    assert sorted(a for _, a in final.values()) == sorted(set().union(*pool_of.values())), final
    return final


def test_kubesched_run_killed_mid_burst_loses_and_duplicates_no_address(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, pools: list[str]
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * NODES)
    pool_of = _make_pools(cp, ns, nodes, pools)
    name = f"kill-{ns}"
    cfg = _config(tmp_path / "underlay.json", name)
    killer = Killer(KILL_AT)
    watch = BindWatch(cp, ns, on_bind=killer)
    first = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-1.log")
    second: Proc | None = None
    try:
        first.wait_ready(60)
        killer.pid = first.popen.pid
        create_pods(cp, ns, [f"p-{i:03d}" for i in range(PODS)], workers=16, scheduler_name=name,
                    labels={"net": "underlay"}, requests={"cpu": "10m"})
        assert killer.done.wait(60), f"no {KILL_AT} binds seen: {first.tail()}"
        assert first.wait(10) == -signal.SIGKILL
        time.sleep(1)
        after_kill = len(watch.bound)
        second = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-2.log")
        second.wait_ready(60)
        final = _finish(cp, ns, watch, pool_of, name)

        def status_agrees() -> bool | None:
            for pool_name, node in zip(pools, nodes, strict=True):
                status = cp.get(f"{GROUP_PATH}/underlayippools/{pool_name}").get("status") or {}
                mine = {a: n for n, (nd, a) in final.items() if nd == node}
                allocations = status.get("allocations") or {}
                if {a: e.get("pod") for a, e in allocations.items()} != {a: f"{ns}/{n}" for a, n in mine.items()}:
                    return None
                if (status.get("total"), status.get("active"), status.get("free"), status.get("reserved")) != \
                        (ADDRESSES, len(mine), ADDRESSES - len(mine), 0):
                    return None
            return True

        cp.wait_for(status_agrees, 30, 0.5, "each pool's status lists exactly its bound pods' addresses")
        print(f"\nkubesched run: SIGKILL at the {killer.killed_at_bind}th bind seen, {after_kill} bound once it "
              f"died; {len(watch.events)} pod events replayed")
        assert second.popen.poll() is None, second.tail()
    finally:
        watch.stop()
        first.close()
        if second is not None:
            second.kill(signal.SIGTERM)
            code = second.wait(30)
            second.close()
            assert code == 0, second.tail()


def _extender_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_kubesched_extender_with_bind_killed_mid_burst_loses_and_duplicates_no_address(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path, pools: list[str]
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, nodes_to_delete, ns, [("32", "64Gi")] * NODES)
    pool_of = _make_pools(cp, ns, nodes, pools)
    name = f"kill-{uuid.uuid4().hex[:6]}"
    cfg = _config(tmp_path / "extender.json", name)
    port = free_port()
    argv = [sys.executable, "-m", "kubesched.cli", "extender", f"--config={cfg}", f"--kubeconfig={cp.kubeconfig}",
            f"--listen=127.0.0.1:{port}", "--log-level=warning"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def start_extender(n: int) -> Component:
        comp = Component(f"extender-{n}", argv, tmp_path / f"extender-{n}.log", env=env).start()
        cp.wait_for(lambda: _extender_ready(port) or (not comp.alive() and
                    pytest.fail(f"extender exited: {comp.tail()}")), 90, 0.2, "kubesched extender ready")
        return comp

    killer = Killer(KILL_AT)
    watch = BindWatch(cp, ns, on_bind=killer)
    first = start_extender(1)
    second: Component | None = None
    stanza = extender_stanza(url=f"http://127.0.0.1:{port}/", weight=10, bind=True, node_cache_capable=True)
    sched = _start_scheduler(cp, tmp_path, name, stanza)
    try:
        killer.pid = first.pid
        create_pods(cp, ns, [f"p-{i:03d}" for i in range(PODS)], workers=16, scheduler_name=name,
                    labels={"net": "underlay"}, requests={"cpu": "10m"})
        assert killer.done.wait(60), f"no {KILL_AT} binds seen: {first.tail()}"
        assert first.proc is not None and first.proc.wait(10) == -signal.SIGKILL
        time.sleep(1)
        after_kill = len(watch.bound)
        second = start_extender(2)  # the same port: kube-scheduler's configuration is unchanged
        _finish(cp, ns, watch, pool_of, name)
        print(f"\nkubesched extender: SIGKILL at the {killer.killed_at_bind}th bind seen, {after_kill} bound once "
              f"it died; {len(watch.events)} pod events replayed")
        assert second.alive(), second.tail()
    finally:
        watch.stop()
        cp.stop_component(sched)
        first.stop()
        if second is not None:
            second.stop()
