"""A release's files: ``python -m build`` makes an sdist and a wheel that pass ``twine check``,
and the sdist holds everything the build needs, so the wheel built from it (what
``python -m build`` does by default, and what a downstream packager does) is the wheel
built from the repository, file for file and byte for byte. The development tools are the
drakit-localcluster distribution's (distributions/drakit-localcluster), released with drakit:
none of them is in drakit's sdist or wheel, and its own wheel holds them alone.

Both builds run with build isolation, as a release does: the build backend pinned in
pyproject.toml's [build-system] is installed into a fresh environment each time.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers.cleanbuild import clean_build_env

ROOT = Path(__file__).resolve().parents[3]
LAYERED = ("allocator", "controller", "kubeapi", "kubeletapi", "node_plugin", "telemetry")
# The development tools: the drakit-localcluster distribution's, never drakit's.
DEV_TOOLS = (
    "drakit/localcluster/",
    "drakit/demo/",
    "drakit/testing/",
    # the development commands: the dev distribution's modules of drakit.cli
    "drakit/cli/dev.py",
    "drakit/cli/local_cluster.py",
    "drakit/cli/local_node.py",
)
DEV_TOOLS_SOURCE = ROOT / "distributions" / "drakit-localcluster"


def _build(source: Path, out: Path, *what: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--quiet", *what, "--outdir", str(out), str(source)],
        check=True,
        cwd=out,
        capture_output=True,
        timeout=300,
        env=clean_build_env(out / "work"),
    )


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel built from that sdist): `python -m build`'s default."""
    out = tmp_path_factory.mktemp("release")
    _build(ROOT, out)
    (sdist,) = out.glob("drakit-*.tar.gz")
    (wheel,) = out.glob("drakit-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def dev_tools_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """drakit-localcluster's (sdist, wheel built from that sdist)."""
    out = tmp_path_factory.mktemp("dev-tools-release")
    _build(DEV_TOOLS_SOURCE, out)
    (sdist,) = out.glob("drakit_localcluster-*.tar.gz")
    (wheel,) = out.glob("drakit_localcluster-*.whl")
    return sdist, wheel


def _sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        return {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}


def _metadata(wheel: Path) -> str:
    contents = _contents(wheel)
    (metadata_name,) = [n for n in contents if n.endswith(".dist-info/METADATA")]
    return contents[metadata_name].decode()


def _contents(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_sdist_and_wheel_pass_twine_check(
    release: tuple[Path, Path], dev_tools_release: tuple[Path, Path]
) -> None:
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            *map(str, release + dev_tools_release),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 4, checked.stdout


def test_drakit_sdist_and_wheel_hold_no_development_tools(release: tuple[Path, Path]) -> None:
    sdist, wheel = release
    for what, names in (("sdist", _sdist_names(sdist)), ("wheel", set(_contents(wheel)))):
        shipped = sorted(n for n in names if n.startswith(DEV_TOOLS))
        assert shipped == [], f"drakit's {what} holds development tools: {shipped[:5]}"
        assert "drakit/cli/__init__.py" in names  # the check looks where the package is


def test_dev_tools_wheel_adds_only_the_dev_tools_and_commands_to_drakits_namespace(
    dev_tools_release: tuple[Path, Path],
) -> None:
    _sdist, wheel = dev_tools_release
    names = [n for n in _contents(wheel) if ".dist-info/" not in n]
    assert names and all(n.startswith(DEV_TOOLS) for n in names), names
    for module in ("localcluster/__init__.py", "cli/local_cluster.py",
                   "cli/local_node.py", "localcluster/hoststate.py",
                   "demo/__main__.py"):  # fmt: skip
        assert f"drakit/{module}" in names, f"drakit/{module} is not in drakit-localcluster"
    # The sdist rebuilds it: its source root is in it.
    assert "src/drakit/localcluster/cluster.py" in _sdist_names(_sdist)


def test_dev_tools_require_drakit_at_its_own_version(
    release: tuple[Path, Path], dev_tools_release: tuple[Path, Path]
) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"Version: {version}\n" in _metadata(release[1])
    metadata = _metadata(dev_tools_release[1])
    assert f"Version: {version}\n" in metadata
    requires = [
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist")
    ]
    assert f"drakit[kubernetes]=={version}" in requires, requires


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
    metadata = _metadata(wheel)
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
