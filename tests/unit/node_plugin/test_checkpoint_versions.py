"""The checkpoint's format versions: what this release reads, writes and refuses.

The snapshot's version is its ``apiVersion`` (``drakit.dev/v1``), the journal's the
``version`` of its header (1, and 1 when absent: drakit 0.1.0 wrote none). A newer version is
refused, on every load, and the files are left exactly as they are: never moved aside as
corrupt, rebuilt or rewritten, since the release that wrote them may be back soon (a roll
forward after a rollback). Files of real releases: test_release_checkpoints.py.
"""

from __future__ import annotations

import json
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest

from drakit.node_plugin.checkpoint import (
    API_VERSION,
    COMPLETED,
    FILE_NAME,
    JOURNAL_VERSION,
    KIND,
    Checkpoint,
    ClaimEntry,
    CorruptCheckpointError,
    UnsupportedCheckpointError,
    journal_path_of,
    read_document,
)
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import CallContext, PluginConfig, PreparedDevice
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.serialize import SerializeLock
from drakit.plugin import ClaimRef

DEVICE = PreparedDevice(("gpu",), "pool", "gpu-0", ("k8s.d/claim=u1-gpu-0",), None)
EPOCH = "0123456789abcdef"


def entry(uid: str = "u1") -> ClaimEntry:
    return ClaimEntry(uid, "ns", "c", COMPLETED, ({"request": "gpu"},), (DEVICE,), {"k": 1})


