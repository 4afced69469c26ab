"""drakit webhook decodes a driver's opaque parameters as strictly as the reference
driver's Go decoder: repeated keys are refused wherever they are in the parameters, bytes
that are not UTF-8 refuse only what they appear in, and the config list must decode as its
Go type (a wrong JSON type refuses the request, whichever driver the entry names)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

from drakit.node_plugin.config import validate_parameters
from drakit.webhook.certs import issue, server_context
from drakit.webhook.review import decide, decode_review
from drakit.webhook.server import REVIEW_PATH, WebhookServer

DRIVER = "gpu.example.com"


class Sharing(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"
    nested: dict[str, Any] = {}

    def validate_config(self) -> None:
        if self.interval not in ("Default", "Short"):
            raise ValueError(f"unknown time-slice interval: {self.interval}")


def validate(params: Any) -> object:
    return validate_parameters(Sharing, params)


def body(config_text: str) -> bytes:
    """An AdmissionReview whose config list is ``config_text``, written as it is."""
    head = json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE",
                    "resource": {"group": "resource.k8s.io", "version": "v1",
                                 "resource": "resourceclaims"},
                    "object": {"metadata": {"name": "c", "namespace": "n"},
                               "spec": {"devices": {"config": "CONFIG"}}}},
    })  # fmt: skip
    return head.replace('"CONFIG"', config_text).encode()


def ours(params_text: str, driver: str = DRIVER) -> str:
    return f'[{{"opaque": {{"driver": "{driver}", "parameters": {params_text}}}}}]'


def verdict(raw: bytes) -> dict[str, Any]:
    return decide(decode_review(raw)["request"], DRIVER, validate)


@pytest.mark.parametrize(
    "params",
    [
        '{"interval": "Short", "interval": "Default"}',
        '{"interval": "Default", "interval": "Default"}',
        '{"nested": {"a": 1, "a": 1}}',
        '{"nested": {"list": [{"b": 1, "b": 2}]}}',
    ],
    ids=["top-level", "same-value", "nested", "inside-a-list"],
)
def test_parameters_that_repeat_a_key_are_refused_at_any_depth(params: str) -> None:
    response = verdict(body(ours(params)))
    assert response["allowed"] is False
    assert "duplicate field(s)" in response["status"]["message"]


def test_repeated_keys_of_another_driver_or_outside_the_parameters_are_not_judged() -> None:
    other = ours('{"interval": "x", "interval": "y"}', driver="nic.example.com")
    assert verdict(body(other))["allowed"] is True
    # The last value counts, as in Go: this driver's entry is the valid one.
    twice = f'[{{"opaque": {{"driver": "{DRIVER}", "driver": "{DRIVER}", "parameters": {{}}}}}}]'
    assert verdict(body(twice))["allowed"] is True


def test_bytes_that_are_not_utf8_refuse_only_what_they_are_in() -> None:
    other = body(ours('{"note": "BAD"}', driver="nic.example.com")).replace(b"BAD", b"\xff\xfe")
    assert verdict(other)["allowed"] is True
    mine = body(ours('{"interval": "BAD"}')).replace(b"BAD", b"\xff\xfe")
    assert verdict(mine)["allowed"] is False


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ("[5]", "config[0]: must be an object, got a number"),
        ('[{"opaque": "x"}]', "config[0].opaque: must be an object, got a string"),
        ('[{"opaque": {"driver": 5, "parameters": {}}}]', "config[0].opaque.driver"),
        (f'[{{"requests": "gpu", "opaque": {{"driver": "{DRIVER}"}}}}]', "config[0].requests"),
        ('[{"requests": [1], "opaque": null}]', "config[0].requests"),
        ('[{}, {"opaque": {"driver": ["nic.example.com"]}}]', "config[1].opaque.driver"),
    ],
)
def test_a_config_list_that_does_not_decode_as_its_type_is_refused(config: str, where: str) -> None:
    response = verdict(body(config))
    assert response["allowed"] is False
    assert f"spec.devices.config{where.removeprefix('config')}" in response["status"]["message"]


@pytest.mark.parametrize(
    "config",
    ["null", "[null]", '[{"opaque": null}]', '[{"requests": null, "opaque": {"driver": null}}]'],
)
def test_null_is_the_zero_value_on_the_config_path(config: str) -> None:
    assert verdict(body(config))["allowed"] is True


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, ssl.SSLContext]]:
    issued = issue(("127.0.0.1",), 3600, name="strict-decoding")
    served = WebhookServer(("127.0.0.1", 0), driver=DRIVER, validate=validate, ready=lambda: True)
    served.use(server_context(issued))
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served.server_address[1], ssl.create_default_context(cadata=issued.ca_pem.decode())
    served.shutdown()
    served.server_close()
    thread.join(10)


def test_the_server_refuses_repeated_keys_it_receives(server: tuple[int, ssl.SSLContext]) -> None:
    port, context = server
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        raw = body(ours('{"interval": "Default", "interval": "Default"}'))
        conn.request("POST", REVIEW_PATH, raw, headers={"Content-Type": "application/json"})
        reply = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert reply["response"]["allowed"] is False
    assert 'duplicate field(s) "interval"' in reply["response"]["status"]["message"]
