"""Kubernetes' standard device attributes of PCI devices, read from sysfs.

Names and value formats are those of the ``deviceattribute`` package of
k8s.io/dynamic-resource-allocation v0.37.2, so that a claim written for any driver
(``matchAttribute: resource.kubernetes.io/pcieRoot``) means the same with drakit:

* ``resource.kubernetes.io/pciBusID``: string, the extended BDF ``dddd:bb:dd.f``
  (lower-case hex, as the kernel spells it);
* ``resource.kubernetes.io/pcieRoot``: string ``pci<domain>:<bus>``, the first
  directory under ``/sys/devices`` of the path the ``/sys/bus/pci/devices/<bdf>``
  symlink points to;
* ``resource.kubernetes.io/numaNode``: int, the device's ``numa_node``; a device
  whose kernel reports ``-1`` (no NUMA affinity) gets no attribute, since ``-1``
  would match every other such device under matchAttribute.

Only the scalar form of ``numaNode`` is produced: the list form needs the
``DRAListTypeAttributes`` gate in the whole cluster, which a driver cannot see.

Every function takes ``sysfs_root`` (default ``/sys``) so tests and containers
can point them at another tree laid out like sysfs.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path, PurePosixPath

from drakit.allocator.model import DeviceAttribute

__all__ = [
    "NUMA_NODE_ATTRIBUTE",
    "PCIE_ROOT_ATTRIBUTE",
    "PCI_BUS_ID_ATTRIBUTE",
    "pci_bus_id_of_device_node",
    "pci_device_attributes",
]

STANDARD_PREFIX = "resource.kubernetes.io/"
PCI_BUS_ID_ATTRIBUTE = STANDARD_PREFIX + "pciBusID"
"""``resource.kubernetes.io/pciBusID``: the attribute name of a device's PCI bus ID."""
PCIE_ROOT_ATTRIBUTE = STANDARD_PREFIX + "pcieRoot"
"""``resource.kubernetes.io/pcieRoot``: the attribute name of a device's PCIe root complex
(what a ``matchAttribute`` constraint names to keep a claim's devices under one root)."""
NUMA_NODE_ATTRIBUTE = STANDARD_PREFIX + "numaNode"
"""``resource.kubernetes.io/numaNode``: the attribute name of a device's NUMA node."""
SYSFS_ROOT = "/sys"

_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
# Linux caps MAX_NUMNODES at 1 << 10: a larger value is not a NUMA node.
_MAX_NUMA_NODES = 1024


def is_pci_bus_id(text: str) -> bool:
    """True for an extended BDF in the kernel's spelling (``0000:3b:00.0``)."""
    return _BDF.fullmatch(text) is not None


def pci_attributes(pci_bus_id: str, sysfs_root: str = SYSFS_ROOT) -> dict[str, DeviceAttribute]:
    """The standard attributes of PCI device ``pci_bus_id`` that sysfs has.

    ``pciBusID`` is always there; ``pcieRoot`` when ``bus/pci/devices/<bdf>`` is a
    symlink into ``devices/pci…``; ``numaNode`` when ``numa_node`` holds a node
    from 0 to 1023. ValueError (naming the value) for a malformed bus ID.
    """
    if not is_pci_bus_id(pci_bus_id):
        raise ValueError(
            f"PCI bus ID {pci_bus_id!r} is not in extended BDF form "
            "(domain:bus:device.function, lower-case hex, e.g. 0000:3b:00.0)"
        )
    attributes = {PCI_BUS_ID_ATTRIBUTE: DeviceAttribute("string", pci_bus_id)}
    root = pcie_root(pci_bus_id, sysfs_root)
    if root is not None:
        attributes[PCIE_ROOT_ATTRIBUTE] = DeviceAttribute("string", root)
    node = numa_node(pci_bus_id, sysfs_root)
    if node is not None:
        attributes[NUMA_NODE_ATTRIBUTE] = DeviceAttribute("int", node)
    return attributes


def pci_device_attributes(
    pci_bus_id: str, *, sysfs_root: str = SYSFS_ROOT
) -> dict[str, DeviceAttribute]:
    """Kubernetes' standard attributes of a PCI device, from sysfs, for ``Device.attributes``.

    ``resource.kubernetes.io/pciBusID`` always, ``…/pcieRoot`` and ``…/numaNode`` when
    sysfs has them (a ``numa_node`` of -1 gives none), in upstream's formats. ValueError
    for a bus ID not in extended BDF form (``0000:3b:00.0``). Find the bus ID of a device
    node with :func:`pci_bus_id_of_device_node`.
    """
    return pci_attributes(pci_bus_id, sysfs_root)


def pcie_root(pci_bus_id: str, sysfs_root: str = SYSFS_ROOT) -> str | None:
    """``pci<domain>:<bus>`` of the root complex above the device, or None.

    As upstream: one readlink of ``bus/pci/devices/<bdf>`` (relative targets taken
    from the link's folder), which must land on ``devices/pci…/…/<bdf>``.
    """
    target = _link_target(sysfs_root, f"bus/pci/devices/{pci_bus_id}")
    if target is None or not target.startswith("devices/pci"):
        return None
    if PurePosixPath(target).name != pci_bus_id:
        return None
    return target.split("/")[1]


def numa_node(pci_bus_id: str, sysfs_root: str = SYSFS_ROOT) -> int | None:
    """The device's NUMA node from ``bus/pci/devices/<bdf>/numa_node``; None if it has none."""
    path = Path(sysfs_root, "bus", "pci", "devices", pci_bus_id, "numa_node")
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if 0 <= node < _MAX_NUMA_NODES else None


def pci_bus_id_of_device_node(
    kind: str, major: int, minor: int, sysfs_root: str = SYSFS_ROOT
) -> str | None:
    """The PCI device behind device node ``major:minor`` (``kind`` ``char``/``block``).

    ``dev/<kind>/<major>:<minor>`` links to the node's place in ``devices/``; the
    PCI function nearest to it on that path is the device (a DRM card, an NVMe
    namespace, a VFIO group member). None for virtual devices (``/dev/fuse``) and
    nodes sysfs does not list.
    """
    target = _link_target(sysfs_root, f"dev/{kind}/{major}:{minor}")
    if target is None or not target.startswith("devices/"):
        return None
    for part in reversed(target.split("/")):
        if is_pci_bus_id(part):
            return part
    return None


def _link_target(sysfs_root: str, link: str) -> str | None:
    """Where symlink ``link`` (relative to the sysfs root) points, relative to that root."""
    try:
        target = Path(sysfs_root, link).readlink()
    except OSError:
        return None
    if target.is_absolute():
        return None  # sysfs links are relative; an absolute one is not sysfs's
    # normpath, not resolve(): ".." is taken textually, within the sysfs tree, as upstream.
    return posixpath.normpath(posixpath.join(posixpath.dirname(link), str(target)))
