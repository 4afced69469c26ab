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

Decoding is as strict as the reference webhook's Go decoding (the admission differential,
tests/differential/admission, holds drakit to it): :func:`decode_review` marks objects
that repeat a key, and a driver's parameters containing one are refused; the config list
must decode as its API type (entries, ``opaque``, ``driver`` and ``requests`` of the right
JSON type, ``null`` being the zero value), whichever driver an entry names.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from drakit.kubeapi.deepjson import MAX_DEPTH, DeepJSON, depth_safe
from drakit.node_plugin.config import ConfigError

__all__ = [
    "MAX_CONFIGS",
    "MAX_PARAMETERS",
    "BadReviewError",
    "RepeatedKeys",
    "Validator",
    "answer",
    "decide",
    "decode_review",
]

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


class RepeatedKeys(dict[str, Any]):
    """A decoded JSON object that named some key more than once.

    It holds the last value of each key, as Go's decoder keeps it; ``repeated`` names the
    keys. Opaque parameters containing one are refused (:func:`decide`), as the reference
    driver's strict decoder refuses duplicate fields; elsewhere in a review it is a plain
    object (the apiserver never sends one: it re-encodes the object it decoded).
    """

    repeated: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    marked = RepeatedKeys(obj)
    marked.repeated = tuple(sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return marked


_decode = depth_safe(partial(json.loads, object_pairs_hook=_object))


def decode_review(body: bytes) -> Any:
    """An AdmissionReview body as Python: JSON of any depth (:mod:`drakit.kubeapi.deepjson`),
    objects with repeated keys marked (:class:`RepeatedKeys`). Bytes that are not UTF-8 are
    read as U+FFFD, as Go's decoder reads them, so they refuse only what they appear in.
    Raises ValueError when the body is not JSON."""
    try:
        return _decode(body)
    except UnicodeDecodeError:
        return _decode(body.decode("utf-8", errors="replace").encode())


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
        return _denied(f"{_describe(kind, request, obj)}: {prefix}.devices.config{configs}")
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
    """The object's config list ([] when absent), or what is wrong with its shape (text
    to follow the list's field path: ``: reason`` or ``[i].field: reason``)."""
    node = obj
    for key in (*spec_path, "devices", "config"):
        if node is None:
            return []
        if not isinstance(node, dict):
            return ": the object does not have the shape of its kind"
        node = node.get(key)
    if node is None:
        return []
    if not isinstance(node, list):
        return ": must be a list"
    if len(node) > MAX_CONFIGS:
        return f": at most {MAX_CONFIGS} entries are allowed, got {len(node)}"
    for index, entry in enumerate(node):
        problem = _entry_shape(entry)
        if problem:
            return f"[{index}]{problem}"
    return node


def _entry_shape(entry: Any) -> str:
    """What keeps a config entry from decoding as a DeviceClaimConfiguration ("" if
    nothing): the reference webhook decodes the whole object into its Go type, so a wrong
    JSON type refuses the request whichever driver the entry is for. ``null`` is the zero
    value anywhere, and unknown fields are ignored, as in Go."""
    if entry is None:
        return ""
    if not isinstance(entry, dict):
        return f": must be an object, got {_json_type(entry)}"
    requests = entry.get("requests")
    if requests is not None and (
        not isinstance(requests, list) or any(not isinstance(r, str | None) for r in requests)
    ):
        return ".requests: must be a list of strings"
    opaque = entry.get("opaque")
    if opaque is None:
        return ""
    if not isinstance(opaque, dict):
        return f".opaque: must be an object, got {_json_type(opaque)}"
    if not isinstance(opaque.get("driver"), str | None):
        return f".opaque.driver: must be a string, got {_json_type(opaque.get('driver'))}"
    return ""


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
    problem = _undecodable(params)
    if problem:
        return problem
    size = len(json.dumps(params, separators=(",", ":"), ensure_ascii=False, default=str))
    if size > MAX_PARAMETERS:
        return f"{size} bytes of JSON, more than the {MAX_PARAMETERS} validated here " \
            "(the API stores at most 10240)"  # fmt: skip
    try:
        validate(params)
    except ConfigError as exc:
        return str(exc)
    return None


def _undecodable(value: Any) -> str:
    """Why strict decoding refuses ``value`` before any model sees it ("" if it does not):
    a container kept undecoded for its depth (a DeepJSON leaf), or an object that repeats
    a key (the reference's strict decoder refuses duplicate fields at any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, DeepJSON):
            return f"nested more than {MAX_DEPTH} levels deep"
        if isinstance(item, RepeatedKeys):
            return "duplicate field(s) " + ", ".join(f'"{_short(k)}"' for k in item.repeated)
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return ""


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
