"""The pydantic side of the backend API, imported only when a backend uses it.

pydantic costs the node plugin about 8 MiB of RSS (its core extension and the first
model's schema), so the plugin's core and the built-in backends do not import it at
start: this module is loaded when a claim carries opaque config, when a backend's
``--backend-config`` is not plainly valid (the error then comes from here), or by a
backend that declares its own pydantic ``config_model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic

from drakit.plugin.errors import BackendConfigError


class EmptyConfig(pydantic.BaseModel):
    """Config model of a backend that accepts no opaque parameters."""

    model_config = pydantic.ConfigDict(extra="forbid")


SettingsT = TypeVar("SettingsT", bound=pydantic.BaseModel)


def validate_model(
    model: type[SettingsT], config: Mapping[str, Any], where: str, backend: str
) -> SettingsT:
    """Validate ``config`` with ``model``; BackendConfigError naming ``where``, the
    backend and each bad field."""
    try:
        return model.model_validate(dict(config))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<top level>'}: {e['msg']}"
            for e in exc.errors()
        )
        raise BackendConfigError(f"{where} for backend {backend!r}: {problems}") from exc
