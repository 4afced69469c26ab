"""The admission decision (drakit.webhook.review): what is judged, what is allowed, what
the denial says; no network."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from drakit.kubeapi.deepjson import loads_bounded
from drakit.node_plugin.config import validate_parameters
from drakit.webhook.review import MAX_CONFIGS, MAX_PARAMETERS, BadReviewError, answer, decide

DRIVER = "gpu.example.com"


class Sharing(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"
    replicas: int = 1

    def validate_config(self) -> None:
        if self.interval not in ("Default", "Short", "Long"):
            raise ValueError(f"unknown time-slice interval: {self.interval}")


def validate(params: Any) -> object:
    return validate_parameters(Sharing, params)


def entry(params: Any, driver: str = DRIVER) -> dict[str, Any]:
    return {"requests": ["gpu"], "opaque": {"driver": driver, "parameters": params}}


def claim(*configs: Any, name: str = "c1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu"}], "config": list(configs)}},
    }


def template(*configs: Any) -> dict[str, Any]:
    return {"metadata": {"name": "t1", "namespace": "ns"}, "spec": claim(*configs)}


def request(
    obj: Any,
    *,
    resource: str = "resourceclaims",
    version: str = "v1",
    operation: str = "CREATE",
    old: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "uid": "u-1",
        "resource": {"group": "resource.k8s.io", "version": version, "resource": resource},
        "operation": operation,
        "object": obj,
        "oldObject": old,
        **extra,
    }


def message(response: dict[str, Any]) -> str:
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid"
    return str(response["status"]["message"])


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_invalid_claim_config_is_denied_naming_object_field_and_model_reason(version: str) -> None:
    bad = claim(entry({"interval": "Short"}), entry({"interval": "InvalidInterval"}))
    text = message(decide(request(bad, version=version), DRIVER, validate))
    assert text.startswith("ResourceClaim ns/c1: 1 opaque config(s) of driver gpu.example.com")
    assert (
        "spec.devices.config[1].opaque.parameters: unknown time-slice interval: InvalidInterval"
        in text
    )
    assert "config[0]" not in text


def test_template_fields_are_named_under_spec_spec() -> None:
    bad = template(entry({"replicas": "2", "colour": "red"}))
    text = message(decide(request(bad, resource="resourceclaimtemplates"), DRIVER, validate))
    assert text.startswith("ResourceClaimTemplate ns/t1:")
    assert "spec.spec.devices.config[0].opaque.parameters: replicas: Input should be a valid " \
        "integer" in text  # fmt: skip
    assert "colour: Extra inputs are not permitted" in text


def test_valid_config_and_no_config_are_allowed() -> None:
    assert decide(request(claim(entry({"interval": "Long"}))), DRIVER, validate) == {
        "allowed": True
    }
    assert decide(request(claim()), DRIVER, validate)["allowed"] is True
    no_devices = {"metadata": {"name": "x"}, "spec": {}}
    assert decide(request(no_devices), DRIVER, validate)["allowed"] is True


def test_other_drivers_configs_are_not_judged() -> None:
    other = claim(entry({"interval": 5, "anything": True}, driver="nic.example.com"))
    assert decide(request(other), DRIVER, validate)["allowed"] is True


@pytest.mark.parametrize(
    "req",
    [
        request(claim(entry({"interval": "x"})), resource="pods"),
        request(claim(entry({"interval": "x"})), subResource="status"),
        request(claim(entry({"interval": "x"})), operation="DELETE"),
        request(claim(entry({"interval": "x"})), version="v1alpha3"),
        {"uid": "u", "resource": "resourceclaims", "operation": "CREATE"},
    ],
    ids=["other-resource", "subresource", "delete", "other-version", "malformed-resource"],
)
def test_requests_that_are_not_about_claim_config_are_allowed(req: dict[str, Any]) -> None:
    assert decide(req, DRIVER, validate)["allowed"] is True


def test_update_that_keeps_the_config_is_allowed_even_when_it_is_invalid() -> None:
    # A claim stored before the webhook existed must still get its finalizers removed.
    stored = claim(entry({"interval": "Bogus"}))
    assert decide(request(stored, operation="UPDATE", old=stored), DRIVER, validate)["allowed"]
    changed = request(stored, operation="UPDATE", old=claim(entry({"interval": "Short"})))
    assert "Bogus" in message(decide(changed, DRIVER, validate))


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ([1, 2], "must be a JSON object, got an array"),
        ("text", "must be a JSON object, got a string"),
        (None, "must be a JSON object, got null"),
    ],
)
def test_parameters_that_are_not_an_object_are_denied(params: Any, reason: str) -> None:
    assert reason in message(decide(request(claim(entry(params))), DRIVER, validate))


def test_parameters_nested_deeper_than_the_decoder_keeps_are_denied_not_crashed() -> None:
    deep = '{"interval": "Short", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    body = json.dumps(request(claim(entry({"interval": "Short"})))).replace(
        '{"interval": "Short"}', deep
    )
    text = message(decide(loads_bounded(body), DRIVER, validate))
    assert "spec.devices.config[0].opaque.parameters: nested more than 200 levels deep" in text


def test_parameters_larger_than_the_api_could_have_stored_are_denied_without_validation() -> None:
    # 200,000 unknown keys: the model's error for each would take seconds and ~170 MiB.
    validated: list[Any] = []
    huge = {f"k{i}": 0 for i in range(200_000)}
    response = decide(request(claim(entry(huge))), DRIVER, validated.append)
    assert validated == []
    assert f"more than the {MAX_PARAMETERS} validated here" in message(response)
    at_the_api_limit = {"interval": "Short", "x": "a" * 10_000}
    decide(request(claim(entry(at_the_api_limit))), DRIVER, validated.append)
    assert validated == [at_the_api_limit]


def test_malformed_shapes_are_denied_with_the_field() -> None:
    bad = {"metadata": {"name": "c"}, "spec": {"devices": {"config": {"not": "a list"}}}}
    assert "spec.devices.config: must be a list" in message(decide(request(bad), DRIVER, validate))
    too_many = claim(*[entry({})] * (MAX_CONFIGS + 1))
    assert f"at most {MAX_CONFIGS} entries" in message(decide(request(too_many), DRIVER, validate))
    assert "shape" in message(decide(request({"spec": "x"}), DRIVER, validate))


def test_a_generated_name_is_shown_as_its_prefix() -> None:
    obj = claim(entry({"interval": "Bogus"}))
    obj["metadata"] = {"generateName": "pod-gpu-", "namespace": "ns"}
    assert message(decide(request(obj), DRIVER, validate)).startswith("ResourceClaim ns/pod-gpu-*:")


def test_a_driver_check_that_crashes_is_a_denial_not_an_error() -> None:
    class Broken(pydantic.BaseModel):
        def validate_config(self) -> None:
            raise KeyError("oops")

    def broken(params: Any) -> object:
        return validate_parameters(Broken, params)

    assert "'oops'" in message(decide(request(claim(entry({}))), DRIVER, broken))


def test_long_reasons_are_clipped() -> None:
    class Wordy(pydantic.BaseModel):
        def validate_config(self) -> None:
            raise ValueError("x" * 100_000)

    def wordy(params: Any) -> object:
        return validate_parameters(Wordy, params)

    text = message(decide(request(claim(*[entry({})] * 32)), DRIVER, wordy))
    assert len(text) <= 8192 and text.endswith("(truncated)")


def test_answer_wraps_the_response_with_the_request_uid() -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": request(claim())}  # fmt: skip
    assert answer(review, DRIVER, validate) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True},
    }


@pytest.mark.parametrize(
    "review",
    [
        [],
        {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}},
    ],
    ids=["not-an-object", "v1beta1", "no-request", "uid-not-a-string"],
)
def test_a_body_that_is_not_an_admission_review_v1_is_refused(review: Any) -> None:
    with pytest.raises(BadReviewError):
        answer(review, DRIVER, validate)
