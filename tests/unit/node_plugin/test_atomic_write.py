"""Crash-safe file replacement on real files: mode, missing folder, no leftovers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drakit.node_plugin.atomic import atomic_write


def test_atomic_write_creates_the_folder_and_the_file_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "spec.json"
    old_umask = os.umask(0o077)
    try:
        atomic_write(path, '{"x": "\u00e9"}\n', mode=0o644)
    finally:
        os.umask(old_umask)
    assert path.read_text(encoding="utf-8") == '{"x": "\u00e9"}\n'
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["spec.json"]


def test_atomic_write_replaces_an_existing_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text("old")
    atomic_write(path, "new", mode=0o600)
    assert path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.json"]


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spec.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "\udcff")  # a lone surrogate cannot be written as UTF-8
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]
