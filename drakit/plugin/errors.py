"""The exceptions of the driver contract: what a backend raises, what the plugin raises at
start, and what it reports of failures in its background work (the error hook)."""

from __future__ import annotations

from collections.abc import Callable

from drakit.telemetry.logs import get_logger

_log = get_logger("drakit.plugin")


class BackendError(Exception):
    """A backend could not prepare or unprepare; the message names device and reason.

    The core turns it into a per-claim error (and an Event on the claim).
    """


class BackendConfigError(Exception):
    """The backend's own configuration (``--backend-config``) is unusable.

    The message must name the file, the field and the reason; the plugin
    prints it and exits non-zero.
    """


class PluginStartError(Exception):
    """The plugin could not start: the message names the option, file or socket and why.

    Nothing keeps running after it (what had started is stopped again, the backend closed).
    """


class BackgroundError(Exception):
    """A failure in the plugin's background work, as the error handler gets it.

    ``what`` says which work failed (``publish ResourceSlices``, ``watch ResourceSlices``,
    ``stream device health to the kubelet``, ``register with the kubelet``); ``cause`` is
    the exception (also ``__cause__``). ``recoverable`` is True when the plugin goes on and
    retries by itself (with backoff), which is so for every failure reported today, as in
    Go's ``kubeletplugin`` helper, where every ResourceSlice publishing error is
    recoverable: an invalid device description or a field the API server drops is not
    retried until the backend changes, but restarting the process would not help either.
    A handler that stops the program on ``not recoverable`` keeps working when a failure
    that cannot be retried is reported.
    """

    def __init__(self, what: str, cause: BaseException, *, recoverable: bool = True) -> None:
        super().__init__(f"{what}: {cause}")
        self.what = what
        self.cause = cause
        self.recoverable = recoverable
        self.__cause__ = cause


ErrorHandler = Callable[[BackgroundError], None]
"""What ``on_error`` takes: a function of one :class:`BackgroundError`.

It is called on the thread that hit the failure, possibly on several threads at once: return
quickly, and do not wait for :meth:`KubeletPlugin.stop` from it (``stop(timeout=0)`` starts
stopping and returns).
"""


def log_background_error(error: BackgroundError) -> None:
    """The default error handler: one log line, a warning (recoverable) or an error."""
    record = _log.warning if error.recoverable else _log.error
    record(
        "Background failure",
        what=error.what,
        recoverable=error.recoverable,
        error=f"{type(error.cause).__name__}: {error.cause}",
    )
