"""Fixtures for integration tests against a real control plane (``kubesched.testing.controlplane``).

* ``control_plane`` (session): etcd + kube-apiserver + kube-controller-manager + KWOK, a
  ``controlplane.ControlPlane``: its
  ``kubeconfig`` / ``server`` / ``etcd_url`` and helpers (``api``, ``watch``, ``wait_for``,
  ``create_nodes``, ``create_pod``, ``start_kube_scheduler``, ``restart_apiserver``,
  ``compact_etcd``, ``logs``).
* ``cp_namespace`` (function): a fresh namespace; its pods are deleted afterwards.

Binaries come from hack/cluster/build.sh (idempotent), run once after collection when integration
tests were selected (not inside a test, so a cold build does not eat into the test timeout; or
build them beforehand with `make cluster-bin`). Outside CI (CI != "true") the tests SKIP with
the reason when Go is missing or the build fails; under CI=true that is a hard failure, so a
missing install step cannot hide behind skips.

On a failing integration test the tail of every component log is attached to the report.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesched.testing import controlplane
from kubesched.testing.controlplane import ApiError, ControlPlane
from kubesched.testing.controlplane.node import RealNode

IN_CI = os.environ.get("CI") == "true"

_binaries_key = pytest.StashKey[tuple[Path | None, str]]()
_cluster: controlplane.ControlPlane | None = None


def _wants_control_plane(items: list[pytest.Item]) -> bool:
    return any(
        item.get_closest_marker("integration") is not None or "control_plane" in getattr(item, "fixturenames", ())
        for item in items
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that start the real node run last: its kubelet, containerd and kube-proxy (iptables
    rules are machine-wide) stay up until the session ends, so no other test shares the machine
    with them (a gang test's PodGroup Event went missing only in sessions where they ran first)."""
    items.sort(key=lambda item: "real_node" in getattr(item, "fixturenames", ()))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build (or find) the binaries once, before any test runs, if any selected test needs them."""
    if not _wants_control_plane(session.items):
        return
    if not controlplane.binaries_up_to_date():
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(
                "integration: building the control plane binaries with hack/cluster/build.sh "
                "(cold: ~6-10 min on 2 cores; `make cluster-bin` does it ahead of time)"
            )
    try:
        bin_dir = controlplane.ensure_binaries(build=True, quiet=True)
        session.config.stash[_binaries_key] = (bin_dir, "")
    except controlplane.BinariesUnavailable as e:
        session.config.stash[_binaries_key] = (None, str(e))
    except OSError as e:  # e.g. build.sh not executable
        session.config.stash[_binaries_key] = (None, f"cannot run hack/cluster/build.sh: {e}")


@pytest.fixture(scope="session")
def control_plane_bin_dir(request: pytest.FixtureRequest) -> Path:
    """The directory of the built binaries (kube-scheduler, kube-apiserver, ...), for tests that run
    one on its own; skipped (failed under CI=true) when they could not be built."""
    bin_dir, err = request.config.stash.get(_binaries_key, (None, "binaries were not prepared"))
    if bin_dir is None:
        msg = f"control plane binaries unavailable: {err}"
        if IN_CI:
            pytest.fail(f"{msg} (CI=true: integration tests must run; add `make cluster-bin` to CI)", pytrace=False)
        pytest.skip(msg)
    return bin_dir


@pytest.fixture(scope="session")
def control_plane(
    control_plane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[controlplane.ControlPlane]:
    global _cluster
    bin_dir = control_plane_bin_dir
    cluster = controlplane.ControlPlane(tmp_path_factory.mktemp("control-plane"), bin_dir=bin_dir)
    _cluster = cluster
    try:
        cluster.start(with_kwok=True, with_controller_manager=True)
    except Exception as e:
        logs = cluster.logs(60)
        cluster.stop()
        _cluster = None
        pytest.fail(f"control plane failed to start: {e}\n{logs}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        _cluster = None
        shutil.rmtree(cluster.dir / "etcd-data", ignore_errors=True)  # 64 MiB of WAL; logs stay


@pytest.fixture
def cp_namespace(control_plane: controlplane.ControlPlane) -> Iterator[str]:
    name = f"it-{uuid.uuid4().hex[:8]}"
    control_plane.create_namespace(name)
    yield name
    # The namespace controller deletes them with the namespace too; deleting them first without a
    # grace period makes the namespace go in seconds instead of after each pod's grace period.
    try:
        pods = control_plane.get(f"/api/v1/namespaces/{name}/pods")["items"]
        for p in pods:
            control_plane.delete_pod(p["metadata"]["name"], name, grace_period=0)
        control_plane.api("DELETE", f"/api/v1/namespaces/{name}")
    except controlplane.ApiError:
        pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and _cluster is not None and item.get_closest_marker("integration") is not None:
        report.sections.append(("control plane logs", _cluster.logs(80)))
    return report


@pytest.fixture
def nodes_to_delete(control_plane: controlplane.ControlPlane) -> Iterator[list[str]]:
    """Names of nodes a test creates; they are deleted afterwards."""
    names: list[str] = []
    yield names
    for n in names:
        with contextlib.suppress(controlplane.ApiError):
            control_plane.api("DELETE", f"/api/v1/nodes/{n}")


#: The PodGroup CRD (Coscheduling's declared kind), installed once from deploy/crds.
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def podgroup_crd(control_plane: ControlPlane) -> None:
    crd = yaml.safe_load((ROOT / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
    try:
        control_plane.api("POST", CRD_PATH, crd)
    except ApiError as e:
        if e.status != 409:
            raise

    def established() -> bool:
        got = control_plane.get(f"{CRD_PATH}/{crd['metadata']['name']}")
        conds = got.get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    control_plane.wait_for(established, 30, 0.2, "PodGroup CRD established")


@pytest.fixture(scope="session")
def real_node(control_plane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    """A control plane of its own that serves real nodes (ServiceAccount tokens, the `kubernetes`
    Service at this machine's address; see ``ControlPlane(real_nodes=True)``) with KWOK,
    kube-controller-manager and kube-scheduler (as a real cluster), and one real node on it:
    containerd + kubelet + kube-proxy (``controlplane.node``). ``real_node.cluster`` is its
    control plane. Skipped (failed under CI=true) when this machine
    cannot run a node (not root, packages missing: the message says which)."""
    from kubesched.testing.controlplane.node import missing_prerequisites

    problems = missing_prerequisites(control_plane_bin_dir)
    if problems:
        msg = "real node unavailable: " + "; ".join(problems)
        if IN_CI:
            pytest.fail(f"{msg} (CI=true: .ci/run installs the packages)", pytrace=False)
        pytest.skip(msg)
    cluster = ControlPlane(tmp_path_factory.mktemp("real-node-cluster"), bin_dir=control_plane_bin_dir,
                           real_nodes=True)
    node = RealNode(cluster)
    try:
        cluster.start(with_kwok=True, with_controller_manager=True)
        cluster.start_kube_scheduler()  # the default scheduler places kubesched's own pods
        node.start()
    except Exception as e:  # NodeUnavailable included: prerequisites passed but the machine refused
        logs = f"{cluster.logs(40)}\n{node.logs(60)}"
        node.stop()
        cluster.stop()
        pytest.fail(f"real node failed to start: {e}\n{logs}", pytrace=False)
    try:
        yield node
    finally:
        node.stop()
        cluster.stop()


@pytest.fixture(scope="session")
def kubesched_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/image/build.sh's output directory (oci/, kubesched-image.tar, digest) for this tree's
    wheel; skipped (failed under CI=true) when the tools are missing."""
    import subprocess
    import sys

    missing = [t for t in ("umoci", "apt-get") if shutil.which(t) is None]
    problem = f"missing {', '.join(missing)} (apt-get install umoci)" if missing else ""
    if os.geteuid() != 0:
        problem = "deploy/image/build.sh needs root"
    if problem:
        if IN_CI:
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    root = tmp_path_factory.mktemp("kubesched-image")
    for argv in ([sys.executable, "-m", "build", "--wheel", "--outdir", root / "dist", ROOT],
                 ["bash", ROOT / "deploy/image/build.sh", "--wheel", "WHEEL", "--out", root / "out"]):
        if "WHEEL" in argv:
            (wheel,) = (root / "dist").glob("kubesched-*.whl")
            argv[argv.index("WHEEL")] = wheel
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return root / "out"
