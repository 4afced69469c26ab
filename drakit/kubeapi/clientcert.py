"""A TLS context that follows the client certificate files it was made from.

A kubeconfig that names ``client-certificate`` and ``client-key`` files (rather than
embedding ``-data``) expects the client to notice when they are replaced: kubelet-style
certificate rotation writes new files and the old certificate soon expires. client-go
re-reads such files for every new connection, at most once a second
(``transport.cachingCertificateLoader``), and closes its connections when the certificate
changed. :class:`RotatingTLSContext` does the same for :mod:`drakit.kubeapi.http11`: the pool asks
it for the context of each new connection; it looks at the files' identity (inode, size,
modification time) at most once a second and builds a new context when that changed.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from drakit.kubeapi.errors import ConfigError
from drakit.telemetry.logs import get_logger

__all__ = ["RotatingTLSContext"]

logger = get_logger(__name__)

#: How often the files are looked at, at most (client-go's cache lifetime).
CHECK_INTERVAL_SECONDS = 1.0

_Identity = tuple[tuple[int, int, int], ...]


class RotatingTLSContext:
    """``__call__`` returns the SSLContext for a new connection; thread-safe.

    ``build`` makes a context from the current files (raising ConfigError when they do
    not make one); ``files`` are the files it reads. A rebuild that fails (a rotation
    caught half-written) keeps the last good context and is tried again a second later.
    """

    def __init__(
        self,
        build: Callable[[], ssl.SSLContext],
        files: Sequence[Path],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._build = build
        self._files = tuple(files)
        self._clock = clock
        self._lock = threading.Lock()
        self._identity = self._current_identity()
        self._context = build()
        self._checked_at = clock()

    def __call__(self) -> ssl.SSLContext:
        with self._lock:
            if self._clock() - self._checked_at >= CHECK_INTERVAL_SECONDS:
                self._checked_at = self._clock()
                self._refresh()
            return self._context

    def _refresh(self) -> None:
        identity = self._current_identity()
        if identity == self._identity:
            return
        try:
            context = self._build()
        except ConfigError as err:
            logger.warning(
                "Client certificate files changed but do not load; keeping the previous ones",
                files=[str(f) for f in self._files],
                cause=str(err),
            )
            return
        self._identity, self._context = identity, context
        logger.info(
            "Client certificate files changed; new connections use them",
            files=[str(f) for f in self._files],
        )

    def _current_identity(self) -> _Identity:
        identity = []
        for file in self._files:
            try:
                info = file.stat()
            except OSError:
                identity.append((-1, -1, -1))  # gone for now: a change, once it is back
            else:
                identity.append((info.st_ino, info.st_size, info.st_mtime_ns))
        return tuple(identity)
