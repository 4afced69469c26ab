"""Opaque device configuration: which parameters apply to which allocated device.

The scheduler copies the configs that matter into the claim's
``status.allocation.devices.config``: first those of the DeviceClasses
(``source: FromClass``), then those of the claim (``source: FromClaim``).
For one allocation result of this driver, the applicable entries are those

* whose ``opaque.driver`` is this driver (other drivers' configs are theirs);
* whose ``requests`` is empty (all requests) or names the result's request,
  either exactly (``req/sub``) or by its base name (``req``).

They are applied class configs first, then claim configs, each in list order;
a later entry wins field by field at the top level of ``parameters`` (a claim
can override one setting of its class). The merged parameters are validated
with the backend's pydantic model (imported only then); an invalid config is a per-claim error
naming the request, the field and the reason.

Validation is strict, as Go's strict JSON decoding of a driver's config type:
field names exactly as the model's JSON names (its aliases; no Python
snake_case twins), values of exactly the JSON type (``"5"``, ``5.0`` and
``true`` are not the integer 5), no unknown fields (the model forbids extras).
A model may add checks across fields in a ``validate_config()`` method (called
after the fields validated; it raises ValueError saying what is wrong).
:func:`validate_parameters` is that whole check, shared with ``drakit webhook``
so admission and prepare accept exactly the same configs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from drakit.allocator.model import (
    CONFIG_SOURCE_CLAIM,
    CONFIG_SOURCE_CLASS,
    DeviceAllocationConfiguration,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    import pydantic

    #: A backend's ``config_model``, or a function returning it: called only when a
    #: request has opaque config, so that claims without any never load pydantic.
    ConfigModel: TypeAlias = type[pydantic.BaseModel] | Callable[[], type[pydantic.BaseModel]]


class ConfigError(ValueError):
    """An opaque config for this driver is unusable; the message names request and field."""


def base_request(request: str) -> str:
    """``req/sub`` -> ``req``; a request name without a subrequest is returned as is."""
    return request.partition("/")[0]


def _applies(entry: DeviceAllocationConfiguration, request: str) -> bool:
    return (
        not entry.requests or request in entry.requests or base_request(request) in entry.requests
    )


def applicable_configs(
    configs: Sequence[DeviceAllocationConfiguration], driver: str, request: str
) -> list[tuple[int, DeviceAllocationConfiguration]]:
    """(index in the list, entry) for this driver's configs that apply to ``request``, in order."""
    ours = [
        (i, c)
        for i, c in enumerate(configs)
        if c.opaque is not None and c.opaque.driver == driver and _applies(c, request)
    ]
    rank = {CONFIG_SOURCE_CLASS: 0, CONFIG_SOURCE_CLAIM: 1}
    return sorted(ours, key=lambda ic: (rank.get(ic[1].source, 1), ic[0]))


def merged_parameters(
    configs: Sequence[DeviceAllocationConfiguration], driver: str, request: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """The merged parameters for ``request`` (None: no config) and where they came from."""
    merged: dict[str, Any] | None = None
    sources: list[str] = []
    for index, entry in applicable_configs(configs, driver, request):
        assert entry.opaque is not None
        params = entry.opaque.parameters
        where = f"status.allocation.devices.config[{index}] ({entry.source})"
        if not isinstance(params, Mapping):
            raise ConfigError(
                f"request {request!r}: {where}: opaque.parameters must be an object, "
                f"got {_json_type(params)}"
            )
        merged = {**(merged or {}), **params}
        sources.append(where)
    return merged, sources


def _json_type(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def resolve_config(
    configs: Sequence[DeviceAllocationConfiguration],
    driver: str,
    request: str,
    model: ConfigModel,
) -> pydantic.BaseModel | None:
    """The validated config for ``request``; None when no config applies.

    ``model`` is the backend's pydantic model or a function returning it, called (and
    pydantic imported) only when some config applies. Raises :class:`ConfigError`
    naming the request, the sources and each bad field.
    """
    params, sources = merged_parameters(configs, driver, request)
    if params is None:
        return None
    try:
        return validate_parameters(model, params)
    except ConfigError as exc:
        raise ConfigError(
            f"invalid opaque config for request {request!r} (from {', '.join(sources)}): {exc}"
        ) from exc


def validate_parameters(model: ConfigModel, params: Mapping[str, Any]) -> pydantic.BaseModel:
    """``params`` (one JSON object) validated strictly as ``model``, then by the model's
    ``validate_config()`` when it has one.

    Raises :class:`ConfigError` whose message is only the reasons (``field: reason; ...``,
    or validate_config's own message); callers add where the parameters came from.
    """
    import pydantic  # noqa: PLC0415 (only for parameters that exist)

    model_class = cast("type[pydantic.BaseModel]", model if isinstance(model, type) else model())
    try:
        # Through JSON on purpose: JSON-mode strict validation takes a string for an
        # enum or Literal, as Go does, and rejects every other type mismatch.
        config = model_class.model_validate_json(
            json.dumps(params), strict=True, by_alias=True, by_name=False
        )
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<parameters>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(problems) from exc
    except (TypeError, ValueError) as exc:  # json.dumps: a value JSON cannot carry
        raise ConfigError(f"<parameters>: not JSON: {exc}") from exc
    check = getattr(config, "validate_config", None)
    if callable(check):
        try:
            check()
        except Exception as exc:  # the driver's code: any failure is a refusal, never a crash
            raise ConfigError(str(exc) or type(exc).__name__) from exc
    return config
