"""Fixtures of the differential suite: the reference allocator binary and the Python
allocator's scenario entry point."""

from __future__ import annotations

import pytest
from differential_harness import Oracle, PythonRunner
from helpers.gobuilds import built_binary


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """``dra-oracle``, built once (or reused) by ``hack/build-binaries.sh oracle``.

    Skips the suite, saying why, only when the binary cannot be built (no Go toolchain,
    no module proxy); everything else is a failure."""
    binary = built_binary("oracle", "dra-oracle", "the reference allocator (hack/oracle)")
    return Oracle(binary)


@pytest.fixture(scope="session")
def run_scenario() -> PythonRunner:
    """``drakit.allocator.scenario.run_scenario``: the Python side of the contract."""
    from drakit.allocator.scenario import run_scenario as python_run_scenario  # noqa: PLC0415

    return python_run_scenario
