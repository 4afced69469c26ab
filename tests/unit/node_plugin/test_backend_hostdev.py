"""The hostdev backend on real device nodes (/dev/null, /dev/zero) and symlinks to them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drakit.backends.hostdev import HostDevBackend, device_name
from drakit.node_plugin.backend_loader import load_backend
from drakit.plugin import (
    BackendConfigError,
    ClaimToPrepare,
    DeviceToPrepare,
    HealthStatus,
    RequestContext,
)


def hostdev(**config: object) -> HostDevBackend:
    backend = load_backend("hostdev", driver_name="dev.example.com", node_name="n1", config=config)
    assert isinstance(backend, HostDevBackend)
    return backend


def test_hostdev_discovers_char_devices_with_path_major_minor_type_attributes() -> None:
    backend = hostdev(devices=[{"glob": "/dev/nul[l]", "shareable": True}, {"glob": "/dev/zero"}])
    (pool,) = backend.discover()
    assert pool.name == "n1"
    by_name = {d.name: d for d in pool.devices}
    null, zero = by_name["dev-null"], by_name["dev-zero"]
    st = Path("/dev/null").stat()
    assert null.attributes["path"].value == "/dev/null"
    assert null.attributes["major"].value == os.major(st.st_rdev)
    assert null.attributes["minor"].value == os.minor(st.st_rdev)
    assert null.attributes["type"].value == "char"
    assert null.allow_multiple_allocations is True
    assert zero.allow_multiple_allocations is None


def test_hostdev_ignores_files_that_are_not_device_nodes(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    backend = hostdev(devices=[{"glob": f"{tmp_path}/*"}])
    assert backend.discover()[0].devices == ()


def test_hostdev_prepare_returns_cdi_device_node_with_host_path() -> None:
    backend = hostdev(devices=[{"glob": "/dev/null"}])
    claim = ClaimToPrepare("uid-1", "ns", "c", (DeviceToPrepare("r", "n1", "dev-null"),))
    (edits,) = backend.prepare(claim, RequestContext("r1")).device_edits
    (node,) = edits.device_nodes
    assert (node.path, node.host_path, node.type) == ("/dev/null", "/dev/null", "c")


def test_hostdev_prepare_of_absent_device_fails_naming_it() -> None:
    backend = hostdev(devices=[{"glob": "/dev/null"}])
    claim = ClaimToPrepare("uid-1", "ns", "c", (DeviceToPrepare("r", "n1", "dev-kvm"),))
    with pytest.raises(Exception, match="n1/dev-kvm is not present"):
        backend.prepare(claim, RequestContext("r1"))


def test_hostdev_reports_vanished_device_unhealthy_keeps_it_published_and_tells_subscribers(
    tmp_path: Path,
) -> None:
    link = tmp_path / "mydev"
    link.symlink_to("/dev/null")
    backend = hostdev(devices=[{"glob": f"{tmp_path}/my*"}], pollSeconds=3600)
    calls: list[int] = []
    backend.subscribe(lambda: calls.append(1))
    name = device_name(str(link))
    assert [h.health for h in backend.health()] == [HealthStatus.HEALTHY]
    link.unlink()
    assert backend.rescan() is True
    assert calls == [1]
    (health,) = backend.health()
    assert (health.device_name, health.health, health.reason) == (
        name,
        HealthStatus.UNHEALTHY,
        "DeviceNodeMissing",
    )
    # Still published: the health policy taints it rather than letting it vanish.
    assert [d.name for d in backend.discover()[0].devices] == [name]
    backend.close()


def test_hostdev_config_errors_name_the_field() -> None:
    with pytest.raises(BackendConfigError, match=r"devices\.0\.glob: Value error, 'dev/fuse'"):
        hostdev(devices=[{"glob": "dev/fuse"}])
    with pytest.raises(BackendConfigError, match="devices: Field required"):
        hostdev()


def test_hostdev_under_a_host_root_reports_host_paths(tmp_path: Path) -> None:
    # As in the chart: the host's /dev is seen at <hostRoot>/dev; names, attributes
    # and CDI paths are those of the host.
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "null").symlink_to("/dev/null")
    backend = hostdev(devices=[{"glob": "/dev/nul[l]"}], hostRoot=f"{tmp_path}/")
    (device,) = backend.discover()[0].devices
    assert (device.name, device.attributes["path"].value) == ("dev-null", "/dev/null")
    claim = ClaimToPrepare("uid-1", "ns", "c", (DeviceToPrepare("r", "n1", "dev-null"),))
    (node,) = backend.prepare(claim, RequestContext("r1")).device_edits[0].device_nodes
    assert (node.path, node.host_path) == ("/dev/null", "/dev/null")


def test_hostdev_refuses_a_relative_host_root() -> None:
    with pytest.raises(BackendConfigError, match="hostRoot"):
        hostdev(devices=[{"glob": "/dev/null"}], hostRoot="host")
