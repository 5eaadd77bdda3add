"""RealNode: a real kubelet + containerd on this machine, registered with a ``ControlPlane`` (opt-in:
``python -m kubesched.testing.controlplane run --real-node``, the ``real_node`` pytest fixture).

KWOK nodes stay for scale; the real node runs what must really run: the kubesched image as a pod
(in-cluster auth, ConfigMap mounts, probes, leader election between replicas).

What this machine needs and why (each was refused otherwise):

* containerd + runc + containernetworking-plugins from Debian (bookworm: containerd 1.6.20, runc
  1.1.5); containerd with its own root/state/socket under the node directory, so it never touches
  a system containerd, and ``restrict_oom_score_adj = true`` (the sandbox lacks CAP_SYS_RESOURCE:
  raising a container's oom_score_adj is refused).
* The kubelet on cgroup v1 (``failCgroupV1: false``, deprecated upstream but still supported),
  ``cgroupDriver: cgroupfs`` (no systemd), ``failSwapOn: false``; its pods under a cgroup root of
  its own, so two nodes on one machine (parallel test sessions) do not share ``/kubepods``.
* A local pod sandbox image: registry.k8s.io is unreachable, so hack/cluster/extras/pause.sh
  builds ``pause`` and this module packs it as ``kubesched.local/pause:1`` (an OCI archive written
  here: one layer, one file) and imports it with ``ctr``.
* Pod network: the CNI ``bridge`` plugin with host-local IPAM on a subnet of its own per node
  (masquerading out), so pods reach the host's address and, through kube-proxy, Services.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kubesched.testing.controlplane.certs import write_kubeconfig
from kubesched.testing.controlplane.processes import Component, ComponentDied, free_port, wait_for

if TYPE_CHECKING:
    from kubesched.testing.controlplane.cluster import ControlPlane

__all__ = ["PAUSE_IMAGE", "NodeUnavailable", "RealNode", "host_ip", "missing_prerequisites", "oci_archive"]

PAUSE_IMAGE = "kubesched.local/pause:1"
CNI_PLUGINS_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
HOST_TOOLS = ("containerd", "ctr", "runc")
APT_PACKAGES = "containerd runc containernetworking-plugins"
MACHINE_LOCK = "/run/kubesched-real-node.lock"


class NodeUnavailable(RuntimeError):
    """This machine cannot run a real node (not root, a package missing, ...); the message says what."""


def host_ip() -> str:
    """This machine's address on its default route (what pods and the kubelet use to reach it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("203.0.113.1", 9))  # UDP connect (TEST-NET-3): picks the route, sends nothing
        except OSError as e:
            raise NodeUnavailable(f"no default route to find this machine's address: {e}") from None
        return str(s.getsockname()[0])


def missing_prerequisites(bin_dir: Path) -> list[str]:
    problems = []
    if os.geteuid() != 0:
        problems.append("a real node needs root (containerd, kubelet)")
    tools = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if tools:
        problems.append(f"missing {', '.join(tools)} (apt-get install {APT_PACKAGES})")
    cni = [p for p in ("bridge", "host-local", "loopback", "portmap") if not (CNI_PLUGINS_DIR / p).exists()]
    if cni:
        problems.append(f"missing CNI plugins {', '.join(cni)} in {CNI_PLUGINS_DIR} "
                        "(apt-get install containernetworking-plugins)")
    built = [b for b in ("kubelet", "pause") if not (bin_dir / b).exists()]
    if built:
        problems.append(f"missing {', '.join(built)} in {bin_dir} (hack/cluster/build.sh)")
    return problems


