"""The admission decision: an AdmissionReview (``admission.k8s.io/v1``) in, its answer out.

Pure: no network, no clock. :func:`answer` takes the decoded request body and a
``validate`` function (the backend's config check, raising
:class:`~drakit.node_plugin.config.ConfigError` with the reasons) and returns the
AdmissionReview to send back; :class:`BadReviewError` means the body is not an AdmissionReview
at all (the server answers 400, and the apiserver applies the webhook's failurePolicy).

What is judged: CREATE and UPDATE of ResourceClaims (``spec.devices.config``) and
ResourceClaimTemplates (``spec.spec.devices.config``) of ``resource.k8s.io`` v1, v1beta2
and v1beta1 (the config list has the same shape in all three). Each entry whose
``opaque.driver`` is this driver is validated on its own, as the reference driver's
webhook does: the class's configs (merged first at prepare) are not known here, so a
claim entry must be valid by itself. Everything else is allowed: other drivers' configs,
other resources and subresources, DELETE and CONNECT, and an UPDATE that leaves the config
list as it was (a claim stored before the webhook existed, or before the driver's model
got stricter, must still have its finalizers removed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from drakit.kubeapi.deepjson import MAX_DEPTH, DeepJSON
from drakit.node_plugin.config import ConfigError

__all__ = ["MAX_CONFIGS", "MAX_PARAMETERS", "BadReviewError", "Validator", "answer", "decide"]

#: The API's own limit on config entries per claim (resource.k8s.io DeviceConfigMaxSize).
#: The apiserver validates the object before calling validating webhooks, so more is never
#: a real request; refusing it bounds the work a hostile caller can ask for.
MAX_CONFIGS = 32
#: Longest reason quoted per entry, and longest denial message: the apiserver returns the
#: message to the client, and a driver's validate_config may say a lot.
MAX_REASON = 1024
MAX_MESSAGE = 8192
#: Largest parameters validated, as compact JSON. The API stores at most 10 KiB
#: (OpaqueParametersMaxLength), and decoding and re-encoding can grow them about fourfold
#: (``1e15`` is written back as ``1000000000000000.0``), so more did not come through the
#: apiserver; validating it could take seconds and hundreds of MiB (a model's error for
#: each of 200,000 unknown keys).
MAX_PARAMETERS = 64 * 1024

GROUP = "resource.k8s.io"
VERSIONS = frozenset({"v1", "v1beta2", "v1beta1"})
# resource -> (kind, path of the ResourceClaimSpec in the object)
TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "resourceclaims": ("ResourceClaim", ("spec",)),
    "resourceclaimtemplates": ("ResourceClaimTemplate", ("spec", "spec")),
}

#: Checks one entry's ``opaque.parameters``; raises ConfigError with the reasons.
Validator = Callable[[Mapping[str, Any]], object]


class BadReviewError(ValueError):
    """The body is not an ``admission.k8s.io/v1`` AdmissionReview with a request."""


def answer(review: Any, driver: str, validate: Validator) -> dict[str, Any]:
    """The AdmissionReview to return for ``review`` (decoded JSON); BadReviewError if it is none."""
    if not isinstance(review, dict):
        raise BadReviewError("body is not a JSON object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        raise BadReviewError(
            f"expected apiVersion admission.k8s.io/v1, kind AdmissionReview; got "
            f"{_short(review.get('apiVersion'))}, {_short(review.get('kind'))}"
        )
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadReviewError("AdmissionReview has no request with a uid")
    response = decide(request, driver, validate)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request["uid"], **response},
    }


def decide(request: Mapping[str, Any], driver: str, validate: Validator) -> dict[str, Any]:
    """The ``response`` (without uid) for one admission request: allowed, or denied with a
    Status (code 422, reason Invalid) whose message names the object, each field path
    ``<spec>.devices.config[i].opaque.parameters`` and the model's reason."""
    target = _target(request)
    if target is None or request.get("operation") not in ("CREATE", "UPDATE"):
        return _ALLOWED
    kind, spec_path = target
    prefix = ".".join(spec_path)
    obj = request.get("object")
    configs = _configs(obj, spec_path)
    if isinstance(configs, str):
        return _denied(f"{_describe(kind, request, obj)}: {prefix}.devices.config: {configs}")
    if request.get("operation") == "UPDATE" and configs == _configs(
        request.get("oldObject"), spec_path
    ):
        return _ALLOWED
    problems = [
        f"{prefix}.devices.config[{index}].opaque.parameters: {reason}"
        for index, reason in _problems(configs, driver, validate)
    ]
    if not problems:
        return _ALLOWED
    return _denied(
        f"{_describe(kind, request, obj)}: {len(problems)} opaque config(s) of driver "
        f"{driver} are invalid: {'; '.join(problems)}"
    )


