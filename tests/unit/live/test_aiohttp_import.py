"""aiohttp imported by kubesched's API client reads the system CA bundle at the first TLS connection
that needs it, not at import (kube/aiohttp_import.py): a session with aiohttp's default SSL
settings (as a plugin's) still trusts exactly the system's CAs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_CHILD = """
import asyncio, ssl, sys
from kubesched.kube.api import ApiClient  # imports aiohttp the way `kubesched run` does
import aiohttp, aiohttp.connector

cert, key = sys.argv[1], sys.argv[2]
loaded_at_import = aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"]

async def answer(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
    await writer.drain()
    writer.close()

async def main():
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with aiohttp.ClientSession() as session:  # aiohttp's default SSL context
            async with session.get(f"https://127.0.0.1:{port}/") as resp:
                return str(resp.status)
    except aiohttp.ClientConnectorCertificateError:
        return "untrusted"
    finally:
        server.close()

print(loaded_at_import, asyncio.run(main()))
"""


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


def _request(certificate: tuple[Path, Path], ca_bundle: Path | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if ca_bundle is not None:
        env["SSL_CERT_FILE"] = str(ca_bundle)  # what set_default_verify_paths reads first
    out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, certificate)], capture_output=True, text=True,
                         check=True, env=env).stdout
    return out.split()


def test_the_system_ca_bundle_is_read_at_the_first_connection_and_trusted(certificate: tuple[Path, Path]) -> None:
    loaded_at_import, outcome = _request(certificate, ca_bundle=certificate[0])
    assert loaded_at_import == "0"
    assert outcome == "200"


def test_a_certificate_no_system_ca_signed_is_still_refused(certificate: tuple[Path, Path]) -> None:
    assert _request(certificate, ca_bundle=None)[1] == "untrusted"
