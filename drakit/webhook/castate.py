"""What the webhook's certificate authority is at one moment, and how a Secret holds it.

:class:`CAState` is pure data: the certificate served now (``current``), the one staged to
be served next (``next``: trusted already, served only once the apiserver has seen it), and
the CA served before (``previous_ca``: kept trusted until it expires, for replicas and
connections still on the old certificate). The bundle written into the
ValidatingWebhookConfiguration is every one of those CAs still valid, newest first: a
canonical order, so that replicas reading the Secret a moment apart (before and after a
promotion) publish the same bytes instead of patching over each other.

The Secret (``type: Opaque``) holds, in ``data``:

=====================  ===========================================================
``tls.crt``/``tls.key``  the serving certificate and key every replica serves
``ca.crt``               the CA that issued ``tls.crt``
``next-tls.crt``,        a staged rotation: the next certificate, key and CA
``next-tls.key``,
``next-ca.crt``
``previous-ca.crt``      the CA of the certificate served before the last rotation
=====================  ===========================================================

and in ``metadata.annotations``: :data:`STAGED_AT` (when the rotation was staged) and
:data:`ROTATED_FOR` (the value of the user's :data:`ROTATE` annotation that the last
rotation answered). Setting :data:`ROTATE` to a new value asks for a rotation now, with the
same overlap as a scheduled one; deleting the Secret makes the webhook start over with a new
CA at once (for a key that leaked: old certificates stop being trusted immediately).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from drakit.webhook.certs import CertificateError, Issued, load, not_after

__all__ = [
    "DATA_KEYS",
    "ROTATE",
    "ROTATED_FOR",
    "STAGED_AT",
    "CAState",
    "StateError",
    "decode",
    "encode",
    "rotate_request",
]

#: The annotation a user sets (to any new value) to ask for a rotation.
ROTATE = "webhook.drakit.dev/rotate"
#: The value of ROTATE the last rotation was made for.
ROTATED_FOR = "webhook.drakit.dev/rotated-for"
#: When the next certificate was staged (epoch seconds).
STAGED_AT = "webhook.drakit.dev/staged-at"

_CURRENT = ("ca.crt", "tls.crt", "tls.key")
_NEXT = ("next-ca.crt", "next-tls.crt", "next-tls.key")
_PREVIOUS = "previous-ca.crt"
#: Every data key the webhook writes; others are dropped on its next write.
DATA_KEYS = (*_CURRENT, *_NEXT, _PREVIOUS)


class StateError(ValueError):
    """The Secret does not hold a usable state; the message names the key and why."""


@dataclass(frozen=True)
class CAState:
    """The served certificate, the staged one and the CA served before them."""

    current: Issued
    next: Issued | None = None
    previous_ca: bytes = b""
    staged_at: float = 0.0
    rotated_for: str = ""

    def trusted(self, now: float) -> list[bytes]:
        """The CAs to publish: current, next and previous while valid, newest first."""
        cas = [self.current.ca_pem]
        if self.next is not None:
            cas.append(self.next.ca_pem)
        if self.previous_ca:
            cas.append(self.previous_ca)
        dated = [(not_after(ca), ca) for ca in dict.fromkeys(cas)]
        return [ca for end, ca in sorted(dated, reverse=True) if end > now]

    def bundle(self, now: float) -> bytes:
        """The caBundle: :meth:`trusted` concatenated."""
        return b"".join(self.trusted(now))

    def staged(self, fresh: Issued, now: float, request: str) -> CAState:
        """This state with ``fresh`` staged as the next certificate, answering ``request``
        (the ROTATE annotation's value, or the one already answered)."""
        return replace(self, next=fresh, staged_at=now, rotated_for=request)

    def promoted(self) -> CAState:
        """The staged certificate served, the current CA kept as the previous one."""
        if self.next is None:
            raise ValueError("no staged certificate to promote")
        return replace(
            self, current=self.next, next=None, previous_ca=self.current.ca_pem, staged_at=0.0
        )


def decode(secret: Mapping[str, Any]) -> CAState:
    """The state a Secret holds; StateError naming the key when it holds none."""
    data = secret.get("data") or {}
    if not isinstance(data, dict):
        raise StateError("data: not a map")
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    current = _issued(data, _CURRENT)
    staged = _issued(data, _NEXT) if any(data.get(k) for k in _NEXT) else None
    previous = _bytes(data, _PREVIOUS) if _PREVIOUS in data else b""
    if previous:
        try:
            not_after(previous)
        except CertificateError as exc:
            raise StateError(f"data.{_PREVIOUS}: {exc}") from None
    try:
        staged_at = float(annotations.get(STAGED_AT) or 0.0) if staged else 0.0
    except ValueError:
        raise StateError(f"annotation {STAGED_AT}: not a number") from None
    return CAState(
        current=current,
        next=staged,
        previous_ca=previous,
        staged_at=staged_at,
        rotated_for=str(annotations.get(ROTATED_FOR) or ""),
    )


def encode(state: CAState, base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (the Secret as read, or a new one's skeleton) holding ``state``.

    Everything of ``base`` but the webhook's own data keys and annotations is kept: labels,
    owner references, the user's ROTATE annotation.
    """
    data: dict[str, str] = {}
    _put(data, _CURRENT, state.current)
    if state.next is not None:
        _put(data, _NEXT, state.next)
    if state.previous_ca:
        data[_PREVIOUS] = _b64(state.previous_ca)
    metadata = {k: v for k, v in (base.get("metadata") or {}).items() if k != "managedFields"}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != STAGED_AT}
    if state.next is not None:
        annotations[STAGED_AT] = f"{state.staged_at:.3f}"
    if state.rotated_for:
        annotations[ROTATED_FOR] = state.rotated_for
    else:
        annotations.pop(ROTATED_FOR, None)
    metadata["annotations"] = annotations
    return {
        **base,
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": data,
    }


def rotate_request(secret: Mapping[str, Any]) -> str:
    """The value of the user's ROTATE annotation ('' when unset)."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(ROTATE) or "")


def _issued(data: Mapping[str, Any], keys: tuple[str, str, str]) -> Issued:
    missing = [k for k in keys if not data.get(k)]
    if missing:
        raise StateError(f"data.{missing[0]}: missing")
    ca, cert, key = (_bytes(data, k) for k in keys)
    try:
        return load(ca, cert, key)
    except CertificateError as exc:
        raise StateError(f"data.{keys[1]}: {exc}") from None


def _bytes(data: Mapping[str, Any], key: str) -> bytes:
    value = data.get(key)
    if not isinstance(value, str):
        raise StateError(f"data.{key}: not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise StateError(f"data.{key}: not base64") from None


def _put(data: dict[str, str], keys: tuple[str, str, str], issued: Issued) -> None:
    for key, value in zip(keys, (issued.ca_pem, issued.cert_pem, issued.key_pem), strict=True):
        data[key] = _b64(value)


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()