_ALLOWED: dict[str, Any] = {"allowed": True}


def _target(request: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """(kind, spec path) when the request is about one of ours; None for anything else."""
    resource = request.get("resource")
    if not isinstance(resource, dict) or request.get("subResource"):
        return None
    if resource.get("group") != GROUP or resource.get("version") not in VERSIONS:
        return None
    plural = resource.get("resource")
    return TARGETS.get(plural) if isinstance(plural, str) else None


def _configs(obj: Any, spec_path: tuple[str, ...]) -> list[Any] | str:
    """The object's config list ([] when absent), or what is wrong with its shape."""
    node = obj
    for key in (*spec_path, "devices", "config"):
        if node is None:
            return []
        if not isinstance(node, dict):
            return "the object does not have the shape of its kind"
        node = node.get(key)
    if node is None:
        return []
    if not isinstance(node, list):
        return "must be a list"
    if len(node) > MAX_CONFIGS:
        return f"at most {MAX_CONFIGS} entries are allowed, got {len(node)}"
    return node


def _problems(configs: list[Any], driver: str, validate: Validator) -> list[tuple[int, str]]:
    """(index, reason) for each of this driver's entries that fails validation."""
    problems = []
    for index, entry in enumerate(configs):
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        if not isinstance(opaque, dict) or opaque.get("driver") != driver:
            continue
        reason = _reason(opaque.get("parameters"), validate)
        if reason is not None:
            problems.append((index, _clip(reason, MAX_REASON)))
    return problems


def _reason(params: Any, validate: Validator) -> str | None:
    """Why ``params`` are refused; None when they are valid."""
    if not isinstance(params, dict):
        return f"must be a JSON object, got {_json_type(params)}"
    if _too_deep(params):
        return f"nested more than {MAX_DEPTH} levels deep"
    size = len(json.dumps(params, separators=(",", ":"), ensure_ascii=False, default=str))
    if size > MAX_PARAMETERS:
        return f"{size} bytes of JSON, more than the {MAX_PARAMETERS} validated here " \
            "(the API stores at most 10240)"  # fmt: skip
    try:
        validate(params)
    except ConfigError as exc:
        return str(exc)
    return None


def _too_deep(value: Any) -> bool:
    """True when a container was kept undecoded for its depth (a DeepJSON leaf)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, DeepJSON):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _describe(kind: str, request: Mapping[str, Any], obj: Any) -> str:
    """``Kind namespace/name`` of the object; a generated name shows as ``prefix*``."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or request.get("name")
    if not name and meta.get("generateName"):
        name = f"{meta['generateName']}*"
    namespace = meta.get("namespace") or request.get("namespace") or ""
    where = f"{_short(namespace)}/{_short(name or '')}" if namespace else _short(name or "")
    return f"{kind} {where}"


def _denied(message: str) -> dict[str, Any]:
    return {
        "allowed": False,
        "status": {"code": 422, "reason": "Invalid", "message": _clip(message, MAX_MESSAGE)},
    }


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number" if isinstance(value, int | float) else "nested too deep to read"


def _short(value: Any) -> str:
    """A value from the request as it appears in a message: text, clipped."""
    return _clip(value if isinstance(value, str) else repr(value), 253)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 15]}... (truncated)"
