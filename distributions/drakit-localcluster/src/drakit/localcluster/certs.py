"""Certificates for a local control plane: one CA, a serving certificate,
an admin client certificate and the service-account signing key pair.

Everything is ECDSA P-256 and short-lived (a week): these are throw-away
credentials for a loopback-only cluster, written with 0600 permissions.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # a source checkout without the drakit-localcluster deps
    raise ImportError(
        "the local control plane needs cryptography, a dependency of the "
        "drakit-localcluster distribution (pip install drakit-localcluster): it is not installed"
    ) from exc

VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class CertPaths:
    """Where the control plane's credentials were written."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def write_certificates(
    cert_dir: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> CertPaths:
    """Create a CA and every certificate the control plane needs in ``cert_dir``."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("drakit-local-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = _key()
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    serving_cert = (
        _builder(_name("kube-apiserver"), ca_name, serving_key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    # CN is the user name, O the group: system:masters bypasses RBAC.
    admin_key = _key()
    admin_cert = (
        _builder(_name("admin", "system:masters"), ca_name, admin_key.public_key())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = _key()
    paths = CertPaths(
        ca_cert=cert_dir / "ca.crt",
        ca_key=cert_dir / "ca.key",
        serving_cert=cert_dir / "apiserver.crt",
        serving_key=cert_dir / "apiserver.key",
        admin_cert=cert_dir / "admin.crt",
        admin_key=cert_dir / "admin.key",
        sa_key=cert_dir / "sa.key",
        sa_pub=cert_dir / "sa.pub",
    )
    _write(paths.ca_cert, _pem_cert(ca_cert))
    _write(paths.ca_key, _pem_key(ca_key))
    _write(paths.serving_cert, _pem_cert(serving_cert))
    _write(paths.serving_key, _pem_key(serving_key))
    _write(paths.admin_cert, _pem_cert(admin_cert))
    _write(paths.admin_key, _pem_key(admin_key))
    _write(paths.sa_key, _pem_key(sa_key))
    _write(
        paths.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return paths
