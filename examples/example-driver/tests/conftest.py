"""Fixtures of the example driver's tests.

The package is used from its source folder (``src``), so the tests run from the
repository root without installing it: ``.venv/bin/pytest examples/example-driver/tests``.
The control plane, the node under the kubelet harness and the plugin under test are
drakit's public test kit (``drakit.testing``), as a vendor's driver tests use it; drakit's
own session fixtures (tests/conftest.py) are loaded from there rather than copied, so both
test folders share one control plane.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

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


pytest_plugins = ["drakit.testing"]
_root = _drakit_fixtures()
kube_version = _root.kube_version  # type: ignore[attr-defined]
cluster = _root.cluster  # type: ignore[attr-defined]
namespace = _root.namespace  # type: ignore[attr-defined]
kubelet_harness_binary = _root.kubelet_harness_binary  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def drakit_cluster(cluster: Any) -> Any:
    """drakit.testing's control plane is the session's ``cluster``."""
    return cluster


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
