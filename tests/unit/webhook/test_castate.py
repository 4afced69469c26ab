"""The CA state as a Secret holds it: what goes in comes out, what the user set stays, and
a Secret that does not hold a usable state is named by key and reason."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from drakit.webhook.castate import (
    ROTATE,
    ROTATED_FOR,
    STAGED_AT,
    CAState,
    StateError,
    decode,
    encode,
    rotate_request,
)
from drakit.webhook.certs import issue, load

NOW = float(int(time.time()))


def issued(lifetime: float = 3000.0, at: float = NOW) -> Any:
    return issue(("127.0.0.1", "webhook.ns.svc"), lifetime, name="t", at=at)


def test_a_state_survives_the_round_trip_and_keeps_what_others_set() -> None:
    old, current, staged = issued(at=NOW - 100), issued(), issued()
    state = CAState(current=current, next=staged, previous_ca=old.ca_pem, staged_at=NOW,
                    rotated_for="r1")  # fmt: skip
    base = {"metadata": {"name": "ca", "labels": {"a": "b"}, "managedFields": [{}],
                         "annotations": {ROTATE: "r2", STAGED_AT: "1"}}}  # fmt: skip
    secret = encode(state, base)
    assert secret["type"] == "Opaque" and "managedFields" not in secret["metadata"]
    assert secret["metadata"]["labels"] == {"a": "b"}
    assert secret["metadata"]["annotations"] == {
        ROTATE: "r2", STAGED_AT: f"{NOW:.3f}", ROTATED_FOR: "r1"
    }  # fmt: skip
    back = decode(secret)
    assert back.current.cert_pem == current.cert_pem and back.current.key_pem == current.key_pem
    assert back.next is not None and back.next.cert_pem == staged.cert_pem
    assert (back.previous_ca, back.staged_at, back.rotated_for) == (old.ca_pem, NOW, "r1")
    assert rotate_request(secret) == "r2"
    assert back.current.renew_at == pytest.approx(current.renew_at, abs=1)


def test_a_promotion_drops_the_staged_keys() -> None:
    state = CAState(current=issued()).staged(issued(), NOW, "")
    secret = encode(state.promoted(), encode(state, {"metadata": {"name": "ca"}}))
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key", "previous-ca.crt"}
    assert STAGED_AT not in secret["metadata"]["annotations"]


def test_the_bundle_is_every_valid_ca_newest_first() -> None:
    expired, current, staged = issued(lifetime=10, at=NOW - 100), issued(), issued(at=NOW + 5)
    state = CAState(current=current, next=staged, previous_ca=expired.ca_pem)
    assert state.trusted(NOW) == [staged.ca_pem, current.ca_pem]


def _secret(**data: bytes) -> dict[str, Any]:
    return {"data": {k.replace("_", "."): base64.b64encode(v).decode() for k, v in data.items()}}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tls_key": None}, "data.tls.key: missing"),
        ({"tls_key": "other"}, "data.tls.crt: serving key: it does not belong"),
        ({"ca_crt": "other"}, "data.tls.crt: serving certificate: not issued by the CA"),
        ({"tls_crt": b"junk"}, "data.tls.crt: serving certificate: not a PEM certificate"),
        ({"next-tls.crt": "only"}, "data.next-ca.crt: missing"),
    ],
)
def test_an_unusable_secret_is_named_by_key_and_reason(change: dict[str, Any], reason: str) -> None:
    mine, other = issued(), issued()
    parts = {"ca_crt": mine.ca_pem, "tls_crt": mine.cert_pem, "tls_key": mine.key_pem}
    for key, value in change.items():
        if value is None:
            parts.pop(key)
        elif value == "other":
            parts[key] = {"ca_crt": other.ca_pem, "tls_key": other.key_pem}[key]
        elif value == "only":
            parts["next-tls_crt"] = mine.cert_pem
        else:
            parts[key] = value
    secret = _secret(**parts)
    secret["data"] = {
        k.replace("next-tls.crt", "next-tls.crt"): v for k, v in secret["data"].items()
    }
    with pytest.raises(StateError) as caught:
        decode(secret)
    assert reason in str(caught.value)


def test_text_that_is_not_base64_is_named() -> None:
    with pytest.raises(StateError, match=r"data\.ca\.crt: not base64"):
        decode({"data": {"ca.crt": "***", "tls.crt": "a", "tls.key": "b"}})


def test_a_loaded_certificate_is_due_when_its_issuer_said() -> None:
    fresh = issued()
    again = load(fresh.ca_pem, fresh.cert_pem, fresh.key_pem)
    assert again.renew_at == pytest.approx(fresh.renew_at, abs=1)
    assert again.not_after == pytest.approx(fresh.not_after, abs=1)
    assert "key" not in repr(again).lower()
