"""The checkpoint: versioned, journaled, torn-write safe, boot-aware, tolerant, self-healing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from drakit.node_plugin import checkpoint as checkpoint_module
from drakit.node_plugin.checkpoint import (
    API_VERSION,
    COMPLETED,
    KIND,
    STARTED,
    Checkpoint,
    ClaimEntry,
    journal_path_of,
    read_document,
)
from drakit.node_plugin.driver import PreparedDevice

DEVICE = PreparedDevice(("gpu",), "pool", "gpu-0", ("k8s.d/claim=u1-gpu-0",), None)


def entry(uid: str = "u1", state: str = COMPLETED) -> ClaimEntry:
    return ClaimEntry(uid, "ns", "c", state, ({"request": "gpu"},), (DEVICE,), {"k": 1})


def test_checkpoint_round_trips_entries_with_version_and_boot_id(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    first = Checkpoint(path, boot_id=lambda: "b1")
    first.refresh()
    first.put(entry("u1"), entry("u2", STARTED))
    first.save()
    document = json.loads(path.read_text())
    assert (document["apiVersion"], document["kind"], document["bootID"]) == (
        API_VERSION,
        KIND,
        "b1",
    )
    second = Checkpoint(path, boot_id=lambda: "b1")
    second.refresh()
    assert second.get("u1") == entry("u1")
    assert second.get("u2") == entry("u2", STARTED)
    assert not second.get("u2").completed  # type: ignore[union-attr]


def test_checkpoint_refresh_sees_another_writers_changes(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    ours, theirs = Checkpoint(path, boot_id=lambda: "b"), Checkpoint(path, boot_id=lambda: "b")
    ours.refresh()
    theirs.refresh()
    theirs.put(entry("u9"))
    theirs.save()
    ours.refresh()
    assert ours.get("u9") == entry("u9")


def test_checkpoint_from_another_boot_drops_prepared_claims(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    old = Checkpoint(path, boot_id=lambda: "b1")
    old.refresh()
    old.put(entry("u1"))
    old.save()
    new = Checkpoint(path, boot_id=lambda: "b2")
    new.refresh()
    assert new.entries() == []
    assert [e.uid for e in new.dropped_after_reboot] == ["u1"]
    assert json.loads(path.read_text())["bootID"] == "b2"


def test_checkpoint_keeps_unknown_fields_of_newer_versions(tmp_path: Path) -> None:
    # A newer release that adds fields keeps the format's version (a new version is for
    # changes an older reader would misread: tests/unit/node_plugin/test_checkpoint_versions.py).
    path = tmp_path / "checkpoint.json"
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "bootID": "b",
        "newTop": [1, 2],
        "claims": {"u1": {**entry().to_json(), "newField": {"a": "b"}}},
    }
    path.write_text(json.dumps(doc))
    checkpoint = Checkpoint(path, boot_id=lambda: "b")
    checkpoint.refresh()
    checkpoint.put(entry("u2"))
    checkpoint.save()
    written = json.loads(path.read_text())
    assert written["newTop"] == [1, 2]
    assert written["claims"]["u1"]["newField"] == {"a": "b"}


def test_corrupt_checkpoint_is_moved_aside_reported_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text("{not json")
    reported: list[tuple[str, Path]] = []
    checkpoint = Checkpoint(
        path,
        boot_id=lambda: "b",
        on_corrupt=lambda reason, aside: reported.append((reason, aside)),
        rebuild=lambda: [entry("u7")],
    )
    checkpoint.refresh()
    assert checkpoint.get("u7") == entry("u7")
    ((reason, aside),) = reported
    assert "not JSON" in reason
    assert aside.read_text() == "{not json"
    assert json.loads(path.read_text())["claims"]["u7"]["state"] == COMPLETED


def test_checkpoint_with_wrong_kind_or_bad_state_counts_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    for bad in (
        {"apiVersion": "v1", "kind": "ConfigMap"},
        {"apiVersion": API_VERSION, "kind": KIND, "claims": {"u": {"state": "Half"}}},
        {"apiVersion": API_VERSION, "kind": KIND, "claims": []},
    ):
        path.write_text(json.dumps(bad))
        reasons: list[str] = []

        def report(reason: str, _aside: Path, seen: list[str] = reasons) -> None:
            seen.append(reason)

        checkpoint = Checkpoint(path, boot_id=lambda: "b", on_corrupt=report)
        checkpoint.refresh()
        assert reasons and checkpoint.entries() == []


def test_missing_checkpoint_is_an_empty_one(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json", boot_id=lambda: "b")
    checkpoint.refresh()
    assert checkpoint.entries() == []


def saved(path: Path, *entries: ClaimEntry, compact_bytes: int = 1 << 20) -> Checkpoint:
    checkpoint = Checkpoint(path, boot_id=lambda: "b", compact_bytes=compact_bytes)
    checkpoint.refresh()
    for one in entries:
        checkpoint.put(one)
        checkpoint.save()
    return checkpoint


def reopened(path: Path) -> Checkpoint:
    checkpoint = Checkpoint(path, boot_id=lambda: "b")
    checkpoint.refresh()
    return checkpoint


def test_saves_after_the_first_append_journal_records_and_leave_the_snapshot_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint = saved(path, entry("u1", STARTED))
    snapshot = path.read_bytes()
    checkpoint.put(entry("u1", COMPLETED))
    checkpoint.save()
    checkpoint.remove("u1")
    checkpoint.put(entry("u2"))
    checkpoint.save()
    assert path.read_bytes() == snapshot
    assert len(journal_path_of(path).read_bytes().splitlines()) == 3  # header + 2 records
    assert [e.uid for e in reopened(path).entries()] == ["u2"]
    assert list(read_document(path)["claims"]) == ["u2"]


def test_record_cut_in_half_by_a_crash_is_dropped_and_the_earlier_state_recovered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    saved(path, entry("u1", STARTED), entry("u1", COMPLETED))
    journal = journal_path_of(path)
    whole = journal.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    for cut in (last_start + 1, (last_start + len(whole)) // 2, len(whole) - 1):
        journal.write_bytes(whole[:cut])  # the PrepareCompleted record, torn
        recovered = reopened(path)
        assert recovered.get("u1") == entry("u1", STARTED)  # phase 1 held; phase 2 never acked
        assert journal.read_bytes() == whole[:last_start]  # the torn tail is cut off
        recovered.put(entry("u1", COMPLETED))
        recovered.save()  # appending after the repair gives a readable journal again
        assert reopened(path).get("u1") == entry("u1", COMPLETED)


def test_last_record_with_a_wrong_checksum_counts_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    saved(path, entry("u1", STARTED), entry("u1", COMPLETED))
    journal = journal_path_of(path)
    data = bytearray(journal.read_bytes())
    data[-12] ^= 0x01  # a flipped bit inside the last record's JSON
    journal.write_bytes(bytes(data))
    assert reopened(path).get("u1") == entry("u1", STARTED)


def test_damaged_record_before_whole_ones_is_corruption_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    saved(path, entry("u1", STARTED), entry("u1", COMPLETED), entry("u2"))
    journal = journal_path_of(path)
    lines = journal.read_bytes().split(b"\n")
    lines[1] = lines[1][:5]
    journal.write_bytes(b"\n".join(lines))
    reported: list[str] = []
    checkpoint = Checkpoint(
        path,
        boot_id=lambda: "b",
        on_corrupt=lambda reason, _: reported.append(reason),
        rebuild=lambda: [entry("u7")],
    )
    checkpoint.refresh()
    assert reported == ["journal record 1 is damaged"]
    assert [e.uid for e in checkpoint.entries()] == ["u7"]
    assert [e.uid for e in reopened(path).entries()] == ["u7"]


def test_full_journal_is_compacted_into_a_new_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint = saved(path, entry("u0"), compact_bytes=2000)
    first_epoch = json.loads(path.read_text())["journalEpoch"]
    for n in range(1, 20):
        checkpoint.put(entry(f"u{n}"))
        checkpoint.save()
    assert json.loads(path.read_text())["journalEpoch"] != first_epoch
    assert journal_path_of(path).stat().st_size <= 2000 + 1000
    assert sorted(e.uid for e in reopened(path).entries()) == sorted(f"u{n}" for n in range(20))


def test_crash_between_new_snapshot_and_journal_reset_replays_nothing_stale(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    saved(path, entry("u1"), entry("u2"))
    old_journal = journal_path_of(path).read_bytes()
    rebooted = Checkpoint(path, boot_id=lambda: "b2")
    rebooted.refresh()  # drops u1 and u2, writes a snapshot and a new journal
    journal_path_of(path).write_bytes(old_journal)  # as if the reset never reached the disk
    again = Checkpoint(path, boot_id=lambda: "b2")
    again.refresh()
    assert again.entries() == []
    again.put(entry("u3"))
    again.save()  # the stale journal is not appended to: a snapshot is written instead
    assert [e.uid for e in reopened_b2(path)] == ["u3"]


def reopened_b2(path: Path) -> list[ClaimEntry]:
    checkpoint = Checkpoint(path, boot_id=lambda: "b2")
    checkpoint.refresh()
    return checkpoint.entries()


def test_claims_prepared_after_a_reboot_with_an_empty_checkpoint_survive_a_reload(
    tmp_path: Path,
) -> None:
    # The earlier boot left a snapshot without claims. Claims of this boot journaled on
    # top of it must not be taken for the earlier boot's when the files are read again.
    path = tmp_path / "checkpoint.json"
    old = saved_checkpoint(path, "b1", entry("u0"))
    old.remove("u0")
    old.save()
    saved_checkpoint(path, "b2", entry("u1"))
    reloaded = saved_checkpoint(path, "b2")
    assert reloaded.get("u1") == entry("u1")
    assert reloaded.dropped_after_reboot == []


def saved_checkpoint(path: Path, boot: str, *entries: ClaimEntry) -> Checkpoint:
    """The checkpoint at ``path`` as a plugin of boot ``boot`` loads it, with ``entries``
    put and saved (none: just loaded)."""
    checkpoint = Checkpoint(path, boot_id=lambda: boot)
    checkpoint.refresh()
    if entries:
        checkpoint.put(*entries)
        checkpoint.save()
    return checkpoint


def count_fdatasyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors the checkpoint module fdatasyncs, in order (the calls still run)."""
    calls: list[int] = []
    real = os.fdatasync

    def recording(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    return calls


def test_a_record_saved_without_flush_is_read_by_the_next_process_and_not_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.json"
    writer = saved_checkpoint(path, "b", entry("u0"))  # a snapshot and its journal
    flushes = count_fdatasyncs(monkeypatch)
    writer.put(entry("u1", STARTED))
    writer.save(flush=False)
    assert flushes == []
    # What a restarted plugin reads after a SIGKILL here: the same files, no flush.
    assert saved_checkpoint(path, "b").get("u1") == entry("u1", STARTED)


def test_a_flushing_save_flushes_earlier_unflushed_records_even_when_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = saved_checkpoint(tmp_path / "checkpoint.json", "b", entry("u0"))
    flushes = count_fdatasyncs(monkeypatch)
    checkpoint.put(entry("u1", STARTED))
    checkpoint.save(flush=False)
    checkpoint.save()  # nothing new, but the STARTED record is not on the disk yet
    assert len(flushes) == 1
    checkpoint.save()  # now there is nothing left to flush
    assert len(flushes) == 1
    checkpoint.put(entry("u1"))
    checkpoint.save(flush=False)
    checkpoint.put(entry("u2"))
    checkpoint.save()  # one flush covers both records of the one file
    assert len(flushes) == 2


def test_a_save_after_a_failed_journal_reset_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a reboot the snapshot is rewritten (new boot id, new epoch); when the journal
    # reset fails, the journal keeps the old header: records appended to it are never
    # replayed.
    path = tmp_path / "checkpoint.json"
    saved(path, entry("u0"))
    real_start = checkpoint_module._start_journal

    def disk_full(journal: Path, epoch: str) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_module, "_start_journal", disk_full)
    rebooted = Checkpoint(path, boot_id=lambda: "after-reboot")
    with pytest.raises(OSError):
        rebooted.refresh()
    monkeypatch.setattr(checkpoint_module, "_start_journal", real_start)
    rebooted.put(entry("after"))
    rebooted.save()
    again = Checkpoint(path, boot_id=lambda: "after-reboot")
    again.refresh()
    assert [e.uid for e in again.entries()] == ["after"]
