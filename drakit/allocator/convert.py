"""Convert resource.k8s.io v1beta1 and v1beta2 objects (plain dicts) to the v1 shape.

* **v1beta2** has the v1 shape already; only ``apiVersion`` changes.
* **v1beta1** differs: a device keeps its fields under ``basic``; ``spec.nodeName`` is a
  plain string (``""`` = unset) and ``spec.allNodes`` a plain bool (``false`` = unset); a
  device request is flat (``deviceClassName``, ``selectors``, ... directly on the request,
  or ``firstAvailable``) where v1 nests it under ``exactly``.

:func:`to_v1` dispatches on ``apiVersion`` and ``kind``; objects already in v1 (or with no
apiVersion) are returned unchanged. The input is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from drakit.allocator._codec import ModelError

__all__ = ["claim_spec_v1beta1_to_v1", "device_v1beta1_to_v1", "slice_spec_v1beta1_to_v1", "to_v1"]

GROUP = "resource.k8s.io"
V1 = f"{GROUP}/v1"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"

_EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
    "derivedAttributes",
)


def to_v1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The v1 form of a resource.k8s.io object given as a dict (any served version)."""
    api_version = obj.get("apiVersion", "")
    out = copy.deepcopy(dict(obj))
    if api_version in ("", V1) or not str(api_version).startswith(GROUP + "/"):
        return out
    if api_version not in (V1BETA1, V1BETA2):
        raise ModelError(
            "apiVersion",
            f"unsupported version {api_version!r} (expected {V1}, {V1BETA2} or {V1BETA1})",
        )
    out["apiVersion"] = V1
    if api_version == V1BETA2:
        return out
    kind = obj.get("kind", "")
    if kind == "ResourceSlice" and isinstance(out.get("spec"), dict):
        out["spec"] = slice_spec_v1beta1_to_v1(out["spec"])
    elif kind == "ResourceClaim" and isinstance(out.get("spec"), dict):
        out["spec"] = claim_spec_v1beta1_to_v1(out["spec"])
    elif kind == "ResourceClaimTemplate" and isinstance(out.get("spec"), dict):
        inner = out["spec"].get("spec")
        if isinstance(inner, dict):
            out["spec"]["spec"] = claim_spec_v1beta1_to_v1(inner)
    return out


def slice_spec_v1beta1_to_v1(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A v1beta1 ResourceSliceSpec as v1 (devices flattened, empty node fields dropped)."""
    out = dict(spec)
    if out.get("nodeName") == "":
        del out["nodeName"]
    if out.get("allNodes") is False:
        del out["allNodes"]
    devices = out.get("devices")
    if isinstance(devices, list):
        out["devices"] = [device_v1beta1_to_v1(d) for d in devices]
    return out


def device_v1beta1_to_v1(device: Mapping[str, Any]) -> dict[str, Any]:
    """A v1beta1 Device (``{name, basic: {...}}``) as a flat v1 Device."""
    if not isinstance(device, Mapping):
        return device
    out = {k: v for k, v in device.items() if k != "basic"}
    basic = device.get("basic")
    if isinstance(basic, Mapping):
        for key, value in basic.items():
            if key == "nodeName" and value == "":
                continue
            if key == "allNodes" and value is False:
                continue
            out[key] = value
    return out


def claim_spec_v1beta1_to_v1(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A v1beta1 ResourceClaimSpec as v1 (flat requests moved under ``exactly``)."""
    out = dict(spec)
    devices = out.get("devices")
    if not isinstance(devices, Mapping):
        return out
    devices = dict(devices)
    requests = devices.get("requests")
    if isinstance(requests, list):
        devices["requests"] = [_request_v1beta1_to_v1(r) for r in requests]
    out["devices"] = devices
    return out


def _request_v1beta1_to_v1(request: Any) -> Any:
    if not isinstance(request, Mapping) or "exactly" in request:
        return request
    out: dict[str, Any] = {}
    exactly: dict[str, Any] = {}
    for key, value in request.items():
        if key in _EXACT_FIELDS:
            exactly[key] = value
        else:
            out[key] = value
    if exactly and not request.get("firstAvailable"):
        out["exactly"] = exactly
    return out
