"""A driver's opaque config judged exactly as drakit judges it: :func:`validate_config` (the
check the node plugin makes at prepare and ``drakit webhook`` at admission) and
:func:`admission_verdict` (the webhook's whole answer for a claim or template)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pydantic

__all__ = ["InvalidConfigError", "admission_verdict", "validate_config"]


class InvalidConfigError(ValueError):
    """The parameters are refused. ``str()`` is the reason exactly as drakit words it: the
    node plugin reports ``invalid opaque config for request 'R' (from claim): REASON`` and
    ``drakit webhook`` ``spec.devices.config[I].opaque.parameters: REASON``."""


def validate_config(backend: type | str, parameters: Mapping[str, Any]) -> pydantic.BaseModel:
    """``parameters`` (one config entry's ``opaque.parameters``) validated with ``backend``'s
    ``config_model``: strictly as JSON (exact field names and JSON types, no unknown fields),
    then by the model's ``validate_config()`` if it has one, the check the node plugin runs
    at prepare and ``drakit webhook`` at admission.

    ``backend`` is the backend class, its ``module:Class`` (as ``--backend`` names it), or
    a pydantic model class. Returns the validated model (what ``config_of(device)`` gives
    ``prepare``); raises :class:`InvalidConfigError` with the reason.
    """
    from drakit.node_plugin.config import ConfigError, validate_parameters  # noqa: PLC0415

    model = _config_model(backend)
    try:
        return validate_parameters(model, parameters)
    except ConfigError as err:
        raise InvalidConfigError(str(err)) from err


def admission_verdict(
    backend: type | str,
    driver: str,
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
) -> str | None:
    """What ``drakit webhook --backend BACKEND --driver-name DRIVER`` answers when ``obj``
    (a ResourceClaim or ResourceClaimTemplate of resource.k8s.io v1, v1beta2 or v1beta1) is
    created, or updated from ``old``: None when it is admitted, else the message the user
    sees after ``admission webhook "..." denied the request:``, which names the object, each
    refused entry's field path and the reason."""
    from drakit.node_plugin.config import validate_parameters  # noqa: PLC0415
    from drakit.webhook.review import decide  # noqa: PLC0415

    model = _config_model(backend)
    meta = obj.get("metadata") or {}
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    plural = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
    request = {
        "uid": "drakit-testing",
        "kind": {"group": group, "version": version, "kind": obj.get("kind")},
        "resource": {
            "group": group,
            "version": version,
            "resource": plural.get(str(obj.get("kind")), ""),
        },
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": "CREATE" if old is None else "UPDATE",
        "object": dict(obj),
        "oldObject": None if old is None else dict(old),
    }
    response = decide(request, driver, lambda params: validate_parameters(model, params))
    if response.get("allowed"):
        return None
    return str(response["status"]["message"])


def _config_model(backend: type | str) -> type[pydantic.BaseModel]:
    """The pydantic model ``backend`` stands for (see :func:`validate_config`)."""
    import pydantic  # noqa: PLC0415

    from drakit.node_plugin.backend_loader import resolve_backend_class  # noqa: PLC0415

    if isinstance(backend, type) and issubclass(backend, pydantic.BaseModel):
        return backend
    cls = resolve_backend_class(backend) if isinstance(backend, str) else backend
    model = getattr(cls, "config_model", None)
    if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
        raise TypeError(
            f"{getattr(cls, '__name__', cls)!r}.config_model must be a pydantic model class, "
            f"got {type(model).__name__}"
        )
    return model
