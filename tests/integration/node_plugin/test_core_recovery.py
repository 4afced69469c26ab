"""Crash safety of the core: SIGKILL mid-prepare, corrupt checkpoint, reboot, half-prepared."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from claims import call, create_claim, result
from conftest import CoreFactory, RecordingEvents

from drakit.kubeapi.resources import Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.checkpoint import FILE_NAME, STARTED, journal_path_of, read_document
from drakit.plugin import ClaimRef

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


def checkpoint_of(root: Path) -> dict[str, object]:
    data: dict[str, object] = read_document(root / "plugins/gpu.example.com" / FILE_NAME)
    return data


def crash_in_prepare(root: Path, kubeconfig: str, ref: ClaimRef, temp_folder: Path) -> None:
    """Prepare ``ref`` in a plugin process that is SIGKILLed inside the backend's prepare;
    its temp folder is ``temp_folder``."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "crash_prepare.py"), str(root), kubeconfig,
         ref.namespace, ref.name, ref.uid],
        env={**os.environ, "PYTHONPATH": str(HERE), "TMPDIR": str(temp_folder)},
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_sigkill_between_started_and_completed_then_restart_completes_the_prepare(
    make_core: CoreFactory,
    claims: Resource,
    namespace: str,
    cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    crash_in_prepare(tmp_path, cluster.kubeconfig, ref, Path(tempfile.gettempdir()))
    claims_in_checkpoint = checkpoint_of(tmp_path)["claims"]
    assert isinstance(claims_in_checkpoint, dict)
    assert claims_in_checkpoint[ref.uid]["state"] == STARTED
    assert list((tmp_path / "cdi").iterdir()) == []

    core = make_core()  # the restarted plugin, with a working backend
    out = core.prepare([ref], call(core.config))[ref.uid]
    assert out.error == "" and [d.device_name for d in out.devices] == ["gpu-1"]
    assert core.cdi.spec_path(ref.uid).exists()
    assert checkpoint_of(tmp_path)["claims"][ref.uid]["state"] == "PrepareCompleted"  # type: ignore[index]


def test_a_plugin_killed_mid_prepare_leaves_no_key_or_certificate_in_the_temp_folder(
    claims: Resource, namespace: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    # The kubeconfig carries the client key inline; a client that copies it to a temp file
    # and deletes the copy only at exit leaves it behind on a SIGKILL.
    ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    temp_folder = tmp_path / "tmp"
    temp_folder.mkdir()
    crash_in_prepare(tmp_path / "plugin", cluster.kubeconfig, ref, temp_folder)
    assert list(temp_folder.iterdir()) == []


def test_prepare_completed_record_torn_in_half_leaves_a_half_prepared_claim_that_prepare_completes(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    first = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert first.prepare([ref], call(first.config))[ref.uid].error == ""
    first.stop()
    journal = journal_path_of(tmp_path / "plugins/gpu.example.com" / FILE_NAME)
    whole = journal.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    journal.write_bytes(whole[: (last_start + len(whole)) // 2])  # power cut mid-record
    assert checkpoint_of(tmp_path)["claims"][ref.uid]["state"] == STARTED  # type: ignore[index]

    restarted = make_core()
    out = restarted.prepare([ref], call(restarted.config))[ref.uid]
    assert out.error == "" and [d.device_name for d in out.devices] == ["gpu-0"]
    assert checkpoint_of(tmp_path)["claims"][ref.uid]["state"] == "PrepareCompleted"  # type: ignore[index]
    assert restarted.metrics.corrupt_checkpoints.get() == 0
    assert restarted.unprepare([ref], call(restarted.config)) == {ref.uid: ""}
    assert checkpoint_of(tmp_path)["claims"] == {}


def test_half_prepared_claim_is_rolled_back_by_unprepare(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    core.prepare([ref], call(core.config))
    entry = core.checkpoint.get(ref.uid)
    assert entry is not None
    core.checkpoint.put(replace(entry, state=STARTED))
    core.checkpoint.save()
    core.stop()
    restarted = make_core()
    assert restarted.unprepare([ref], call(restarted.config)) == {ref.uid: ""}
    assert not restarted.cdi.spec_path(ref.uid).exists()
    assert checkpoint_of(tmp_path)["claims"] == {}


def test_corrupt_checkpoint_is_moved_aside_reported_and_rebuilt_from_cdi_specs(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    first = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    answer = first.prepare([ref], call(first.config))
    first.stop()
    path = tmp_path / "plugins/gpu.example.com" / FILE_NAME
    path.write_text('{"apiVersion": "drakit.dev/v1", "kind": "NodePluginCheck')
    events = RecordingEvents()
    restarted = make_core(events=events)
    assert [p.name for p in path.parent.glob(f"{FILE_NAME}.corrupt-*")]
    assert events.events[0][1] == "CheckpointCorrupt"
    assert events.events[0][0]["kind"] == "Node"
    assert restarted.metrics.corrupt_checkpoints.get() == 1
    # the plugin keeps serving: the rebuilt checkpoint knows the claim
    assert restarted.prepare([ref], call(restarted.config)) == answer
    other = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert (
        "allocated exclusively"
        in restarted.prepare([other], call(restarted.config))[other.uid].error
    )


def test_changed_boot_id_drops_stale_prepared_claims_and_their_cdi_specs(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    first = make_core(boot_id=lambda: "boot-1")
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    first.prepare([ref], call(first.config))
    first.stop()
    rebooted = make_core(boot_id=lambda: "boot-2")
    assert checkpoint_of(tmp_path)["claims"] == {}
    assert checkpoint_of(tmp_path)["bootID"] == "boot-2"
    assert not rebooted.cdi.spec_path(ref.uid).exists()
    assert rebooted.metrics.prepared_claims.get() == 0


def test_checkpoint_keeps_fields_it_does_not_know(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    first = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    first.prepare([ref], call(first.config))
    first.stop()
    path = tmp_path / "plugins/gpu.example.com" / FILE_NAME
    data = read_document(path)
    data.pop("journalEpoch", None)  # as a version that writes a snapshot without a journal
    data["futureField"] = {"x": 1}
    data["claims"][ref.uid]["futureClaimField"] = "kept"
    path.write_text(json.dumps(data))
    second = make_core()
    other = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    second.prepare([other], call(second.config))
    written = read_document(path)
    assert written["futureField"] == {"x": 1}
    assert written["claims"][ref.uid]["futureClaimField"] == "kept"


def test_prepared_claim_whose_cdi_spec_vanished_is_prepared_again(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    answer = core.prepare([ref], call(core.config))
    core.cdi.spec_path(ref.uid).unlink()
    assert core.prepare([ref], call(core.config)) == answer
    assert core.cdi.spec_path(ref.uid).exists()
