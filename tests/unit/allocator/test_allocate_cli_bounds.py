"""``drakit allocate --timeout`` stays within time and memory for hostile selectors.

Each case runs the real command in a subprocess and reads its peak resident memory (the
process and every child it waited for) from ``os.wait4``. Assertions are on the outcome and
on memory; the time bound is enforced as the subprocess timeout only (a liveness bound).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from alloc_builders import claim, dclass, gpus, req, rslice

# Peak RSS allowed for the whole command: the interpreter with drakit loaded (~100 MiB),
# plus a guarded child's 256 MiB of headroom, plus slack. Without the guard the
# doubling selector grows to gigabytes.
MAX_RSS_MIB = 640
LIVENESS_SECONDS = 60
# The allocation's own time limit. The CPU-time guard stops a hostile selector after 2 s of
# CPU per device, so on a loaded 2-core machine a 5 s wall-clock limit could end the
# allocation before the guard reports the cost error this file asserts.
ALLOCATE_TIMEOUT_SECONDS = "30"

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"


def doubling_selector(levels: int = 28) -> str:
    """s1 = s0 + s0, ..., s28 = s27 + s27: 64 characters grow to 16 GiB."""
    text = f"s{levels}.size() > 0"
    for i in range(levels, 0, -1):
        text = f"cel.bind(s{i}, s{i - 1} + s{i - 1}, {text})"
    return f'cel.bind(s0, "{ALPHABET}", {text})'


def split_selector() -> str:
    parts = [f'"{ALPHABET}".split("")' for _ in range(4)]
    return (
        f"{parts[0]}.all(a, {parts[1]}.all(b, {parts[2]}.all(c, "
        f'{parts[3]}.all(d, a + b + c + d != ""))))'
    )


RANGE_SELECTOR = "lists.range(100000).all(i, lists.range(100000).all(j, i + j >= 0))"


def run_allocate(tmp_path: Path, selector: str) -> tuple[int, str, int]:
    """Run the command; return (exit code, output, peak RSS in MiB of it and its children)."""
    files = {
        "slices": [rslice("n1", gpus(2), node="node-1")],
        "classes": [dclass()],
        "claims": [claim("c", req("r", "gpu", selector))],
    }
    args = [sys.executable, "-m", "drakit.cli", "allocate", "--timeout", ALLOCATE_TIMEOUT_SECONDS]
    for flag, objects in files.items():
        path = tmp_path / f"{flag}.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        args += [f"--{flag}", str(path)]
    output_path = tmp_path / "output.txt"
    code, peak_kib = _run_measured(args, output_path)
    return code, output_path.read_text(), peak_kib // 1024


def _run_measured(args: list[str], output_path: Path) -> tuple[int, int]:
    """Run ``args`` under a fresh intermediate process, so that its RUSAGE_CHILDREN holds
    exactly this command and the children it forked; return (exit code, peak RSS KiB)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            with output_path.open("wb") as output:
                proc = subprocess.Popen(args, stdout=output, stderr=subprocess.STDOUT)
                try:
                    code = proc.wait(timeout=LIVENESS_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = -999
                    proc.wait()
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            os.write(write_end, f"{code} {peak}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        text = answer.read().decode()
    os.waitpid(pid, 0)
    code, peak = (int(x) for x in text.split())
    if code == -999:
        pytest.fail("drakit allocate did not end")
    return code, peak


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param(doubling_selector(), id="cel.bind-string-doubling"),
        pytest.param(split_selector(), id="nested-split"),
        pytest.param(RANGE_SELECTOR, id="nested-lists.range"),
    ],
)
def test_hostile_selector_fails_with_cost_error_and_bounded_memory(
    tmp_path: Path, selector: str
) -> None:
    code, output, peak_mib = run_allocate(tmp_path, selector)
    assert code == 2, output
    assert "cost limit exceeded" in output
    assert "ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0]" in output
    assert "Traceback" not in output
    assert peak_mib < MAX_RSS_MIB


def test_redos_selector_answers_like_re2(tmp_path: Path) -> None:
    selector = '"' + "a" * 48 + 'b".find("^(a+)+$") == ""'
    code, output, _ = run_allocate(tmp_path, selector)
    assert code == 0, output
    assert "node node-1: fits" in output


@pytest.mark.parametrize("depth", [600, 3000], ids=["objects-600", "lists-3000"])
def test_claim_file_nested_too_deep_is_a_one_line_input_error(tmp_path: Path, depth: int) -> None:
    """Opaque parameters nested past the model's limit (600) or past the YAML reader's
    recursion (3,000): exit 2 with one line naming the file or field, no traceback."""
    parameters: object = [] if depth > 1000 else {"leaf": 1}
    text = "[" * depth + "]" * depth if depth > 1000 else None
    for _ in range(0 if text else depth):
        parameters = {"n": parameters}
    document = claim("c", req("r", "gpu", "true"))
    document["spec"]["devices"]["config"] = [
        {"opaque": {"driver": "gpu.example.com", "parameters": {"a": "DEEP"}}}
    ]
    claims = json.dumps(document).replace('"DEEP"', text or json.dumps(parameters))
    paths = {}
    for flag, body in (
        ("slices", yaml.safe_dump_all([rslice("n1", gpus(2), node="node-1")])),
        ("classes", yaml.safe_dump_all([dclass()])),
        ("claims", claims),
    ):
        paths[flag] = tmp_path / f"{flag}.json"
        paths[flag].write_text(body)
    args = [sys.executable, "-m", "drakit.cli", "allocate"]
    for flag, path in paths.items():
        args += [f"--{flag}", str(path)]
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "nested" in done.stderr
