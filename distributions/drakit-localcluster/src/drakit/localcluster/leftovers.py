"""A registry of running local clusters, so that a run that was killed
(SIGKILL, a crashed CI job) is cleaned up by the next one.

Each launcher writes ``<registry>/<launcher pid>-<token>.json`` naming its child
processes (pid and executable) and the folders it owns. At start-up every
record whose launcher is gone is swept: its children are killed only when
``/proc/<pid>/exe`` still points at the recorded executable, so a recycled
pid is never hit; what is mounted inside its folders (the chaos soak's tmpfs)
is unmounted before they are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: Tokens of the clusters this process runs now. A record that names this
#: process but another token was left by an earlier process whose pid was
#: recycled, and is swept like any other dead launcher's.
_LIVE_TOKENS: set[str] = set()
MOUNTINFO = Path("/proc/self/mountinfo")


def registry_dir() -> Path:
    base = Path(os.environ.get("DRAKIT_CACHE_DIR", Path.home() / ".cache" / "drakit"))
    return base / "run"


@dataclass
class RunRecord:
    """What one launcher owns."""

    owner_pid: int
    token: str
    processes: list[tuple[int, str]] = field(default_factory=list)  # (pid, executable)
    owned_dirs: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return registry_dir() / f"{self.owner_pid}-{self.token}.json"

    def save(self) -> None:
        _LIVE_TOKENS.add(self.token)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "ownerPid": self.owner_pid,
                    "processes": self.processes,
                    "ownedDirs": self.owned_dirs,
                }
            )
        )
        tmp.replace(self.path)

    def remove(self) -> None:
        _LIVE_TOKENS.discard(self.token)
        self.path.unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_exe(pid: int) -> str | None:
    """The executable ``pid`` runs, or None when it is gone or hidden."""
    try:
        return str(Path(f"/proc/{pid}/exe").readlink())
    except OSError:
        return None


def _owner_still_runs(owner: int, record_path: Path) -> bool:
    if owner == os.getpid():
        token = record_path.stem.partition("-")[2]
        return token in _LIVE_TOKENS
    return process_alive(owner)


def mount_points_under(folder: Path, mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Mount points inside ``folder`` (deepest first), from ``/proc/self/mountinfo``."""
    prefix = str(folder.resolve()).rstrip("/") + "/"
    found = []
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                # Field 5 is the mount point, with spaces and the like as octal escapes.
                point = fields[4].encode().decode("unicode_escape")
                if point.startswith(prefix):
                    found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_under(folder: Path) -> list[str]:
    """Unmount (lazily) what is mounted inside ``folder`` (a test's tmpfs), so that the
    folder can be removed; needs root, does nothing otherwise. Returns what was done."""
    if os.geteuid() != 0:
        return []
    done = []
    for point in mount_points_under(folder):
        result = subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
        if result.returncode == 0:
            done.append(f"unmounted leftover {point}")
    return done


def sweep() -> list[str]:
    """Kill and delete what dead launchers left behind; returns what was done."""
    done: list[str] = []
    folder = registry_dir()
    if not folder.is_dir():
        return done
    for record_path in folder.glob("*.json"):
        try:
            data = json.loads(record_path.read_text())
            owner = int(data["ownerPid"])
        except (OSError, ValueError, KeyError, TypeError):
            record_path.unlink(missing_ok=True)
            continue
        if _owner_still_runs(owner, record_path):
            continue
        for pid, exe in data.get("processes", []):
            if process_exe(int(pid)) == exe:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                done.append(f"killed leftover {Path(exe).name} (pid {pid})")
        for d in data.get("ownedDirs", []):
            if Path(d).exists():
                done.extend(unmount_under(Path(d)))
                shutil.rmtree(d, ignore_errors=True)
                done.append(f"removed leftover folder {d}")
        record_path.unlink(missing_ok=True)
    return done
