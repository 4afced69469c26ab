"""Building the image leaves nothing on the host outside drakit's cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import NodeAssets
from node_rig import ROOT

# buildah's network backend creates its CNI configuration folder (with a cni.lock)
# wherever containers.conf points, /etc/cni/net.d by default, on any command.
HOST_CNI = Path("/etc/cni")
# Read when the module is collected, before any fixture has built the image.
HOST_CNI_BEFORE_THE_SESSION = HOST_CNI.exists()


def test_an_image_build_creates_no_cni_configuration_on_the_host(node_assets: NodeAssets) -> None:
    if HOST_CNI_BEFORE_THE_SESSION:
        pytest.skip(f"{HOST_CNI} existed before the tests: it may be another runtime's")
    assert not HOST_CNI.exists()  # after the session's own build (node_assets)
    build = subprocess.run(
        [str(ROOT / "hack" / "build-image.sh")],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    assert Path(build.stdout.strip().splitlines()[-1]) == node_assets.image_archive
    assert not HOST_CNI.exists()
