"""A backend's own settings (``--backend-config``), validated with its pydantic model."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from drakit.plugin.context import BackendContext

if TYPE_CHECKING:
    import pydantic

SettingsT = TypeVar("SettingsT", bound="pydantic.BaseModel")


def settings_source(context: BackendContext) -> str:
    """Where a backend's settings came from, as its error messages name it."""
    if context.config_path:
        return f"--backend-config {context.config_path}"
    return "--backend-config (not given)"


def validate_settings(model: type[SettingsT], context: BackendContext, backend: str) -> SettingsT:
    """Validate ``context.config`` with ``model``; BackendConfigError naming each bad field."""
    from drakit.plugin import models  # noqa: PLC0415 (pydantic on first use)

    return models.validate_model(model, context.config, settings_source(context), backend)
