"""What the reference launcher decides without a node: a node folder short enough for
the drivers' Unix sockets, and chart values that exist in drakit's example chart."""

from __future__ import annotations

import shutil
from pathlib import Path

import launcher
import pytest
import staging
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CHART = ROOT / "examples/example-driver/deployments/helm/example-driver"
#: The longest socket a driver makes: <kubelet>/plugins_registry/<driver>-<pod uid>-reg.sock,
#: with a per-spec driver name of the suite (dra-XXXXXX.example.com).
LONGEST_SOCKET = "kubelet/plugins_registry/dra-abcdef.example.com-" + "u" * 36 + "-reg.sock"
SUN_PATH_MAX = 107  # bytes of a Unix socket path, without the trailing NUL


def test_the_node_folder_leaves_room_for_the_drivers_registration_sockets() -> None:
    folders = [launcher._short_folder() for _ in range(3)]
    try:
        assert len(set(folders)) == 3
        for folder in folders:
            assert folder.is_dir()
            assert len(str(folder / LONGEST_SOCKET)) <= SUN_PATH_MAX
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def _paths(values: dict[str, object], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        if isinstance(value, dict):
            out += _paths(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def test_every_value_staged_for_drakit_exists_in_the_example_charts_values() -> None:
    if not (EXAMPLE_CHART / "values.yaml").is_file():
        pytest.skip("the example driver's chart is not there yet")
    defaults = yaml.safe_load((EXAMPLE_CHART / "values.yaml").read_text())
    facts = staging.NodeFacts("127.0.0.1", 1, Path("/k"), Path("/c"))
    staged = staging.drakit_values(facts, "localhost/x", "t", 2)
    missing = []
    for path in _paths(staged):
        node = defaults
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(path)
                break
            node = node[part]
    assert missing == [], f"values the harness stages that the example chart lacks: {missing}"


def test_upstreams_gates_are_passed_as_each_minor_takes_them() -> None:
    on_136 = launcher.feature_gates(36).split(",")
    on_137 = launcher.feature_gates(37).split(",")
    assert len(on_136) == 9 and "GangScheduling=true" in on_136
    # 1.37.2's components refuse a gate they no longer know.
    assert "GangScheduling=true" not in on_137
    assert set(on_137) == set(on_136) - {"GangScheduling=true"}
