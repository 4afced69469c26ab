"""drakit.testing's reading of CDI specs: what a container gets from its devices, applied as
the CDI library (tags.cncf.io/container-device-interface v1.1.1, ``Cache.InjectDevices`` and
``ContainerEdits.Apply``) applies it, from real spec files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drakit.testing import CDIMount, cdi_specs, container_edits, unresolved_cdi_ids


def write_spec(folder: Path, name: str, spec: dict[str, Any]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps({"cdiVersion": "0.6.0", **spec}))


@pytest.fixture
def cdi(tmp_path: Path) -> Path:
    folder = tmp_path / "cdi"
    write_spec(folder, "a.json", {
        "kind": "example.com/gpu",
        "containerEdits": {"env": ["COMMON=a", "SHARED=from-a-spec"]},
        "devices": [
            {"name": "g0", "containerEdits": {
                "env": ["G0=1", "SHARED=from-g0"],
                "deviceNodes": [{"path": "/dev/g0"}],
                "mounts": [{"hostPath": "/h/deep", "containerPath": "/x/y/z"}],
            }},
            {"name": "g1", "containerEdits": {
                "env": ["G1=1"],
                "deviceNodes": [{"path": "/dev/g1"}],
                "mounts": [{"hostPath": "/h/top", "containerPath": "/x", "options": ["ro"]}],
            }},
        ],
    })  # fmt: skip
    write_spec(folder, "b.json", {
        "kind": "example.com/nic",
        "containerEdits": {"env": ["COMMON=b"]},
        "devices": [{"name": "n0", "containerEdits": {
            "env": ["N0=1"],
            "mounts": [{"hostPath": "/h/other", "containerPath": "/x/y/z"}],
            "hooks": [{"hookName": "createContainer", "path": "/bin/hook"}],
        }}],
    })  # fmt: skip
    return folder


def test_a_specs_common_edits_come_once_before_its_devices_edits(cdi: Path) -> None:
    container = container_edits(cdi, ["example.com/gpu=g0", "example.com/gpu=g1"])
    assert container.env == ("COMMON=a", "SHARED=from-g0", "G0=1", "G1=1")
    assert container.device_nodes == ("/dev/g0", "/dev/g1")


def test_a_later_variable_of_the_same_name_replaces_the_earlier_value_in_place(cdi: Path) -> None:
    container = container_edits(cdi, ["example.com/gpu=g0", "example.com/nic=n0"])
    assert container.env == ("COMMON=b", "SHARED=from-g0", "G0=1", "N0=1")
    assert container.environ["COMMON"] == "b"


def test_a_later_mount_at_the_same_path_wins_and_mounts_are_ordered_by_depth(cdi: Path) -> None:
    ids = ["example.com/gpu=g0", "example.com/nic=n0", "example.com/gpu=g1"]
    container = container_edits(cdi, ids)
    assert container.mounts == (
        CDIMount(host_path="/h/top", container_path="/x", options=("ro",)),
        CDIMount(host_path="/h/other", container_path="/x/y/z"),
    )
    assert container.hooks == ({"hookName": "createContainer", "path": "/bin/hook"},)


def test_an_id_no_spec_defines_fails_naming_what_the_specs_define(cdi: Path) -> None:
    assert unresolved_cdi_ids(cdi, ["example.com/gpu=g0", "example.com/gpu=g9"]) == [
        "example.com/gpu=g9"
    ]
    with pytest.raises(AssertionError, match=r"example.com/gpu=g9.*example.com/gpu=g0"):
        container_edits(cdi, ["example.com/gpu=g9"])


def test_yaml_specs_are_read_and_an_unreadable_spec_is_named(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "cdiVersion: 0.6.0\nkind: example.com/fpga\ndevices:\n"
        "- name: f0\n  containerEdits:\n    env: [F0=1]\n"
    )
    assert container_edits(tmp_path, ["example.com/fpga=f0"]).env == ("F0=1",)
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(AssertionError, match=r"d\.json: not valid JSON"):
        cdi_specs(tmp_path)
