"""The tools a driver's tests may need beside the cluster: helm, for chart tests.

:func:`find_helm` looks where drakit's launcher looks for its binaries
(drakit.localcluster's rules: ``TEST_ASSET_HELM``, ``$KUBEBUILDER_ASSETS/helm``, drakit's
cache ``$DRAKIT_CACHE_DIR/bin/<Kubernetes version>/helm``, default ``~/.cache/drakit``,
and ``/usr/local/kubebuilder/bin/helm``); in a drakit checkout it builds the pinned helm
there (``hack/build-binaries.sh helm``, needs Go); then it takes ``helm`` from ``PATH``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

__all__ = ["find_helm", "helm_or_skip", "helm_places"]


def find_helm() -> Path | None:
    """helm as described above; None when there is none."""
    from drakit.localcluster import assets  # noqa: PLC0415

    found = assets.find_binary("helm")
    if found is None and assets.repo_root() is not None:
        try:
            found = assets.require_binary("helm", "helm")
        except assets.MissingBinaryError:
            found = None
    if found is None and (on_path := shutil.which("helm")) is not None:
        found = Path(on_path)
    return found


def helm_places() -> list[str]:
    """Where :func:`find_helm` looks, for a message saying so."""
    from drakit.localcluster import assets  # noqa: PLC0415

    return [*(str(p) for p in assets.candidate_paths("helm")), "helm on PATH"]


def helm_or_skip(*, required: bool) -> Path:
    """:func:`find_helm`'s helm; none skips the test saying where it looked, or fails it
    when ``required`` (``--drakit-require-tools``)."""
    found = find_helm()
    if found is None:
        reason = f"helm not found (looked in: {', '.join(helm_places())})"
        if required:
            pytest.fail(f"{reason}; --drakit-require-tools was given", pytrace=False)
        pytest.skip(reason)
    return found
