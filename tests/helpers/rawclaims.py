"""ResourceClaims whose opaque config parameters are written with bytes of the test's choosing.

The apiserver keeps a RawExtension's bytes as received and compares them byte for byte when
a claim's ``spec`` or ``status.allocation`` is sent back. kube-scheduler copies the spec's
bytes into the allocation untouched (protobuf); these helpers do the same over raw JSON, so
a test can check that drakit's later writes never resend those bytes re-encoded.

``PARAMETERS`` is in the form the apiserver itself keeps through a patch (compact, ``<`` ``>``
``&`` escaped as Go escapes them) but which no Python encoder reproduces after a decode: keys
not sorted, ``1e3``/``1E-2``/``1.0`` number spellings, an escaped ``\\/``, non-ASCII as raw
UTF-8 and ``\\u003c`` for ``<``.
"""

from __future__ import annotations

import json
from typing import Any

from drakit.kubeapi import deepjson
from drakit.kubeapi.errors import error_from_status
from drakit.kubeapi.resources import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

__all__ = [
    "PARAMETERS",
    "allocate_raw",
    "create_raw_claim",
    "create_raw_template",
    "raw_claim_text",
    "send",
]

PARAMETERS = (
    '{"z":1e3,"model":"\\u003cgpu\\u003e \\u0026 caf\u00e9 \\/ \u00fc","n":1.0,'
    '"list":[1E-2,true,null,{"b":2,"a":1}]}'
)
_SLOT = "drakit-test-raw-parameters"


def send(
    client: Any,
    method: str,
    path: str,
    text: str | None = None,
    content_type: str = "application/json",
) -> str:
    """Send ``text`` as the body, unchanged, with the client's credentials; the answer's
    text (ApiError when refused)."""
    _method, url, headers, _body, _ = client.param_serialize(
        method,
        path,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        auth_settings=["BearerToken"],
    )
    body = None if text is None else text.encode("utf-8")
    response = client.call_api(method, url, headers, body=body).response
    data = response.data
    response.release_conn()
    if not 200 <= response.status < 300:
        raise error_from_status(response.status, data)
    return str(data.decode("utf-8"))


def _with_parameters(obj: dict[str, Any], parameters: str = PARAMETERS) -> str:
    """``obj`` as compact JSON with every parameters slot replaced by ``parameters``."""
    return json.dumps(obj, separators=(",", ":")).replace(f'"{_SLOT}"', parameters)


def _config(driver: str, source: str | None) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"requests": [], "opaque": {"driver": driver, "parameters": _SLOT}}
    if source:
        entry["source"] = source
    return [entry]


def create_raw_claim(
    client: Any,
    namespace: str,
    name: str,
    driver: str,
    *,
    device_class: str,
    request: str = "gpu",
    parameters: str = PARAMETERS,
) -> dict[str, Any]:
    """Create a claim with one request and opaque config for ``driver`` (``parameters``)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": request, "exactly": {"deviceClassName": device_class}}],
                "config": _config(driver, None),
            }
        },
    }
    text = _with_parameters(claim, parameters)
    created: dict[str, Any] = deepjson.loads(
        send(client, "POST", RESOURCE_CLAIMS.path(namespace), text)
    )
    return created


def create_raw_template(
    client: Any, namespace: str, name: str, driver: str, *, device_class: str, parameters: str
) -> dict[str, Any]:
    """Create a claim template with one request and opaque config for ``driver``."""
    spec = {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}],
            "config": _config(driver, None),
        }
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": spec},
    }
    path = RESOURCE_CLAIM_TEMPLATES.path(namespace)
    created: dict[str, Any] = deepjson.loads(
        send(client, "POST", path, _with_parameters(template, parameters))
    )
    return created


def allocate_raw(
    client: Any,
    claim: dict[str, Any],
    results: list[dict[str, Any]],
    *,
    driver: str,
    node: str | None = None,
    reserved_for: list[dict[str, Any]] | None = None,
    parameters: str = PARAMETERS,
) -> dict[str, Any]:
    """Write the allocation (and ``reserved_for``) the way kube-scheduler does: the claim's
    config copied with its bytes, at the claim's resourceVersion."""
    meta = claim["metadata"]
    allocation: dict[str, Any] = {
        "devices": {"results": results, "config": _config(driver, "FromClaim")}
    }
    if node:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    status: dict[str, Any] = {"allocation": allocation}
    if reserved_for:
        status["reservedFor"] = reserved_for
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")},
        "status": status,
    }
    path = RESOURCE_CLAIMS.path(meta["namespace"], meta["name"], "status")
    stored: dict[str, Any] = deepjson.loads(
        send(client, "PUT", path, _with_parameters(body, parameters))
    )
    return stored


def raw_claim_text(client: Any, namespace: str, name: str) -> str:
    """The claim as the apiserver sends it (JSON text, not decoded)."""
    return send(client, "GET", RESOURCE_CLAIMS.path(namespace, name))
