"""The lock that serializes prepare/unprepare work, within and across processes.

During a rolling update two plugin instances of one driver run on the node
and the kubelet may call either, so in-process locking is not enough: the
lock is an ``flock`` on ``<plugins-dir>/<driver>/serialize.lock`` (the file the
Go helper uses), combined with a thread lock because ``flock`` does not
exclude threads of one process that share the lock.

The driver core enters the lock *after* its API-server reads (see
``driver.CallContext``), so a slow API server does not stall the other
instance.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from types import TracebackType

LOCK_FILE_NAME = "serialize.lock"

# Below the kubelet's 45 s call deadline, so a stuck peer turns into a clear
# per-claim error instead of a kubelet-side timeout.
DEFAULT_TIMEOUT_SECONDS = 40.0


class SerializeTimeoutError(TimeoutError):
    """The lock was not acquired in time (another call or instance holds it)."""


class SerializeLock:
    """A reusable, thread-safe, cross-process exclusive lock.

    ``with lock:`` blocks up to ``timeout`` seconds, then raises
    SerializeTimeoutError. Not re-entrant.
    """

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.Lock()
        self._fd: int | None = None

    def __enter__(self) -> SerializeLock:
        deadline = time.monotonic() + self.timeout
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise SerializeTimeoutError(
                f"timed out after {self.timeout:g}s waiting for {self.path}"
            )
        try:
            self._fd = self._flock(deadline)
        except BaseException:
            self._thread_lock.release()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        finally:
            self._thread_lock.release()

    def _flock(self, deadline: float) -> int:
        # Open per acquisition: if someone deletes the file, the next call
        # locks the new one instead of a forgotten inode.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise SerializeTimeoutError(
                        f"timed out after {self.timeout:g}s waiting for {self.path} "
                        "(held by another call or plugin instance)"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            except BaseException:
                os.close(fd)
                raise


def serialize_lock_for(plugin_data_dir: Path) -> SerializeLock:
    """The plugin's lock, on ``<plugin_data_dir>/serialize.lock``."""
    return SerializeLock(plugin_data_dir / LOCK_FILE_NAME)
