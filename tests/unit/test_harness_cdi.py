"""The e2e tests' CDI check resolves IDs the way a container runtime would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from harness.cdi import CDISpecError, assert_cdi_ids_resolve, unresolved_cdi_ids


def write_spec(folder: Path, filename: str, kind: str, names: list[str]) -> None:
    spec = {"cdiVersion": "0.6.0", "kind": kind, "devices": [{"name": n} for n in names]}
    is_yaml = filename.endswith((".yaml", ".yml"))
    (folder / filename).write_text(yaml.safe_dump(spec) if is_yaml else json.dumps(spec))


def test_ids_defined_in_json_and_yaml_specs_resolve(tmp_path: Path) -> None:
    write_spec(tmp_path, "a.json", "example.com/gpu", ["gpu-0", "gpu-1"])
    write_spec(tmp_path, "b.yaml", "example.com/nic", ["nic-0"])

    assert unresolved_cdi_ids(["example.com/gpu=gpu-1", "example.com/nic=nic-0"], tmp_path) == []


def test_unknown_device_kind_or_malformed_id_is_reported_unresolved(tmp_path: Path) -> None:
    write_spec(tmp_path, "a.json", "example.com/gpu", ["gpu-0"])

    ids = [
        "example.com/gpu=gpu-9",
        "example.com/fpga=gpu-0",
        "example.com/gpu",
        "example.com/gpu=gpu-0",
    ]

    assert unresolved_cdi_ids(ids, tmp_path) == ids[:3]


def test_files_without_a_spec_suffix_and_subfolders_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    write_spec(tmp_path / "nested", "a.json", "example.com/gpu", ["gpu-0"])
    write_spec(tmp_path, "a.json.tmp", "example.com/gpu", ["gpu-0"])

    assert unresolved_cdi_ids(["example.com/gpu=gpu-0"], tmp_path) == ["example.com/gpu=gpu-0"]


def test_failed_check_names_missing_ids_and_devices_on_disk(tmp_path: Path) -> None:
    write_spec(tmp_path, "a.json", "example.com/gpu", ["gpu-0"])

    with pytest.raises(
        AssertionError, match=r"example.com/gpu=gpu-1.*'example.com/gpu': \['gpu-0'\]"
    ):
        assert_cdi_ids_resolve(["example.com/gpu=gpu-1"], tmp_path)


def test_unreadable_spec_is_an_error_naming_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"kind": "example.com/gpu", "devices": [{"nam": "x"}]}')

    with pytest.raises(CDISpecError, match=r"bad.json: field devices\[0\].name"):
        unresolved_cdi_ids(["example.com/gpu=x"], tmp_path)
