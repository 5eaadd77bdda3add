"""The chaos suite's harness: a control plane that audits bindings, `kubesched run` replicas kept
running as a Deployment would (a replica that exits is replaced by a new one, with a new
identity), pods created through apiserver outages, and the Lease read back."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.chaos_watch import audit_apiserver_args
from kubesched.testing import kwok_node, pod_manifest
from kubesched.testing.controlplane import ApiError, Component, ControlPlane, free_port

GROUP_LABEL = "chaos.kubesched.io/group"
LEASE_NAMESPACE = "kube-system"
#: Upstream's defaults (leaseDuration, renewDeadline, retryPeriod): the stock configuration.
STOCK_LEASE = ("15s", "10s", "2s")


@contextlib.contextmanager
def chaos_control_plane(workdir: Path, bin_dir: Path | None = None) -> Iterator[tuple[ControlPlane, Path]]:
    """etcd + kube-apiserver (auditing pods/binding creates) + KWOK; yields (control plane, audit log)."""
    audit_args, audit_log = audit_apiserver_args(workdir / "audit")
    cp = ControlPlane(workdir / "cluster", bin_dir=bin_dir,
                      apiserver_args=[*audit_args, "--delete-collection-workers=4"])
    cp.start(with_kwok=True)
    try:
        yield cp, audit_log
    finally:
        cp.stop()
        import shutil

        shutil.rmtree(cp.dir / "etcd-data", ignore_errors=True)


def kubesched_argv() -> list[str]:
    return [sys.executable, "-m", "kubesched.cli"]


def write_config(path: Path, scheduler_name: str, lease_name: str, *, lease: tuple[str, str, str] = STOCK_LEASE,
                 qps: float | None = None, extra: dict[str, Any] | None = None) -> Path:
    """A KubeSchedulerConfiguration as a user would write it: leader election on, and no
    clientConnection unless ``qps`` is given (so the default 50 QPS / burst 100)."""
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": True, "resourceNamespace": LEASE_NAMESPACE, "resourceName": lease_name,
                           "leaseDuration": lease[0], "renewDeadline": lease[1], "retryPeriod": lease[2]},
        "profiles": [{"schedulerName": scheduler_name}],
        **(extra or {}),
    }
    if qps is not None:
        doc["clientConnection"] = {"qps": qps, "burst": max(int(qps * 2), 1)}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


@dataclass
class Replica:
    identity: str
    component: Component
    health_port: int
    started: float

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()
        except OSError:
            return 0, ""

    def max_loop_lag_ms(self) -> float | None:
        """From the `event=stopped ... max_loop_lag_ms=N` line a clean exit logs."""
        found = re.findall(r"max_loop_lag_ms=(\d+)", self.component.tail(20))
        return float(found[-1]) if found else None


@dataclass
class Replicas:
    """``count`` replicas of `kubesched run`; a replica that exits is replaced (like a Deployment)
    unless replacement is paused. ``kubeconfig_for(identity)`` gives each its own client identity
    (so the audit log tells who bound what)."""

    cp: ControlPlane
    config: Path
    count: int
    logs: Path
    kubeconfig_for: Callable[[str], Path]
    prefix: str = "r"
    replace: bool = True
    running: list[Replica] = field(default_factory=list)
    exits: list[dict[str, Any]] = field(default_factory=list)
    _serial: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Replicas:
        for _ in range(self.count):
            self._spawn()
        self._thread = threading.Thread(target=self._supervise, daemon=True, name="replicas")
        self._thread.start()
        return self

    def _spawn(self) -> Replica:
        with self._lock:
            self._serial += 1
            identity = f"{self.prefix}{self._serial}"
        port = free_port()
        argv = [*kubesched_argv(), "run", f"--config={self.config}", f"--kubeconfig={self.kubeconfig_for(identity)}",
                f"--health-addr=127.0.0.1:{port}", f"--identity={identity}"]
        comp = Component(identity, argv, self.logs / f"kubesched-{identity}.log",
                         env={**os.environ, "PYTHONUNBUFFERED": "1"}).start()
        r = Replica(identity, comp, port, time.monotonic())
        with self._lock:
            self.running.append(r)
        return r

    def _supervise(self) -> None:
        while not self._stop.wait(0.2):
            for r in list(self.running):
                if r.component.alive():
                    continue
                code = r.component.proc.returncode if r.component.proc else None
                with self._lock:
                    self.running.remove(r)
                    self.exits.append({"identity": r.identity, "code": code, "wall": time.time(),
                                       "lived_s": round(time.monotonic() - r.started, 1),
                                       "max_loop_lag_ms": r.max_loop_lag_ms()})
                if self.replace and not self._stop.is_set():
                    self._spawn()

    def by_identity(self, identity: str) -> Replica | None:
        return next((r for r in list(self.running) if r.identity == identity), None)

    def kill(self, identity: str, sig: int = signal.SIGKILL) -> bool:
        r = self.by_identity(identity)
        if r is None or r.component.proc is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.component.proc.pid, sig)
        return True

    def stop(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """SIGTERM every replica (each drains and exits 0); returns every exit seen."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for r in list(self.running):
            if r.component.proc is not None and r.component.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(r.component.proc.pid, signal.SIGTERM)
        for r in list(self.running):
            code = None
            if r.component.proc is not None:
                try:
                    code = r.component.proc.wait(timeout)
                except Exception:
                    r.component.stop()
            self.exits.append({"identity": r.identity, "code": code, "wall": time.time(),
                               "lived_s": round(time.monotonic() - r.started, 1),
                               "max_loop_lag_ms": r.max_loop_lag_ms(), "stopped": True})
            r.component.stop()
        self.running.clear()
        return self.exits


