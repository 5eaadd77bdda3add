"""A burst through `kubesched extender` behind the real kube-scheduler never over-commits (issue 30).

3 KWOK nodes with 10 underlay IPs each, 200 pods created at once (concurrently), kube-scheduler at
QPS 5000 so it binds far faster than the extender's watch sees the binds. Every bind is recorded
from a watch on the namespace's pods: no node ever gets an 11th pod, and exactly 30 are bound;
once filter-only (the extender holds what it approved) and once with the bind verb (the extender
binds, re-checking the node). The throughput is logged for information (no timed assertion).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from integration import test_underlay_pools_live as pools_live
from integration.test_extender import RunningExtender, make_nodes
from kubesched.plugins.underlay_ip.kinds import POOL
from kubesched.testing.controlplane import ApiError, ControlPlane

pytestmark = pytest.mark.integration

log = logging.getLogger("kubesched.tests.burst")

# The pool fixtures, for the test with pools.
pools, underlay_crds = pools_live.pools, pools_live.underlay_crds
GROUP_PATH, KEY = pools_live.GROUP_PATH, pools_live.KEY

PODS = 200
NODES = 3
IPS = 10


class BindWatch:
    """Every pod of a namespace whose spec.nodeName the watch saw set, and when: a thread re-watching
    from the last resourceVersion in short windows, so it stops soon after ``stop``. ``events`` keeps
    every event seen (type and pod object, in order), for checks of each moment, not only the end;
    ``on_bind(count)`` is called (on the watch thread) at each newly seen bind."""

    def __init__(self, cp: ControlPlane, ns: str, on_bind: Callable[[int], None] | None = None) -> None:
        self.cp, self.ns = cp, ns
        self.bound: dict[str, tuple[str, float]] = {}  # pod name -> (node, monotonic time seen)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.on_bind = on_bind
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._rv = str(cp.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"])
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for ev in self.cp.watch(f"/api/v1/namespaces/{self.ns}/pods", timeout=3, resourceVersion=self._rv,
                                        allowWatchBookmarks="true"):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        self.errors.append(str(obj))
                        return
                    self._rv = obj["metadata"]["resourceVersion"]
                    if ev["type"] == "BOOKMARK":
                        continue
                    node = (obj.get("spec") or {}).get("nodeName")
                    with self.lock:
                        self.events.append((ev["type"], obj))
                        new = bool(node) and obj["metadata"]["name"] not in self.bound
                        if new:
                            self.bound[obj["metadata"]["name"]] = (node, time.monotonic())
                        count = len(self.bound)
                    if new and self.on_bind is not None:
                        self.on_bind(count)
            except (ApiError, OSError) as e:  # a dropped watch: resume from the last version seen
                if self._stop.is_set():
                    return
                self.errors.append(str(e))
                time.sleep(0.2)

    def per_node(self) -> dict[str, int]:
        with self.lock:
            counts: dict[str, int] = {}
            for node, _ in self.bound.values():
                counts[node] = counts.get(node, 0) + 1
            return counts

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _start_scheduler(cp: ControlPlane, tmp_path: Path, name: str, extender: dict[str, Any]) -> Any:
    # QPS 5000: kube-scheduler binds as fast as it schedules (the setting).
    client = {"kubeconfig": str(cp.scheduler_kubeconfig), "qps": 5000, "burst": 5000}
    cfg = cp.write_scheduler_config(tmp_path / f"{name}.json", scheduler_names=(name,),
                                    extra={"extenders": [extender], "clientConnection": client})
    return cp.start_kube_scheduler(cfg)


@pytest.mark.parametrize("with_bind", [False, True], ids=["filter-only", "bind-verb"])
def test_a_burst_of_200_never_puts_an_11th_pod_on_a_node(
    control_plane: ControlPlane, cp_namespace: str, tmp_path: Path, with_bind: bool
) -> None:
    cp, ns = control_plane, cp_namespace
    group = {"kubesched.test/group": ns}
    nodes = set(make_nodes(cp, ns, group, {f"n{i}": IPS for i in range(NODES)}).values())
    _burst(cp, ns, tmp_path, group, nodes, with_bind)


def test_a_burst_through_the_bind_verb_gives_each_pod_its_own_address_from_its_nodes_pool(
    control_plane: ControlPlane, cp_namespace: str, tmp_path: Path, pools: list[str]
) -> None:
    """One pool of 10 addresses per node (no budget label: the pools are the capacity). The extender
    binds, running PreBind: every bound pod carries a distinct address of its node's pool."""
    cp, ns = control_plane, cp_namespace
    group = {"kubesched.test/group": ns}
    by_key = make_nodes(cp, ns, group, dict.fromkeys((f"n{i}" for i in range(NODES)), None))
    pool_of: dict[str, set[str]] = {}
    for i, node_name in enumerate(sorted(by_key.values())):
        addrs = [f"10.91.{i}.{j}" for j in range(1, IPS + 1)]
        name = f"burst-{ns}-{i}"
        cp.api("POST", f"{GROUP_PATH}/underlayippools", {
            "apiVersion": "underlay.kubesched.io/v1alpha1", "kind": "UnderlayIPPool", "metadata": {"name": name},
            "spec": {"addresses": addrs, "nodeNames": [node_name]}})
        pools.append(name)
        pool_of[node_name] = set(addrs)
    final = _burst(cp, ns, tmp_path, group, set(pool_of), True,
                   await_pools=lambda ext: all(n in ext.cluster.objects(POOL) for n in pools))
    got = {p["metadata"]["name"]: (p["spec"]["nodeName"], (p["metadata"].get("annotations") or {}).get(KEY, ""))
           for p in final if p["spec"].get("nodeName")}
    assert all(addr in pool_of[node_name] for node_name, addr in got.values()), got
    assert len({addr for _, addr in got.values()}) == len(got) == NODES * IPS, got


