"""kubesched deployed as users deploy it, on a real node: `kubectl apply -k deploy/scheduler` and
`helm install kubesched deploy/chart`, the image built by deploy/image/build.sh. The pods run
on the real kubelet with in-cluster service-account auth (through the `kubernetes` Service and
kube-proxy), read the ConfigMap, pass their probes, elect one leader between two replicas, and bind
pods of schedulerName kubesched to KWOK nodes, with the Scheduled events `kubectl describe` shows.
Every command here is one of docs/deploy.md's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kubesched.testing.controlplane import ApiError
from kubesched.testing.controlplane.node import RealNode, oci_archive

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "kubesched-system"


@pytest.fixture(scope="module")
def node(real_node: RealNode, kubesched_image: Path) -> RealNode:
    real_node.import_image(kubesched_image / "kubesched-image.tar", base_name="docker.io/library/kubesched")
    return real_node


def _cli(node: RealNode, tool: str, *args: str | Path, check: bool = True) -> str:
    env = {**os.environ, "KUBECONFIG": str(node.cluster.kubeconfig)}
    proc = subprocess.run([str(node.bin_dir / tool), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    if check:
        output = f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        assert proc.returncode == 0, f"{tool} {args}: exit {proc.returncode}\n{output}"
    return proc.stdout


INSTALL = {
    "kubectl apply -k": (("kubectl", "apply", "-k", "deploy/scheduler"),
                         ("kubectl", "delete", "-k", "deploy/scheduler", "--wait")),
    "helm install": (("helm", "install", "kubesched", "deploy/chart", "--namespace", NAMESPACE, "--create-namespace"),
                     ("helm", "uninstall", "kubesched", "--namespace", NAMESPACE, "--wait")),
}


@pytest.fixture(params=sorted(INSTALL))
def installed(request: pytest.FixtureRequest, node: RealNode) -> Iterator[RealNode]:
    install, uninstall = INSTALL[request.param]
    _cli(node, install[0], *install[1:])
    try:
        yield node
    finally:
        _cli(node, uninstall[0], *uninstall[1:])
        if request.param == "helm install":
            _cli(node, "kubectl", "delete", "namespace", NAMESPACE, "--wait")
        node.cluster.wait_for(lambda: not _scheduler_pods(node), 120, 0.5, "kubesched pods gone")


def _scheduler_pods(node: RealNode) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = node.cluster.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector="app.kubernetes.io/name=kubesched")["items"]
    return items


def test_two_replicas_run_elect_one_leader_and_bind_pods(installed: RealNode) -> None:
    node, cluster = installed, installed.cluster
    # Both replicas pass /readyz (the kubelet's probes) once they have synced their informers.
    rollout = _cli(node, "kubectl", "-n", NAMESPACE, "rollout", "status", "deployment/kubesched", "--timeout=240s",
                   check=False)
    dep = cluster.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kubesched")
    if dep["status"].get("readyReplicas") != 2:
        pods = _cli(node, "kubectl", "describe", "pods", "-n", NAMESPACE)
        logs = _cli(node, "kubectl", "logs", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=kubesched",
                    "--tail=30", check=False)
        pytest.fail(f"kubesched did not become ready: {rollout}\n{pods[-4000:]}\n{logs}\n{node.logs(30)}")
    pods = _scheduler_pods(node)
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    # The leader Lease (named in the ConfigMap's configuration) is held by one of the two replicas;
    # an identity is "<hostname>_<uuid>" and a pod's hostname is its name.
    holder = _cli(node, "kubectl", "-n", NAMESPACE, "get", "lease", "kubesched",
                  "-o", "jsonpath={.spec.holderIdentity}").split("_")[0]
    assert holder in {p["metadata"]["name"] for p in pods}

    ns = f"apply-{uuid.uuid4().hex[:6]}"
    cluster.create_namespace(ns)
    cluster.wait_for(lambda: cluster.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60, 0.2)
    kwok = [f"kwok-{ns}-{i}" for i in range(2)]
    cluster.create_nodes(2, prefix=f"kwok-{ns}-", cpu="4", memory="8Gi", pods=20)
    try:
        for i in range(3):
            cluster.create_pod(f"p{i}", ns, scheduler_name="kubesched", requests={"cpu": "100m"},
                               node_selector={"type": "kwok"})

        def bound() -> bool:
            got = cluster.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            return len(got) == 3 and all(p["spec"].get("nodeName") in kwok for p in got)

        cluster.wait_for(bound, 60, 0.5, "pods bound by the in-cluster kubesched")
        described = _cli(node, "kubectl", "describe", "pod", "p0", "-n", ns)
        events = described[described.index("Events:"):]
        assert "Scheduled" in events and "kubesched" in events and f"Successfully assigned {ns}/p0 to kwok-" in events
    finally:
        for n in kwok:
            cluster.api("DELETE", f"/api/v1/nodes/{n}")


def _kube_scheduler_image(node: RealNode) -> None:
    """registry.k8s.io/kube-scheduler:v1.37.1 (what the extender deployment runs), not pullable
    here: the kube-scheduler built from the same pinned module, packed under that name."""
    archive = node.dir / "kube-scheduler-image.tar"
    archive.write_bytes(oci_archive(f"registry.k8s.io/kube-scheduler:{node.cluster.versions['K8S_VERSION']}",
                                    {"usr/local/bin/kube-scheduler": (node.bin_dir / "kube-scheduler").read_bytes()}))
    node.import_image(archive)


def test_extender_mode_schedules_through_the_extender(node: RealNode) -> None:
    """`helm install` in extender mode: the real kube-scheduler and `kubesched extender` in one pod
    on the real node; pods of the kube-scheduler's profile are bound after the extender's filter
    (UnderlayIP, from deploy/chart/ci/extender-values.yaml)."""
    cluster = node.cluster
    _kube_scheduler_image(node)
    release = ("kubesched-underlay", "--namespace", "kube-system")
    _cli(node, "helm", "install", *release, "deploy/chart", "-f", "deploy/chart/ci/extender-values.yaml")
    ns = f"ext-{uuid.uuid4().hex[:6]}"
    kwok = [f"kwok-{ns}-{i}" for i in range(2)]
    try:
        rollout = _cli(node, "kubectl", "-n", "kube-system", "rollout", "status", "deployment/kubesched-underlay",
                       "--timeout=240s", check=False)
        assert "successfully rolled out" in rollout, (
            rollout + _cli(node, "kubectl", "-n", "kube-system", "describe", "pods", "-l",
                           "app.kubernetes.io/name=kubesched-underlay")[-4000:])
        cluster.create_namespace(ns)
        cluster.wait_for(lambda: cluster.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60, 0.2)
        cluster.create_nodes(2, prefix=f"kwok-{ns}-", cpu="8", memory="16Gi", pods=110)
        # UnderlayIP allows 10 labelled pods per node (ipsPerNode: 10): the 21st cannot fit, and
        # only the extender knows why.
        labels = {"kubesched.io/underlay": "true"}
        # All 21 in one burst: the extender holds each pod it approves on its node until its watch
        # sees the bind (docs/extender.md, "What an extender can promise"), so kube-scheduler
        # binding faster than that watch does not put an 11th on a node (issue 30; bc8da14 had
        # made this one pod at a time).
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: cluster.create_pod(f"u{i}", ns, scheduler_name="kubesched-underlay",
                                                       labels=labels, node_selector={"type": "kwok"}), range(21)))

        seen: list[str] = []  # the last state, for the failure message

        def placed() -> list[dict[str, Any]] | None:
            got: list[dict[str, Any]] = cluster.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            bound = [p for p in got if p["spec"].get("nodeName")]
            failed = [p for p in got if any(c["type"] == "PodScheduled" and c["status"] == "False"
                                            for c in p["status"].get("conditions") or [])]
            per_node = {n: sum(p["spec"].get("nodeName") == n for p in got) for n in kwok}
            seen[:] = [f"{len(bound)} bound {per_node}, {len(failed)} with PodScheduled=False"]
            return got if len(bound) == 20 and len(failed) == 1 else None

        try:
            pods = cluster.wait_for(placed, 120, 0.5, "20 pods bound and 1 refused by the extender")
        except TimeoutError as e:
            raise AssertionError(f"{e}; last seen: {seen}") from e
        per_node = [sum(p["spec"].get("nodeName") == n for p in pods) for n in kwok]
        assert per_node == [10, 10]
        (refused,) = (p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName"))
        placed_one = next(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))  # any of the burst
        described = _cli(node, "kubectl", "describe", "pod", placed_one, "-n", ns)
        assert f"kubesched-underlay  Successfully assigned {ns}/{placed_one} to kwok-" in described
        described = _cli(node, "kubectl", "describe", "pod", refused, "-n", ns)
        assert "FailedScheduling" in described and "2 node(s) had no free underlay IP" in described, described
    finally:
        _cli(node, "helm", "uninstall", *release, "--wait", check=False)
        for n in kwok:
            with contextlib.suppress(ApiError):
                cluster.api("DELETE", f"/api/v1/nodes/{n}")
