"""``drakit allocate``: output, exit codes, input formats and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from alloc_builders import claim, dclass, device, gpus, node, req, rslice

from drakit.cli import main


def write(path: Path, *objects: dict[str, Any], as_list: bool = False, fmt: str = "yaml") -> str:
    if as_list:
        data: Any = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        text = json.dumps(data) if fmt == "json" else yaml.safe_dump(data)
    elif fmt == "json":
        text = json.dumps(objects[0])
    else:
        text = yaml.safe_dump_all(objects)
    path.write_text(text)
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "slices": write(
            tmp_path / "slices.yaml",
            rslice("n1", gpus(2), node="node-1"),
            rslice("n2", gpus(1), node="node-2"),
        ),
        "classes": write(tmp_path / "classes.json", dclass(), fmt="json"),
        "claims": write(tmp_path / "claims.yaml", claim("c", req(count=2)), as_list=True),
    }


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["allocate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def base(files: dict[str, str]) -> list[str]:
    return ["--slices", files["slices"], "--classes", files["classes"], "--claims", files["claims"]]


def test_prints_allocation_per_node_and_exits_zero(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(base(files), capsys)
    assert code == 0
    assert "node node-1: fits" in out
    assert "r: gpu.example.com/node-1/gpu-0" in out
    assert "node node-2: does not fit" in out


def test_json_output_is_machine_readable(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([*base(files), "--node", "node-1", "-o", "json"], capsys)
    report = json.loads(out)
    assert code == 0
    assert report["nodes"][0]["outcome"] == "allocated"
    results = report["nodes"][0]["allocations"][0]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-0", "gpu-1"]


def test_explain_in_yaml_for_a_node_that_does_not_fit(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([*base(files), "--node", "node-2", "--explain", "-o", "yaml"], capsys)
    report = yaml.safe_load(out)
    assert code == 1
    request = report["nodes"][0]["explanation"]["claims"][0]["requests"][0]
    assert (request["considered"], request["suitable"]) == (1, 1)
    assert "note" not in request  # too few devices: no competition to blame


def test_explain_text(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*base(files), "--node", "node-2", "--explain"], capsys)
    assert code == 1
    assert "request r (class gpu) wants 2 device(s): 1 of 1 device(s) suitable" in out


def test_nodes_file_supplies_labels(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    selected = rslice(
        "z",
        gpus(2, "z"),
        node=None,
        pool="zone",
        nodeSelector={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        },
    )
    slices = write(tmp_path / "zone.yaml", selected)
    nodes = write(tmp_path / "nodes.yaml", node("n-a", zone="a"), node("n-b", zone="b"))
    code, out, _ = run(
        [
            "--slices",
            slices,
            "--classes",
            files["classes"],
            "--claims",
            files["claims"],
            "--nodes",
            nodes,
        ],
        capsys,
    )
    assert code == 0
    assert "node n-a: fits" in out and "node n-b: does not fit" in out


def test_v1beta1_input_is_accepted(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "b"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-9",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "g", "basic": {}}, {"name": "h", "basic": {}}],
        },
    }
    slices = write(tmp_path / "beta.yaml", beta)
    code, out, _ = run(
        ["--slices", slices, "--classes", files["classes"], "--claims", files["claims"]], capsys
    )
    assert code == 0
    assert "node node-9: fits" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("a: [", "slices.yaml (line"),
        ("- 1\n- 2\n", "expected an object"),
        (
            yaml.safe_dump({"kind": "DeviceClass", "metadata": {"name": "x"}}),
            "(DeviceClass x): expected kind ResourceSlice",
        ),
        (
            yaml.safe_dump(rslice("s", [device("d", attributes={"a": {"int": "x"}})])),
            "(ResourceSlice s): spec.devices[0].attributes.a.int: must be of type int",
        ),
        (
            yaml.safe_dump(rslice("s", [device("Bad_Name")])),
            "ResourceSlice s: spec.devices[0].name",
        ),
    ],
)
def test_bad_input_is_one_line_naming_file_object_and_field(
    tmp_path: Path,
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    content: str,
    expected: str,
) -> None:
    bad = tmp_path / "slices.yaml"
    bad.write_text(content)
    code, out, err = run(
        ["--slices", str(bad), "--classes", files["classes"], "--claims", files["claims"]], capsys
    )
    assert code == 2
    assert out == ""
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_missing_file_is_reported(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        [
            "--slices",
            "/nonexistent.yaml",
            "--classes",
            files["classes"],
            "--claims",
            files["claims"],
        ],
        capsys,
    )
    assert code == 2
    assert "/nonexistent.yaml: cannot read" in err


def test_malformed_cel_is_an_error_naming_the_field(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    claims = write(tmp_path / "bad-claim.yaml", claim("c", req("r", "gpu", "device.driver ==")))
    args = ["--slices", files["slices"], "--classes", files["classes"], "--claims", claims]
    code, out, err = run(args, capsys)
    assert code == 2
    assert out == ""
    assert "ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel" in err
    assert "<input>:1:17: Syntax error" in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_class_is_an_error(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    claims = write(tmp_path / "c.yaml", claim("c", req(cls="missing")))
    code, out, _ = run(
        [
            "--slices",
            files["slices"],
            "--classes",
            files["classes"],
            "--claims",
            claims,
            "--node",
            "node-1",
        ],
        capsys,
    )
    assert code == 2
    assert "could not retrieve device class missing" in out


def test_no_nodes_anywhere_is_an_input_error(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    slices = write(tmp_path / "s.yaml", rslice("a", gpus(1), node=None, pool="p", allNodes=True))
    code, _, err = run(
        ["--slices", slices, "--classes", files["classes"], "--claims", files["claims"]], capsys
    )
    assert code == 2
    assert "no nodes to try" in err


def test_console_script_help_describes_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "drakit.cli", "allocate", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert "--explain" in done.stdout and "Exit status" in done.stdout
