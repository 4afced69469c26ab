"""What an allocated claim holds, even when the rest of it cannot be decoded.

A claim is allocated by whoever allocated it (kube-scheduler, drakit's controller, another
scheduler), not by whoever can read it. Its devices are taken from the moment
``status.allocation`` is written, whatever else the claim holds: a claim whose opaque
parameters nest too deep for the model, or carry a field a newer apiserver added in a shape
this version refuses, still blocks its devices. Code that builds allocated state from claims
therefore decodes them with :func:`decode_claim`, which falls back to the claim's *holdings*:
its identity, the devices its allocation results name and its consumers. That keeps the
allocated state failing closed: an undecodable claim never frees a device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drakit.allocator.model import ModelError, ResourceClaim

__all__ = ["DecodedClaim", "claim_holdings", "decode_claim"]

# The keys of an allocation result that say which device (or share of it) a claim holds.
_RESULT_KEYS = ("request", "driver", "pool", "device", "adminAccess", "shareID", "consumedCapacity")
_METADATA_KEYS = ("name", "namespace", "uid")


@dataclass(frozen=True, slots=True)
class DecodedClaim:
    """A claim's model and, when the full model could not be built, why.

    ``model`` is the full model when ``error`` is None. Otherwise it is the claim's holdings
    (see :func:`claim_holdings`), or None when the claim is not allocated or not even its
    holdings decode.
    """

    model: ResourceClaim | None
    error: ModelError | None

    @property
    def complete(self) -> bool:
        """True when ``model`` is the whole claim, not only its holdings."""
        return self.error is None


def decode_claim(data: Mapping[str, Any]) -> DecodedClaim:
    """Decode a ResourceClaim dict, failing closed.

    Never raises ModelError: the full model when it decodes; otherwise the holdings of an
    allocated claim (so its devices stay taken) together with the error that refused the
    full model.
    """
    try:
        return DecodedClaim(ResourceClaim.from_dict(data), None)
    except ModelError as err:
        try:
            return DecodedClaim(claim_holdings(data), err)
        except ModelError:
            return DecodedClaim(None, err)


def claim_holdings(data: Mapping[str, Any]) -> ResourceClaim | None:
    """A model of ``data`` with only its name, namespace and UID, the device results of its
    ``status.allocation`` and its ``status.reservedFor``; None when it has no allocation.

    Everything a result says beyond which device (or share and capacity of it) it holds is
    left out, as are the spec and the allocation's configuration, where free-form data lives.
    Raises ModelError when even those fields are malformed.
    """
    status = _mapping(data.get("status"), "status")
    allocation = _mapping(status.get("allocation"), "status.allocation")
    if not allocation:
        return None
    devices = _mapping(allocation.get("devices"), "status.allocation.devices")
    results = devices.get("results") or []
    if not isinstance(results, list):
        raise ModelError("status.allocation.devices.results", "must be a list")
    metadata = _mapping(data.get("metadata"), "metadata")
    reduced = {
        "metadata": {k: metadata[k] for k in _METADATA_KEYS if k in metadata},
        "spec": {"devices": {}},
        "status": {
            "allocation": {"devices": {"results": [_held(r, i) for i, r in enumerate(results)]}},
            "reservedFor": status.get("reservedFor") or [],
        },
    }
    return ResourceClaim.from_dict(reduced)


def _held(result: Any, index: int) -> dict[str, Any]:
    result = _mapping(result, f"status.allocation.devices.results[{index}]")
    return {k: result[k] for k in _RESULT_KEYS if k in result}


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelError(field, "must be an object")
    return value
