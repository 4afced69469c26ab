"""The webhook's own certificate authority and serving certificate, kept in memory.

No cert-manager: each :func:`issue` makes a fresh CA (ECDSA P-256) and a serving
certificate it signs, for 127.0.0.1 and the ``--dns-name`` values. The CA lives twice as
long as the serving certificate, so that after a rotation the previous CA, still in the
published bundle beside the new one, stays valid until the rotation after that drops it.
Private keys exist only in memory; Python's ``ssl`` loads a key only from a file, so
:func:`server_context` writes it to a private (0700) temporary folder and removes it at once.

cryptography is an optional dependency of drakit (the ``webhook`` extra); this module is
imported only by ``drakit webhook``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # an optional extra: the node plugin and controller do not need it
    raise ImportError(
        "drakit webhook needs the 'webhook' extra (pip install 'drakit[webhook]'): "
        "cryptography is not installed"
    ) from exc

__all__ = ["RENEW_FRACTION", "Issued", "issue", "server_context"]

#: A certificate is replaced after this fraction of its lifetime (cert-manager's default:
#: renew when a third is left).
RENEW_FRACTION = 2 / 3
#: Certificates are valid from a little before they are made, for clocks a little behind.
CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    """One CA and the serving certificate it signed (PEM), with when to replace them."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes = b""  # the serving key; never logged, never written to lasting storage
    ca_not_after: float = 0.0  # epoch seconds
    renew_at: float = 0.0  # epoch seconds

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        return f"Issued(renew_at={self.renew_at:.0f}, ca_not_after={self.ca_not_after:.0f})"


def issue(hosts: Sequence[str], lifetime: float, *, name: str) -> Issued:
    """A new CA and a serving certificate for ``hosts`` (IP addresses or DNS names),
    valid ``lifetime`` seconds (the CA twice that); ``name`` goes into their subjects."""
    now = datetime.datetime.now(datetime.UTC)
    valid = datetime.timedelta(seconds=lifetime)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{name} CA {os.urandom(4).hex()}")
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), now, now + 2 * valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(_name(name), ca_name, key.public_key(), now, now + valid)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Issued(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        ca_not_after=(now + 2 * valid).timestamp(),
        renew_at=time.time() + lifetime * RENEW_FRACTION,
    )


def server_context(issued: Issued) -> ssl.SSLContext:
    """A TLS 1.2+ server context presenting ``issued``'s serving certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="drakit-webhook-") as folder:  # mode 0700
        cert, key = Path(folder, "tls.crt"), Path(folder, "tls.key")
        _write_private(cert, issued.cert_pem)
        _write_private(key, issued.key_pem)
        context.load_cert_chain(cert, key)
    return context


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
