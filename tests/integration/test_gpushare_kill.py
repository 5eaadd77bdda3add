"""kill -9 mid-burst never gives a GPU more than 1000 milli and loses no milli (issue 28), on the
real control plane.

3 KWOK nodes with 2 GPUs each (``alibabacloud.com/gpu-count: 2``, ``gpu-milli: 2000``); ``PODS``
pods of 300 milli on one GPU (more than the 18 shares the 6 GPUs hold) created at once. `kubesched
run` (a subprocess, GpuShare + FGD as in examples/gpushare.yaml) is killed with SIGKILL as the pod
watch sees the ``KILL_AT``-th bind, started again, and left to finish: the restarted scheduler
rebuilds its per-GPU ledger from the bound pods' ``alibabacloud.com/gpu-index``. A pod whose
``gpu-index`` was written at PreBind but whose bind the kill cut off is still pending: its
annotation must count for nothing until it is bound, and it is overwritten at its next PreBind.
Then ``DELETE_AFTER`` bound pods are deleted and pending pods must take exactly their GPUs.

A watch records every pod event from before the first pod is created, and the whole history is
replayed (``violations``): at no moment does a GPU carry more than 1000 milli of bound live pods, a
bound pod lack a ``gpu-index`` naming one of its node's GPUs, or a bound pod's ``gpu-index``
change.
"""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from integration.test_extender_burst import BindWatch
from integration.test_live_scheduler import Proc, create_pods, pods_in, write_config
from kubesched.testing.controlplane import ControlPlane
from kubesched.testing.kill import Killer

pytestmark = pytest.mark.integration

