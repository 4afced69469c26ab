"""Fixtures of the example driver's tests.

The package is used from its source folder (``src``), so the tests run from the
repository root without installing it: ``.venv/bin/pytest examples/example-driver/tests``.
The control-plane and kubelet-harness fixtures are drakit's own (tests/conftest.py),
loaded from there rather than copied.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from example_paths import ROOT, SRC

if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))
# tests/ holds drakit's shared test helpers (harness, helpers).
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(1, str(ROOT / "tests"))


def _drakit_fixtures() -> object:
    spec = importlib.util.spec_from_file_location(
        "drakit_tests_conftest", ROOT / "tests" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_root = _drakit_fixtures()
kube_version = _root.kube_version  # type: ignore[attr-defined]
cluster = _root.cluster  # type: ignore[attr-defined]
namespace = _root.namespace  # type: ignore[attr-defined]
kubelet_harness_binary = _root.kubelet_harness_binary  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    """helm as drakit's tests get it (hack/build-binaries.sh helm builds or reuses it)."""
    proc = subprocess.run(
        [str(ROOT / "hack" / "build-binaries.sh"), "helm"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/build-binaries.sh helm failed:\n{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1]) / "helm"
