"""kubesched extender behind the REAL kube-scheduler (hack/cluster control plane, KWOK nodes).

The extender runs in-process on its own event loop thread, serving the UnderlayIP profile (budget
per node from the ``kubesched.io/underlay-ips`` label); the kube-scheduler is configured with an
``extenders:`` entry pointing at it, exactly as ``kubesched extender --print-config`` writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import generate_latest

from kubesched.config.load import load_config_text
from kubesched.extender.command import extender_stanza
from kubesched.extender.server import ExtenderServer, server_ssl_context, start_server
from kubesched.extender.service import ExtenderService
from kubesched.plugins.builtin import builtin_registry
from kubesched.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

BUDGET = "kubesched.io/underlay-ips"
PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: underlay
    plugins:
      multiPoint:
        enabled:
          - name: UnderlayIP
      score:
        disabled:
          - name: "*"
        enabled:
          - name: UnderlayIP
    pluginConfig:
      - name: UnderlayIP
        args:
          ipsPerNode: 10
          podSelector:
            matchLabels:
              net: underlay
"""


class RunningExtender:
    """kubesched extender on a background event loop (the control-plane helpers block the test thread)."""

    def __init__(
        self, kubeconfig: Path | None = None, ssl_context: ssl.SSLContext | None = None, profile: str = PROFILE
    ) -> None:
        self.profile_text = profile
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.cluster: Any = None
        self.service: ExtenderService
        self.server: ExtenderServer
        self.port = 0
        self._runner: Any = None
        self.https = ssl_context is not None
        self._call(self._start(kubeconfig, ssl_context))

    def _call(self, coro: Any, timeout: float = 90.0) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    async def _start(self, kubeconfig: Path | None, ssl_context: ssl.SSLContext | None) -> None:
        registry = builtin_registry()
        profile = load_config_text(self.profile_text, registry).profiles[0]
        if kubeconfig is not None:
            from kubesched.extender.cluster import ExtenderCluster
            from kubesched.framework.registry import profiles_object_kinds

            kinds = profiles_object_kinds(registry, [profile])  # as `kubesched extender` does
            self.cluster = await ExtenderCluster.connect(str(kubeconfig), kinds)
            await self.cluster.start(sync_timeout=60)
            assert self.cluster.synced
        self.service = ExtenderService(profile, registry, self.cluster)
        self.server = ExtenderServer(self.service)
        self._runner, self.port = await start_server(self.server, "127.0.0.1", 0, ssl_context)

    def stanza(self, **kw: Any) -> dict[str, Any]:
        url = f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}/"
        return extender_stanza(url=url, weight=kw.pop("weight", 10), https=self.https, **kw)

    def pod_known(self, uid: str) -> bool:
        async def known() -> bool:
            return self.cluster is not None and self.cluster.cache.table.pod(uid) is not None

        return bool(self._call(known()))

    def close(self) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
            if self.cluster is not None:
                await self.cluster.stop()

        try:
            self._call(stop(), 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def group(cp_namespace: str) -> dict[str, str]:
    return {"kubesched.test/group": cp_namespace}


def start_scheduler(cp: ControlPlane, tmp_path: Path, name: str, extenders: list[dict[str, Any]]) -> Any:
    cfg = cp.write_scheduler_config(tmp_path / f"{name}.json", scheduler_names=(name,),
                                    extra={"extenders": extenders})
    return cp.start_kube_scheduler(cfg)


def make_nodes(cp: ControlPlane, ns: str, group: dict[str, str], budgets: dict[str, int | None]) -> dict[str, str]:
    """Nodes <ns>-<key> with the given IP budget label (None: no label, i.e. ipsPerNode)."""
    names = {}
    for key, b in budgets.items():
        labels = {**group, **({BUDGET: str(b)} if b is not None else {})}
        names[key] = cp.create_nodes(1, prefix=f"{ns}-{key}-", labels=labels, cpu="32", memory="64Gi")[0]
    return names


def ip_pod(cp: ControlPlane, name: str, ns: str, sched: str, group: dict[str, str]) -> dict[str, Any]:
    return cp.create_pod(name, ns, scheduler_name=sched, labels={"net": "underlay"}, node_selector=group,
                         requests={"cpu": "10m"})


def failed_scheduling_messages(cp: ControlPlane, ns: str, pod: str) -> list[str]:
    events = cp.get(f"/api/v1/namespaces/{ns}/events")["items"]
    return [e.get("message", "") for e in events
            if e.get("reason") == "FailedScheduling" and e.get("involvedObject", {}).get("name") == pod]


def wait_failed(cp: ControlPlane, ns: str, pod: str, needle: str, timeout: float = 60) -> str:
    def found() -> str | None:
        p = cp.get_pod(pod, ns)
        assert not p["spec"].get("nodeName"), f"{pod} was bound to {p['spec'].get('nodeName')}"
        for m in failed_scheduling_messages(cp, ns, pod):
            if needle in m:
                return m
        for c in p.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and needle in (c.get("message") or ""):
                return str(c["message"])
        return None

    return cp.wait_for(found, timeout, 0.3, f"FailedScheduling for {pod} mentioning {needle!r}")


# -- (a) filter and (b) prioritize, nodeCacheCapable: false, no cluster connection ---------------------


def test_filter_keeps_pods_off_rejected_nodes_and_prioritize_steers(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, ns, group, {"none": 0, "cp": None, "few": 2, "many": 9})
    # A control-plane-labelled node gets no IPs (UnderlayIP excludes it: UnschedulableAndUnresolvable).
    cp.api("PATCH", f"/api/v1/nodes/{nodes['cp']}",
           {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}})
    ext = RunningExtender()
    sched_name = f"ext-{uuid.uuid4().hex[:6]}"
    sched = start_scheduler(cp, tmp_path, sched_name, [ext.stanza(node_cache_capable=False)])
    try:
        placed = {}
        for i in range(4):
            ip_pod(cp, f"p{i}", ns, sched_name, group)
            placed[f"p{i}"] = cp.wait_pod(f"p{i}", ns, timeout=60)["spec"]["nodeName"]
        # (a) never on the rejected nodes; (b) always on the node with the most free IPs: without a
        # cluster connection the extender sees no pods, so "many" (9) stays ahead of "few" (2).
        assert set(placed.values()) == {nodes["many"]}, placed
        assert ext.service.table_builds >= 1
    finally:
        cp.stop_component(sched)
        ext.close()


