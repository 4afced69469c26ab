"""Running the plugin from a driver's own program: :class:`KubeletPlugin`.

``drakit node-plugin --backend mypkg.mod:MyBackend`` is one way to run a backend. A driver
with its own ``main`` (its own config loading, its own process supervisor, other work in
the same process) runs it with a handle it owns instead, as Go drivers do with
``kubeletplugin.Start``::

    options = PluginOptions.from_env()        # $DRIVER_NAME, $NODE_NAME, ... as the command
    backend = MyBackend(options.backend_context())
    plugin = KubeletPlugin(backend, options, on_error=my_handler)
    plugin.start()                            # serving and registering with the kubelet
    ...
    plugin.publish_now()                      # the backend knows its devices changed
    ...
    plugin.stop()                             # deregistered, drained, sockets removed

The plugin runs on threads of its own (gRPC servers, the ResourceSlice publisher, API
watches); no method needs the caller's thread afterwards, and every method may be called
from any thread. Failures in that background work go to the error handler
(:class:`BackgroundError`), never to the caller.

The node plugin's runtime (``drakit.node_plugin``) sits above this package: the types here
are what it is built against, so this module reaches it only when a plugin is made, by
name (:data:`RUNTIME`), and never imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol

from drakit.plugin.errors import BackgroundError, ErrorHandler, log_background_error
from drakit.telemetry.logs import get_logger

if TYPE_CHECKING:
    from drakit.plugin.backend import Backend
    from drakit.plugin.options import PluginOptions

__all__ = ["DEFAULT_STOP_TIMEOUT", "RUNTIME", "KubeletPlugin", "RegistrationStatus"]

#: ``module:function`` that makes the runtime behind a :class:`KubeletPlugin`.
RUNTIME: Final = "drakit.node_plugin.embedded:runtime_for"
#: How long :meth:`KubeletPlugin.stop` waits by default: the kubelet's calls in flight get as
#: long to finish (the kubelet's own deadline is 45 s).
DEFAULT_STOP_TIMEOUT: Final = 30.0
DEFAULT_START_TIMEOUT: Final = 30.0

_log = get_logger("drakit.plugin")


@dataclass(frozen=True)
class RegistrationStatus:
    """What the kubelet last said about registering the plugin (``NotifyRegistrationStatus``).

    ``registered`` is False with the kubelet's ``error`` when it refused (the kubelet tries
    again; the refusal also goes to the error handler).
    """

    registered: bool
    error: str = ""


class _Runtime(Protocol):
    """What the node plugin's runtime does for a :class:`KubeletPlugin`."""

    def start(self, timeout: float | None) -> bool: ...

    def stop(self, timeout: float | None) -> bool: ...

    def wait(self, timeout: float | None) -> bool: ...

    def wait_ready(self, timeout: float | None) -> bool: ...

    def publish_now(self) -> bool: ...

    @property
    def running(self) -> bool: ...

    @property
    def registration(self) -> RegistrationStatus | None: ...


class KubeletPlugin:
    """One kubelet plugin run by the program that made it: the handle it owns.

    ``backend`` is any :class:`~drakit.plugin.Backend` (typically a
    :class:`~drakit.plugin.BackendBase` made with ``options.backend_context()``); from
    :meth:`start` on the plugin calls it exactly as ``drakit node-plugin`` would, and closes
    it when it stops. ``on_error`` gets every :class:`BackgroundError` (default:
    :func:`log_background_error`); a handler that raises is logged and otherwise ignored.

    Usable as a context manager: ``with KubeletPlugin(...) as plugin:`` starts it (without
    waiting until it is ready: :meth:`wait_ready` does) and stops it on the way out. A
    stopped plugin does not start again: make a new one.
    """

    def __init__(
        self,
        backend: Backend,
        options: PluginOptions,
        *,
        on_error: ErrorHandler | None = None,
    ) -> None:
        self.options = options
        self.backend = backend
        handler = on_error or log_background_error
        module, _, name = RUNTIME.partition(":")
        make: Callable[..., _Runtime] = getattr(importlib.import_module(module), name)
        self._runtime = make(backend, options, _guarded(handler))

    def start(self, timeout: float | None = DEFAULT_START_TIMEOUT) -> bool:
        """Serve the kubelet and register with it, then wait up to ``timeout`` seconds
        (None: no limit) until the plugin is ready: the Node found, the API watches
        synced, the backend's first description queued for publishing.

        Returns whether it got ready in time; it keeps trying in the background either way.
        Idempotent (a second call only waits). Raises
        :class:`~drakit.plugin.BackendConfigError` for a backend that does not implement
        :class:`~drakit.plugin.Backend` or whose ``discover`` fails or describes its devices
        wrongly, :class:`PluginStartError` when an option does not work on this node
        (a folder not writable, a kubeconfig unreadable, a socket path too long), and
        RuntimeError once the plugin was stopped.
        """
        return self._runtime.start(timeout)

    def stop(self, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> bool:
        """Stop: deregister from the kubelet (its socket goes first), let calls in flight
        finish, stop publishing and watching, close the backend, remove the sockets.

        Waits up to ``timeout`` seconds (None: until done; 0: not at all) and returns
        whether the plugin has stopped; it goes on stopping in the background either
        way (:meth:`wait`). Idempotent, callable from any thread, also before
        :meth:`start`. The published ResourceSlices stay: the kubelet removes a node's
        slices when the driver is gone from it.
        """
        return self._runtime.stop(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the plugin has stopped, or ``timeout`` seconds; whether it has."""
        return self._runtime.wait(timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the plugin is ready (see :meth:`start`), or ``timeout`` seconds
        (0: do not block); whether it is."""
        return self._runtime.wait_ready(timeout)

    def publish_now(self) -> bool:
        """Ask the backend's ``discover`` (and ``health``) again and publish what changed.

        For a backend that knows its devices changed and does not announce it through
        the callbacks ``subscribe`` gave it. Returns at once (the publishing runs on the
        plugin's threads; a failure goes to the error handler); False when the plugin is
        not running (before :meth:`start`, after :meth:`stop`), and nothing happens.
        """
        return self._runtime.publish_now()

    @property
    def running(self) -> bool:
        """True from :meth:`start` until :meth:`stop` begins."""
        return self._runtime.running

    @property
    def registration(self) -> RegistrationStatus | None:
        """What the kubelet last said about registering the plugin; None before it spoke."""
        return self._runtime.registration

    def __enter__(self) -> KubeletPlugin:
        self.start(timeout=0)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _guarded(handler: ErrorHandler) -> ErrorHandler:
    """``handler``, made safe to call from the plugin's threads: what it raises is logged."""

    def report(error: BackgroundError) -> None:
        try:
            handler(error)
        except Exception:
            _log.exception("The error handler failed", what=error.what)

    return report
