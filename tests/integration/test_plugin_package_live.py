"""The plugin author's path on the real control plane: `kubesched new-plugin RackCap` written, pip
installed (its `kubesched.plugins` entry point, no --plugins anywhere), then run by `kubesched run`
as a second scheduler and by `kubesched extender --only RackCap` behind a real kube-scheduler.
RackCap keeps pods off nodes labelled example.com/pool=spot (the template's example args)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kubesched.extender.command import extender_stanza
from kubesched.testing.controlplane import ControlPlane, free_port, wait_for

from .test_live_scheduler import Proc

pytestmark = pytest.mark.integration

POOL = "example.com/pool"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("rackcap")
    subprocess.run([sys.executable, "-m", "kubesched.cli", "new-plugin", "RackCap", "--dir", str(root / "pkg")],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(root / "site"),
                    str(root / "pkg")], check=True, capture_output=True)
    return root / "pkg", root / "site"


def _nodes(cp: ControlPlane, ns: str, cleanup: list[str]) -> tuple[str, str]:
    group = {"kubesched.test/group": ns}
    spot = cp.create_nodes(1, prefix=f"{ns}-spot-", labels={**group, POOL: "spot"})[0]
    steady = cp.create_nodes(1, prefix=f"{ns}-steady-", labels={**group, POOL: "steady"})[0]
    cleanup += [spot, steady]
    return spot, steady


def test_installed_plugin_runs_live(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path,
    plugin_site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    cp, ns = control_plane, cp_namespace
    package, site = plugin_site
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    spot, steady = _nodes(cp, ns, nodes_to_delete)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text((package / "config.yaml").read_text() + "leaderElection: {leaderElect: false}\n")
    p = Proc(cfg, cp.kubeconfig, tmp_path / "k.log")
    try:
        p.wait_ready(60)
        for i in range(4):
            cp.create_pod(f"r{i}", ns, scheduler_name="rack-cap-scheduler",
                          node_selector={"kubesched.test/group": ns}, requests={"cpu": "100m"})
        placed = {cp.wait_pod(f"r{i}", ns, timeout=60)["spec"]["nodeName"] for i in range(4)}
        assert placed == {steady}, (placed, spot)
    finally:
        p.kill(signal.SIGTERM)
        p.wait(30)
        p.close()


def test_installed_plugin_serves_alone_as_an_extender(
    control_plane: ControlPlane, cp_namespace: str, nodes_to_delete: list[str], tmp_path: Path,
    plugin_site: tuple[Path, Path],
) -> None:
    cp, ns = control_plane, cp_namespace
    package, site = plugin_site
    spot, steady = _nodes(cp, ns, nodes_to_delete)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "ext.log").open("wb")
    ext = subprocess.Popen(
        [sys.executable, "-m", "kubesched.cli", "extender", "--config", str(package / "config.yaml"),
         "--only", "RackCap", "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(cp.kubeconfig)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    sched_name = f"ext-rackcap-{uuid.uuid4().hex[:6]}"
    sched = None
    try:
        import urllib.request

        def ready() -> bool:
            assert ext.poll() is None, (tmp_path / "ext.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_for(ready, 60, 0.2, "kubesched extender ready")
        stanza = extender_stanza(url=f"http://127.0.0.1:{port}/", node_cache_capable=True)
        cfg = cp.write_scheduler_config(tmp_path / "ks.json", scheduler_names=(sched_name,),
                                        extra={"extenders": [stanza]})
        sched = cp.start_kube_scheduler(cfg)
        for i in range(4):
            cp.create_pod(f"e{i}", ns, scheduler_name=sched_name, node_selector={"kubesched.test/group": ns},
                          requests={"cpu": "100m"})
        placed = {cp.wait_pod(f"e{i}", ns, timeout=60)["spec"]["nodeName"] for i in range(4)}
        assert placed == {steady}, (placed, spot)
    finally:
        if sched is not None:
            cp.stop_component(sched)
        ext.send_signal(signal.SIGTERM)
        try:
            ext.wait(30)
        except subprocess.TimeoutExpired:
            ext.kill()
        log.close()
