#!/usr/bin/env python3
"""A real, local Kubernetes control plane for tests and demos: etcd + kube-apiserver (+ KWOK, + the
real kube-scheduler), built from Go modules by ``hack/cluster/build.sh``.

Stdlib only, plus ``cryptography`` (a dev dependency) for the certificates. Importable as a
module and runnable as a script::

    python hack/cluster/devcluster.py up --nodes 10 --dir /tmp/kc     # start, detach, print KUBECONFIG
    python hack/cluster/devcluster.py down --dir /tmp/kc              # stop what `up` started
    python hack/cluster/devcluster.py run --nodes 10                  # foreground; Ctrl-C stops everything
    python hack/cluster/devcluster.py up --nodes 10 --foreground      # the same as `run`
    python hack/cluster/devcluster.py run --nodes 10 --scheduler      # ... plus the real kube-scheduler

Python API::

    with DevCluster(workdir) as c:           # or c = DevCluster(); c.start(); ...; c.stop()
        c.create_nodes(3, cpu="4", memory="8Gi")
        c.create_pod("p", requests={"cpu": "100m"})
        sched = c.start_kube_scheduler()     # default KubeSchedulerConfiguration, leader election off
        c.wait_for(lambda: c.get("/api/v1/namespaces/default/pods/p")["spec"].get("nodeName"))

What is there and what is not (no kube-controller-manager, no kubelet):
  * RBAC is on (``--authorization-mode=Node,RBAC``); clients authenticate with certificates signed
    by the generated CA: admin (O=system:masters), system:kube-scheduler, or any identity through
    ``client_kubeconfig()``.
  * Admission plugins ``ServiceAccount`` and ``TaintNodesByCondition`` are disabled: the first would
    need the ``default`` ServiceAccount that only the controller manager creates, the second adds a
    ``node.kubernetes.io/not-ready`` taint that only the node lifecycle controller removes.
  * KWOK plays the kubelets of the nodes annotated ``kwok.x-k8s.io/node: fake`` with kwokctl's
    default stages (node ready + lease heartbeat, pod ready/complete/delete): bound pods become
    Running and graceful deletions of their pods complete.
  * Nothing garbage-collects: namespaces stay Terminating, ownerReferences do not cascade.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as _dt
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

HERE = Path(__file__).resolve().parent
BINARIES = ("kube-apiserver", "kube-scheduler", "etcd", "kwok")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
COMPACT_REV_KEY = "compact_rev_key"  # the key kube-apiserver's etcd compactor coordinates on

T = TypeVar("T")


# --------------------------------------------------------------------------------------------------
# versions and binaries


def read_versions() -> dict[str, str]:
    """The pin from hack/cluster/versions.env: K8S_VERSION, ETCD_VERSION, KWOK_VERSION."""
    out: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip("'\"")
    return out


def default_bin_dir() -> Path:
    root = os.environ.get("KUBESCHED_CACHE") or str(Path.home() / ".cache" / "kubesched")
    return Path(root) / f"k8s-{read_versions()['K8S_VERSION']}"


class BinariesUnavailable(RuntimeError):
    """The control plane binaries are missing and could not be built (e.g. no Go toolchain)."""


def missing_binaries(bin_dir: Path | None = None) -> list[str]:
    d = bin_dir or default_bin_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def binaries_up_to_date() -> bool:
    """True when build.sh's stamp matches the current pin (no rebuild needed)."""
    return subprocess.run([str(HERE / "build.sh"), "--check"], capture_output=True).returncode == 0


def ensure_binaries(*, build: bool = True, quiet: bool = False) -> Path:
    """Return the binary directory, running hack/cluster/build.sh first (a no-op when up to date)."""
    d = default_bin_dir()
    if binaries_up_to_date():
        return d
    if not build:
        raise BinariesUnavailable(f"control plane binaries are missing or stale in {d}; run hack/cluster/build.sh")
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        raise BinariesUnavailable(
            f"control plane binaries are missing in {d} and no Go toolchain is installed to build them "
            "(install go >= 1.26, then run hack/cluster/build.sh)"
        )
    env = dict(os.environ)
    env.setdefault("GO", go)
    proc = subprocess.run(
        [str(HERE / "build.sh")],
        env=env,
        stdout=None if not quiet else subprocess.PIPE,
        stderr=subprocess.STDOUT if quiet else None,
        text=True,
    )
    if proc.returncode != 0 or missing_binaries(d):
        tail = (proc.stdout or "")[-4000:] if quiet else ""
        raise BinariesUnavailable(f"hack/cluster/build.sh failed (exit {proc.returncode})\n{tail}")
    return d