GPU_COUNT = "alibabacloud.com/gpu-count"
GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_MODEL = "alibabacloud.com/gpu-card-model"
GPU_INDEX = "alibabacloud.com/gpu-index"
NODES = 3
GPUS = 2  # per node
MILLI = 300  # per pod: 3 pods fit on a GPU
PODS = 30
KILL_AT = 4  # SIGKILL as the watch sees this many binds
DELETE_AFTER = 3  # bound pods deleted after the restart: pending ones take their GPUs
CAPACITY = NODES * GPUS * (1000 // MILLI)

PROFILE = {
    "plugins": {"multiPoint": {"enabled": [{"name": "GpuShare"}, {"name": "FGD", "weight": 1000}]},
                "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "FGD", "weight": 1000}]}},
    "pluginConfig": [{"name": "GpuShare", "args": {"gpuSelMethod": "FGD"}}],
}


def violations(events: list[tuple[str, dict[str, Any]]], nodes: set[str]) -> list[str]:
    """Replay every pod event in order; what was ever wrong, at the moment it was."""
    live: dict[str, tuple[str, str]] = {}  # bound live pod name -> (node, gpu-index)
    ever: dict[str, str] = {}  # pod uid -> the gpu-index it was first seen bound with
    found: list[str] = []
    for kind, obj in events:
        name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
        node = (obj.get("spec") or {}).get("nodeName") or ""
        index = (obj["metadata"].get("annotations") or {}).get(GPU_INDEX, "")
        if kind == "DELETED":
            live.pop(name, None)
            continue
        if not node:
            continue
        if node not in nodes:
            found.append(f"{name} bound to {node}, not a node of this test")
        if index not in {str(i) for i in range(GPUS)}:
            found.append(f"{name} bound to {node} with {GPU_INDEX}={index!r}")
        if ever.setdefault(uid, index) != index:
            found.append(f"{name}'s {GPU_INDEX} changed from {ever[uid]} to {index} while bound")
        live[name] = (node, index)
        milli = Counter(gpu for gpu in live.values())[(node, index)] * MILLI
        if milli > 1000:
            holders = sorted(n for n, gpu in live.items() if gpu == (node, index))
            found.append(f"GPU {index} of {node} holds {milli} milli: {holders}")
    return found


def _bound(cp: ControlPlane, ns: str) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (p["spec"]["nodeName"], (p["metadata"].get("annotations") or {}).get(GPU_INDEX, ""))
            for p in pods_in(cp, ns) if p["spec"].get("nodeName")}


def _full(cp: ControlPlane, ns: str) -> dict[str, tuple[str, str]] | None:
    now = _bound(cp, ns)
    return now if len(now) == CAPACITY else None


def test_kubesched_run_killed_mid_burst_overcommits_and_loses_no_gpu_milli(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    group = {"kubesched.test/group": ns}
    nodes = cp.create_nodes(NODES, prefix=f"{ns}-g", cpu="64", memory="256Gi",
                            extended={GPU_COUNT: str(GPUS), GPU_MILLI: str(GPUS * 1000)},
                            labels={**group, GPU_MODEL: "T4"})
    nodes_to_delete += nodes
    name = f"gpukill-{ns}"
    cfg = write_config(tmp_path / "gpushare-kill.json", name, qps=500, burst=1000, profile=PROFILE)
    killer = Killer(KILL_AT)
    watch = BindWatch(cp, ns, on_bind=killer)
    first = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-1.log")
    second: Proc | None = None
    code: int | None = None
    try:
        first.wait_ready(60)
        killer.pid = first.popen.pid
        create_pods(cp, ns, [f"p-{i:02d}" for i in range(PODS)], workers=16, scheduler_name=name,
                    requests={"cpu": "10m"}, annotations={GPU_MILLI: str(MILLI), GPU_COUNT: "1"})
        assert killer.done.wait(60), f"no {KILL_AT} binds seen: {first.tail()}"
        assert first.wait(10) == -signal.SIGKILL
        time.sleep(1)
        at_kill = _bound(cp, ns)
        annotated_pending = [p["metadata"]["name"] for p in pods_in(cp, ns)
                             if not p["spec"].get("nodeName") and GPU_INDEX in (p["metadata"].get("annotations") or {})]
        second = Proc(cfg, cp.kubeconfig, tmp_path / "kubesched-2.log")
        second.wait_ready(60)
        try:
            before = cp.wait_for(lambda: _full(cp, ns), 120, 0.5, f"{CAPACITY} pods bound after the restart")
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{_bound(cp, ns)}\n{second.tail()}") from e
        per_gpu = Counter(before.values())
        assert per_gpu == {(n, str(i)): 1000 // MILLI for n in nodes for i in range(GPUS)}, per_gpu
        victims = sorted(before)[:DELETE_AFTER]
        freed = sorted(before[v] for v in victims)
        for v in victims:
            cp.delete_pod(v, ns)

        def refilled() -> dict[str, tuple[str, str]] | None:
            now = _bound(cp, ns)
            return now if len(now) == CAPACITY and not set(victims) & set(now) else None

        try:
            after = cp.wait_for(refilled, 120, 0.5, "pending pods took the freed GPU shares")
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{_bound(cp, ns)}\n{second.tail()}") from e
        taken = sorted(gpu for n, gpu in after.items() if n not in before)
        assert taken == freed, (taken, freed)
        time.sleep(3)  # room for a late extra bind
        final = _bound(cp, ns)
        assert final == after, (final, after)
        pending = [p for p in pods_in(cp, ns) if not p["spec"].get("nodeName")]
        messages = {p["metadata"]["name"]: next((c.get("message", "") for c in p["status"].get("conditions") or []
                                                 if c.get("type") == "PodScheduled"), "") for p in pending}
        assert len(pending) == PODS - DELETE_AFTER - CAPACITY, messages
        assert all("Insufficient alibabacloud.com/gpu-milli" in m for m in messages.values()), messages
        assert second.popen.poll() is None, second.tail()
    finally:
        watch.stop()
        first.close()
        if second is not None:
            second.kill(signal.SIGTERM)
            code = second.wait(30)
            second.close()
        for p in pods_in(cp, ns):
            cp.delete_pod(p["metadata"]["name"], ns)
    print(f"\nkubesched run (GpuShare): SIGKILL at the {killer.killed_at_bind}th bind seen, {len(at_kill)} bound "
          f"once it died, {len(annotated_pending)} pending pods with a {GPU_INDEX} from PreBind; "
          f"{len(watch.events)} pod events replayed")
    assert second is not None and code == 0, second.tail() if second else ""
    found = violations(watch.events, set(nodes))
    assert not found, found[:20]
    used: dict[tuple[str, str], int] = defaultdict(int)
    for gpu in final.values():
        used[gpu] += MILLI
    assert set(used.values()) == {1000 // MILLI * MILLI} and len(used) == NODES * GPUS, dict(used)
