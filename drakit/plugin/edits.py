"""CDI container edits: what a prepared device changes in the containers that use it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceNodeEdit:
    """A CDI ``deviceNodes`` entry: ``path`` in the container, ``host_path`` on the host."""

    path: str
    host_path: str | None = None
    type: str | None = None
    major: int | None = None
    minor: int | None = None
    permissions: str | None = None


@dataclass(frozen=True)
class MountEdit:
    """A CDI ``mounts`` entry."""

    host_path: str
    container_path: str
    options: tuple[str, ...] = ()
    type: str | None = None


@dataclass(frozen=True)
class ContainerEdits:
    """CDI container edits for one device (``env`` entries are ``NAME=value``)."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNodeEdit, ...] = ()
    mounts: tuple[MountEdit, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.env or self.device_nodes or self.mounts)