# -- (c) both node-cache modes with a cluster connection: exact per-node IP counts --------------------


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["nodeCacheCapable", "nodeObjects"])
def test_exact_budgets_in_both_node_modes(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path, node_cache_capable: bool
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, ns, group, {"a": 2, "b": 1})
    ext = RunningExtender(kubeconfig=cp.kubeconfig)
    sched_name = f"ext-{uuid.uuid4().hex[:6]}"
    sched = start_scheduler(cp, tmp_path, sched_name, [ext.stanza(node_cache_capable=node_cache_capable)])
    try:
        placed = []
        for i in range(3):
            uid = ip_pod(cp, f"p{i}", ns, sched_name, group)["metadata"]["uid"]
            placed.append(cp.wait_pod(f"p{i}", ns, timeout=60)["spec"]["nodeName"])
            cp.wait_for(lambda u=uid: ext.pod_known(u), 20, 0.05, "the extender's cache to see the bound pod")
        # The first pod goes to the node with more free IPs; then the budgets fill up exactly.
        assert placed[0] == nodes["a"]
        assert sorted(placed) == sorted([nodes["a"], nodes["a"], nodes["b"]])
        ip_pod(cp, "p3", ns, sched_name, group)
        msg = wait_failed(cp, ns, "p3", "no free underlay IP")
        assert "0/" in msg and "node(s) had no free underlay IP" in msg
    finally:
        cp.stop_component(sched)
        ext.close()