class RealNode:
    """containerd + kubelet registered as node ``name`` with ``cluster``; files under
    ``cluster.dir/node-<name>/`` (containerd root/state, kubelet root, pod logs, CNI config)."""

    def __init__(
        self, cluster: ControlPlane, name: str = "kubesched-node", *, pod_subnet: str = "10.88.0.0/24"
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.pod_subnet = pod_subnet
        self.dir = cluster.dir / f"node-{name}"
        self.bin_dir = cluster.bin_dir
        self.address = host_ip()
        self.containerd_socket = self.dir / "containerd.sock"
        self.containerd: Component | None = None
        self.kubelet: Component | None = None
        self.kube_proxy: Component | None = None
        self._lock: IO[str] | None = None
        # A cgroup root per node: parallel sessions on one machine would otherwise share /kubepods.
        self.cgroup_root = f"/kubesched-{name}-{os.getpid()}"

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> RealNode:
        problems = missing_prerequisites(self.bin_dir)
        if problems:
            raise NodeUnavailable("; ".join(problems))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_machine(timeout)
        try:
            self._start_containerd(timeout)
            self.import_image(self._pause_archive())
            self._make_cgroup_root()
            self._start_kubelet(timeout)
            self._start_kube_proxy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the kubelet, then remove every pod sandbox it left (containers, mounts, network
        namespaces), then containerd."""
        if self.kube_proxy is not None:
            self.kube_proxy.stop()
            # Its iptables chains outlive it; `--cleanup` removes them and exits.
            subprocess.run([str(self.bin_dir / "kube-proxy"), "--cleanup"], capture_output=True, check=False,
                           timeout=60)
        if self.kubelet is not None:
            self.kubelet.stop()
        self.kubelet = self.kube_proxy = None
        if self.containerd is not None and self.containerd.alive():
            self._remove_containers()
        if self.containerd is not None:
            self.containerd.stop()
        self.containerd = None
        # Volumes (kubelet) and sandbox /dev/shm (containerd state) stay mounted after the processes.
        prefix = f"{self.dir}/"
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mountpoint in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
            subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)
        self._remove_cgroup_root()
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None

    def _lock_machine(self, timeout: float) -> None:
        """One real node per machine at a time: kube-proxy's iptables chains and the Service range
        are machine-wide, so two nodes (parallel test sessions) would route each other's
        `kubernetes` Service to the wrong API server (seen: TLS verification failures in pods).
        A second node waits for the first to stop."""
        lock = open(MACHINE_LOCK, "a")  # noqa: SIM115 - held until stop()
        deadline = time.monotonic() + max(timeout, 600.0)
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise NodeUnavailable(f"another real node holds {MACHINE_LOCK}") from None
                time.sleep(1)
        self._lock = lock

    # ---- cgroups (v1 here: one hierarchy per controller) -----------------------------------------

    def _cgroup_dirs(self, *, unified: bool = False) -> list[Path]:
        """The root in every v1 hierarchy (and in the cgroup2 one mounted alongside, where the
        kubelet also makes its pod cgroups, when ``unified``)."""
        base = Path("/sys/fs/cgroup")
        return [d / self.cgroup_root.lstrip("/") for d in sorted(base.iterdir())
                if d.is_dir() and (d / "cgroup.procs").exists() and (unified or d.name != "unified")]

    def _make_cgroup_root(self) -> None:
        """The kubelet wants its cgroup root to exist in every hierarchy; a new cpuset cgroup
        starts with no CPUs and no memory nodes, so it gets its parent's."""
        for d in self._cgroup_dirs():
            d.mkdir(exist_ok=True)
            if d.parent.name == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((d.parent / f).read_text())

    def _remove_cgroup_root(self) -> None:
        """Remove the (now empty) cgroups the kubelet made under the root, deepest first."""
        for d in self._cgroup_dirs(unified=True):
            if d.exists():
                for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        sub.rmdir()
                with contextlib.suppress(OSError):
                    d.rmdir()

    def logs(self, lines: int = 40) -> str:
        parts = (self.containerd, self.kubelet, self.kube_proxy)
        return "\n".join(f"--- {c.name} ---\n{c.tail(lines)}" for c in parts if c)

    # ---- containerd ---------------------------------------------------------------------------

    def ctr(self, *args: str, input: bytes | None = None, timeout: float = 300) -> str:
        proc = subprocess.run(["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io", *args],
                              input=input, capture_output=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: exit {proc.returncode}: {proc.stderr.decode()[-2000:]}")
        return proc.stdout.decode()

    def import_image(self, archive: Path, base_name: str | None = None) -> None:
        """Import an OCI archive (e.g. deploy/image/build.sh's kubesched-image.tar) into the node's
        image store; ``base_name`` names a tag-only reference (``kubesched`` + ``0.1.0`` gives
        docker.io/library/kubesched:0.1.0, what a pod's ``image: kubesched:0.1.0`` resolves to)."""
        args = ["images", "import"]
        if base_name:
            args += ["--base-name", base_name]
        self.ctr(*args, str(archive))

    def _start_containerd(self, timeout: float) -> None:
        cni_conf = self.dir / "cni"
        cni_conf.mkdir(exist_ok=True)
        (cni_conf / "10-kubesched.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0",
            "name": f"kubesched-{self.name}",
            "plugins": [
                {"type": "bridge", "bridge": "ksbr0", "isGateway": True, "ipMasq": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_subnet}]],
                          "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(self.dir / "cni-ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }))
        config = self.dir / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{self.dir / "containerd-root"}"\n'
            f'state = "{self.dir / "containerd-state"}"\n'
            f'[grpc]\n  address = "{self.containerd_socket}"\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n'
            f'  sandbox_image = "{PAUSE_IMAGE}"\n'
            "  restrict_oom_score_adj = true\n"
            '[plugins."io.containerd.grpc.v1.cri".cni]\n'
            f'  bin_dir = "{CNI_PLUGINS_DIR}"\n'
            f'  conf_dir = "{cni_conf}"\n'
        )
        self.containerd = Component("containerd", ["containerd", "--config", str(config)],
                                    self.cluster.logs_dir / f"containerd-{self.name}.log")
        self.containerd.die_with_parent = self.cluster.die_with_parent
        self.containerd.start()

        def up() -> bool:
            if not self.containerd or not self.containerd.alive():
                raise ComponentDied(f"containerd exited:\n{self.containerd.tail(30) if self.containerd else ''}")
            self.ctr("version", timeout=10)
            return True

        wait_for(up, timeout, 0.2, "containerd")

    def _pause_archive(self) -> Path:
        out = self.dir / "pause-image.tar"
        out.write_bytes(oci_archive(PAUSE_IMAGE, {"pause": (self.bin_dir / "pause").read_bytes()},
                                    entrypoint=["/pause"], user="65535:65535"))
        return out

    def _remove_containers(self) -> None:
        """Pod sandboxes survive the kubelet: remove their containers and tasks through ctr."""
        for cid in self.ctr("containers", "list", "--quiet", timeout=30).split():
            subprocess.run(["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io",
                            "tasks", "kill", "--signal", "SIGKILL", cid], capture_output=True, check=False)
        for cid in self.ctr("containers", "list", "--quiet", timeout=30).split():
            subprocess.run(["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io",
                            "tasks", "delete", "--force", cid], capture_output=True, check=False, timeout=30)
            subprocess.run(["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io",
                            "containers", "delete", cid], capture_output=True, check=False, timeout=30)

    # ---- kubelet ------------------------------------------------------------------------------

    def _start_kubelet(self, timeout: float) -> None:
        pki = self.cluster.pki
        crt, key = pki.issue(f"kubelet-{self.name}", f"system:node:{self.name}", organizations=["system:nodes"],
                             client=True)
        kubeconfig = write_kubeconfig(self.dir / "kubelet.kubeconfig", self.cluster.server, pki.ca_crt, crt, key,
                                      user=f"system:node:{self.name}")
        serving_crt, serving_key = pki.issue(f"kubelet-{self.name}-serving", f"system:node:{self.name}",
                                             ips=[self.address, "127.0.0.1"], dns=[self.name], server=True)
        self.port = free_port()
        config = self.dir / "kubelet.yaml"
        config.write_text(json.dumps(self._kubelet_config(serving_crt, serving_key), indent=2))
        argv = [
            str(self.bin_dir / "kubelet"),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.dir / 'kubelet'}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.address}",
            f"--node-labels=kubesched.io/real-node={self.name}",
            "--v=1",
        ]
        self.kubelet = Component("kubelet", argv, self.cluster.logs_dir / f"kubelet-{self.name}.log")
        self.kubelet.die_with_parent = self.cluster.die_with_parent
        self.kubelet.start()

        def ready() -> bool:
            if not self.kubelet or not self.kubelet.alive():
                raise ComponentDied(f"kubelet exited:\n{self.kubelet.tail(40) if self.kubelet else ''}")
            node = self.cluster.get(f"/api/v1/nodes/{self.name}")
            conds = node.get("status", {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        wait_for(ready, timeout, 0.5, f"node {self.name} Ready")

    def _start_kube_proxy(self, timeout: float) -> None:
        """kube-proxy (iptables mode) so pods reach Services, above all ``kubernetes``: what
        in-cluster clients (kubesched's service-account auth) connect to."""
        crt, key = self.cluster.pki.issue("kube-proxy", "system:kube-proxy", client=True)  # system:node-proxier
        kubeconfig = write_kubeconfig(self.dir / "kube-proxy.kubeconfig", self.cluster.server, self.cluster.pki.ca_crt,
                                      crt, key, user="kube-proxy")
        healthz = free_port()
        config = self.dir / "kube-proxy.yaml"
        config.write_text(json.dumps({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": self.name,
            "clusterCIDR": self.pod_subnet,
            "bindAddress": self.address,
            "healthzBindAddress": f"127.0.0.1:{healthz}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            # A shared machine: leave its conntrack sysctls alone (0: do not set) and do not turn
            # on route_localnet for NodePorts on 127.0.0.1 (nothing here uses NodePorts).
            "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},
            "nodePortAddresses": ["primary"],
        }, indent=2))
        self.kube_proxy = Component("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={config}", "--v=1"],
                                    self.cluster.logs_dir / f"kube-proxy-{self.name}.log")
        self.kube_proxy.die_with_parent = self.cluster.die_with_parent
        self.kube_proxy.start()

        def healthy() -> bool:
            if not self.kube_proxy or not self.kube_proxy.alive():
                raise ComponentDied(f"kube-proxy exited:\n{self.kube_proxy.tail(40) if self.kube_proxy else ''}")
            conn = http.client.HTTPConnection("127.0.0.1", healthz, timeout=2)
            try:
                conn.request("GET", "/healthz")
                return conn.getresponse().status == 200
            finally:
                conn.close()

        wait_for(healthy, timeout, 0.5, "kube-proxy /healthz")

    def _kubelet_config(self, serving_crt: Path, serving_key: Path) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": self.address,
            "port": self.port,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "tlsCertFile": str(serving_crt),
            "tlsPrivateKeyFile": str(serving_key),
            # The API server authenticates with its kubelet client certificate (exec, logs).
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.cluster.pki.ca_crt)}},
            "authorization": {"mode": "Webhook"},
            "registerNode": True,
            "podLogsDir": str(self.dir / "pod-logs"),
            "staticPodPath": "",
            "resolvConf": "/etc/resolv.conf",
            # A shared test machine: no disk-pressure evictions or image GC from its fill level.
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "localStorageCapacityIsolation": False,
            "serializeImagePulls": False,
        }


