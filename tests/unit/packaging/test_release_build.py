"""A release's files: ``python -m build`` makes an sdist and a wheel that pass ``twine check``,
and the sdist holds everything the build needs, so the wheel built from it (what
``python -m build`` does by default, and what a downstream packager does) is the wheel
built from the repository, file for file and byte for byte.

Both builds run with build isolation, as a release does: the build backend pinned in
pyproject.toml's [build-system] is installed into a fresh environment each time.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LAYERED = ("allocator", "controller", "kubeapi", "kubeletapi", "node_plugin", "telemetry")


def _build(source: Path, out: Path, *what: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--quiet", *what, "--outdir", str(out), str(source)],
        check=True,
        cwd=out,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel built from that sdist): `python -m build`'s default."""
    out = tmp_path_factory.mktemp("release")
    _build(ROOT, out)
    (sdist,) = out.glob("drakit-*.tar.gz")
    (wheel,) = out.glob("drakit-*.whl")
    return sdist, wheel


def _contents(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_sdist_and_wheel_pass_twine_check(release: tuple[Path, Path]) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, release)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_sdist_holds_the_packages_the_links_in_drakit_name_and_the_license(
    release: tuple[Path, Path],
) -> None:
    sdist, _wheel = release
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"} <= names
    for package in LAYERED:
        assert f"drakit/{package}/__init__.py" in names, f"drakit/{package} is not in the sdist"
    assert "drakit/kubeletapi/gen/dra/v1/api_pb2.py" in names


def test_wheel_from_the_sdist_equals_the_wheel_from_the_repository(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    _sdist, from_sdist = release
    _build(ROOT, tmp_path, "--wheel")
    (from_tree,) = tmp_path.glob("drakit-*.whl")
    assert from_tree.name == from_sdist.name
    tree, sdist = _contents(from_tree), _contents(from_sdist)
    assert sorted(tree) == sorted(sdist)
    differing = sorted(name for name in tree if tree[name] != sdist[name])
    assert differing == [], f"differ between the two wheels: {differing}"


def test_wheel_metadata_carries_ranges_license_and_extras(release: tuple[Path, Path]) -> None:
    _sdist, wheel = release
    contents = _contents(wheel)
    (metadata_name,) = [n for n in contents if n.endswith(".dist-info/METADATA")]
    metadata = contents[metadata_name].decode()
    requires = [
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist")
    ]
    core = [r for r in requires if "extra ==" not in r]
    assert core and all(">=" in r and "<" in r and "==" not in r for r in core), core
    assert "License-Expression: Apache-2.0" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in contents)
    extras = {
        line.split(": ", 1)[1]
        for line in metadata.splitlines()
        if line.startswith("Provides-Extra")
    }
    assert {"kubernetes", "webhook"} <= extras
    assert not any(r.startswith("kubernetes") for r in core)
