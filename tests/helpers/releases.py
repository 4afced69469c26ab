"""Earlier releases of drakit, built from their git tags (``hack/build-release.sh``).

    for tag in earlier_release_tags():        # ["v0.1.0", ...], oldest first
        release = build_release(tag)          # the tag's tree, chart and image (root, buildah)
        release.chart                         # its Helm chart folder
        release.image_archive, release.image_tag   # its OCI archive, its tag in localhost/drakit
        release.python                        # its own venv's interpreter (make_venv=True)

A release tag is ``vMAJOR.MINOR.PATCH`` (an optional suffix after ``-`` or ``+``); the
releases "earlier" than this checkout are those whose version is below drakit's own version
(``0.2.0.dev0`` is below ``0.2.0`` and above ``0.1.0``). Everything is cached under
``$DRAKIT_CACHE_DIR/releases/<tag>`` (default ``~/.cache/drakit``): a second call costs a
``git rev-parse`` and a hash, no build.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_RELEASE = REPO_ROOT / "hack" / "build-release.sh"
#: What hack/build-release.sh accepts as a release tag.
RELEASE_TAG = re.compile(r"^v\d+\.\d+\.\d+([.+-][0-9A-Za-z.+-]*)?$")
#: A cold image build runs pip inside buildah; a venv build runs pip too.
BUILD_TIMEOUT = 1800


class ReleaseUnavailableError(RuntimeError):
    """The release cannot be built here: the message says why (no tag, no root, no buildah)."""


@dataclass(frozen=True)
class Release:
    """One earlier release, as hack/build-release.sh made it."""

    tag: str
    source: Path
    chart: Path
    image_archive: Path | None = None
    image_tag: str | None = None

    @property
    def version(self) -> Version:
        return Version(self.tag.removeprefix("v"))

    @property
    def python(self) -> Path:
        """The interpreter of the release's own venv (``make_venv``)."""
        return self.source / ".venv" / "bin" / "python"


def release_tags(repo: Path = REPO_ROOT) -> list[str]:
    """Every release tag of ``repo``, oldest version first ([] without git or tags)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "tag", "--list", "v*"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    tags = []
    for tag in proc.stdout.split():
        if not RELEASE_TAG.match(tag):
            continue
        try:
            tags.append((Version(tag.removeprefix("v")), tag))
        except InvalidVersion:
            continue
    return [tag for _, tag in sorted(tags)]


def current_version() -> Version:
    """This checkout's drakit version (pyproject.toml, as installed)."""
    from drakit.version import __version__  # noqa: PLC0415 (resolved on first access)

    return Version(__version__)


def earlier_release_tags(repo: Path = REPO_ROOT, now: Version | None = None) -> list[str]:
    """The release tags older than ``now`` (default: this checkout's version), oldest first:
    the releases to upgrade from."""
    now = now or current_version()
    return [tag for tag in release_tags(repo) if Version(tag.removeprefix("v")) < now]


def build_release(
    tag: str,
    *,
    image: bool = True,
    repo: Path | None = None,
    cache: Path | None = None,
) -> Release:
    """Run hack/build-release.sh for ``tag``; ReleaseUnavailableError when it cannot run here
    (exit code 3: no such tag, no root or buildah for the image), AssertionError when the
    build itself failed. ``repo`` holds the tags (default this checkout's), ``cache``
    replaces ``$DRAKIT_CACHE_DIR``."""
    env = dict(os.environ)
    if repo is not None:
        env["DRAKIT_RELEASE_REPO"] = str(repo)
    if cache is not None:
        env["DRAKIT_CACHE_DIR"] = str(cache)
    argv = [str(BUILD_RELEASE), *([] if image else ["--no-image"]), tag]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, check=False, timeout=BUILD_TIMEOUT
    )
    if proc.returncode == 3:
        raise ReleaseUnavailableError(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}")
    out = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return Release(
        tag=tag,
        source=Path(out["source"]),
        chart=Path(out["chart"]),
        image_archive=Path(out["image"]) if "image" in out else None,
        image_tag=out.get("image_tag"),
    )


def make_venv(release: Release) -> Path:
    """The release's own venv (``make venv`` in its tree, as its developers made it); its
    interpreter. Reused while its stamp is newer than the tree's pyproject and lock; made
    under the release's lock, which hack/build-release.sh takes too."""
    lock = release.source.parent / ".lock"
    proc = subprocess.run(
        ["flock", str(lock), "make", "-C", str(release.source), "venv"],
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT,
    )
    if proc.returncode != 0:
        raise AssertionError(f"make venv in {release.source} failed:\n{proc.stderr}")
    return release.python
