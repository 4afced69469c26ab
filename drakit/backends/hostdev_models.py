"""The hostdev backend's ``--backend-config`` as a pydantic model.

Imported only when the settings are not plainly valid (the plain check is
``drakit.backends.hostdev.SETTINGS``): :class:`HostDevSettings` then coerces them
or names each bad field. pydantic costs the plugin about 8 MiB of RSS.
"""

from __future__ import annotations

import pydantic


class DeviceGlob(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    glob: str = pydantic.Field(min_length=1)
    shareable: bool = False

    @pydantic.field_validator("glob")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path or glob")
        return value


class HostDevSettings(pydantic.BaseModel):
    """``--backend-config`` of the hostdev backend."""

    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    devices: list[DeviceGlob] = pydantic.Field(min_length=1)
    pool: str | None = None
    poll_seconds: float = pydantic.Field(10.0, gt=0, alias="pollSeconds")
    host_root: str = pydantic.Field("/", alias="hostRoot")
    sysfs_root: str = pydantic.Field("/sys", alias="sysfsRoot")

    @pydantic.field_validator("host_root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path")
        return value.rstrip("/")  # "/" -> "": host paths are appended as they are

    @pydantic.field_validator("sysfs_root")
    @classmethod
    def _absolute_sysfs(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path")
        return value
