"""The command lines of the control plane's processes (etcd, kube-apiserver, KWOK,
kube-controller-manager, kube-scheduler), a minimal KubeSchedulerConfiguration, and etcd's v3 JSON
gateway."""

from __future__ import annotations

import base64
import http.client
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubesched.testing.builders import KWOK_ANNOTATION

__all__ = [
    "COMPACT_REV_KEY",
    "CONTROLLERS",
    "SERVICE_ACCOUNT_ISSUER",
    "SERVICE_CLUSTER_IP_RANGE",
    "apiserver_argv",
    "compact_etcd",
    "etcd_argv",
    "etcd_call",
    "etcd_revision",
    "kube_controller_manager_argv",
    "kube_scheduler_argv",
    "kwok_argv",
    "real_node_apiserver_args",
    "scheduler_config",
]

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
COMPACT_REV_KEY = "compact_rev_key"  # the key kube-apiserver's etcd compactor coordinates on


def etcd_argv(binary: str, data_dir: Path, client_url: str, peer_url: str, extra: Sequence[str] = ()) -> list[str]:
    return [
        binary,
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--log-level=warn",
        # A throw-away test store: skipping fsync makes writes ~10x faster on slow disks.
        "--unsafe-no-fsync",
        *extra,
    ]


def apiserver_argv(
    binary: str, *, etcd_url: str, port: int, pki: Path, verbosity: int = 1, extra: Sequence[str] = (),
    service_account_admission: bool = False,
) -> list[str]:
    """kube-apiserver on 127.0.0.1:``port`` with the certificates and keys in ``pki`` (see certs.PKI).
    ServiceAccount admission (token volumes; refuses pods until the namespace's ``default`` account
    exists) only with ``service_account_admission``: pods on KWOK nodes never read a token."""
    return [
        binary,
        f"--etcd-servers={etcd_url}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--authorization-mode=Node,RBAC",
        # 1.37 refuses a loopback --advertise-address with the lease endpoint reconciler; with
        # "none" the default/kubernetes Service simply has no endpoints (nothing in-cluster uses it).
        "--endpoint-reconciler-type=none",
        # Without it a SIGTERMed apiserver never exits while clients (KWOK, schedulers) hold
        # watches open: it stops listening, then waits for those connections forever. With it,
        # it ends the watches (clients see the stream close and re-watch) and exits in ~1s.
        "--shutdown-watch-termination-grace-period=5s",
        "--disable-admission-plugins=" + ",".join(
            ([] if service_account_admission else ["ServiceAccount"]) + ["TaintNodesByCondition"]
        ),
        "--allow-privileged=true",
        "--profiling=false",
        f"--v={verbosity}",
        *extra,
    ]


def real_node_apiserver_args(pki: Path, address: str) -> list[str]:
    """kube-apiserver flags (after ``apiserver_argv``'s, which they override) for a cluster with a
    real node (node.py), with ``apiserver_argv(service_account_admission=True)`` so pods get
    service-account tokens: they reach the API server through the ``kubernetes`` Service, whose
    endpoint is this machine's ``address`` (lease reconciler; serving on every address, loopback
    clients keep working); ``kubectl logs`` and ``exec`` reach the kubelet at its InternalIP with
    the API server's kubelet client certificate (certs: ``apiserver-kubelet-client``)."""
    return [
        "--bind-address=0.0.0.0",
        f"--advertise-address={address}",
        "--endpoint-reconciler-type=lease",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


def kwok_argv(
    binary: str, *, kubeconfig: Path, stages: Path, node_port: int, server_port: int, extra: Sequence[str] = ()
) -> list[str]:
    """KWOK for the nodes annotated kwok.x-k8s.io/node=fake, with the stages in ``stages``."""
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--config={stages}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        "--node-ip=127.0.0.1",
        f"--node-port={node_port}",
        f"--server-address=127.0.0.1:{server_port}",
        "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16",
        *extra,
    ]


