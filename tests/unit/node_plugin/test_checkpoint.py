"""The checkpoint file: versioned, atomic, boot-aware, tolerant, self-healing."""

from __future__ import annotations

import json
from pathlib import Path

from node_plugin.checkpoint import (
    API_VERSION,
    COMPLETED,
    KIND,
    STARTED,
    Checkpoint,
    ClaimEntry,
)
from node_plugin.driver import PreparedDevice

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
    path = tmp_path / "checkpoint.json"
    doc = {
        "apiVersion": "drakit.dev/v2",
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
        checkpoint = Checkpoint(
            path, boot_id=lambda: "b", on_corrupt=lambda r, _, seen=reasons: seen.append(r)
        )
        checkpoint.refresh()
        assert reasons and checkpoint.entries() == []


def test_missing_checkpoint_is_an_empty_one(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json", boot_id=lambda: "b")
    checkpoint.refresh()
    assert checkpoint.entries() == []
