"""Binaries built from their pinned Go modules by ``hack/build-binaries.sh`` for a test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def built_binary(target: str, relative: str, what: str) -> Path:
    """The file ``relative`` in the folder ``hack/build-binaries.sh TARGET`` prints, built
    once (or reused from the cache).

    Skips, naming ``what`` and the build's last line, only when the build fails (no Go
    toolchain, no module proxy); a build that succeeded without the file is a failure."""
    done = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), target],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        pytest.skip(
            f"{what} could not be built: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
        )
    binary = Path(done.stdout.strip().splitlines()[-1]) / relative
    if not binary.is_file():
        pytest.fail(f"hack/build-binaries.sh {target} succeeded but {binary} does not exist")
    return binary
