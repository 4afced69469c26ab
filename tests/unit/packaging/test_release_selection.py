"""Which tags are releases, in which order, and which of them this checkout upgrades from.

A repository of its own in tmp_path with tags of every shape; the building and caching of a
release's tree and image: tests/integration/deploy/test_earlier_release_build.py and
tests/node/test_release_image.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.releases import earlier_release_tags, release_tags
from packaging.version import Version

TAGS = ["v0.1.0", "v0.10.0", "v0.2.0", "v0.2.0-rc.1", "v1.0.0", "v0.3", "vnext", "0.4.0", "x1"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "--quiet")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
        "--allow-empty", "-m", "first")  # fmt: skip
    for tag in TAGS:
        git(tmp_path, "tag", tag)
    return tmp_path


def test_release_tags_are_the_semver_tags_oldest_version_first(repo: Path) -> None:
    # 0.10.0 after 0.2.0 (versions, not strings); a pre-release before its release.
    assert release_tags(repo) == ["v0.1.0", "v0.2.0-rc.1", "v0.2.0", "v0.10.0", "v1.0.0"]


@pytest.mark.parametrize(
    ("now", "earlier"),
    [
        ("0.1.0", []),
        ("0.2.0.dev0", ["v0.1.0"]),  # a development version is below its release
        ("0.2.0", ["v0.1.0", "v0.2.0-rc.1"]),
        ("0.11.0.dev0", ["v0.1.0", "v0.2.0-rc.1", "v0.2.0", "v0.10.0"]),
    ],
)
def test_the_releases_to_upgrade_from_are_the_tags_below_this_version(
    repo: Path, now: str, earlier: list[str]
) -> None:
    assert earlier_release_tags(repo, Version(now)) == earlier


def test_a_folder_without_git_has_no_releases(tmp_path: Path) -> None:
    assert release_tags(tmp_path / "none") == []