def _burst(
    cp: ControlPlane, ns: str, tmp_path: Path, group: dict[str, str], nodes: set[str], with_bind: bool,
    await_pools: Callable[[RunningExtender], bool] | None = None,
) -> list[dict[str, Any]]:
    """Create the burst, check no node exceeds IPS pods (watch and final state); the final pods."""
    ext = RunningExtender(kubeconfig=cp.kubeconfig)
    if await_pools is not None:
        cp.wait_for(lambda: await_pools(ext) or None, 30, 0.2, "the extender sees the pools")
    sched_name = f"burst-{uuid.uuid4().hex[:6]}"
    sched = _start_scheduler(cp, tmp_path, sched_name, ext.stanza(node_cache_capable=True, bind=with_bind))
    watch = BindWatch(cp, ns)
    try:
        manifest = {"scheduler_name": sched_name, "labels": {"net": "underlay"}, "node_selector": group,
                    "requests": {"cpu": "10m"}}
        start = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: cp.create_pod(f"b{i}", ns, **manifest), range(PODS)))
        created = time.monotonic()

        def all_tried() -> bool | None:
            """30 bound, and every other pod refused at least once (PodScheduled=False)."""
            if len(watch.bound) < NODES * IPS:
                return None
            items = cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            pending = [p for p in items if not p["spec"].get("nodeName") and not any(
                c["type"] == "PodScheduled" and c["status"] == "False" for c in p["status"].get("conditions") or [])]
            return not pending or None

        try:
            cp.wait_for(all_tried, 240, 0.5, f"{NODES * IPS} pods bound and the other {PODS - NODES * IPS} refused")
        except TimeoutError as e:
            raise AssertionError(f"{e}; bound per node (watch): {watch.per_node()}") from e
        decided = time.monotonic()  # within the 0.5 s polling interval
        with watch.lock:
            last_bind = max(t for _, t in watch.bound.values())
        # Room for a late 11th: refused pods retry after backoff and on every bind event.
        time.sleep(5)
        final = cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        per_node_final = {n: sum(p["spec"].get("nodeName") == n for p in final) for n in nodes}
        watched = watch.per_node()
        assert set(watched) <= nodes
        assert max(watched.values()) <= IPS, f"an 11th pod on a node (watch): {watched}; watch errors: {watch.errors}"
        assert per_node_final == dict.fromkeys(nodes, IPS), per_node_final
        assert sum(watched.values()) == NODES * IPS == len(watch.bound)
        if with_bind:
            # Every bind went through the extender: it was asked to bind each bound pod. (Its own
            # count of successful POSTs can be lower on a loaded machine: the apiserver may answer
            # a pods/binding with a handler timeout and still commit it.)
            asked = ext.server.metrics.registry.get_sample_value(
                "kubesched_extender_requests_total", {"verb": "bind", "code": "200"}) or 0
            assert asked >= NODES * IPS and ext.cluster.binds <= NODES * IPS, (asked, ext.cluster.binds)

        holds = ext.service.holds
        assert holds is not None
        rate = NODES * IPS / (last_bind - start)
        message = (f"extender burst ({'bind verb' if with_bind else 'filter only'}): {PODS} pods created in "
                   f"{created - start:.2f}s, {NODES * IPS} bound in {last_bind - start:.2f}s = {rate:.1f} pods/s, "
                   f"all {PODS} bound or refused within {decided - start:.1f}s; "
                   f"holds ended: {holds.ended}")
        log.warning(message)
        print(message)
        return final
    finally:
        watch.stop()
        cp.stop_component(sched)
        ext.close()
