"""The webhook's own certificate authority and serving certificate.

No cert-manager: each :func:`issue` makes a fresh CA (ECDSA P-256) and a serving
certificate it signs, for 127.0.0.1 and the ``--dns-name`` values. The CA lives twice as
long as the serving certificate, so that after a rotation the previous CA, still in the
published bundle beside the new one, stays valid until the rotation after that drops it.
The CA's private key is dropped as soon as it has signed: nothing is ever signed by it
again (a rotation makes a new CA), so only the serving key needs keeping.

:func:`load` rebuilds an :class:`Issued` from its PEM (the CA Secret of
:mod:`.castate`), checking that the key belongs to the certificate and the certificate to
the CA. Python's ``ssl`` loads a key only from a file, so :func:`server_context` writes it
to a private (0700) temporary folder and removes it at once.

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
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # an optional extra: the node plugin and controller do not need it
    raise ImportError(
        "drakit webhook needs the 'webhook' extra (pip install 'drakit[webhook]'): "
        "cryptography is not installed"
    ) from exc

__all__ = [
    "RENEW_FRACTION",
    "CertificateError",
    "Issued",
    "issue",
    "load",
    "not_after",
    "server_context",
    "split_bundle",
]

#: A certificate is replaced after this fraction of its lifetime (cert-manager's default:
#: renew when a third is left).
RENEW_FRACTION = 2 / 3
#: Certificates are valid from a little before they are made, for clocks a little behind.
CLOCK_SKEW = datetime.timedelta(minutes=5)


class CertificateError(ValueError):
    """PEM that is not a usable CA, certificate and key; the message says what is wrong."""


@dataclass(frozen=True)
class Issued:
    """One CA and the serving certificate it signed (PEM), with when to replace them."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes = b""  # the serving key; never logged
    ca_not_after: float = 0.0  # epoch seconds
    renew_at: float = 0.0  # epoch seconds
    not_after: float = 0.0  # epoch seconds: the serving certificate's end

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        return f"Issued(renew_at={self.renew_at:.0f}, ca_not_after={self.ca_not_after:.0f})"


def issue(hosts: Sequence[str], lifetime: float, *, name: str, at: float | None = None) -> Issued:
    """A new CA and a serving certificate for ``hosts`` (IP addresses or DNS names),
    valid ``lifetime`` seconds (the CA twice that) from ``at`` (epoch seconds; default:
    now); ``name`` goes into their subjects."""
    now = datetime.datetime.fromtimestamp(time.time() if at is None else at, datetime.UTC)
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
        renew_at=_renew_at(cert),
        not_after=(now + valid).timestamp(),
    )


def load(ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> Issued:
    """The :class:`Issued` these PEM blocks make up; CertificateError when they are not one
    CA, a certificate it issued and that certificate's private key."""
    ca, cert = _certificate(ca_pem, "CA"), _certificate(cert_pem, "serving certificate")
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"serving key: not a PEM private key ({exc})") from None
    if key.public_key() != cert.public_key():
        raise CertificateError("serving key: it does not belong to the serving certificate")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise CertificateError("serving certificate: not issued by the CA") from None
    return Issued(
        ca_pem=ca_pem,
        cert_pem=cert_pem,
        key_pem=key_pem,
        ca_not_after=ca.not_valid_after_utc.timestamp(),
        renew_at=_renew_at(cert),
        not_after=cert.not_valid_after_utc.timestamp(),
    )


def not_after(ca_pem: bytes) -> float:
    """When the certificate in ``ca_pem`` expires (epoch seconds); CertificateError if none."""
    return _certificate(ca_pem, "CA").not_valid_after_utc.timestamp()


def split_bundle(bundle: bytes) -> list[bytes]:
    """The PEM certificates of a bundle, one block each (text around them dropped)."""
    end = b"-----END CERTIFICATE-----"
    blocks = []
    for part in bundle.split(end)[:-1]:
        start = part.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            blocks.append(part[start:] + end + b"\n")
    return blocks


def _certificate(pem: bytes, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise CertificateError(f"{what}: not a PEM certificate ({exc})") from None


def _renew_at(cert: x509.Certificate) -> float:
    """When to replace ``cert``: RENEW_FRACTION into its lifetime (issuance is not_before
    plus the skew allowance), so a process that loads it later agrees with its issuer."""
    issued = cert.not_valid_before_utc + CLOCK_SKEW
    lifetime = cert.not_valid_after_utc - issued
    return (issued + lifetime * RENEW_FRACTION).timestamp()


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