def record(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return body + b"\t" + f"{zlib.crc32(body):08x}".encode() + b"\n"


def write_snapshot(path: Path, api_version: str = API_VERSION, **extra: Any) -> None:
    document = {"apiVersion": api_version, "kind": KIND, "bootID": "b", "journalEpoch": EPOCH}
    document["claims"] = {"u1": entry().to_json()}
    path.write_text(json.dumps({**document, **extra}))


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_snapshot_of_a_newer_format_is_refused_on_every_load_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / FILE_NAME
    write_snapshot(path, "drakit.dev/v2")
    journal_path_of(path).write_bytes(record({"epoch": EPOCH, "version": 2}))
    before = files_of(tmp_path)
    corrupt: list[str] = []
    checkpoint = Checkpoint(
        path, boot_id=lambda: "other-boot", on_corrupt=lambda r, _: corrupt.append(r)
    )
    for _ in range(2):
        with pytest.raises(UnsupportedCheckpointError) as refused:
            checkpoint.refresh()
        message = str(refused.value)
        assert str(path) in message and "drakit.dev/v2" in message and API_VERSION in message
        assert "newer drakit" in message and "docs/upgrade.md" in message
    # Not corrupt, not an earlier boot's state to drop: untouched.
    assert corrupt == [] and files_of(tmp_path) == before


def test_a_journal_of_a_newer_format_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    write_snapshot(path)
    journal_path_of(path).write_bytes(
        record({"epoch": EPOCH, "version": JOURNAL_VERSION + 1})
        + record({"put": {"u2": entry("u2").to_json()}, "remove": []})
        + b'{"put": {}, "rem'  # a torn end a version-1 reader would cut off
    )
    before = files_of(tmp_path)
    with pytest.raises(UnsupportedCheckpointError, match=r"journal is format version 2"):
        Checkpoint(path, boot_id=lambda: "b").refresh()
    with pytest.raises(UnsupportedCheckpointError):
        read_document(path)
    assert files_of(tmp_path) == before


def test_a_journal_header_without_a_version_is_version_1(tmp_path: Path) -> None:
    # As drakit 0.1.0 writes it: {"epoch": E}.
    path = tmp_path / FILE_NAME
    write_snapshot(path)
    journal_path_of(path).write_bytes(
        record({"epoch": EPOCH}) + record({"put": {"u2": entry("u2").to_json()}, "remove": []})
    )
    checkpoint = Checkpoint(path, boot_id=lambda: "b")
    checkpoint.refresh()
    assert [e.uid for e in checkpoint.entries()] == ["u1", "u2"]


def test_this_release_writes_snapshot_and_journal_with_their_versions(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    checkpoint = Checkpoint(path, boot_id=lambda: "b")
    checkpoint.refresh()
    checkpoint.put(entry())
    checkpoint.save()
    assert json.loads(path.read_text())["apiVersion"] == API_VERSION == "drakit.dev/v1"
    header = journal_path_of(path).read_bytes().split(b"\n")[0].rpartition(b"\t")[0]
    assert json.loads(header)["version"] == JOURNAL_VERSION == 1


@pytest.mark.parametrize(
    ("api_version", "journal_version"),
    [("drakit.dev/v1beta1", 1), ("drakit.dev/vnext", 1), ("drakit.dev/v²", 1),
     ("drakit.dev/v" + "9" * 5000, 1), (API_VERSION, "2"), (API_VERSION, True),
     (API_VERSION, 0), (API_VERSION, None)],
)  # fmt: skip
def test_a_version_that_is_no_version_number_is_corrupt_not_newer(
    tmp_path: Path, api_version: str, journal_version: Any
) -> None:
    path = tmp_path / FILE_NAME
    write_snapshot(path, api_version)
    journal_path_of(path).write_bytes(record({"epoch": EPOCH, "version": journal_version}))
    with pytest.raises(CorruptCheckpointError):
        read_document(path)


def test_fields_a_newer_release_adds_are_kept_from_snapshot_and_journal(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    write_snapshot(path, newTop={"x": 1})
    document = json.loads(path.read_text())
    document["claims"]["u1"]["newEntryField"] = [1]
    path.write_text(json.dumps(document))
    journaled = {**entry("u2").to_json(), "newEntryField": "journaled"}
    journal_path_of(path).write_bytes(
        record({"epoch": EPOCH, "version": 1, "newHeaderField": 1})
        + record({"put": {"u2": journaled}, "remove": []})
    )
    checkpoint = Checkpoint(path, boot_id=lambda: "b", compact_bytes=0)
    checkpoint.refresh()
    checkpoint.put(entry("u3"))
    checkpoint.save()  # compact_bytes=0: a new snapshot holds everything
    written = json.loads(path.read_text())
    assert written["newTop"] == {"x": 1}
    assert written["claims"]["u1"]["newEntryField"] == [1]
    assert written["claims"]["u2"]["newEntryField"] == "journaled"
    # An entry this release puts again (a re-prepare) keeps the fields it did not know.
    checkpoint.put(entry("u1"))
    checkpoint.save()
    assert json.loads(path.read_text())["claims"]["u1"]["newEntryField"] == [1]


def test_a_plugin_with_a_newer_checkpoint_starts_and_refuses_each_call(tmp_path: Path) -> None:
    for sub in ("registry", "plugins", "cdi"):
        (tmp_path / sub).mkdir()
    config = PluginConfig(
        driver_name="gpu.example.com", node_name="node-a", kubeconfig=None,
        registrar_dir=tmp_path / "registry", plugins_dir=tmp_path / "plugins",
        cdi_root=tmp_path / "cdi", backend="example",
    )  # fmt: skip
    config.plugin_data_dir.mkdir(parents=True)
    write_snapshot(config.plugin_data_dir / FILE_NAME, "drakit.dev/v3")
    before = files_of(config.plugin_data_dir)
    from drakit.node_plugin.backend_loader import load_backend  # noqa: PLC0415

    backend = load_backend("example", driver_name=config.driver_name, node_name="node-a")
    core = PrepareCore(config, PluginMetrics(), backend, claims_api=None, boot_id=lambda: "b")  # type: ignore[arg-type]
    try:
        core.start()  # no raise: the plugin keeps serving what it can
        lock = SerializeLock(config.plugin_data_dir / "serialize.lock")
        ref = ClaimRef("ns", str(uuid.uuid4()), "c")
        with pytest.raises(UnsupportedCheckpointError, match=r"drakit\.dev/v3"):
            core.unprepare([ref], CallContext("r1", lock))
    finally:
        core.stop()
        backend.close()
    before["serialize.lock"] = b""
    assert files_of(config.plugin_data_dir) == before
