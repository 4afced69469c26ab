"""A small tmpfs that a test can make full or read-only, for the node plugin's checkpoint.

``FaultFs(mountpoint, size_bytes)`` mounts a tmpfs (source name :data:`SOURCE`, so its
mounts are recognisable in ``/proc/self/mountinfo``) on an empty folder; the soak points a
node plugin's data folder (where ``checkpoint.json`` lives) at it. Then:

* :meth:`FaultFs.fill` writes a filler file until the file system says ENOSPC, so every
  later write that needs a new page fails (a snapshot's temp file, a CDI spec, a journal
  append across a page boundary; tmpfs allocates whole pages, so a short append into a
  file's last page still succeeds); :meth:`FaultFs.unfill` deletes the filler.
* :meth:`FaultFs.read_only` remounts it read-only (EROFS on every write);
  :meth:`FaultFs.read_write` restores it.
* :meth:`FaultFs.unmount` unmounts it (lazily: a plugin may hold a file open).

Cleaning up after a crash: before mounting, a record ``faultfs-<pid>-<token>.json`` naming
the owner and the mount point is written to the launcher's registry folder
(``drakit.localcluster.leftovers.registry_dir() / "faultfs"``); it is removed after the
unmount. :func:`sweep_leftovers` (called by every :meth:`FaultFs.mount`, and callable by a
soak at start) unmounts each :data:`SOURCE` tmpfs whose record's owner is gone — a test
killed with SIGKILL — and each one without any record. Mounts of live owners (another
run on the same machine) are left alone. An ``atexit`` hook unmounts on a normal exit.

Needs root (``mount``); :func:`can_mount` says whether this process may.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import subprocess
import uuid
from pathlib import Path

from drakit.localcluster.leftovers import process_alive, registry_dir

#: The tmpfs "device" name of every mount made here: how the sweep recognises them.
SOURCE = "drakit-soak-faultfs"
FILLER = ".faultfs-filler"
MIN_SIZE = 64 * 1024
MAX_SIZE = 256 * 1024 * 1024
_LIVE: dict[str, FaultFs] = {}  # token -> mounted by this process


class FaultFsError(RuntimeError):
    """A mount operation failed; the message names the mount point and the reason."""


def can_mount() -> bool:
    """Whether this process may mount (root), as the tests and the soak need."""
    return os.geteuid() == 0


def records_dir() -> Path:
    return registry_dir() / "faultfs"


class FaultFs:
    """One tmpfs on ``mountpoint`` (absolute, empty or absent); a context manager."""

    def __init__(self, mountpoint: Path, size_bytes: int = 4 * 1024 * 1024) -> None:
        if not mountpoint.is_absolute():
            raise ValueError(f"faultfs: mount point {mountpoint} is not an absolute path")
        if not MIN_SIZE <= size_bytes <= MAX_SIZE:
            raise ValueError(f"faultfs: size {size_bytes} is not in [{MIN_SIZE}, {MAX_SIZE}]")
        self.mountpoint = mountpoint
        self.size_bytes = size_bytes
        self.token = uuid.uuid4().hex[:12]
        self.record = records_dir() / f"faultfs-{os.getpid()}-{self.token}.json"
        self.mounted = False

    def __enter__(self) -> FaultFs:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def mount(self) -> FaultFs:
        """Sweep leftovers, record, then mount; FaultFsError (nothing mounted) on failure."""
        sweep_leftovers()
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if any(self.mountpoint.iterdir()):
            raise FaultFsError(f"faultfs: {self.mountpoint} is not empty (a mount would hide it)")
        if is_mounted(self.mountpoint):
            raise FaultFsError(f"faultfs: {self.mountpoint} is already a mount point")
        self.record.parent.mkdir(parents=True, exist_ok=True)
        self.record.write_text(
            json.dumps({"ownerPid": os.getpid(), "mountpoint": str(self.mountpoint)})
        )
        options = f"size={self.size_bytes},mode=0755"
        try:
            _run("mount", "-t", "tmpfs", "-o", options, SOURCE, str(self.mountpoint))
        except FaultFsError:
            self.record.unlink(missing_ok=True)
            raise
        self.mounted = True
        _LIVE[self.token] = self
        return self

    def fill(self) -> int:
        """Fill the file system (a filler file) until writes fail with ENOSPC; returns the
        filler's size. Files written before stay readable; appends to them fail."""
        fd = os.open(self.mountpoint / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        written = 0
        try:
            for chunk in (1 << 16, 1 << 12, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        written += os.write(fd, block)
                    except OSError as err:
                        if err.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)
        return written

    def unfill(self) -> None:
        """Delete the filler: writes succeed again."""
        (self.mountpoint / FILLER).unlink(missing_ok=True)

    def read_only(self) -> None:
        _run("mount", "-o", "remount,ro", str(self.mountpoint))

    def read_write(self) -> None:
        _run("mount", "-o", "remount,rw", str(self.mountpoint))

    def unmount(self) -> None:
        """Unmount (lazily) and drop the record; idempotent."""
        if self.mounted and is_mounted(self.mountpoint):
            _run("umount", "-l", str(self.mountpoint))
        self.mounted = False
        _LIVE.pop(self.token, None)
        self.record.unlink(missing_ok=True)


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        raise FaultFsError(f"faultfs: {' '.join(argv)} failed: {proc.stderr.strip()}")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as three octal digits."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def faultfs_mounts() -> list[Path]:
    """Mount points of every :data:`SOURCE` tmpfs in this mount namespace."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) > 4 and len(tail) > 1 and tail[0] == "tmpfs" and tail[1] == SOURCE:
            found.append(Path(_unescape(fields[4])))
    return found


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point (of any file system)."""
    target = str(path)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == target:
            return True
    return False


def sweep_leftovers() -> list[Path]:
    """Unmount the faultfs mounts of dead owners (and unrecorded ones); returns them.

    Mounts are listed before records are read: a record is written before its mount, so
    every mount seen here already has its record if its owner is alive.
    """
    mounted = faultfs_mounts()
    live_points: set[str] = set()
    for record in sorted(records_dir().glob("faultfs-*.json")):
        owner, point = _read_record(record)
        token = record.stem.rsplit("-", 1)[-1]
        if owner is not None and (
            (owner == os.getpid() and token in _LIVE)
            or (owner != os.getpid() and process_alive(owner))
        ):
            live_points.add(point)
            continue
        if Path(point) not in mounted:
            record.unlink(missing_ok=True)  # its owner died after unmounting
    swept: list[Path] = []
    for mount in mounted:
        if str(mount) in live_points:
            continue
        with contextlib.suppress(FaultFsError):
            _run("umount", "-l", str(mount))
            swept.append(mount)
    for record in sorted(records_dir().glob("faultfs-*.json")):
        if Path(_read_record(record)[1]) in swept:
            record.unlink(missing_ok=True)
    return swept


def _read_record(record: Path) -> tuple[int | None, str]:
    try:
        data = json.loads(record.read_text())
        return int(data["ownerPid"]), str(data["mountpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, ""


@atexit.register
def _unmount_at_exit() -> None:
    for fs in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            fs.unmount()