# --------------------------------------------------------------------------------------------------
# certificates


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _PKI:
    """A throw-away CA plus the keys and certificates a control plane needs (ECDSA P-256: fast)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_crt = self.dir / "ca.crt"
        self.ca_key = self.dir / "ca.key"
        if not self.ca_crt.exists():
            self._make_ca()

    def _make_ca(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesched-devcluster-ca")])
        now = _dt.datetime.now(_dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(hours=1))
            .not_valid_after(now + _dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        _write_key(self.ca_key, key)
        self.ca_crt.write_bytes(_pem_cert(cert))

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        server: bool = False,
        client: bool = False,
    ) -> tuple[Path, Path]:
        """Write <name>.crt/<name>.key signed by the CA (reused when they already exist)."""
        crt, keyf = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        if crt.exists() and keyf.exists():
            return crt, keyf
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(self.ca_crt.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = _dt.datetime.now(_dt.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(hours=1))
            .not_valid_after(now + _dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        _write_key(keyf, key)
        crt.write_bytes(_pem_cert(cert))
        return crt, keyf

    def service_account_keys(self) -> tuple[Path, Path]:
        pub, key = self.dir / "sa.pub", self.dir / "sa.key"
        if not key.exists():
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ec

            k = ec.generate_private_key(ec.SECP256R1())
            _write_key(key, k)
            pub.write_bytes(
                k.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            )
        return pub, key


def _pem_cert(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str = "admin") -> Path:
    """A kubeconfig with client-certificate auth (absolute file paths, so it can be copied around)."""
    path.write_text(
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: devcluster\n"
        "  cluster:\n"
        f"    server: {server}\n"
        f"    certificate-authority: {ca.resolve()}\n"
        "users:\n"
        f"- name: {user}\n"
        "  user:\n"
        f"    client-certificate: {cert.resolve()}\n"
        f"    client-key: {key.resolve()}\n"
        "contexts:\n"
        "- name: devcluster\n"
        "  context:\n"
        "    cluster: devcluster\n"
        f"    user: {user}\n"
        "current-context: devcluster\n"
    )
    return path


# --------------------------------------------------------------------------------------------------
# a tiny HTTPS JSON client


class ApiError(RuntimeError):
    """A non-2xx answer from the apiserver; ``status`` is the HTTP code, ``body`` the parsed Status."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method, self.path, self.status, self.body = method, path, status, body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {msg}")

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


class KubeClient:
    """Raw JSON over HTTPS with the CA and a client certificate; one connection per request."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path, timeout: float = 30.0) -> None:
        assert server.startswith("https://")
        hostport = server[len("https://") :].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.ctx.load_cert_chain(str(cert), str(key))

    def _conn(self, timeout: float | None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        if params:
            path += ("&" if "?" in path else "?") + urlencode({k: v for k, v in params.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        conn = self._conn(timeout or self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if resp.status >= 300:
            raise ApiError(method, path, resp.status, parsed)
        return parsed

    def watch(
        self, path: str, *, params: Mapping[str, Any] | None = None, timeout: float = 60.0
    ) -> Iterator[dict[str, Any]]:
        """Yield watch events ({"type":..., "object":...}) until the server ends the stream.

        An HTTP error before the stream starts raises ApiError; errors during the stream arrive as
        ``{"type": "ERROR", "object": <Status>}`` events, exactly as the apiserver sends them."""
        p = dict(params or {})
        p["watch"] = "true"
        p.setdefault("timeoutSeconds", max(1, int(timeout)))
        full = path + ("&" if "?" in path else "?") + urlencode(p)
        conn = self._conn(timeout + 10)
        try:
            conn.request("GET", full, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status >= 300:
                raw = resp.read()
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                raise ApiError("WATCH", full, resp.status, body)
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)
        finally:
            conn.close()


# --------------------------------------------------------------------------------------------------
# processes


class Component:
    """One child process in its own process group, logging to a file. ``stop()`` is idempotent."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        env: Mapping[str, str] | None = None,
        *,
        die_with_parent: bool = True,
    ) -> None:
        self.name, self.argv, self.log_path = name, list(argv), log
        self.env = dict(env) if env is not None else None
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Component:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: signals from a terminal's Ctrl-C don't reach it
                preexec_fn=_die_with_parent if self.die_with_parent else None,
                env=self.env,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        p = self.proc
        if p is None:
            return
        _terminate_group(p.pid, p, timeout)
        self.proc = None

    def tail(self, lines: int = 60) -> str:
        return tail_file(self.log_path, lines)


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the parent dies, even by SIGKILL, when atexit and
    finalizers never run (Linux only; a no-op elsewhere). PR_SET_PDEATHSIG = 1. Note that it fires
    when the *thread* that started the child exits: start clusters from a long-lived thread."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before prctl
            os._exit(1)


