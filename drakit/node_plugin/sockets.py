"""Where the plugin's two Unix sockets live, and their life cycle on disk.

Names follow the Go ``kubeletplugin`` helper so the kubelet (and humans) see
what they expect:

* registration socket ``<registrar-dir>/<driver>-reg.sock``;
* DRA socket ``<plugins-dir>/<driver>/dra.sock``.

With a pod UID (rolling update: two instances of one driver on a node at
once) each instance gets its own pair. The registration socket is the first
of these that fits, as in the Go helper's ``RollingUpdateRegistrarSocketFile``:

1. ``<driver>-<podUID>-reg.sock``
2. ``<driver>-<base64url(sha256(podUID))[:8 bytes]>-reg.sock``
3. ``dra-<base64url(sha256(driver + NUL + podUID))[:16 bytes]>-reg.sock``

and the DRA socket is ``dra-<podUID>.sock``, else
``dra-<base64url(sha256(podUID))[:8 bytes]>.sock``. "Fits" means the full path
is at most 107 bytes: ``sun_path`` is 108 bytes including the terminating NUL,
which gRPC requires (the Go helper compares with 108, so a path of exactly 108
bytes would fail to bind there too).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

# Longest usable AF_UNIX path in bytes (sun_path[108] minus the NUL).
MAX_SOCKET_PATH_BYTES = 107


class SocketPathError(ValueError):
    """A socket path cannot be made short enough, or a non-socket is in the way."""


@dataclass(frozen=True)
class SocketPaths:
    """The absolute paths of one plugin instance's sockets."""

    registration: Path
    dra: Path


def _hash(text: str, size: int) -> str:
    digest = hashlib.sha256(text.encode()).digest()[:size]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _fits(directory: Path, name: str) -> bool:
    return len(os.fsencode(directory / name)) <= MAX_SOCKET_PATH_BYTES


def _first_fitting(directory: Path, candidates: list[str], what: str) -> str:
    for name in candidates:
        if _fits(directory, name):
            return name
    shortest = directory / candidates[-1]
    raise SocketPathError(
        f"{what} socket path {str(shortest)!r} is {len(os.fsencode(shortest))} bytes, "
        f"over the {MAX_SOCKET_PATH_BYTES}-byte Unix socket limit; use a shorter directory"
    )


def registration_socket_name(registrar_dir: Path, driver: str, pod_uid: str | None) -> str:
    """File name of the registration socket in ``registrar_dir``."""
    if not pod_uid:
        candidates = [f"{driver}-reg.sock"]
    else:
        candidates = [
            f"{driver}-{pod_uid}-reg.sock",
            f"{driver}-{_hash(pod_uid, 8)}-reg.sock",
            f"dra-{_hash(driver + chr(0) + pod_uid, 16)}-reg.sock",
        ]
    return _first_fitting(registrar_dir, candidates, "registration")


def dra_socket_name(plugin_data_dir: Path, pod_uid: str | None) -> str:
    """File name of the DRA service socket in ``plugin_data_dir``."""
    candidates = (
        [f"dra-{pod_uid}.sock", f"dra-{_hash(pod_uid, 8)}.sock"] if pod_uid else ["dra.sock"]
    )
    return _first_fitting(plugin_data_dir, candidates, "DRA service")


def socket_paths(
    registrar_dir: Path, plugin_data_dir: Path, driver: str, pod_uid: str | None
) -> SocketPaths:
    """Both socket paths; raises SocketPathError when one cannot fit."""
    return SocketPaths(
        registration=registrar_dir / registration_socket_name(registrar_dir, driver, pod_uid),
        dra=plugin_data_dir / dra_socket_name(plugin_data_dir, pod_uid),
    )


def remove_stale_socket(path: Path) -> bool:
    """Delete a socket left behind at ``path`` before binding; True if one was removed.

    Refuses (SocketPathError) to delete anything that is not a socket, so a
    mistyped directory flag cannot destroy a user's file.
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(mode):
        raise SocketPathError(f"{path} exists and is not a Unix socket; refusing to replace it")
    path.unlink(missing_ok=True)
    return True


def remove_dead_sockets(directory: Path, pattern: str, keep: Path) -> list[Path]:
    """Delete the sockets matching ``pattern`` in ``directory`` that nobody listens on.

    A plugin killed with SIGKILL (or a node that lost power) leaves its per-pod sockets
    behind, and the kubelet keeps trying to register the dead one. A socket whose connect
    is refused has no server and is removed; one that accepts, or times out, is left alone
    (another instance serves it: the old pod during a rolling update). Hidden files (a
    starting instance's temporary name), non-sockets and ``keep`` are never touched.
    Returns the removed paths.
    """
    removed: list[Path] = []
    for path in sorted(directory.glob(pattern)):
        if path == keep or path.name.startswith("."):
            continue
        try:
            if not stat.S_ISSOCK(path.lstat().st_mode):
                continue
        except FileNotFoundError:
            continue
        if _has_listener(path):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _has_listener(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True  # busy or slow: not provably dead
    return True


@dataclass(frozen=True)
class SocketIdentity:
    """Which file a socket path pointed to when we bound it."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> SocketIdentity:
        st = path.lstat()
        return cls(path, st.st_dev, st.st_ino)

    def remove_if_still_ours(self) -> bool:
        """Delete the socket unless another process has replaced it since; idempotent.

        Without a pod UID two instances share socket names; the one shutting
        down must not delete the socket its successor just created.
        """
        try:
            st = self.path.lstat()
        except FileNotFoundError:
            return False
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return False
        self.path.unlink(missing_ok=True)
        return True
