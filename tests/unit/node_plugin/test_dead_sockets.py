"""Sockets of earlier plugin instances that nobody serves any more are removed at start
(a plugin killed with SIGKILL leaves its per-pod sockets behind)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from drakit.node_plugin.sockets import remove_dead_sockets


@pytest.fixture
def short_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("s"))


@pytest.fixture
def live(short_dir: Path) -> Iterator[Path]:
    path = short_dir / "dra-live.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        yield path


def _dead(path: Path) -> Path:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))  # closed without unlink: what SIGKILL leaves
    return path


def test_only_sockets_without_a_listener_are_removed(short_dir: Path, live: Path) -> None:
    dead = _dead(short_dir / "dra-dead.sock")
    mine = _dead(short_dir / "dra-mine.sock")
    hidden = _dead(short_dir / ".tstarting")
    regular = short_dir / "dra-file.sock"
    regular.write_text("not a socket")

    removed = remove_dead_sockets(short_dir, "*.sock", keep=mine)

    assert removed == [dead]
    assert live.exists() and mine.exists() and hidden.exists() and regular.exists()


def test_pattern_limits_the_sweep_to_this_drivers_sockets(short_dir: Path) -> None:
    ours = _dead(short_dir / "gpu.example.com-abc-reg.sock")
    other = _dead(short_dir / "nic.example.com-abc-reg.sock")
    remove_dead_sockets(short_dir, "gpu.example.com-*reg.sock", keep=short_dir / "x")
    assert not ours.exists()
    assert other.exists()
