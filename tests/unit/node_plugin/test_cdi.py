"""Transient CDI specs: names, minimum version, atomic writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from drakit.node_plugin.cdi import CDIDevice, CDISpecs, minimum_version
from drakit.plugin import BackendPrepared, ContainerEdits, DeviceNodeEdit, MountEdit

UID = "0b5a4c1e-6d2f-4a8b-9c3d-1e2f3a4b5c6d"


def test_cdi_kind_ids_and_file_name_derive_from_driver_and_claim_uid(tmp_path: Path) -> None:
    cdi = CDISpecs(tmp_path, "gpu.example.com")
    assert cdi.kind == "k8s.gpu.example.com/claim"
    name = cdi.device_name(UID, "gpu-0")
    assert name == f"{UID}-gpu-0"
    assert cdi.device_id(name) == f"k8s.gpu.example.com/claim={UID}-gpu-0"
    assert cdi.device_name(UID, "gpu-0", "share-1") == f"{UID}-gpu-0-share-1"
    assert cdi.spec_path(UID) == tmp_path / f"k8s.gpu.example.com-claim_{UID}.json"


def test_cdi_minimum_version_follows_the_features_used() -> None:
    base = {"kind": "v.io/c", "devices": [{"name": "a", "containerEdits": {"env": ["A=1"]}}]}
    assert minimum_version(base) == "0.3.0"
    typed_mount = {"mounts": [{"hostPath": "/a", "containerPath": "/b", "type": "bind"}]}
    assert minimum_version({**base, "devices": [{"name": "a", "containerEdits": typed_mount}]}) == (
        "0.4.0"
    )
    host_path = {"deviceNodes": [{"path": "/dev/x", "hostPath": "/dev/x"}]}
    assert minimum_version({**base, "devices": [{"name": "a", "containerEdits": host_path}]}) == (
        "0.5.0"
    )
    assert minimum_version({**base, "devices": [{"name": "0a", "containerEdits": {}}]}) == "0.5.0"
    assert minimum_version({**base, "annotations": {"k": "v"}}) == "0.6.0"
    assert minimum_version({**base, "kind": "v.io/c.x"}) == "0.6.0"


def test_cdi_spec_content_has_device_edits(tmp_path: Path) -> None:
    cdi = CDISpecs(tmp_path, "dev.example.com")
    edits = ContainerEdits(
        env=("A=1",),
        device_nodes=(DeviceNodeEdit("/dev/fuse", "/dev/fuse", "c", 10, 229, "rw"),),
        mounts=(MountEdit("/host", "/ctr", ("ro", "bind")),),
    )
    path = cdi.write(UID, [CDIDevice(cdi.device_name(UID, "dev-fuse"), edits)])
    spec = json.loads(path.read_text())
    assert spec == {
        "cdiVersion": "0.5.0",
        "kind": "k8s.dev.example.com/claim",
        "devices": [
            {
                "name": f"{UID}-dev-fuse",
                "containerEdits": {
                    "env": ["A=1"],
                    "deviceNodes": [
                        {
                            "path": "/dev/fuse",
                            "hostPath": "/dev/fuse",
                            "type": "c",
                            "major": 10,
                            "minor": 229,
                            "permissions": "rw",
                        }
                    ],
                    "mounts": [
                        {"hostPath": "/host", "containerPath": "/ctr", "options": ["ro", "bind"]}
                    ],
                },
            }
        ],
    }


def test_cdi_writes_are_atomic_readers_never_see_partial_specs(tmp_path: Path) -> None:
    cdi = CDISpecs(tmp_path, "gpu.example.com")
    many = [CDIDevice(f"{UID}-gpu-{i}", ContainerEdits(env=(f"X={'y' * 500}",))) for i in range(50)]
    cdi.write(UID, many[:1])
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            text = cdi.spec_path(UID).read_text()
            try:
                json.loads(text)
            except ValueError:
                bad.append(text)

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(1, 60):
        cdi.write(UID, many[: n % 50 + 1])
    stop.set()
    thread.join()
    assert bad == []
    assert [p.name for p in tmp_path.iterdir()] == [cdi.spec_path(UID).name]  # no temp files


def test_cdi_remove_is_idempotent(tmp_path: Path) -> None:
    cdi = CDISpecs(tmp_path, "gpu.example.com")
    cdi.write(UID, [CDIDevice(f"{UID}-gpu-0", ContainerEdits())])
    assert cdi.remove(UID) is True
    assert cdi.remove(UID) is False
    assert list(tmp_path.iterdir()) == []


def test_claim_edits_are_the_specs_own_container_edits_once_for_all_devices(
    tmp_path: Path,
) -> None:
    cdi = CDISpecs(tmp_path, "npu.example.com")
    devices = [
        CDIDevice(cdi.device_name(UID, name), ContainerEdits(env=(f"{name.upper()}=1",)))
        for name in ("a", "b")
    ]
    claim_edits = ContainerEdits(
        env=("NPU_VISIBLE_DEVICES=a,b",),
        mounts=(MountEdit("/run/npu", "/run/npu", type="bind"),),
    )
    spec = json.loads(cdi.write(UID, devices, claim_edits=claim_edits).read_text())
    assert spec["containerEdits"] == {
        "env": ["NPU_VISIBLE_DEVICES=a,b"],
        "mounts": [{"hostPath": "/run/npu", "containerPath": "/run/npu", "type": "bind"}],
    }
    assert [d["containerEdits"] for d in spec["devices"]] == [{"env": ["A=1"]}, {"env": ["B=1"]}]
    empty = json.loads(cdi.write(UID, devices, claim_edits=ContainerEdits()).read_text())
    assert "containerEdits" not in empty


def test_claim_edits_of_another_type_fail_in_the_backends_prepare() -> None:
    with pytest.raises(TypeError, match="claim_edits must be ContainerEdits, not dict"):
        BackendPrepared((), claim_edits={"env": ["A=1"]})  # type: ignore[arg-type]
