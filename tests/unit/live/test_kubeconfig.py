"""Credentials come from kubernetes_asyncio's maintained loaders, whatever the kubeconfig holds."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubesched.kube.api import ApiClient, ConnectionConfigError, load_connection
from kubesched.testing import controlplane


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    p = controlplane.PKI(tmp_path_factory.mktemp("pki"))
    crt, key = p.issue("client", "someone", client=True)
    return p.ca_crt, crt, key


def _kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


async def test_client_certificate_files(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, crt, key = pki
    kc = controlplane.write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", ca, crt, key)
    conn = await load_connection(str(kc))
    assert conn.host == "https://127.0.0.1:6443"
    assert isinstance(conn.ssl_context, ssl.SSLContext) and conn.ssl_context.verify_mode == ssl.CERT_REQUIRED


async def test_inline_data_and_token(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, _, _ = pki
    kc = _kubeconfig(
        tmp_path / "kc",
        {"server": "https://10.0.0.1:6443", "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()},
        {"token": "s3cret"},
    )
    conn = await load_connection(str(kc))
    assert conn.host == "https://10.0.0.1:6443"
    api = ApiClient(conn)
    try:
        headers = await api._headers(None)  # what every request sends
    finally:
        await api.close()
    assert headers["Authorization"] == "Bearer s3cret"


async def test_a_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("clusters: [")
    with pytest.raises(ConnectionConfigError, match="cannot load the cluster configuration"):
        await load_connection(str(bad))


async def test_a_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConnectionConfigError, match=r"--kubeconfig .*nope: no such file"):
        await load_connection(str(tmp_path / "nope"))


def test_loading_credentials_leaves_kubernetes_asyncio_whole_for_later_imports(tmp_path: Path) -> None:
    """The loaders are imported without kubernetes_asyncio's ~860 generated modules (a fresh
    process: what `kubesched run` pays at start-up), and a plugin importing the package afterwards
    still gets all of it."""
    kc = _kubeconfig(tmp_path / "kc", {"server": "https://10.0.0.1:6443"}, {"token": "t"})
    script = f"""
import asyncio, sys
from kubesched.kube.api import load_connection
conn = asyncio.run(load_connection({str(kc)!r}))
loaded = sum(1 for m in sys.modules if m.startswith("kubernetes_asyncio"))
import kubernetes_asyncio.client
print(conn.host, loaded, hasattr(kubernetes_asyncio.client, "CoreV1Api"))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["https://10.0.0.1:6443", "0", "True"]