# -- (d) ignorable -------------------------------------------------------------------------------------


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ignorable_extender_down_still_schedules_and_non_ignorable_reports(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path
) -> None:
    cp, ns = control_plane, cp_namespace
    make_nodes(cp, ns, group, {"n": 0})  # the extender would reject it, but it is down
    dead = f"http://127.0.0.1:{_dead_port()}/"
    for ignorable in (True, False):
        sched_name = f"ext-{uuid.uuid4().hex[:6]}"
        sched = start_scheduler(cp, tmp_path, sched_name,
                                [extender_stanza(url=dead, weight=1, ignorable=ignorable)])
        pod = f"ign-{str(ignorable).lower()}"
        try:
            ip_pod(cp, pod, ns, sched_name, group)
            if ignorable:
                assert cp.wait_pod(pod, ns, timeout=60)["spec"]["nodeName"]
            else:
                msg = wait_failed(cp, ns, pod, dead.rstrip("/") + "/filter")
                assert "connection refused" in msg or "extender" in msg, msg
        finally:
            cp.stop_component(sched)


# -- (e) HTTPS with client-certificate verification ----------------------------------------------------


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
          issuer_key: ec.EllipticCurvePrivateKey | None, *, ca: bool = False, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer.subject if issuer else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


def _write(d: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    crt, k = d / f"{name}.crt", d / f"{name}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return crt, k


@pytest.fixture
def pki(tmp_path: Path) -> Iterator[dict[str, Path]]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("kubesched-test-ca", ca_key, None, None, ca=True)
    ca_crt, _ = _write(tmp_path, "ca", ca, ca_key)
    s_key = ec.generate_private_key(ec.SECP256R1())
    s_crt, s_k = _write(tmp_path, "server", _cert("kubesched-extender", s_key, ca, ca_key, server=True), s_key)
    c_key = ec.generate_private_key(ec.SECP256R1())
    c_crt, c_k = _write(tmp_path, "client", _cert("kube-scheduler", c_key, ca, ca_key), c_key)
    yield {"ca": ca_crt, "server_crt": s_crt, "server_key": s_k, "client_crt": c_crt, "client_key": c_k}


def test_https_with_client_certificates(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path, pki: dict[str, Path]
) -> None:
    cp, ns = control_plane, cp_namespace
    nodes = make_nodes(cp, ns, group, {"no": 0, "yes": 5})
    ext = RunningExtender(ssl_context=server_ssl_context(pki["server_crt"], pki["server_key"], pki["ca"]))
    # Without a client certificate the TLS handshake is refused.
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)), \
            socket.create_connection(("127.0.0.1", ext.port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        if not tls.recv(1):
            raise ConnectionResetError("closed without an answer")
    sched_name = f"ext-{uuid.uuid4().hex[:6]}"
    tls_config = {"certFile": str(pki["client_crt"]), "keyFile": str(pki["client_key"]), "caFile": str(pki["ca"])}
    sched = start_scheduler(cp, tmp_path, sched_name, [ext.stanza(tls_config=tls_config)])
    try:
        ip_pod(cp, "tls", ns, sched_name, group)
        assert cp.wait_pod("tls", ns, timeout=60)["spec"]["nodeName"] == nodes["yes"]
        text = generate_latest(ext.server.metrics.registry).decode()
        assert 'kubesched_extender_requests_total{code="200",verb="filter"}' in text
    finally:
        cp.stop_component(sched)
        ext.close()


# -- declared objects: Coscheduling's PodGroups reach the extender's plugins ---------------------------

GANG_PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: gang
    plugins:
      preFilter:
        disabled: [{name: "*"}]
        enabled: [{name: Coscheduling}]
      filter:
        disabled: [{name: "*"}]
      preScore:
        disabled: [{name: "*"}]
      score:
        disabled: [{name: "*"}]
    pluginConfig:
      - name: Coscheduling
        args: {podGroupBackoffSeconds: 0}
"""


def test_a_gang_through_the_extender_waits_for_its_pod_groups_min_member(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path, podgroup_crd: None
) -> None:
    """The same Coscheduling as in the simulator and `kubesched run`, behind a real kube-scheduler:
    the extender watches the PodGroups the plugin declares and the pending pods it counts, so two
    members of a minMember-3 group are refused and the third lets all three bind."""
    cp, ns = control_plane, cp_namespace
    make_nodes(cp, ns, group, {"a": None, "b": None})
    cp.api("POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns}, "spec": {"minMember": 3},
    })
    ext = RunningExtender(cp.kubeconfig, profile=GANG_PROFILE)
    cp.wait_for(lambda: ext._call(_has_pod_group(ext, f"{ns}/train")), 30, 0.2, "the extender sees the PodGroup")
    sched_name = f"ext-gang-{uuid.uuid4().hex[:6]}"
    sched = start_scheduler(cp, tmp_path, sched_name, [ext.stanza(node_cache_capable=True)])
    member = {"scheduling.x-k8s.io/pod-group": "train"}
    try:
        for i in range(2):
            cp.create_pod(f"train-{i}", ns, scheduler_name=sched_name, labels=member, node_selector=group,
                          requests={"cpu": "100m"})
        msg = wait_failed(cp, ns, "train-0", "cannot find enough sibling pods")
        assert "minMember of group: 3" in msg
        cp.create_pod("train-2", ns, scheduler_name=sched_name, labels=member, node_selector=group,
                      requests={"cpu": "100m"})
        for i in range(3):
            assert cp.wait_pod(f"train-{i}", ns, timeout=90)["spec"]["nodeName"]
    finally:
        cp.stop_component(sched)
        ext.close()


async def _has_pod_group(ext: RunningExtender, key: str) -> bool:
    return key in ext.cluster.objects("PodGroup")


# -- (g) preempt: the extender's own victims on top of kube-scheduler's ---------------------------------


def test_preempt_verb_adds_the_victim_only_the_extender_needs(
    control_plane: ControlPlane, cp_namespace: str, group: dict[str, str], tmp_path: Path
) -> None:
    """One node: 1 CPU, one underlay IP. `low-cpu` (600m) and `low-ip` (100m, holds the IP) run at
    priority 0; `high` (500m + an IP) arrives at priority 1000. kube-scheduler's DefaultPreemption
    evicts only `low-cpu` (its own filters need the CPU, not the IP); through the `preempt` verb
    the extender adds `low-ip`, so `high` binds. With victims filtered only (the extender before
    this verb ran DefaultPreemption's code), `high` waits forever: kube-scheduler's filters pass
    once `low-cpu` is gone, so it finds no victim of its own for the IP."""
    cp, ns = control_plane, cp_namespace
    pc = f"ext-high-{ns}"
    cp.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc}, "value": 1000})
    node_name = cp.create_nodes(1, prefix=f"{ns}-one-", labels={**group, BUDGET: "1"}, cpu="1", memory="4Gi")[0]
    ext = RunningExtender(kubeconfig=cp.kubeconfig)
    sched_name = f"ext-preempt-{uuid.uuid4().hex[:6]}"
    sched = start_scheduler(cp, tmp_path, sched_name, [ext.stanza(node_cache_capable=True)])
    try:
        assert ext.stanza(node_cache_capable=True)["preemptVerb"] == "preempt"
        low_cpu = cp.create_pod("low-cpu", ns, scheduler_name=sched_name, node_selector=group,
                                requests={"cpu": "600m"})
        low_ip = cp.create_pod("low-ip", ns, scheduler_name=sched_name, node_selector=group,
                               labels={"net": "underlay"}, requests={"cpu": "100m"})
        for p in (low_cpu, low_ip):
            assert cp.wait_pod(p["metadata"]["name"], ns, timeout=60)["spec"]["nodeName"] == node_name
            cp.wait_for(lambda u=p["metadata"]["uid"]: ext.pod_known(u), 20, 0.05, "the extender sees the pod")
        cp.create_pod("high", ns, scheduler_name=sched_name, node_selector=group, labels={"net": "underlay"},
                      requests={"cpu": "500m"}, priority_class_name=pc)
        assert cp.wait_pod("high", ns, timeout=90)["spec"]["nodeName"] == node_name
        left = {p["metadata"]["name"] for p in cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
                if not p["metadata"].get("deletionTimestamp")}
        assert left == {"high"}
    finally:
        cp.stop_component(sched)
        ext.close()
        with contextlib.suppress(Exception):
            cp.api("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc}")
