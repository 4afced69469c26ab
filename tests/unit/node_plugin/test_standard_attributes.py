"""Standard PCI device attributes read from a real tree laid out like sysfs (symlinks included),
and the hostdev backend publishing them for a real device node (/dev/null) that such a tree
places under a PCI device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drakit.allocator.model import DeviceAttribute
from drakit.node_plugin.backend_loader import load_backend
from drakit.plugin import pci_device_attributes
from drakit.plugin.pci import (
    NUMA_NODE_ATTRIBUTE,
    PCI_BUS_ID_ATTRIBUTE,
    PCIE_ROOT_ATTRIBUTE,
    pci_attributes,
    pci_bus_id_of_device_node,
)

GPU_BDF = "0000:3b:00.0"
GPU_PATH = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"


def fake_pci_device(sysfs: Path, bdf: str, device_path: str, numa: str | None) -> None:
    """``devices/…/<bdf>`` with ``numa_node``, and ``bus/pci/devices/<bdf>`` linking to it
    relatively, as the kernel does."""
    (sysfs / device_path).mkdir(parents=True)
    if numa is not None:
        (sysfs / device_path / "numa_node").write_text(numa + "\n")
    bus = sysfs / "bus/pci/devices"
    bus.mkdir(parents=True, exist_ok=True)
    (bus / bdf).symlink_to(os.path.relpath(sysfs / device_path, bus))


def fake_char_node(sysfs: Path, major: int, minor: int, node_path: str) -> None:
    """``dev/char/<major>:<minor>`` linking to the node's folder under ``devices/``."""
    (sysfs / node_path).mkdir(parents=True, exist_ok=True)
    char = sysfs / "dev/char"
    char.mkdir(parents=True, exist_ok=True)
    (char / f"{major}:{minor}").symlink_to(os.path.relpath(sysfs / node_path, char))


def test_pci_device_has_bus_id_root_complex_and_numa_node(tmp_path: Path) -> None:
    fake_pci_device(tmp_path, GPU_BDF, GPU_PATH, "1")
    assert pci_attributes(GPU_BDF, str(tmp_path)) == {
        PCI_BUS_ID_ATTRIBUTE: DeviceAttribute("string", GPU_BDF),
        PCIE_ROOT_ATTRIBUTE: DeviceAttribute("string", "pci0000:3a"),
        NUMA_NODE_ATTRIBUTE: DeviceAttribute("int", 1),
    }


def test_attribute_names_are_kubernetes_standard_names() -> None:
    assert (PCI_BUS_ID_ATTRIBUTE, PCIE_ROOT_ATTRIBUTE, NUMA_NODE_ATTRIBUTE) == (
        "resource.kubernetes.io/pciBusID",
        "resource.kubernetes.io/pcieRoot",
        "resource.kubernetes.io/numaNode",
    )


def test_device_without_numa_affinity_gets_no_numa_node(tmp_path: Path) -> None:
    fake_pci_device(tmp_path, GPU_BDF, GPU_PATH, "-1")
    assert NUMA_NODE_ATTRIBUTE not in pci_attributes(GPU_BDF, str(tmp_path))


def test_device_without_numa_node_file_gets_no_numa_node(tmp_path: Path) -> None:
    fake_pci_device(tmp_path, GPU_BDF, GPU_PATH, None)
    assert set(pci_attributes(GPU_BDF, str(tmp_path))) == {
        PCI_BUS_ID_ATTRIBUTE,
        PCIE_ROOT_ATTRIBUTE,
    }


def test_device_sysfs_does_not_list_has_only_its_bus_id(tmp_path: Path) -> None:
    assert pci_attributes(GPU_BDF, str(tmp_path)) == {
        PCI_BUS_ID_ATTRIBUTE: DeviceAttribute("string", GPU_BDF)
    }


def test_bus_link_that_does_not_end_at_the_device_gives_no_root(tmp_path: Path) -> None:
    fake_pci_device(tmp_path, "0000:3b:00.1", GPU_PATH, "0")
    assert PCIE_ROOT_ATTRIBUTE not in pci_attributes("0000:3b:00.1", str(tmp_path))


def test_absolute_bus_link_gives_no_root(tmp_path: Path) -> None:
    (tmp_path / GPU_PATH).mkdir(parents=True)
    (tmp_path / "bus/pci/devices").mkdir(parents=True)
    (tmp_path / "bus/pci/devices" / GPU_BDF).symlink_to(tmp_path / GPU_PATH)
    assert PCIE_ROOT_ATTRIBUTE not in pci_attributes(GPU_BDF, str(tmp_path))


