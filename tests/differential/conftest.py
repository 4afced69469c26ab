"""Fixtures of the differential suite: the reference allocator binary and the Python
allocator's scenario entry point."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from differential_harness import REPO, Oracle, PythonRunner


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """``dra-oracle``, built once (or reused) by ``hack/build-binaries.sh oracle``.

    Skips the suite, saying why, only when the binary cannot be built (no Go toolchain,
    no module proxy); everything else is a failure."""
    done = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "oracle"],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        pytest.skip(
            "the reference allocator (hack/oracle) could not be built: "
            + (done.stderr.strip().splitlines() or ["no output"])[-1]
        )
    binary = Path(done.stdout.strip().splitlines()[-1]) / "dra-oracle"
    if not binary.is_file():
        pytest.fail(f"hack/build-binaries.sh oracle succeeded but {binary} does not exist")
    return Oracle(binary)


@pytest.fixture(scope="session")
def run_scenario() -> PythonRunner:
    """``drakit.allocator.scenario.run_scenario``: the Python side of the contract."""
    from drakit.allocator.scenario import run_scenario as python_run_scenario  # noqa: PLC0415

    return python_run_scenario