#: kube-controller-manager's controllers: every default one except those that need what this
#: cluster lacks — node-ipam-controller (a pod CIDR to allocate from) and node-lifecycle-controller
#: (kubelets: with KWOK's leases renewed late under load it would taint nodes not-ready mid-test and
#: evict their pods).
CONTROLLERS = "*,-node-ipam-controller,-node-lifecycle-controller"


def kube_controller_manager_argv(
    binary: str, *, kubeconfig: Path, pki: Path, port: int, cert_dir: Path, verbosity: int = 1,
    extra: Sequence[str] = (),
) -> list[str]:
    """kube-controller-manager as kubeadm runs it (user system:kube-controller-manager, one service
    account per controller, the cluster CA to sign CSRs), serving /healthz on 127.0.0.1:``port``."""
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--controllers={CONTROLLERS}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--v={verbosity}",
        *extra,
    ]


def kube_scheduler_argv(
    binary: str,
    *,
    config: Path,
    kubeconfig: Path,
    port: int,
    cert_dir: Path,
    verbosity: int = 1,
    extra: Sequence[str] = (),
) -> list[str]:
    """The real kube-scheduler serving /healthz on 127.0.0.1:``port``; ``kubeconfig`` authenticates
    its delegated authentication/authorization checks."""
    return [
        binary,
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        f"--v={verbosity}",
        *extra,
    ]


def scheduler_config(
    kubeconfig: Path,
    *,
    scheduler_names: Sequence[str] = ("default-scheduler",),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A minimal KubeSchedulerConfiguration v1, leader election off; ``extra`` overrides top-level keys."""
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [{"schedulerName": n} for n in scheduler_names],
    }
    cfg.update(extra or {})
    return cfg


# -- etcd ---------------------------------------------------------------------------------------------


def _b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def etcd_call(port: int, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    """etcd's v3 JSON gateway on 127.0.0.1:``port`` (e.g. POST /v3/kv/range); int64 fields are
    strings, keys base64."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body).encode())
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    parsed = json.loads(raw) if raw else {}
    if resp.status >= 300:
        raise RuntimeError(f"etcd {method} {path}: HTTP {resp.status}: {parsed}")
    return parsed


def etcd_revision(port: int) -> int:
    return int(etcd_call(port, "POST", "/v3/kv/range", {"key": _b64(COMPACT_REV_KEY)})["header"]["revision"])


def compact_etcd(port: int, revision: int | None = None) -> int:
    """Compact etcd at ``revision`` (default: the current one) the way kube-apiserver does it.

    kube-apiserver's own compactor (every --etcd-compaction-interval, 5m by default) first
    bumps ``compact_rev_key`` with a compare-and-swap on its version, then compacts. Every
    apiserver watches that key to learn the compacted revision (its watch cache then drops
    snapshots older than it), so we follow the same protocol instead of only calling
    Compact: that is what a real cluster does, and a stale resourceVersion then gets 410
    Gone from the apiserver rather than being served from a cache snapshot."""
    key = _b64(COMPACT_REV_KEY)
    for _ in range(20):
        rng = etcd_call(port, "POST", "/v3/kv/range", {"key": key})
        current = int(rng["header"]["revision"])
        kvs = rng.get("kvs") or []
        version = int(kvs[0].get("version", 0)) if kvs else 0
        rev = revision or current
        txn = {
            "compare": [{"key": key, "target": "VERSION", "result": "EQUAL", "version": str(version)}],
            "success": [{"requestPut": {"key": key, "value": _b64(str(rev))}}],
            "failure": [{"requestRange": {"key": key}}],
        }
        if etcd_call(port, "POST", "/v3/kv/txn", txn).get("succeeded"):
            etcd_call(port, "POST", "/v3/kv/compaction", {"revision": str(rev), "physical": True})
            return rev
        time.sleep(0.05)
    raise RuntimeError("compact_etcd: compare-and-swap on compact_rev_key kept failing")
