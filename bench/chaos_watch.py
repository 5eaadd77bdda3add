"""What every chaos scenario asserts, checked from outside the schedulers.

:class:`InvariantWatch` watches the scenario's nodes and pods (admin client, its own connections,
resumed from the last resourceVersion across apiserver restarts, relisting after 410 Gone) and
keeps, incrementally, the resources bound to each node. It records a violation when

* a node is over-committed (cpu, memory or pod count above allocatable) at any event;
* a pod is bound twice (its ``spec.nodeName`` changes, or it has two Scheduled events);
* a pod is bound to a node that was already deleted (the bind's resourceVersion is newer than the
  node's deletion; etcd revisions are one global order);
* at the end, a pending pod would fit on a node (every pod that fits is bound).

:func:`read_audit` and :func:`binder_segments` read the apiserver's audit log of
``pods/binding`` creates: who bound each pod and when, the evidence for "no two replicas bind in
the same second".
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from kubesched.api.quantity import milli_value, value
from kubesched.snapshot.pod import PodInfo
from kubesched.testing.controlplane import ApiError, ControlPlane

#: Audit policy: only successful or failed pods/binding creates, at Metadata level (user, time, code).
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create"]
    resources:
      - group: ""
        resources: ["pods/binding"]
  - level: None
"""


def audit_apiserver_args(workdir: Path) -> tuple[list[str], Path]:
    """kube-apiserver flags that write the bindings' audit log; returns (flags, log path)."""
    workdir.mkdir(parents=True, exist_ok=True)
    policy = workdir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    log = workdir / "audit.log"
    return [f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-mode=blocking",
            "--audit-log-maxsize=0"], log


@dataclass(frozen=True)
class Binding:
    user: str
    namespace: str
    pod: str
    code: int
    at: float  # stageTimestamp, seconds since the epoch


