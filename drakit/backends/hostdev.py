"""The ``hostdev`` backend: real host device nodes, chosen by globs.

``--backend-config`` (YAML or JSON)::

    devices:
      - glob: /dev/fuse
        shareable: true        # many pods may use it: allowMultipleAllocations
      - glob: /dev/net/tun
        shareable: true
      - glob: /dev/kvm
    pool: node-a               # default: the node name
    pollSeconds: 10            # how often the device nodes are re-checked
    hostRoot: /host            # where the host's file system is seen (default: /)
    sysfsRoot: /sys            # where the host's sysfs is seen (default: /sys)

Every character or block device matching a glob becomes one device named after
its path (``/dev/net/tun`` -> ``dev-net-tun``) with attributes ``path``,
``major``, ``minor`` and ``type`` (``char``/``block``), plus Kubernetes' standard
attributes ``resource.kubernetes.io/pciBusID``, ``pcieRoot`` and ``numaNode`` when
sysfs places the node under a PCI device (``drakit.plugin.pci_device_attributes``).
Prepare hands the container a CDI ``deviceNodes`` entry with the host path. A device node that
disappears is reported Unhealthy with reason ``DeviceNodeMissing`` and stays in
``discover`` (so that the health policy's taint has a device to sit on, and the
device-taint eviction controller can evict the pods using it); a poller tells
subscribers about such changes.

``hostRoot`` lets the plugin run without the host's ``/dev`` over its own: the
chart mounts the host's ``/dev`` read-only at ``/host/dev`` and sets
``hostRoot: /host``. Globs are matched under ``hostRoot``; names, attributes
and CDI paths are the host's paths (``/dev/fuse``), which is what the
container runtime resolves.
"""

from __future__ import annotations

import glob
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from drakit.plugin import (
    BackendContext,
    BackendError,
    BackendPrepared,
    ChangeListeners,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    DeviceAttribute,
    DeviceHealth,
    DeviceNodeEdit,
    HealthStatus,
    LazyConfigModel,
    PoolDescription,
    RequestContext,
    get_logger,
    pci_bus_id_of_device_node,
    pci_device_attributes,
)
from drakit.plugin import plainconfig as plain

if TYPE_CHECKING:
    import pydantic

_log = get_logger(__name__)
_SYSFS = "/sys"
_NAME_UNSAFE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class DeviceGlob:
    """One ``devices`` entry: the glob (absolute) and whether its devices are shared."""

    glob: str
    shareable: bool = False


@dataclass(frozen=True)
class Settings:
    """The hostdev backend's ``--backend-config``, validated (see ``HostDevSettings``).

    ``host_root`` has no trailing slash: "" for ``/``.
    """

    devices: tuple[DeviceGlob, ...]
    pool: str | None
    poll_seconds: float
    host_root: str
    sysfs_root: str = _SYSFS

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """From validated settings in the shape of ``HostDevSettings.model_dump()``."""
        return cls(
            devices=tuple(DeviceGlob(**d) for d in data["devices"]),
            pool=data["pool"],
            poll_seconds=data["poll_seconds"],
            host_root=data["host_root"].rstrip("/"),
            sysfs_root=data["sysfs_root"],
        )


def _absolute_glob(value: Any) -> str:
    glob_text = plain.text(value)
    if not glob_text.startswith("/"):
        raise plain.NotPlainError
    return glob_text


def _host_root(value: Any) -> str:
    return _absolute_glob(value).rstrip("/")  # as HostDevSettings: "/" -> ""


#: ``HostDevSettings`` (drakit.backends.hostdev_models) as a plain check: what it
#: accepts without coercion. Keep the two in step (a test compares them).
SETTINGS = plain.obj(
    plain.Field(
        "devices",
        plain.list_of(
            plain.obj(
                plain.Field("glob", _absolute_glob),
                plain.Field("shareable", plain.boolean, False),
            ),
            min_length=1,
        ),
    ),
    plain.Field("pool", plain.optional(plain.text), None),
    plain.Field("poll_seconds", plain.positive_number, 10.0, alias="pollSeconds"),
    plain.Field("host_root", _host_root, "/", alias="hostRoot"),
    plain.Field("sysfs_root", _absolute_glob, _SYSFS, alias="sysfsRoot"),
)


@dataclass(frozen=True)
class HostDevice:
    """A device node found on the host."""

    name: str
    path: str
    type: str  # "char" or "block"
    major: int
    minor: int
    shareable: bool
    # (name, value) pairs of the standard attributes sysfs gave (a tuple: hashable).
    standard: tuple[tuple[str, DeviceAttribute], ...] = ()

    def to_device(self) -> Device:
        data: dict[str, Any] = {
            "name": self.name,
            "attributes": {
                "path": {"string": self.path},
                "major": {"int": self.major},
                "minor": {"int": self.minor},
                "type": {"string": self.type},
                **{name: {value.kind: value.value} for name, value in self.standard},
            },
        }
        if self.shareable:
            data["allowMultipleAllocations"] = True
        return Device.from_dict(data)


