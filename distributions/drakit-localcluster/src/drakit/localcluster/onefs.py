"""Removing a folder tree without leaving its file system (``rm -rf --one-file-system``).

What a node leaves behind may still have something mounted inside it: an
unmount that failed (a busy mount, one in a mount namespace this process
cannot reach) leaves the mount point in place, and a plain recursive delete
would descend into it and delete what another file system holds. Like the
kubelet's ``RemoveAllOneFilesystem``, ``remove_tree`` stops at every mount
point and reports it instead. A mount point is a folder on another device,
or one that ``/proc/self/mountinfo`` lists: a bind mount of the same file
system keeps the device number.

Folders are opened with ``O_NOFOLLOW`` relative to their parent's descriptor,
so a folder swapped for a symbolic link meanwhile is never followed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
_MOUNTED = "a mount point (another file system is mounted there)"


def mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount in this mount namespace."""
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        found.append((_unescape(fields[4]), fields[sep + 1]))
    return found


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as three octal digits.
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), path)


def remove_tree(path: str, device: int, inode: int) -> list[str]:
    """Remove ``path`` and what it holds, if it is still the object (``device``, ``inode``).

    Returns what was left and why, one line each; empty when ``path`` is gone
    (or never existed). Nothing is removed when ``path`` is now another object
    (it was removed and made again by someone else); nothing on another file
    system is touched, and the folders holding a mount point stay.
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return []
    if (found.st_dev, found.st_ino) != (device, inode):
        return [
            f"left {path}: not the object this node created (device/inode "
            f"{device}/{inode} recorded, {found.st_dev}/{found.st_ino} now)"
        ]
    if not stat.S_ISDIR(found.st_mode):
        Path(path).unlink()
        return []
    tree = _Tree(device, {m for m, _ in mounts()})
    real = os.path.realpath(path)
    if real in tree.mount_points:
        return [f"left {path}: it is a mount point"]
    fd = os.open(path, _OPEN_DIR)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (device, inode):
            return [f"left {path}: replaced while being removed"]
        tree.empty(fd, real)
    finally:
        os.close(fd)
    if not tree.left:
        tree.attempt(partial(os.rmdir, path), path)
    return tree.left


@dataclass
class _Tree:
    """One removal: the file system it stays on, the mount points it stops at, what it left."""

    device: int
    mount_points: set[str]
    left: list[str] = field(default_factory=list)

    def empty(self, dir_fd: int, dir_path: str) -> None:
        """Remove everything in the folder open as ``dir_fd`` (at ``dir_path``) that it can."""
        for name in os.listdir(dir_fd):
            child = f"{dir_path}/{name}"
            try:
                found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(found.st_mode):
                self.attempt(partial(os.unlink, name, dir_fd=dir_fd), child)
            elif found.st_dev != self.device or child in self.mount_points:
                self.left.append(f"left {child}: {_MOUNTED}")
            elif self._empty_folder(dir_fd, name, child):
                self.attempt(partial(os.rmdir, name, dir_fd=dir_fd), child)

    def _empty_folder(self, parent_fd: int, name: str, path: str) -> bool:
        """Empty the folder ``name`` of ``parent_fd``; whether nothing in it was left."""
        before = len(self.left)
        try:
            fd = os.open(name, _OPEN_DIR, dir_fd=parent_fd)
        except OSError as err:
            self.left.append(f"left {path}: {err.strerror}")
            return False
        try:
            if os.fstat(fd).st_dev != self.device:  # mounted between the stat and the open
                self.left.append(f"left {path}: {_MOUNTED}")
            else:
                self.empty(fd, path)
        finally:
            os.close(fd)
        return len(self.left) == before

    def attempt(self, remove: Callable[[], None], path: str) -> None:
        """Run ``remove``; a failure (other than the path being gone already) goes to ``left``."""
        try:
            remove()
        except FileNotFoundError:
            pass
        except OSError as err:
            self.left.append(f"left {path}: {err.strerror}")
