"""drakit.testing finds helm where drakit's launcher finds its binaries, then on PATH, and
without one skips a chart test saying where it looked (or fails it, for CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.localcluster import assets
from drakit.testing import find_helm
from drakit.testing.tools import helm_or_skip


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_helm_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No helm in the envtest variables, the cache or PATH, and no checkout to build one in
    (as for an installed drakit-localcluster)."""
    for name in ("TEST_ASSET_HELM", "KUBEBUILDER_ASSETS", "DRAKIT_KUBE_VERSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(assets, "repo_root", lambda: None)
    if Path("/usr/local/kubebuilder/bin/helm").exists():
        pytest.skip("this machine has /usr/local/kubebuilder/bin/helm")
    return tmp_path


def test_helm_is_looked_for_as_the_launchers_binaries_before_path(
    no_helm_anywhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = executable(no_helm_anywhere / "bin" / "helm")
    assert find_helm() == on_path
    cached = executable(Path(assets.cache_dir()) / "helm")
    assert find_helm() == cached
    explicit = executable(no_helm_anywhere / "elsewhere" / "helm")
    monkeypatch.setenv("TEST_ASSET_HELM", str(explicit))
    assert find_helm() == explicit


def test_without_helm_a_chart_test_is_skipped_saying_where_it_looked(
    no_helm_anywhere: Path,
) -> None:
    with pytest.raises(pytest.skip.Exception) as skipped:
        helm_or_skip(required=False)
    assert f"{no_helm_anywhere}/cache/bin/" in str(skipped.value)
    assert "helm on PATH" in str(skipped.value)
    with pytest.raises(pytest.fail.Exception, match="--drakit-require-tools was given"):
        helm_or_skip(required=True)