# ---- OCI archive --------------------------------------------------------------------------------


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def oci_archive(
    reference: str, files: dict[str, bytes], *, entrypoint: Sequence[str] = (), user: str = "65532:65532"
) -> bytes:
    """A one-layer OCI image archive (what ``ctr images import`` reads) holding ``files`` (path →
    content, mode 0755, owner root) at the image root; reproducible (fixed times, sorted)."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, content in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), 0o755, 0
            t.addfile(info, io.BytesIO(content))
    diff_id = "sha256:" + hashlib.sha256(layer_tar.getvalue()).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
        g.write(layer_tar.getvalue())
    layer_digest, layer = _blob(gz.getvalue())
    config_digest, config = _blob(json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": list(entrypoint) or None, "User": user,
                   "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }, sort_keys=True).encode())
    manifest_digest, manifest = _blob(json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest,
                    "size": len(layer)}],
    }, sort_keys=True).encode())
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                       "size": len(manifest),
                       "annotations": {"io.containerd.image.name": reference,
                                       "org.opencontainers.image.ref.name": reference.rsplit(":", 1)[1]}}],
    }).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        entries = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)]
        entries += [(f"blobs/sha256/{d.removeprefix('sha256:')}", b)
                    for d, b in ((layer_digest, layer), (config_digest, config), (manifest_digest, manifest))]
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()

