"""The checkpoint's fault file system, for real: a tmpfs that fills up and turns read-only
under the node plugin's own checkpoint writer, and is unmounted even after SIGKILL."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drakit.node_plugin.checkpoint import COMPLETED, Checkpoint, ClaimEntry
from soak.faultfs import (
    FaultFs,
    FaultFsError,
    can_mount,
    faultfs_mounts,
    is_mounted,
    records_dir,
    sweep_leftovers,
)

pytestmark = pytest.mark.skipif(not can_mount(), reason="mounting a tmpfs needs root")

UID = "0b6c1a52-3e0e-4a47-9d56-111111111111"


@pytest.fixture
def faultfs(tmp_path: Path) -> Iterator[FaultFs]:
    with FaultFs(tmp_path / "plugin", size_bytes=256 * 1024) as fs:
        yield fs
    assert not is_mounted(tmp_path / "plugin")


def entry(uid: str = UID) -> ClaimEntry:
    return ClaimEntry(uid, "ns", "claim", COMPLETED)


def test_a_full_file_system_fails_checkpoint_writes_until_emptied(faultfs: FaultFs) -> None:
    # Every save writes a snapshot (a new file): a short journal append could still fit
    # in the journal's last page, which tmpfs allocated before it filled up.
    checkpoint = Checkpoint(
        faultfs.mountpoint / "checkpoint.json", boot_id=lambda: "boot", compact_bytes=0
    )
    checkpoint.refresh()
    checkpoint.put(entry())
    checkpoint.save()
    assert faultfs.fill() > 0
    checkpoint.put(entry("0b6c1a52-3e0e-4a47-9d56-222222222222"))
    with pytest.raises(OSError) as failed:
        checkpoint.save()
    assert failed.value.errno == errno.ENOSPC
    faultfs.unfill()
    checkpoint.save()
    reread = Checkpoint(checkpoint.path, boot_id=lambda: "boot", compact_bytes=0)
    reread.refresh()
    assert len(reread.entries()) == 2


def test_a_read_only_file_system_fails_writes_until_restored(faultfs: FaultFs) -> None:
    target = faultfs.mountpoint / "file"
    target.write_text("before")
    faultfs.read_only()
    with pytest.raises(OSError) as failed:
        target.write_text("during")
    assert failed.value.errno == errno.EROFS
    assert target.read_text() == "before"
    faultfs.read_write()
    target.write_text("after")
    assert target.read_text() == "after"


def test_unmount_leaves_no_mount_and_no_record(tmp_path: Path) -> None:
    fs = FaultFs(tmp_path / "m").mount()
    assert is_mounted(fs.mountpoint) and fs.record.exists()
    fs.unmount()
    fs.unmount()  # idempotent
    assert not is_mounted(fs.mountpoint) and not fs.record.exists()


def test_a_mount_would_not_hide_existing_files(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "checkpoint.json").write_text("{}")
    with pytest.raises(FaultFsError, match="is not empty"):
        FaultFs(tmp_path / "data").mount()
    assert not is_mounted(tmp_path / "data")


def test_bad_arguments_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not an absolute path"):
        FaultFs(Path("relative"))
    with pytest.raises(ValueError, match="size"):
        FaultFs(Path("/tmp/x"), size_bytes=1)


def test_the_mount_of_a_killed_process_is_swept_by_the_next_start(tmp_path: Path) -> None:
    point = tmp_path / "orphan"
    script = (
        "import sys, time; from pathlib import Path; from soak.faultfs import FaultFs; "
        f"FaultFs(Path({str(point)!r})).mount(); print('mounted', flush=True); time.sleep(600)"
    )
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{tests}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "mounted"
        assert point in faultfs_mounts()
        assert point not in sweep_leftovers()  # its owner is alive: left alone
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    assert point in faultfs_mounts()  # SIGKILL: no clean-up ran
    assert point in sweep_leftovers()
    assert point not in faultfs_mounts() and not is_mounted(point)
    assert not [r for r in records_dir().glob("faultfs-*.json") if str(point) in r.read_text()]