def standard_attributes_of(
    kind: str, major: int, minor: int, sysfs_root: str
) -> tuple[tuple[str, DeviceAttribute], ...]:
    """The standard PCI attributes of device node ``major:minor``; () if it is not PCI."""
    bus_id = pci_bus_id_of_device_node(kind, major, minor, sysfs_root)
    if bus_id is None:
        return ()
    return tuple(sorted(pci_device_attributes(bus_id, sysfs_root=sysfs_root).items()))


def device_name(path: str) -> str:
    """A DNS-label device name for ``path``: ``/dev/net/tun`` -> ``dev-net-tun``."""
    name = _NAME_UNSAFE.sub("-", path.lower()).strip("-")
    return name[:63].rstrip("-") or "device"


def scan(
    globs: Sequence[DeviceGlob], host_root: str = "", sysfs_root: str = _SYSFS
) -> dict[str, HostDevice]:
    """Device nodes matching ``globs`` now, by device name (first glob wins on overlaps).

    ``host_root`` ("" or an absolute path without trailing slash) is where the host's
    file system is mounted; the returned paths are host paths, without it.
    ``sysfs_root`` is where the host's sysfs is read for the standard attributes.
    """
    found: dict[str, HostDevice] = {}
    for entry in globs:
        for seen_at in sorted(glob.glob(host_root + entry.glob)):  # noqa: PTH207 (absolute)
            path = seen_at[len(host_root) :]
            try:
                st = Path(seen_at).stat()
            except OSError:
                continue
            if stat.S_ISCHR(st.st_mode):
                kind = "char"
            elif stat.S_ISBLK(st.st_mode):
                kind = "block"
            else:
                continue
            name = device_name(path)
            if name in found:
                continue
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
            found[name] = HostDevice(
                name,
                path,
                kind,
                major,
                minor,
                entry.shareable,
                standard_attributes_of(kind, major, minor, sysfs_root),
            )
    return found


class HostDevBackend:
    """Host device nodes; thread-safe."""

    name: ClassVar[str] = "hostdev"
    config_model: ClassVar[type[pydantic.BaseModel]] = LazyConfigModel(  # type: ignore[assignment]
        "drakit.plugin.models:EmptyConfig"
    )

    def __init__(self, context: BackendContext) -> None:
        settings = Settings.from_dict(
            plain.settings(
                SETTINGS,
                "drakit.backends.hostdev_models:HostDevSettings",
                context,
                self.name,
            )
        )
        self.settings = settings
        self.pool_name = settings.pool or context.node_name
        self._lock = threading.Lock()
        self._listeners = ChangeListeners()
        self._devices = scan(settings.devices, settings.host_root, settings.sysfs_root)
        self._seen: dict[str, HostDevice] = dict(self._devices)
        self._changed_at = int(time.time())
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def discover(self) -> tuple[PoolDescription, ...]:
        with self._lock:
            # Every device node seen since start, present or not: a missing one is
            # unhealthy (tainted by the health policy), not gone; prepare refuses it.
            devices = tuple(d.to_device() for _, d in sorted(self._seen.items()))
        return (PoolDescription(name=self.pool_name, devices=devices),)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self._listeners.add(on_change)
        with self._lock:
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll_loop, name="hostdev-poll", daemon=True
                )
                self._poller.start()

    def rescan(self) -> bool:
        """Re-check the device nodes now; True (and listeners told) if anything changed."""
        current = scan(self.settings.devices, self.settings.host_root, self.settings.sysfs_root)
        with self._lock:
            if current == self._devices:
                return False
            self._devices = current
            self._seen.update(current)
            self._changed_at = int(time.time())
        _log.info("Host devices changed", devices=sorted(current))
        self._listeners.notify()
        return True

    def _poll_loop(self) -> None:
        while not self._stop.wait(self.settings.poll_seconds):
            try:
                self.rescan()
            except Exception:
                _log.exception("Scanning host devices failed")

    def health(self) -> Sequence[DeviceHealth]:
        with self._lock:
            present = set(self._devices)
            seen = sorted(self._seen)
            changed_at = self._changed_at
        return [
            DeviceHealth(
                pool_name=self.pool_name,
                device_name=name,
                health=HealthStatus.HEALTHY if name in present else HealthStatus.UNHEALTHY,
                last_updated=changed_at,
                message="" if name in present else "device node disappeared",
                reason="" if name in present else "DeviceNodeMissing",
            )
            for name in seen
        ]

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        with self._lock:
            devices = dict(self._devices)
        edits = []
        for wanted in claim.devices:
            device = devices.get(wanted.device)
            if device is None or wanted.pool != self.pool_name:
                raise BackendError(
                    f"device {wanted.pool}/{wanted.device} is not present on this host"
                )
            node = DeviceNodeEdit(
                path=device.path,
                host_path=device.path,
                type="c" if device.type == "char" else "b",
                major=device.major,
                minor=device.minor,
                permissions="rw",
            )
            edits.append(ContainerEdits(device_nodes=(node,)))
        return BackendPrepared(device_edits=tuple(edits))

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        return None  # nothing on the host changes at prepare time

    def close(self) -> None:
        self._stop.set()
        self._listeners.clear()