# -- cluster objects -------------------------------------------------------------------------------
def identities(cp: ControlPlane) -> Callable[[str], Path]:
    """A kubeconfig per replica identity: user kubesched-<identity>, cluster-admin (system:masters)."""
    return lambda identity: cp.client_kubeconfig(f"kubesched-{identity}", f"kubesched-{identity}",
                                                 groups=["system:masters"])


def create_nodes(cp: ControlPlane, group: str, count: int, *, cpu: str, memory: str, pods: int = 110,
                 prefix: str | None = None) -> list[str]:
    prefix = prefix or f"{group}-n"
    names = [f"{prefix}{i:04d}" for i in range(count)]
    bodies = [kwok_node(n, cpu=cpu, memory=memory, pods=pods, labels={GROUP_LABEL: group}) for n in names]
    post_all(cp, [("/api/v1/nodes", b) for b in bodies])
    want = set(names)
    cp.wait_for(lambda: want <= cp.ready_nodes(), 120 + count * 0.2, 0.5, f"{count} nodes Ready")
    return names


def pod_bodies(ns: str, group: str, names: list[str], scheduler: str, *, cpu: str = "100m", memory: str = "64Mi",
               labels: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    res = {"cpu": cpu, "memory": memory}
    return [(f"/api/v1/namespaces/{ns}/pods",
             pod_manifest(n, ns, requests=res, scheduler_name=scheduler, node_selector={GROUP_LABEL: group},
                          labels=labels or {}))
            for n in names]


def post_all(cp: ControlPlane, requests: list[tuple[str, dict[str, Any]]], threads: int = 8,
             timeout: float = 300.0) -> None:
    """POST each (path, body), retrying through apiserver outages; 409 counts as created."""
    kc = cp.client
    local = threading.local()
    deadline = time.monotonic() + timeout

    def one(req: tuple[str, dict[str, Any]]) -> None:
        path, body = req
        data = json.dumps(body).encode()
        while True:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPSConnection(kc.host, kc.port, context=kc.ctx, timeout=30)
            try:
                conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                if resp.status < 300 or resp.status == 409:
                    return
                if resp.status not in (429, 500, 503, 504) or time.monotonic() > deadline:
                    raise ApiError("POST", path, resp.status, raw[:300])
            except (OSError, http.client.HTTPException):
                conn.close()
                local.conn = None
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, requests))


def lease(cp: ControlPlane, name: str) -> dict[str, Any]:
    try:
        return dict(cp.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}")["spec"])
    except (ApiError, OSError):
        return {}


def lease_holder(cp: ControlPlane, name: str) -> str:
    return str(lease(cp, name).get("holderIdentity") or "")


def micro_time(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def delete_group(cp: ControlPlane, ns: str) -> None:
    """Remove a scenario's pods, events, nodes and namespace (nothing garbage-collects here)."""
    for path in (f"/api/v1/namespaces/{ns}/pods", f"/apis/events.k8s.io/v1/namespaces/{ns}/events"):
        with contextlib.suppress(ApiError, OSError):
            cp.client.request("DELETE", path, params={"gracePeriodSeconds": 0}, timeout=300)
    with contextlib.suppress(ApiError, OSError):
        cp.client.request("DELETE", "/api/v1/nodes", params={"labelSelector": f"{GROUP_LABEL}={ns}"}, timeout=300)
    with contextlib.suppress(ApiError, OSError):
        cp.api("DELETE", f"/api/v1/namespaces/{ns}")
