"""Crash-safe file replacement, shared by the checkpoint and the CDI specs."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never a mix.

    Temp file in the same directory (``.<name>.<random>.tmp``: readers skip dot files),
    fsync, rename over the target, fsync the directory (so the rename survives a power
    cut). No temp file is left behind. The directory is created when missing.
    """
    data = text.encode("utf-8")
    tmp, fd = _create_temporary(path)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new, exclusively created temp file next to ``path`` and its descriptor.

    Plain ``os.open`` calls: ``tempfile.mkstemp`` and a text-mode file object cost a
    prepare call more than the write itself on a tmpfs CDI root.
    """
    for attempt in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, _CREATE, 0o600)
        except FileNotFoundError:
            if attempt:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {path}")


def fsync_dir(directory: Path) -> None:
    """fsync a directory so renames and unlinks in it are durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
