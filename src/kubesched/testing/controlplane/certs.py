"""A throw-away PKI for the control plane (ECDSA P-256: fast) and client-certificate kubeconfigs.

Needs ``cryptography`` (a dev dependency of kubesched), imported only when a key is made."""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PKI", "write_kubeconfig"]


class PKI:
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
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesched-controlplane-ca")])
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

    def admin_tls(self) -> ssl.SSLContext:
        """A client context with the admin certificate, for the components' secure ports
        (kube-scheduler's /metrics and /debug/pprof pass its delegated authorization); the
        components' serving certificates are self-signed, so they are not verified."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(str(self.dir / "admin.crt"), str(self.dir / "admin.key"))
        return ctx


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
        "- name: controlplane\n"
        "  cluster:\n"
        f"    server: {server}\n"
        f"    certificate-authority: {ca.resolve()}\n"
        "users:\n"
        f"- name: {user}\n"
        "  user:\n"
        f"    client-certificate: {cert.resolve()}\n"
        f"    client-key: {key.resolve()}\n"
        "contexts:\n"
        "- name: controlplane\n"
        "  context:\n"
        "    cluster: controlplane\n"
        f"    user: {user}\n"
        "current-context: controlplane\n"
    )
    return path