def _terminate_group(pid: int, popen: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM the process group, wait, then SIGKILL it."""
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if popen is not None:
                if popen.poll() is not None:
                    break
            elif not _pid_alive(pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    # the group may hold children (none of ours fork, but be thorough)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(Exception):
            popen.wait(timeout=5)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def tail_file(path: Path, lines: int = 60) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * lines))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _stop_order(c: Component) -> int:
    # clients first, then the apiserver, etcd last (whatever order they were (re)started in)
    for i, prefix in enumerate(("kube-scheduler", "kwok", "kube-apiserver", "etcd")):
        if c.name.startswith(prefix):
            return i
    return -1


def _stop_all(components: list[Component]) -> None:
    for c in sorted(components, key=_stop_order):
        with contextlib.suppress(Exception):
            c.stop(timeout=10.0)
    components.clear()


# --------------------------------------------------------------------------------------------------
# the cluster


def wait_for(predicate: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1, message: str = "") -> T:
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` expires.

    Exceptions from the predicate count as "not yet"; the last one is chained to the TimeoutError."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            v = predicate()
            if v:
                return v
        except ComponentDied:
            raise  # no point waiting for a process that is gone
        except Exception as e:
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {message or predicate}") from last_exc
        time.sleep(interval)


def _b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


class DevCluster:
    """etcd + kube-apiserver (+ KWOK, + kube-scheduler) on free loopback ports under ``workdir``.

    Layout of ``workdir``: ``pki/`` (CA, serving and client certs, service-account keys),
    ``etcd-data/``, ``logs/<component>.log``, ``kubeconfig`` (admin, O=system:masters),
    ``scheduler.kubeconfig`` (user system:kube-scheduler), ``cluster.json`` (pids, for ``down``).
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
    ) -> None:
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="kubesched-devcluster-")).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = Path(bin_dir) if bin_dir else default_bin_dir()
        self.versions = read_versions()
        self.extra_apiserver_args = list(apiserver_args)
        self.extra_etcd_args = list(etcd_args)
        self.verbosity = verbosity
        # children get SIGKILL if this process dies without cleaning up (off for `up`: detached)
        self.die_with_parent = die_with_parent
        self.logs_dir = self.dir / "logs"
        self.pki = _PKI(self.dir / "pki")
        self.etcd_port = _free_port()
        self.etcd_peer_port = _free_port()
        self.apiserver_port = _free_port()
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.kubeconfig = self.dir / "kubeconfig"
        self.scheduler_kubeconfig = self.dir / "scheduler.kubeconfig"
        self._components: list[Component] = []
        self.etcd: Component | None = None
        self.apiserver: Component | None = None
        self.kwok: Component | None = None
        self.schedulers: list[Component] = []
        self._client: KubeClient | None = None
        self._lock = threading.Lock()
        # Kill children when the object is collected or the interpreter exits (unless detach()ed).
        self._finalizer = weakref.finalize(self, _stop_all, self._components)

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(
        self,
        with_kwok: bool = True,
        with_scheduler_config: str | Path | None = None,
        *,
        timeout: float = 90.0,
    ) -> DevCluster:
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise BinariesUnavailable(f"missing {', '.join(missing)} in {self.bin_dir}: run hack/cluster/build.sh")
        try:
            self._write_certs_and_kubeconfigs()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            if with_kwok:
                self.start_kwok()
            if with_scheduler_config is not None:
                self.start_kube_scheduler(with_scheduler_config)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def stop(self) -> None:
        """Stop every component (scheduler, kwok, apiserver, etcd), leaving no process behind."""
        _stop_all(self._components)
        self.etcd = self.apiserver = self.kwok = None
        self.schedulers = []
        with contextlib.suppress(OSError):
            (self.dir / "cluster.json").unlink()
        if self._own_dir:  # a temp dir of ours: drop the store (64 MiB of preallocated WAL), keep the logs
            shutil.rmtree(self.dir / "etcd-data", ignore_errors=True)

    def detach(self) -> None:
        """Leave the processes running after this object/interpreter goes away (``up`` command)."""
        self._finalizer.detach()

    def __enter__(self) -> DevCluster:
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
            ips=["127.0.0.1", "::1", str(next(ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE).hosts()))],
            server=True,
        )
        self.pki.service_account_keys()
        crt, key = self.pki.issue("admin", "kubernetes-admin", organizations=["system:masters"], client=True)
        write_kubeconfig(self.kubeconfig, self.server, self.pki.ca_crt, crt, key, user="admin")
        crt, key = self.pki.issue("scheduler", "system:kube-scheduler", client=True)
        write_kubeconfig(self.scheduler_kubeconfig, self.server, self.pki.ca_crt, crt, key, user="scheduler")
        self._client = None

    def client_kubeconfig(self, name: str, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for another identity (certificate CN=user, O=groups), e.g. a custom scheduler."""
        crt, key = self.pki.issue(f"user-{name}", user, organizations=groups, client=True)
        return write_kubeconfig(self.dir / f"{name}.kubeconfig", self.server, self.pki.ca_crt, crt, key, user=name)

    def _start_etcd(self, timeout: float) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [
            self._bin("etcd"),
            "--name=default",
            f"--data-dir={self.dir / 'etcd-data'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--log-level=warn",
            # A throw-away test store: skipping fsync makes writes ~10x faster on slow disks.
            "--unsafe-no-fsync",
            *self.extra_etcd_args,
        ]
        self.etcd = self._add(Component("etcd", argv, self.logs_dir / "etcd.log"))

        def healthy() -> bool:
            self._check_alive(self.etcd)
            body = self.etcd_call("GET", "/health")
            return str(body.get("health")) == "true"

        wait_for(healthy, timeout, 0.1, "etcd /health")

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki.dir
        return [
            self._bin("kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.apiserver_port}",
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
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            "--profiling=false",
            f"--v={self.verbosity}",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self, timeout: float) -> None:
        comp = Component("kube-apiserver", self._apiserver_argv(), self.logs_dir / "kube-apiserver.log")
        self.apiserver = self._add(comp)
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
        argv = [
            self._bin("kwok"),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={HERE / 'kwok' / 'stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--node-ip=127.0.0.1",
            f"--node-port={_free_port()}",
            f"--server-address=127.0.0.1:{_free_port()}",
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16",
            *extra_args,
        ]
        self.kwok = self._add(Component("kwok", argv, self.logs_dir / "kwok.log"))
        time.sleep(0.2)
        self._check_alive(self.kwok)
        self._write_state()
        return self.kwok

    def write_scheduler_config(
        self,
        path: str | Path | None = None,
        *,
        scheduler_names: Sequence[str] = ("default-scheduler",),
        extra: Mapping[str, Any] | None = None,
    ) -> Path:
        """A minimal KubeSchedulerConfiguration v1 (JSON is valid YAML), leader election off."""
        cfg: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(self.scheduler_kubeconfig)},
            "profiles": [{"schedulerName": n} for n in scheduler_names],
        }
        cfg.update(extra or {})
        p = Path(path) if path else self.dir / "kube-scheduler-config.yaml"
        p.write_text(json.dumps(cfg, indent=2) + "\n")
        return p

    def start_kube_scheduler(
        self, config_path: str | Path | None = None, *, extra_args: Sequence[str] = (), timeout: float = 60.0
    ) -> Component:
        """Start the real kube-scheduler (user system:kube-scheduler) and wait for its /healthz.

        ``config_path`` is a KubeSchedulerConfiguration file (its clientConnection.kubeconfig must be
        set; leader election is whatever it says); default: ``write_scheduler_config()``."""
        cfg = Path(config_path) if config_path else self.write_scheduler_config()
        n = len(self.schedulers)
        port = _free_port()
        argv = [
            self._bin("kube-scheduler"),
            f"--config={cfg}",
            f"--authentication-kubeconfig={self.scheduler_kubeconfig}",
            f"--authorization-kubeconfig={self.scheduler_kubeconfig}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.dir / f'kube-scheduler-{n}-certs'}",
            f"--v={self.verbosity}",
            *extra_args,
        ]
        name = "kube-scheduler" if n == 0 else f"kube-scheduler-{n}"
        comp = self._add(Component(name, argv, self.logs_dir / f"{name}.log"))
        self.schedulers.append(comp)
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
            wait_for(healthy, timeout, 0.2, f"{name} /healthz")
        except BaseException:
            self.stop_component(comp)
            raise
        self._write_state()
        return comp

    def stop_component(self, comp: Component) -> None:
        self._remove(comp)
        if comp in self.schedulers:
            self.schedulers.remove(comp)
        if comp is self.kwok:
            self.kwok = None

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
        pods: str = "110",
        extended: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        kwok: bool = True,
        wait_ready: bool | None = None,
        timeout: float = 60.0,
    ) -> list[str]:
        """Create ``count`` fake nodes <prefix><i>. KWOK-managed ones (``kwok=True``, the default)
        get the annotation kwok.x-k8s.io/node=fake and the label type=kwok, and no taint unless given.
        ``wait_ready`` (default: when KWOK runs) waits until KWOK has marked them all Ready."""
        names = []
        for i in range(start, start + count):
            name = f"{prefix}{i}"
            resources = {"cpu": cpu, "memory": memory, "pods": pods, **dict(extended or {})}
            lbl = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **({"type": "kwok"} if kwok else {}),
                **dict(labels or {}),
            }
            ann = {"node.alpha.kubernetes.io/ttl": "0", **({KWOK_ANNOTATION: "fake"} if kwok else {})}
            ann.update(annotations or {})
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": lbl, "annotations": ann},
                "spec": {"taints": [dict(t) for t in taints]} if taints else {},
                "status": {
                    "capacity": resources,
                    "allocatable": resources,
                    "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
                },
            }
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

    def pod_manifest(
        self,
        name: str,
        namespace: str = "default",
        *,
        requests: Mapping[str, str] | None = None,
        limits: Mapping[str, str] | None = None,
        scheduler_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Mapping[str, Any]] = (),
        affinity: Mapping[str, Any] | None = None,
        priority_class_name: str | None = None,
        node_name: str | None = None,
        image: str = "registry.k8s.io/pause:3.10",
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": image}
        res: dict[str, Any] = {}
        if requests:
            res["requests"] = dict(requests)
        if limits:
            res["limits"] = dict(limits)
        if res:
            container["resources"] = res
        spec: dict[str, Any] = {
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        }
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)
        if tolerations:
            spec["tolerations"] = [dict(t) for t in tolerations]
        if affinity:
            spec["affinity"] = dict(affinity)
        if priority_class_name:
            spec["priorityClassName"] = priority_class_name
        if node_name:
            spec["nodeName"] = node_name
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": spec,
        }

    def create_pod(self, name: str, namespace: str = "default", **kwargs: Any) -> dict[str, Any]:
        """Create a pod (see ``pod_manifest`` for the keyword arguments); returns the created object."""
        body = self.pod_manifest(name, namespace, **kwargs)
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
        conn = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=timeout)
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

    def etcd_revision(self) -> int:
        return int(self.etcd_call("POST", "/v3/kv/range", {"key": _b64(COMPACT_REV_KEY)})["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd at ``revision`` (default: the current one) the way kube-apiserver does it.

        kube-apiserver's own compactor (every --etcd-compaction-interval, 5m by default) first
        bumps ``compact_rev_key`` with a compare-and-swap on its version, then compacts. Every
        apiserver watches that key to learn the compacted revision (its watch cache then drops
        snapshots older than it), so we follow the same protocol instead of only calling
        Compact: that is what a real cluster does, and a stale resourceVersion then gets 410
        Gone from the apiserver rather than being served from a cache snapshot."""
        key = _b64(COMPACT_REV_KEY)
        for _ in range(20):
            rng = self.etcd_call("POST", "/v3/kv/range", {"key": key})
            current = int(rng["header"]["revision"])
            kvs = rng.get("kvs") or []
            version = int(kvs[0].get("version", 0)) if kvs else 0
            rev = revision or current
            txn = {
                "compare": [{"key": key, "target": "VERSION", "result": "EQUAL", "version": str(version)}],
                "success": [{"requestPut": {"key": key, "value": _b64(str(rev))}}],
                "failure": [{"requestRange": {"key": key}}],
            }
            if self.etcd_call("POST", "/v3/kv/txn", txn).get("succeeded"):
                self.etcd_call("POST", "/v3/kv/compaction", {"revision": str(rev), "physical": True})
                return rev
            time.sleep(0.05)
        raise RuntimeError("compact_etcd: compare-and-swap on compact_rev_key kept failing")

    # ---- logs ---------------------------------------------------------------------------------

    def logs(self, lines: int = 80) -> str:
        """The last ``lines`` lines of every component log, one section each."""
        out = []
        for p in sorted(self.logs_dir.glob("*.log")):
            out.append(f"----- {p.name} (last {lines} lines) -----\n{tail_file(p, lines)}")
        return "\n".join(out)


class ComponentDied(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------------
# CLI


def _down(directory: Path) -> int:
    state_file = directory / "cluster.json"
    if not state_file.exists():
        print(f"devcluster: nothing running in {directory} (no cluster.json)")
        return 0
    state = json.loads(state_file.read_text())
    for p in reversed(state.get("processes", [])):
        pid = int(p["pid"])
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue  # gone already
        if os.path.basename(exe) != os.path.basename(p["exe"]):
            continue  # pid reused by something else: not ours
        print(f"devcluster: stopping {p['name']} (pid {pid})")
        _terminate_group(pid, None, 10.0)
    state_file.unlink()
    return 0


def _print_banner(c: DevCluster, scheduler: bool) -> None:
    print(f"devcluster: kubernetes {c.versions['K8S_VERSION']} at {c.server} (etcd {c.etcd_url})")
    print(f"devcluster: logs in {c.logs_dir}")
    if scheduler:
        print("devcluster: kube-scheduler running (schedulerName default-scheduler)")
    print(f"devcluster: kubeconfig {c.kubeconfig}")
    print(f"export KUBECONFIG={c.kubeconfig}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, help_ in (
        ("up", "start a control plane and leave it running (stop it with `down`)"),
        ("run", "start a control plane in the foreground; Ctrl-C stops everything"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--dir", type=Path, default=None, help="cluster directory (default: a new temp dir)")
        p.add_argument("--nodes", type=int, default=10, help="number of KWOK nodes to create (default 10)")
        p.add_argument("--cpu", default="32")
        p.add_argument("--memory", default="256Gi")
        p.add_argument("--pods", default="110")
        p.add_argument("--no-kwok", action="store_true", help="do not start KWOK")
        p.add_argument(
            "--scheduler",
            nargs="?",
            const="",
            default=None,
            metavar="CONFIG",
            help="also start the real kube-scheduler (optionally with this KubeSchedulerConfiguration)",
        )
        p.add_argument("--no-build", action="store_true", help="fail instead of running build.sh")
        p.add_argument(
            "--foreground", action="store_true", help="stay in the foreground until Ctrl-C (what `run` does)"
        )
    p = sub.add_parser("down", help="stop the control plane started by `up`")
    p.add_argument("--dir", type=Path, required=True)
    sub.add_parser("build", help="build the binaries (hack/cluster/build.sh)")
    args = ap.parse_args(argv)
    if getattr(args, "foreground", False):
        args.cmd = "run"

    if args.cmd == "down":
        return _down(args.dir)
    if args.cmd == "build":
        ensure_binaries()
        return 0

    ensure_binaries(build=not args.no_build)
    if args.dir is not None and (args.dir / "cluster.json").exists():
        print(f"devcluster: {args.dir} has a running cluster; run `down --dir {args.dir}` first", file=sys.stderr)
        return 1
    if args.dir is not None and (args.dir / "etcd-data").exists():
        shutil.rmtree(args.dir / "etcd-data")  # a fresh store every time: ports and certs change
    c = DevCluster(args.dir, die_with_parent=args.cmd == "run")
    t0 = time.monotonic()
    try:
        c.start(with_kwok=not args.no_kwok)
        if args.nodes:
            c.create_nodes(args.nodes, cpu=args.cpu, memory=args.memory, pods=args.pods, kwok=not args.no_kwok)
        if args.scheduler is not None:
            c.start_kube_scheduler(args.scheduler or None)
    except BaseException:
        print(c.logs(30), file=sys.stderr)
        c.stop()
        raise
    print(f"devcluster: up in {time.monotonic() - t0:.1f}s with {args.nodes} nodes")
    _print_banner(c, args.scheduler is not None)
    if args.cmd == "up":
        c.detach()
        me = Path(__file__).resolve()
        shown = me.relative_to(Path.cwd()) if me.is_relative_to(Path.cwd()) else me
        print(f"devcluster: stop with: python {shown} down --dir {c.dir}")
        return 0

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    print("devcluster: running; press Ctrl-C to stop")
    try:
        while not stop.wait(1.0):
            for comp in list(c._components):
                if not comp.alive():
                    print(f"devcluster: {comp.name} exited unexpectedly:\n{comp.tail(40)}", file=sys.stderr)
                    stop.set()
    finally:
        print("devcluster: stopping")
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
