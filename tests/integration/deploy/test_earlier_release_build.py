"""hack/build-release.sh: an earlier release's tree and chart, from its tag (no root needed).

The image part (root and buildah) is tests/node/test_release_image.py. Tags of a throwaway
clone (``git clone --shared``: no copy of the objects) stand in for releases that do not exist
yet, so every test here also runs with two or more tags.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from deploy_support import KUBE_VERSION, Helm
from helpers.releases import (
    BUILD_RELEASE,
    REPO_ROOT,
    Release,
    ReleaseUnavailableError,
    build_release,
    earlier_release_tags,
    release_tags,
)

FIRST_RELEASE = "v0.1.0"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def _commit(repo: Path, tag: str) -> str:
    return _git(repo, "rev-parse", f"refs/tags/{tag}^{{commit}}")


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of this repository with its tags, sharing its objects; skip without v0.1.0."""
    if FIRST_RELEASE not in release_tags():
        pytest.skip(f"this checkout has no tag {FIRST_RELEASE} (git fetch --tags)")
    path = tmp_path / "repo"
    subprocess.run(
        ["git", "clone", "--quiet", "--shared", "--no-checkout", str(REPO_ROOT), str(path)],
        check=True,
        timeout=120,
    )
    return path


def _tag(repo: Path, tag: str, commit: str) -> None:
    _git(repo, "tag", "--force", "--annotate", "--message", f"test release {tag}", tag, commit)


def _build(tag: str, repo: Path, cache: Path) -> Release:
    return build_release(tag, image=False, repo=repo, cache=cache)


def test_a_release_is_checked_out_from_its_tag_outside_the_checkout(
    clone: Path, tmp_path: Path
) -> None:
    release = _build(FIRST_RELEASE, clone, tmp_path / "cache")
    assert release.source == tmp_path / "cache" / "releases" / FIRST_RELEASE / "src"
    assert _git(release.source, "rev-parse", "HEAD") == _commit(clone, FIRST_RELEASE)
    assert not release.source.is_relative_to(REPO_ROOT)
    # The tag's own tree: v0.1.0 kept its packages at the top level, beside drakit/.
    assert (release.source / "node_plugin" / "checkpoint.py").is_file()
    assert release.chart == release.source / "deploy" / "helm" / "drakit"
    chart = yaml.safe_load((release.chart / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == ("0.1.0", "0.1.0")


def test_the_chart_of_a_release_renders_with_the_image_of_that_release(
    clone: Path, tmp_path: Path, helm: Helm
) -> None:
    release = _build(FIRST_RELEASE, clone, tmp_path / "cache")
    rendered = helm.run(
        "template", "drakit", str(release.chart), "--namespace", "drakit-system",
        "--kube-version", KUBE_VERSION,
        "--set", "image.repository=localhost/drakit", "--set", "image.tag=release-abc",
    ).stdout  # fmt: skip
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    plugin = next(o for o in objects if o["kind"] == "DaemonSet")
    assert plugin["metadata"]["labels"]["helm.sh/chart"] == "drakit-0.1.0"
    images = {c["image"] for c in plugin["spec"]["template"]["spec"]["containers"]}
    assert images == {"localhost/drakit:release-abc"}


def test_every_release_tag_gets_a_tree_of_its_own(clone: Path, tmp_path: Path) -> None:
    # v0.1.0's parent: another commit, and another release as far as the tags say.
    _tag(clone, "v0.0.9", f"{_commit(clone, FIRST_RELEASE)}^")
    assert release_tags(clone)[:2] == ["v0.0.9", FIRST_RELEASE]
    assert {"v0.0.9", FIRST_RELEASE} <= set(earlier_release_tags(clone))
    cache = tmp_path / "cache"
    older, newer = _build("v0.0.9", clone, cache), _build(FIRST_RELEASE, clone, cache)
    assert older.source != newer.source
    assert _git(older.source, "rev-parse", "HEAD") == _commit(clone, "v0.0.9")
    assert _git(newer.source, "rev-parse", "HEAD") == _commit(clone, FIRST_RELEASE)
    assert older.chart.is_dir() and newer.chart.is_dir()


def test_a_release_tree_is_reused_only_while_it_is_the_tag_unchanged(
    clone: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    _tag(clone, "v0.0.9", f"{_commit(clone, FIRST_RELEASE)}^")
    release = _build("v0.0.9", clone, cache)
    marker = release.source / "left-by-a-test"  # untracked: survives only a reuse
    marker.write_text("x")
    assert _build("v0.0.9", clone, cache).source == release.source
    assert marker.exists()
    # A tracked file changed: the tree is made again from the tag.
    readme = release.source / "README.md"
    original = readme.read_text()
    readme.write_text("edited\n")
    _build("v0.0.9", clone, cache)
    assert readme.read_text() == original and not marker.exists()
    # The tag moved: the tree follows it.
    _tag(clone, "v0.0.9", f"{_commit(clone, FIRST_RELEASE)}^^")
    _build("v0.0.9", clone, cache)
    assert _git(release.source, "rev-parse", "HEAD") == _commit(clone, "v0.0.9")


def test_a_tag_the_repository_lacks_is_refused_naming_the_fix(clone: Path, tmp_path: Path) -> None:
    with pytest.raises(ReleaseUnavailableError, match=r"no tag v9\.9\.9.*git fetch --tags"):
        _build("v9.9.9", clone, tmp_path / "cache")
    assert not (tmp_path / "cache" / "releases" / "v9.9.9").exists()


@pytest.mark.parametrize("tag", ["main", "v1.2", "../v1.2.3", "v1.2.3/../../x"])
def test_a_name_that_is_not_a_release_tag_is_refused_before_any_checkout(
    tag: str, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [str(BUILD_RELEASE), "--no-image", tag],
        capture_output=True, text=True, check=False, timeout=60,
        env={"PATH": "/usr/bin:/bin", "DRAKIT_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"tag {tag} is not a release tag" in proc.stderr
    assert list(tmp_path.iterdir()) == []
