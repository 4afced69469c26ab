"""A rollback's node state: each earlier release takes over what this release prepared.

The other direction of tests/unit/node_plugin/test_release_checkpoints.py (this release reads
each release's state). This release prepares the claims of the release's fixture
(tests/fixtures/releases/<tag>/manifest.json: the same claims, backend settings and boot ID)
on real files; then the release itself, from a worktree of its tag and its own venv
(hack/build-release.sh --no-image, ``make venv``), runs ``hack/release_fixtures.py
--take-over`` on those files: it prepares each claim again, as the kubelet's retry after the
rollback does, and unprepares it. The first run makes the release's venv (about a minute);
later runs reuse it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.releases import REPO_ROOT, Release, build_release, earlier_release_tags, make_venv

from drakit.kubeapi.errors import NotFound
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.checkpoint import FILE_NAME, Checkpoint, journal_path_of
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import CallContext, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.serialize import SerializeLock
from drakit.plugin import ClaimRef

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "releases"
TAKE_OVER = REPO_ROOT / "hack" / "release_fixtures.py"


class Claims:
    """ResourceClaims by (namespace, name), as the API server returns them."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}

    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]:
        try:
            return self.objects[(namespace or "", name)]
        except KeyError:
            raise NotFound(f"{namespace}/{name} not found", code=404) from None


@pytest.fixture(params=earlier_release_tags() or [None], ids=str)
def release(request: pytest.FixtureRequest) -> Release:
    """An earlier release's tree with its own venv."""
    if request.param is None:
        pytest.skip("this checkout has no release tag older than its version (git fetch --tags)")
    release = build_release(request.param, image=False)
    make_venv(release)
    return release


def prepare_with_this_release(root: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's claims prepared (and the not-kept ones unprepared) by this release, on
    files under ``root`` laid out as the release's take-over expects; devices per claim."""
    for sub in ("registry", "plugins", "cdi"):
        (root / sub).mkdir(parents=True)
    config = PluginConfig(
        driver_name=manifest["driver"], node_name=manifest["node"], kubeconfig=None,
        registrar_dir=root / "registry", plugins_dir=root / "plugins", cdi_root=root / "cdi",
        backend="example",
    )  # fmt: skip
    backend = load_backend(
        "example", driver_name=config.driver_name, node_name=config.node_name,
        config=manifest["backendConfig"],
    )  # fmt: skip
    claims = Claims([c["object"] for c in manifest["claims"]])
    core = PrepareCore(
        config, PluginMetrics(), backend, claims,  # type: ignore[arg-type]
        boot_id=lambda: str(manifest["bootID"]),
    )  # fmt: skip
    call = CallContext("r1", SerializeLock(config.plugin_data_dir / "serialize.lock"))
    prepared = {}
    core.start()
    try:
        for claim in manifest["claims"]:  # one call each, as the release's fixture was made
            meta = claim["object"]["metadata"]
            ref = ClaimRef(meta["namespace"], meta["uid"], meta["name"])
            outcome = core.prepare([ref], call)[ref.uid]
            assert outcome.error == ""
            prepared[meta["name"]] = [
                (d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in outcome.devices
            ]
            if not claim["preparedAtEnd"]:
                assert core.unprepare([ref], call)[ref.uid] == ""
                del prepared[meta["name"]]
    finally:
        core.stop()
        backend.close()
    # This release's files, journal included: the snapshot alone would not hold the claims.
    assert journal_path_of(config.plugin_data_dir / FILE_NAME).stat().st_size > 0
    return prepared


def test_an_earlier_release_prepares_again_and_unprepares_what_this_release_prepared(
    release: Release, tmp_path: Path
) -> None:
    manifest_path = FIXTURES / release.tag / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    root = tmp_path / "node"
    ours = prepare_with_this_release(root, manifest)
    proc = subprocess.run(
        [str(release.python), "-I", str(TAKE_OVER), "--source", str(release.source),
         "--root", str(root), "--take-over", str(manifest_path)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert f"v{report['release']}" == release.tag
    assert set(report["claims"]) == set(ours)
    for name, theirs in report["claims"].items():
        assert theirs["prepareError"] == "", name
        devices = [
            (d["pool_name"], d["device_name"], d["cdi_device_ids"]) for d in theirs["prepared"]
        ]
        assert devices == ours[name], name  # from this release's checkpoint, not prepared anew
        assert theirs["unprepareError"] == "", name
    # CDI specs and metadata files gone; only the (empty) checkpoint and journal stay.
    data = f"plugins/{manifest['driver']}"
    assert report["left"] == [f"{data}/{FILE_NAME}", f"{data}/{FILE_NAME}.journal"]
    checkpoint = Checkpoint(root / data / FILE_NAME, boot_id=lambda: str(manifest["bootID"]))
    checkpoint.refresh()
    assert list(checkpoint.entries()) == []