def read_audit(log: Path, namespace: str | None = None) -> list[Binding]:
    """Every pods/binding create in the audit log (all replicas, all restarts of the apiserver)."""
    out: list[Binding] = []
    if not log.exists():
        return out
    for line in log.read_text(errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        ref = ev.get("objectRef") or {}
        if ref.get("subresource") != "binding" or ev.get("stage") != "ResponseComplete":
            continue
        if namespace is not None and ref.get("namespace") != namespace:
            continue
        out.append(Binding(
            user=str((ev.get("user") or {}).get("username", "")),
            namespace=str(ref.get("namespace", "")),
            pod=str(ref.get("name", "")),
            code=int((ev.get("responseStatus") or {}).get("code", 0)),
            at=datetime.fromisoformat(ev["stageTimestamp"]).timestamp(),
        ))
    out.sort(key=lambda b: b.at)
    return out


def binder_segments(bindings: list[Binding]) -> list[dict[str, Any]]:
    """Successful binds grouped into runs of one binder, in time order: [{user, first, last, binds}].
    Split brain would show as runs interleaving, or two runs of different users less than a second apart."""
    runs: list[dict[str, Any]] = []
    for b in bindings:
        if b.code >= 300:
            continue
        if runs and runs[-1]["user"] == b.user:
            runs[-1]["last"] = b.at
            runs[-1]["binds"] += 1
        else:
            runs.append({"user": b.user, "first": b.at, "last": b.at, "binds": 1})
    return runs


def split_brain(bindings: list[Binding], min_gap: float = 1.0) -> list[str]:
    """Handovers where the next binder started less than ``min_gap`` after the previous one's last bind."""
    runs = binder_segments(bindings)
    bad = []
    for prev, nxt in itertools.pairwise(runs):
        gap = nxt["first"] - prev["last"]
        if gap < min_gap:
            bad.append(f"{nxt['user']} bound {gap:.3f}s after {prev['user']}'s last bind")
    return bad


@dataclass
class _Node:
    cpu: int
    memory: int
    pods: int
    used: list[int] = field(default_factory=lambda: [0, 0, 0])


@dataclass
class _Pod:
    node: str
    cpu: int
    memory: int
    active: bool  # counts against the node (bound and not terminal)


class InvariantWatch:
    """Watches ``namespace``'s pods and the nodes matching ``node_selector`` (a label selector)."""

    def __init__(self, cp: ControlPlane, namespace: str, node_selector: str) -> None:
        kc = cp.client
        self._connect = lambda: http.client.HTTPSConnection(kc.host, kc.port, context=kc.ctx, timeout=30)
        self.cp = cp
        self.namespace = namespace
        self.node_selector = node_selector
        self.nodes: dict[str, _Node] = {}
        self.deleted_nodes: dict[str, int] = {}  # name -> resourceVersion of the deletion
        self.pods: dict[str, _Pod] = {}  # uid -> where it is bound
        self.pending: dict[str, dict[str, Any]] = {}  # uid -> pod (unbound, not deleted)
        self.bound_at: dict[str, float] = {}  # uid -> time.time() the bind was first seen
        self.violations: list[str] = []
        self.relists = 0
        self.reconnects = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._conns: list[http.client.HTTPSConnection] = []
        self._threads: list[threading.Thread] = []

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> InvariantWatch:
        node_rv = self._list_nodes()
        pod_rv = self._list_pods()
        for name, path, rv, handler, relist in (
            ("nodes", "/api/v1/nodes", node_rv, self._on_node, self._list_nodes),
            ("pods", f"/api/v1/namespaces/{self.namespace}/pods", pod_rv, self._on_pod, self._list_pods),
        ):
            t = threading.Thread(target=self._watch, args=(path, rv, handler, relist), daemon=True,
                                 name=f"invariants-{name}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for conn in list(self._conns):
            with contextlib.suppress(Exception):
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(10)

    # -- lists and watches -------------------------------------------------------------------------
    def _params(self, path: str) -> str:
        return f"?labelSelector={quote(self.node_selector)}" if path == "/api/v1/nodes" else ""

    def _list_nodes(self) -> str:
        body = self._get_retrying("/api/v1/nodes" + self._params("/api/v1/nodes"))
        with self._lock:
            seen = set()
            for n in body["items"]:
                self._on_node({"type": "MODIFIED", "object": n})
                seen.add(n["metadata"]["name"])
            for name in set(self.nodes) - seen:  # deleted while we were away: no revision known
                self.nodes.pop(name)
                self.deleted_nodes.setdefault(name, int(body["metadata"]["resourceVersion"]))
        return str(body["metadata"]["resourceVersion"])

    def _list_pods(self) -> str:
        body = self._get_retrying(f"/api/v1/namespaces/{self.namespace}/pods")
        with self._lock:
            seen = set()
            for p in body["items"]:
                self._on_pod({"type": "MODIFIED", "object": p}, observed=False)
                seen.add(p["metadata"]["uid"])
            for uid in (set(self.pods) | set(self.pending)) - seen:
                self._on_pod({"type": "DELETED", "object": {"metadata": {"uid": uid}}})
        return str(body["metadata"]["resourceVersion"])

    def _get_retrying(self, path: str, timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.cp.client.request("GET", path, timeout=60)
            except (OSError, ApiError, http.client.HTTPException):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _watch(self, path: str, rv: str, handler: Any, relist: Any) -> None:
        while not self._stop.is_set():
            try:
                for ev in self._stream(path, rv):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            self.relists += 1
                            rv = relist()
                        break
                    if ev.get("type") == "BOOKMARK":
                        rv = obj["metadata"]["resourceVersion"]
                        continue
                    with self._lock:
                        handler(ev)
                    rv = obj["metadata"]["resourceVersion"]
            except ApiError as e:
                if e.status == 410:
                    self.relists += 1
                    rv = relist()
                    continue
                time.sleep(0.5)
            except (OSError, http.client.HTTPException, ValueError):
                if self._stop.is_set():
                    return
                time.sleep(0.5)
            self.reconnects += 1

    def _stream(self, path: str, rv: str) -> Iterator[dict[str, Any]]:
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": 300}
        if path == "/api/v1/nodes":
            params["labelSelector"] = self.node_selector
        conn = self._connect()
        self._conns.append(conn)
        try:
            conn.request("GET", f"{path}?{urlencode(params)}", headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status >= 300:
                raise ApiError("WATCH", path, resp.status, json.loads(resp.read() or b"{}"))
            while not self._stop.is_set():
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield orjson.loads(line)
        finally:
            self._conns.remove(conn)
            conn.close()

    # -- the invariants --------------------------------------------------------------------------
    def _on_node(self, ev: dict[str, Any]) -> None:
        obj = ev["object"]
        name = obj["metadata"]["name"]
        if ev["type"] == "DELETED":
            self.nodes.pop(name, None)
            self.deleted_nodes[name] = int(obj["metadata"]["resourceVersion"])
            return
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        old = self.nodes.get(name)
        n = _Node(milli_value(alloc.get("cpu", "0")), value(alloc.get("memory", "0")), int(alloc.get("pods", "0")))
        if old is not None:
            n.used = old.used
        self.nodes[name] = n
        self.deleted_nodes.pop(name, None)

    def _on_pod(self, ev: dict[str, Any], observed: bool = True) -> None:
        obj = ev["object"]
        uid = obj["metadata"]["uid"]
        prev = self.pods.get(uid)
        if ev["type"] == "DELETED":
            self.pending.pop(uid, None)
            if prev is not None and prev.active:
                self._account(prev, -1)
            self.pods.pop(uid, None)
            return
        node = (obj.get("spec") or {}).get("nodeName") or ""
        if not node:
            if prev is None:
                self.pending[uid] = obj
            return
        self.pending.pop(uid, None)
        terminal = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if prev is not None:
            if prev.node != node:
                self.violations.append(f"pod {self._key(obj)} bound twice: {prev.node} then {node}")
            if prev.active and terminal:
                prev.active = False
                self._account(prev, -1)
            return
        self.bound_at[uid] = time.time()
        rv = int(obj["metadata"]["resourceVersion"])
        deleted_at = self.deleted_nodes.get(node)
        # Seen bound for the first time in a watch event: the bind is this revision (or just before).
        if observed and deleted_at is not None and rv > deleted_at:
            self.violations.append(f"pod {self._key(obj)} bound to {node} after the node was deleted")
        r = PodInfo.from_raw(obj).requests
        p = _Pod(node, r.milli_cpu, r.memory, not terminal)
        self.pods[uid] = p
        if p.active:
            self._account(p, +1)

    def _account(self, p: _Pod, sign: int) -> None:
        n = self.nodes.get(p.node)
        if n is None:
            return  # a node outside the scenario, or deleted
        n.used[0] += sign * p.cpu
        n.used[1] += sign * p.memory
        n.used[2] += sign
        if sign > 0 and (n.used[0] > n.cpu or n.used[1] > n.memory or n.used[2] > n.pods):
            self.violations.append(
                f"node {p.node} over-committed: cpu {n.used[0]}m/{n.cpu}m, memory {n.used[1]}/{n.memory}, "
                f"pods {n.used[2]}/{n.pods}")

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        return f"{obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}"

    # -- the end ---------------------------------------------------------------------------------
    @property
    def bound(self) -> int:
        with self._lock:
            return sum(1 for p in self.pods.values() if p.active)

    def wait_bound(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.bound >= n:
                return True
            time.sleep(0.2)
        return self.bound >= n

    def fitting_pending(self) -> list[str]:
        """Pending pods that would fit on some node as things stand (each alone)."""
        with self._lock:
            out = []
            for obj in self.pending.values():
                r = PodInfo.from_raw(obj).requests
                for name, n in self.nodes.items():
                    if (n.used[0] + r.milli_cpu <= n.cpu and n.used[1] + r.memory <= n.memory
                            and n.used[2] < n.pods):
                        out.append(f"{self._key(obj)} fits on {name} but is pending")
                        break
            return out

    def report(self, scheduled_events: bool = True) -> dict[str, Any]:
        """Stop watching and sum up; a final list double-checks what the watch saw."""
        self.stop()
        self._list_nodes()
        self._list_pods()
        lost = self.fitting_pending()
        double = [v for v in self.violations if "bound twice" in v]
        if scheduled_events:
            evs = self.cp.get(f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events")["items"]
            per_pod = Counter(e["regarding"].get("uid") for e in evs if e.get("reason") == "Scheduled")
            double += [f"pod uid {uid} has {n} Scheduled events" for uid, n in per_pod.items() if n > 1]
        return {
            "bound": self.bound,
            "pending": len(self.pending),
            "overcommits": sum(1 for v in self.violations if "over-committed" in v),
            "double_binds": len(double),
            "bound_to_vanished_node": sum(1 for v in self.violations if "after the node was deleted" in v),
            "lost_pods": len(lost),
            "violations": (self.violations + lost)[:20],
            "watch_relists_410": self.relists,
            "watch_reconnects": self.reconnects,
        }


def assert_clean(report: dict[str, Any]) -> None:
    """The three invariants, with what broke them."""
    bad = {k: report[k] for k in ("overcommits", "double_binds", "bound_to_vanished_node", "lost_pods") if report[k]}
    assert not bad, f"invariants broken: {bad}: {report['violations']}"
