"""drakit's image holds the runtime only, as built from deploy/Dockerfile.

The image (hack/build-image.sh's OCI archive: built once, then reused by its content tag; this
module needs the image alone, not the node's binaries) is unpacked layer by layer into a
folder, whiteouts applied, as a container runtime would. Then: no module of the development
tools (drakit.localcluster, drakit.demo, drakit.testing: the drakit-localcluster distribution)
is anywhere in it; the Python packages of its environment are exactly those of the hashed
runtime lock (requirements/runtime.txt) at the lock's versions, plus drakit; and the image's
own ``drakit --help``, run in the unpacked root (chroot), lists no command it lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import _skip_reason
from node_rig import ROOT
from oci_archive import unpack
from packaging.utils import canonicalize_name

VENV = Path("opt/drakit")
DEV_TOOLS = ("drakit/localcluster", "drakit/demo", "drakit/testing")


@pytest.fixture(scope="module")
def image_archive() -> Path:
    """drakit's image as an OCI archive (hack/build-image.sh: built or reused)."""
    reason = _skip_reason()  # the real-node tier's: root, Linux, buildah
    if reason:
        pytest.skip(reason)
    build = subprocess.run(
        [str(ROOT / "hack" / "build-image.sh")],
        capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    if build.returncode != 0:
        pytest.fail(f"hack/build-image.sh failed:\n{build.stderr}")
    return Path(build.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rootfs(image_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's root filesystem, unpacked from its OCI archive."""
    return unpack(image_archive, tmp_path_factory.mktemp("image"))


def _site_packages(root: Path) -> Path:
    (found,) = (root / VENV / "lib").glob("python3.*/site-packages")
    return found


def _runtime_lock() -> dict[str, str]:
    """Name -> version of every entry of requirements/runtime.txt."""
    locked = {}
    for line in (ROOT / "requirements" / "runtime.txt").read_text().splitlines():
        text = line.strip()
        if "==" in text and not text.startswith(("#", "--")):
            name, version = text.split(" ")[0].split("==")
            locked[canonicalize_name(name)] = version
    return locked


def test_image_holds_no_module_of_the_development_tools(rootfs: Path) -> None:
    found = sorted(
        str(path.relative_to(rootfs))
        for path in rootfs.rglob("*")
        if any(tool in path.as_posix() for tool in DEV_TOOLS)
        or (path.parent.name == "cli" and path.stem in ("dev", "local_cluster", "local_node"))
    )
    assert found == [], f"development tools in drakit's image: {found[:10]}"
    # The search looked where drakit is: its CLI and node plugin are there.
    drakit = _site_packages(rootfs) / "drakit"
    assert (drakit / "cli" / "__init__.py").is_file() and (
        drakit / "node_plugin" / "core.py"
    ).is_file()


def test_image_python_packages_are_the_runtime_lock_and_drakit(rootfs: Path) -> None:
    installed = {}
    for info in _site_packages(rootfs).glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[canonicalize_name(name)] = version
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert installed == {**_runtime_lock(), "drakit": version}


def test_image_drakit_help_lists_only_commands_the_image_can_run(rootfs: Path) -> None:
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    if os.geteuid() != 0 or not Path(chroot).is_file():
        pytest.skip("running the image's drakit needs chroot, as root")
    shown = subprocess.run(
        [chroot, str(rootfs), f"/{VENV}/bin/drakit", "--help"],
        capture_output=True, text=True, check=False, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    commands = shown.stdout.split("positional arguments:")[1]
    assert "node-plugin" in commands and "controller" in commands
    assert "local-cluster" not in commands and "local-node" not in commands
    assert "pip install drakit-localcluster" in shown.stdout
    refused = subprocess.run(
        [chroot, str(rootfs), f"/{VENV}/bin/drakit", "local-node", "up", "/x"],
        capture_output=True, text=True, check=False, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "drakit-localcluster" in refused.stderr