@pytest.mark.parametrize("bad", ["", "3b:00.0", "0000:3B:00.0", "0000:3b:00.10", "0000:3b:0.0"])
def test_malformed_bus_id_is_refused_naming_it(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not in extended BDF form"):
        pci_attributes(bad, str(tmp_path))


def test_device_node_resolves_to_the_nearest_pci_function(tmp_path: Path) -> None:
    fake_char_node(tmp_path, 226, 0, f"{GPU_PATH}/drm/card0")
    assert pci_bus_id_of_device_node("char", 226, 0, str(tmp_path)) == GPU_BDF


def test_virtual_device_node_has_no_pci_device(tmp_path: Path) -> None:
    fake_char_node(tmp_path, 10, 229, "devices/virtual/misc/fuse")
    assert pci_bus_id_of_device_node("char", 10, 229, str(tmp_path)) is None
    assert pci_bus_id_of_device_node("block", 10, 229, str(tmp_path)) is None


def test_public_helper_returns_the_same_attributes(tmp_path: Path) -> None:
    fake_pci_device(tmp_path, GPU_BDF, GPU_PATH, "0")
    assert pci_device_attributes(GPU_BDF, sysfs_root=str(tmp_path)) == pci_attributes(
        GPU_BDF, str(tmp_path)
    )


def test_hostdev_publishes_standard_attributes_of_a_pci_device_node(tmp_path: Path) -> None:
    st = Path("/dev/null").stat()
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    fake_pci_device(tmp_path, GPU_BDF, GPU_PATH, "0")
    fake_char_node(tmp_path, major, minor, f"{GPU_PATH}/drm/card0")
    backend = load_backend(
        "hostdev",
        driver_name="dev.example.com",
        node_name="n1",
        config={"devices": [{"glob": "/dev/null"}], "sysfsRoot": str(tmp_path)},
    )
    (device,) = backend.discover()[0].devices
    assert device.attributes[PCI_BUS_ID_ATTRIBUTE].value == GPU_BDF
    assert device.attributes[PCIE_ROOT_ATTRIBUTE].value == "pci0000:3a"
    assert device.attributes[NUMA_NODE_ATTRIBUTE] == DeviceAttribute("int", 0)
    assert device.attributes["path"].value == "/dev/null"


def test_hostdev_device_node_outside_pci_has_no_standard_attributes(tmp_path: Path) -> None:
    backend = load_backend(
        "hostdev",
        driver_name="dev.example.com",
        node_name="n1",
        config={"devices": [{"glob": "/dev/null"}], "sysfsRoot": str(tmp_path)},
    )
    (device,) = backend.discover()[0].devices
    assert set(device.attributes) == {"path", "major", "minor", "type"}


def _host_block_device_on_pci() -> tuple[str, str] | None:
    """(/dev path, bus ID) of a block device of this machine that sits on PCI, if any."""
    for link in sorted(Path("/sys/dev/block").glob("*:*")):
        parts = link.resolve().parts
        bus_ids = [p for p in parts if len(p) == 12 and p[4] == ":" and p[10] == "."]
        node = Path("/dev") / parts[-1]
        if bus_ids and node.is_block_device():
            return str(node), bus_ids[-1]
    return None


@pytest.mark.skipif(_host_block_device_on_pci() is None, reason="no block device on PCI here")
def test_hostdev_reads_the_hosts_own_sysfs_for_a_pci_block_device() -> None:
    found = _host_block_device_on_pci()
    assert found is not None
    path, bus_id = found
    backend = load_backend(
        "hostdev",
        driver_name="dev.example.com",
        node_name="n1",
        config={"devices": [{"glob": path}]},
    )
    (device,) = backend.discover()[0].devices
    root = Path("/sys/bus/pci/devices", bus_id).resolve().relative_to("/sys/devices").parts[0]
    numa = int(Path("/sys/bus/pci/devices", bus_id, "numa_node").read_text())
    assert device.attributes[PCI_BUS_ID_ATTRIBUTE].value == bus_id
    assert device.attributes[PCIE_ROOT_ATTRIBUTE].value == root
    assert (NUMA_NODE_ATTRIBUTE in device.attributes) == (numa >= 0)
