"""An earlier release's image, built from its tag by hack/build-release.sh (root, buildah).

Each release older than this checkout (``earlier_release``, one run per tag) is built from its
own tree and Dockerfile, so the image runs that release's drakit. A second tag whose image
content is the same (a throwaway tag on v0.1.0's parent, which changed docs only) costs no
build: the archive is named by the content hash, as hack/build-image.sh names today's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.releases import REPO_ROOT, Release, build_release, release_tags
from oci_archive import image_name, unpack

VENV = Path("opt/drakit")


def _chroot(rootfs: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    if os.geteuid() != 0 or not Path(chroot).is_file():
        pytest.skip("running the image's drakit needs chroot, as root")
    return subprocess.run(
        [chroot, str(rootfs), *argv],
        capture_output=True, text=True, check=False, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip


def test_an_earlier_release_image_runs_that_release(
    earlier_release: Release, tmp_path: Path
) -> None:
    archive = earlier_release.image_archive
    assert archive is not None and archive.is_file()
    assert image_name(archive) == f"localhost/drakit:{earlier_release.image_tag}"
    rootfs = unpack(archive, tmp_path)
    shown = _chroot(rootfs, f"/{VENV}/bin/drakit", "version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"drakit {earlier_release.version} "), shown.stdout


def test_two_tags_of_the_same_image_content_share_one_build(
    earlier_release: Release, tmp_path: Path
) -> None:
    if earlier_release.tag != "v0.1.0" or "v0.1.0" not in release_tags():
        pytest.skip("the throwaway tag is made on v0.1.0's parent")
    clone = tmp_path / "repo"
    subprocess.run(
        ["git", "clone", "--quiet", "--shared", "--no-checkout", str(REPO_ROOT), str(clone)],
        check=True, timeout=120,
    )  # fmt: skip
    subprocess.run(
        ["git", "-C", str(clone), "tag", "-a", "-m", "test", "v0.0.9", "v0.1.0^"],
        check=True, timeout=60,
    )  # fmt: skip
    # The throwaway tree in a cache of its own; the images where the session's are.
    assert earlier_release.image_archive is not None
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = earlier_release.image_archive.parent.parent
    for part in ("images", "buildah"):
        (cache / part).symlink_to(shared / part)
    archives = sorted(shared.joinpath("images").glob("drakit-release-*.oci.tar"))
    other = build_release("v0.0.9", repo=clone, cache=cache)
    assert other.source != earlier_release.source
    assert other.image_tag == earlier_release.image_tag
    assert other.image_archive is not None
    assert other.image_archive.resolve() == earlier_release.image_archive.resolve()
    assert sorted(shared.joinpath("images").glob("drakit-release-*.oci.tar")) == archives
