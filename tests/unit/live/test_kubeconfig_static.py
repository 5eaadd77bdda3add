"""Kubeconfigs with static credentials load without kubernetes_asyncio (api.load_static_kubeconfig);
anything else still goes to its loaders."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cluster.live.api import load_connection, load_static_kubeconfig

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "hack" / "cluster"))

import devcluster  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    p = devcluster._PKI(tmp_path_factory.mktemp("pki"))
    crt, key = p.issue("client", "someone", client=True)
    return p.ca_crt, crt, key


def _kubeconfig(path: Path, cluster: dict, user: dict | None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}] if user is not None else [],
        "contexts": [{"name": "x", "context": {"cluster": "c", **({"user": "u"} if user is not None else {})}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def test_client_certificate_files(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, crt, key = pki
    kc = devcluster.write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", ca, crt, key)
    conn = load_static_kubeconfig(str(kc))
    assert conn is not None
    assert conn.host == "https://127.0.0.1:6443" and conn.k8s_config is None and conn.static_headers == {}
    assert conn.ssl_context is not False and conn.ssl_context.check_hostname


def test_relative_paths_inline_data_and_token(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, crt, key = pki
    (tmp_path / "ca.pem").write_bytes(ca.read_bytes())
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://h:1/", "certificate-authority": "ca.pem",
                                       "tls-server-name": "api"},
                     {"client-certificate-data": base64.b64encode(crt.read_bytes()).decode(),
                      "client-key-data": base64.b64encode(key.read_bytes()).decode(), "token": "abc"})
    conn = load_static_kubeconfig(str(kc))
    assert conn is not None
    assert conn.host == "https://h:1" and conn.server_hostname == "api"
    assert conn.static_headers == {"Authorization": "Bearer abc"}
    insecure = _kubeconfig(tmp_path / "kc2", {"server": "https://h:1", "insecure-skip-tls-verify": True}, None)
    conn = load_static_kubeconfig(str(insecure))
    assert conn is not None and conn.ssl_context is not False and not conn.ssl_context.check_hostname


@pytest.mark.parametrize("user", [
    {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}},
    {"auth-provider": {"name": "oidc"}},
    {"tokenFile": "/var/run/token"},
    {"username": "a", "password": "b"},
])
def test_other_credentials_use_the_full_loader(tmp_path: Path, user: dict) -> None:
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://h:1", "insecure-skip-tls-verify": True}, user)
    assert load_static_kubeconfig(str(kc)) is None


def test_unknown_context_and_broken_files_use_the_full_loader(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://h:1"}, {})
    assert load_static_kubeconfig(str(kc), context="nope") is None
    (tmp_path / "bad").write_text(": : :")
    assert load_static_kubeconfig(str(tmp_path / "bad")) is None
    assert load_static_kubeconfig(str(tmp_path / "missing")) is None


async def test_load_connection_falls_back(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://h:1", "insecure-skip-tls-verify": True},
                     {"username": "a", "password": "b"})
    conn = await load_connection(str(kc))
    assert conn.k8s_config is not None and conn.host == "https://h:1"


def test_static_path_does_not_import_kubernetes_asyncio(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, crt, key = pki
    kc = devcluster.write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", ca, crt, key)
    code = (
        "import asyncio, sys\n"
        "from kubesched.cluster.live.api import load_connection\n"
        f"c = asyncio.run(load_connection({str(kc)!r}))\n"
        "print(c.host, 'kubernetes_asyncio' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["https://127.0.0.1:6443", "False"]
