"""ControlPlane: etcd + kube-apiserver (+ KWOK, + kube-controller-manager, + the real kube-scheduler)
on free loopback ports."""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import shutil
import ssl
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from kubesched.testing.builders import kwok_node
from kubesched.testing.builders import pod_manifest as _pod_manifest
from kubesched.testing.controlplane import components
from kubesched.testing.controlplane.certs import PKI, write_kubeconfig
from kubesched.testing.controlplane.client import ApiError, KubeClient
from kubesched.testing.controlplane.node import host_ip
from kubesched.testing.controlplane.paths import (
    BinariesUnavailable,
    cluster_dir,
    default_bin_dir,
    missing_binaries,
    read_versions,
)
from kubesched.testing.controlplane.processes import (
    Component,
    ComponentDied,
    free_port,
    stop_all,
    tail_file,
    wait_for,
)

__all__ = ["ControlPlane"]

T = TypeVar("T")


class ControlPlane:
    """etcd + kube-apiserver (+ KWOK, + kube-scheduler) on free loopback ports under ``workdir``.

    Layout of ``workdir``: ``pki/`` (CA, serving and client certs, service-account keys),
    ``etcd-data/``, ``logs/<component>.log``, ``kubeconfig`` (admin, O=system:masters),
    ``scheduler.kubeconfig`` (user system:kube-scheduler), ``controller-manager.kubeconfig`` (user
    system:kube-controller-manager), ``cluster.json`` (pids, for ``down``).
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        bin_dir: str | Path | None = None,
        apiserver_args: Sequence[str] = (),
        etcd_args: Sequence[str] = (),
        verbosity: int = 1,
        die_with_parent: bool = True,
        real_nodes: bool = False,
    ) -> None:
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="kubesched-controlplane-")).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = Path(bin_dir) if bin_dir else default_bin_dir()
        self.versions = read_versions()
        self.extra_apiserver_args = list(apiserver_args)
        self.extra_etcd_args = list(etcd_args)
        self.verbosity = verbosity
        # Serve real nodes' kubelets and pods (node.py): see components.real_node_apiserver_args.
        self.real_nodes = real_nodes
        self.address = host_ip() if real_nodes else "127.0.0.1"
        # children get SIGKILL if this process dies without cleaning up (off for `up`: detached)
        self.die_with_parent = die_with_parent
        self.logs_dir = self.dir / "logs"
        self.pki = PKI(self.dir / "pki")
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.kubeconfig = self.dir / "kubeconfig"
        self.scheduler_kubeconfig = self.dir / "scheduler.kubeconfig"
        self.controller_manager_kubeconfig = self.dir / "controller-manager.kubeconfig"
        self._components: list[Component] = []
        self.etcd: Component | None = None
        self.apiserver: Component | None = None
        self.kwok: Component | None = None
        self.controller_manager: Component | None = None
        self.schedulers: list[Component] = []
        self._client: KubeClient | None = None
        self._lock = threading.Lock()
        # Kill children when the object is collected or the interpreter exits (unless detach()ed).
        self._finalizer = weakref.finalize(self, stop_all, self._components)

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(
        self,
        with_kwok: bool = True,
        with_scheduler_config: str | Path | None = None,
        *,
        with_controller_manager: bool = False,
        timeout: float = 90.0,
    ) -> ControlPlane:
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise BinariesUnavailable(f"missing {', '.join(missing)} in {self.bin_dir}: run hack/cluster/build.sh")
        try:
            self._write_certs_and_kubeconfigs()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            if with_kwok:
                self.start_kwok()
            if with_controller_manager:
                self.start_controller_manager(timeout=timeout)
            if with_scheduler_config is not None:
                self.start_kube_scheduler(with_scheduler_config)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def stop(self) -> None:
        """Stop every component (scheduler, controller manager, kwok, apiserver, etcd), leaving no
        process behind."""
        stop_all(self._components)
        self.etcd = self.apiserver = self.kwok = self.controller_manager = None
        self.schedulers = []
        with contextlib.suppress(OSError):
            (self.dir / "cluster.json").unlink()
        if self._own_dir:  # a temp dir of ours: drop the store (64 MiB of preallocated WAL), keep the logs
            shutil.rmtree(self.dir / "etcd-data", ignore_errors=True)

    def detach(self) -> None:
        """Leave the processes running after this object/interpreter goes away (``up`` command)."""
        self._finalizer.detach()

    @property
    def running(self) -> list[Component]:
        """The started components, in start order."""
        return list(self._components)

    def __enter__(self) -> ControlPlane:
        if self.apiserver is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- components ---------------------------------------------------------------------------

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _add(self, comp: Component) -> Component:
        comp.die_with_parent = self.die_with_parent
        comp.start()
        self._components.append(comp)
        return comp

    def _remove(self, comp: Component | None) -> None:
        if comp is None:
            return
        comp.stop()
        with contextlib.suppress(ValueError):
            self._components.remove(comp)

    def _write_certs_and_kubeconfigs(self) -> None:
        self.pki.issue(
            "apiserver",
            "kube-apiserver",
            dns=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=["127.0.0.1", "::1", str(next(ipaddress.ip_network(components.SERVICE_CLUSTER_IP_RANGE).hosts())),
                 *([self.address] if self.real_nodes else [])],
            server=True,
        )
        if self.real_nodes:
            self.pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                           organizations=["system:masters"], client=True)
        self.pki.service_account_keys()
        crt, key = self.pki.issue("admin", "kubernetes-admin", organizations=["system:masters"], client=True)
        write_kubeconfig(self.kubeconfig, self.server, self.pki.ca_crt, crt, key, user="admin")
        crt, key = self.pki.issue("scheduler", "system:kube-scheduler", client=True)
        write_kubeconfig(self.scheduler_kubeconfig, self.server, self.pki.ca_crt, crt, key, user="scheduler")
        crt, key = self.pki.issue("controller-manager", "system:kube-controller-manager", client=True)
        write_kubeconfig(
            self.controller_manager_kubeconfig, self.server, self.pki.ca_crt, crt, key, user="controller-manager"
        )
        self._client = None

    def client_kubeconfig(self, name: str, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for another identity (certificate CN=user, O=groups), e.g. a custom scheduler."""
        crt, key = self.pki.issue(f"user-{name}", user, organizations=groups, client=True)
        return write_kubeconfig(self.dir / f"{name}.kubeconfig", self.server, self.pki.ca_crt, crt, key, user=name)

    def _start_etcd(self, timeout: float) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = components.etcd_argv(
            self._bin("etcd"), self.dir / "etcd-data", self.etcd_url, peer, self.extra_etcd_args
        )
        self.etcd = self._add(Component("etcd", argv, self.logs_dir / "etcd.log"))

        def healthy() -> bool:
            self._check_alive(self.etcd)
            body = self.etcd_call("GET", "/health")
            return str(body.get("health")) == "true"

        wait_for(healthy, timeout, 0.1, "etcd /health")

    def _start_apiserver(self, timeout: float) -> None:
        argv = components.apiserver_argv(
            self._bin("kube-apiserver"),
            etcd_url=self.etcd_url,
            port=self.apiserver_port,
            pki=self.pki.dir,
            verbosity=self.verbosity,
            service_account_admission=self.real_nodes,
            extra=[
                *(components.real_node_apiserver_args(self.pki.dir, self.address) if self.real_nodes else []),
                *self.extra_apiserver_args,
            ],
        )
        self.apiserver = self._add(Component("kube-apiserver", argv, self.logs_dir / "kube-apiserver.log"))
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 90.0) -> None:
        def ready() -> bool:
            self._check_alive(self.apiserver)
            self.client.request("GET", "/readyz", timeout=5)  # ApiError (500) until every check passes
            return True

        wait_for(ready, timeout, 0.2, "kube-apiserver /readyz")

    def _check_alive(self, comp: Component | None) -> None:
        if comp is not None and not comp.alive():
            raise ComponentDied(f"{comp.name} exited; last log lines:\n{comp.tail(40)}")

    def restart_apiserver(self, timeout: float = 90.0) -> None:
        """Stop kube-apiserver (SIGTERM, graceful) and start it again on the same port and etcd."""
        self._remove(self.apiserver)
        self.apiserver = None
        self._start_apiserver(timeout)
        self._write_state()

    def start_kwok(self, extra_args: Sequence[str] = ()) -> Component:
        """Start KWOK for nodes annotated kwok.x-k8s.io/node=fake, with kwokctl's default stages."""
        if self.kwok is not None:
            return self.kwok
        argv = components.kwok_argv(
            self._bin("kwok"),
            kubeconfig=self.kubeconfig,
            stages=cluster_dir() / "kwok" / "stages.yaml",
            node_port=free_port(),
            server_port=free_port(),
            extra=extra_args,
        )
        self.kwok = self._add(Component("kwok", argv, self.logs_dir / "kwok.log"))
        time.sleep(0.2)
        self._check_alive(self.kwok)
        self._write_state()
        return self.kwok

    def start_controller_manager(self, extra_args: Sequence[str] = (), timeout: float = 90.0) -> Component:
        """Start kube-controller-manager (every default controller but node IPAM and node lifecycle,
        see ``components.CONTROLLERS``) and wait for its /healthz: PersistentVolume binding,
        namespace deletion, garbage collection, workload controllers (ReplicaSet, Deployment,
        StatefulSet, Job), service accounts, PodDisruptionBudget status, ... as in a real cluster."""
        if self.controller_manager is not None:
            return self.controller_manager
        port = free_port()
        argv = components.kube_controller_manager_argv(
            self._bin("kube-controller-manager"),
            kubeconfig=self.controller_manager_kubeconfig,
            pki=self.pki.dir,
            port=port,
            cert_dir=self.dir / "kube-controller-manager-certs",
            verbosity=self.verbosity,
            extra=extra_args,
        )
        name = "kube-controller-manager"
        comp = self._add(Component(name, argv, self.logs_dir / f"{name}.log"))
        self.controller_manager = comp
        self._wait_healthz(comp, port, timeout)
        return comp

    def _wait_healthz(self, comp: Component, port: int, timeout: float) -> None:
        """Wait for ``comp``'s /healthz on 127.0.0.1:``port`` (self-signed serving cert); stop it
        on failure. Records the running process for ``down``."""
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def healthy() -> bool:
            self._check_alive(comp)
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=insecure, timeout=2)
            try:
                conn.request("GET", "/healthz")
                return conn.getresponse().status == 200
            finally:
                conn.close()

        try:
            wait_for(healthy, timeout, 0.2, f"{comp.name} /healthz")
        except BaseException:
            self.stop_component(comp)
            raise
        self._write_state()

    def write_scheduler_config(
        self,
        path: str | Path | None = None,
        *,
        scheduler_names: Sequence[str] = ("default-scheduler",),
        extra: Mapping[str, Any] | None = None,
    ) -> Path:
        """A minimal KubeSchedulerConfiguration v1 (JSON is valid YAML), leader election off."""
        cfg = components.scheduler_config(self.scheduler_kubeconfig, scheduler_names=scheduler_names, extra=extra)
        p = Path(path) if path else self.dir / "kube-scheduler-config.yaml"
        p.write_text(json.dumps(cfg, indent=2) + "\n")
        return p

    def start_kube_scheduler(
        self,
        config_path: str | Path | None = None,
        *,
        extra_args: Sequence[str] = (),
        timeout: float = 60.0,
        binary: str = "kube-scheduler",
    ) -> Component:
        """Start the real kube-scheduler (user system:kube-scheduler) and wait for its /healthz.

        ``config_path`` is a KubeSchedulerConfiguration file (its clientConnection.kubeconfig must be
        set; leader election is whatever it says); default: ``write_scheduler_config()``.
        ``binary``: another kube-scheduler build in the binary directory (e.g. scheduler-plugins'
        ``kube-scheduler-plugins``, see ``controlplane.scheduler_plugins``)."""
        cfg = Path(config_path) if config_path else self.write_scheduler_config()
        n = len(self.schedulers)
        port = free_port()
        argv = components.kube_scheduler_argv(
            self._bin(binary),
            config=cfg,
            kubeconfig=self.scheduler_kubeconfig,
            port=port,
            cert_dir=self.dir / f"kube-scheduler-{n}-certs",
            verbosity=self.verbosity,
            extra=extra_args,
        )
        name = binary if n == 0 else f"{binary}-{n}"
        comp = self._add(Component(name, argv, self.logs_dir / f"{name}.log"))
        self.schedulers.append(comp)
        self._wait_healthz(comp, port, timeout)
        return comp

    def stop_component(self, comp: Component) -> None:
        self._remove(comp)
        if comp in self.schedulers:
            self.schedulers.remove(comp)
        if comp is self.kwok:
            self.kwok = None
        if comp is self.controller_manager:
            self.controller_manager = None

    # ---- state for `down` ---------------------------------------------------------------------

    def _write_state(self) -> None:
        state = {
            "server": self.server,
            "etcd": self.etcd_url,
            "kubeconfig": str(self.kubeconfig),
            "processes": [{"name": c.name, "pid": c.pid, "exe": c.argv[0]} for c in self._components if c.pid],
        }
        (self.dir / "cluster.json").write_text(json.dumps(state, indent=2) + "\n")

    # ---- API ----------------------------------------------------------------------------------

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient(
                self.server, self.pki.ca_crt, self.pki.dir / "admin.crt", self.pki.dir / "admin.key"
            )
        return self._client

    def api(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """One request as cluster-admin; returns parsed JSON, raises ApiError on non-2xx."""
        ct = "application/json"
        if method.upper() == "PATCH":
            ct = params.pop("content_type", "application/merge-patch+json")
        return self.client.request(method.upper(), path, body, params=params or None, content_type=ct)

    def get(self, path: str, **params: Any) -> Any:
        return self.api("GET", path, **params)

    def watch(self, path: str, timeout: float = 30.0, **params: Any) -> Iterator[dict[str, Any]]:
        return self.client.watch(path, params=params, timeout=timeout)

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1, message: str = ""
    ) -> T:
        return wait_for(predicate, timeout, interval, message)

    def version(self) -> dict[str, Any]:
        return dict(self.get("/version"))

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        try:
            return dict(self.api("POST", "/api/v1/namespaces", body))
        except ApiError as e:
            if e.status != 409:
                raise
            return dict(self.get(f"/api/v1/namespaces/{name}"))

    def create_nodes(
        self,
        count: int,
        *,
        prefix: str = "kwok-node-",
        start: int = 0,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: int | str = "110",
        extended: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        images: Sequence[Mapping[str, Any]] = (),
        kwok: bool = True,
        wait_ready: bool | None = None,
        timeout: float = 60.0,
    ) -> list[str]:
        """Create ``count`` fake nodes <prefix><i> (:func:`kubesched.testing.kwok_node`). KWOK-managed
        ones (``kwok=True``, the default) get the annotation kwok.x-k8s.io/node=fake and the label
        type=kwok, and no taint unless given. ``images`` is their ``status.images`` (``{"names":
        [...], "sizeBytes": n}`` each, what ImageLocality scores): a node's status may be set on
        create, and KWOK's stages patch the status strategically without naming ``images``, so
        they stay (read back after a dozen heartbeats). ``wait_ready`` (default: when KWOK runs)
        waits until KWOK has marked them all Ready."""
        names = []
        for i in range(start, start + count):
            name = f"{prefix}{i}"
            body = kwok_node(
                name,
                cpu=cpu,
                memory=memory,
                pods=pods,
                extended=extended,
                labels=labels,
                annotations=annotations,
                taints=taints,
                kwok=kwok,
            )
            if images:
                body["status"]["images"] = [dict(image) for image in images]
            self.api("POST", "/api/v1/nodes", body)
            names.append(name)
        if wait_ready is None:
            wait_ready = kwok and self.kwok is not None
        if wait_ready:
            want = set(names)
            self.wait_for(lambda: want <= self.ready_nodes(), timeout, 0.2, f"nodes {prefix}* Ready")
        return names

    def ready_nodes(self) -> set[str]:
        out = set()
        for n in self.get("/api/v1/nodes")["items"]:
            for c in n.get("status", {}).get("conditions") or []:
                if c.get("type") == "Ready" and c.get("status") == "True":
                    out.add(n["metadata"]["name"])
        return out

    @staticmethod
    def pod_manifest(name: str, namespace: str = "default", **kwargs: Any) -> dict[str, Any]:
        """:func:`kubesched.testing.pod_manifest` (the keyword arguments of ``create_pod``)."""
        return _pod_manifest(name, namespace, **kwargs)

    def create_pod(self, name: str, namespace: str = "default", **kwargs: Any) -> dict[str, Any]:
        """Create a pod (see :func:`kubesched.testing.pod_manifest` for the keyword arguments);
        returns the created object."""
        body = _pod_manifest(name, namespace, **kwargs)
        return dict(self.api("POST", f"/api/v1/namespaces/{namespace}/pods", body))

    def create_pods(self, names: Iterable[str], namespace: str = "default", **kwargs: Any) -> list[dict[str, Any]]:
        return [self.create_pod(n, namespace, **kwargs) for n in names]

    def get_pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return dict(self.get(f"/api/v1/namespaces/{namespace}/pods/{quote(name)}"))

    def delete_pod(self, name: str, namespace: str = "default", grace_period: int | None = 0) -> None:
        params = {} if grace_period is None else {"gracePeriodSeconds": grace_period}
        with contextlib.suppress(ApiError):
            self.api("DELETE", f"/api/v1/namespaces/{namespace}/pods/{quote(name)}", **params)

    def wait_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        phase: str | None = None,
        bound: bool = True,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Wait until the pod is bound (spec.nodeName set) and, if given, in ``phase``."""

        def ok() -> dict[str, Any] | None:
            p = self.get_pod(name, namespace)
            if bound and not p["spec"].get("nodeName"):
                return None
            if phase and p.get("status", {}).get("phase") != phase:
                return None
            return p

        return self.wait_for(ok, timeout, 0.2, f"pod {namespace}/{name} bound={bound} phase={phase}")

    # ---- etcd ---------------------------------------------------------------------------------

    def etcd_call(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """etcd's v3 JSON gateway (e.g. POST /v3/kv/range); int64 fields are strings, keys base64."""
        return components.etcd_call(self.etcd_port, method, path, body, timeout)

    def etcd_revision(self) -> int:
        return components.etcd_revision(self.etcd_port)

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd at ``revision`` (default: the current one) as kube-apiserver's compactor
        does (see :func:`components.compact_etcd`): a stale resourceVersion then gets 410 Gone."""
        return components.compact_etcd(self.etcd_port, revision)

    # ---- logs ---------------------------------------------------------------------------------

    def logs(self, lines: int = 80) -> str:
        """The last ``lines`` lines of every component log, one section each."""
        out = []
        for p in sorted(self.logs_dir.glob("*.log")):
            out.append(f"----- {p.name} (last {lines} lines) -----\n{tail_file(p, lines)}")
        return "\n".join(out)
