"""Crash-safe file replacement, shared by the checkpoint and the CDI specs."""

# os.path on plain strings, not pathlib: a CDI spec is written in every prepare, and
# pathlib's parsing cost a fifth of a small write on a tmpfs.
# ruff: noqa: PTH105, PTH108, PTH118, PTH120

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
    target = os.fspath(path)
    tmp, fd = _create_temporary(target)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(target) or ".")


def _create_temporary(target: str) -> tuple[str, int]:
    """A new, exclusively created temp file next to ``target`` and its descriptor.

    Plain ``os.open`` calls: ``tempfile.mkstemp`` and a text-mode file object cost a
    prepare call more than the write itself on a tmpfs CDI root.
    """
    folder, name = os.path.split(target)
    for attempt in range(100):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, _CREATE, 0o600)
        except FileNotFoundError:
            if attempt:
                raise
            Path(folder or ".").mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {target}")


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory so renames and unlinks in it are durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
