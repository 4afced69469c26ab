"""The handle a running node plugin is driven through: by ``drakit node-plugin`` and by a
program that embeds the plugin (``drakit.plugin.KubeletPlugin``).

:class:`PluginRuntime` wraps one :class:`~drakit.node_plugin.app.NodePlugin`: start (once),
stop (once, on a thread of its own, so that a caller can bound its wait and an error
handler can start it without waiting for itself), wait, readiness, publish now, the
kubelet's registration verdict. The command makes one from its validated flags
(:class:`~drakit.node_plugin.driver.PluginConfig`, the backend named by ``--backend``);
:func:`runtime_for` makes one from an embedding program's backend object and
:class:`~drakit.plugin.PluginOptions`, and is what ``drakit.plugin`` reaches by name
(``drakit.plugin.running.RUNTIME``): the public package sits below this one and imports
nothing of it.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from drakit.kubeapi.errors import ConfigError as KubeConfigError
from drakit.kubeapi.lightclient import load_light_client
from drakit.node_plugin import wiring
from drakit.node_plugin.app import NodePlugin, settle_heap
from drakit.node_plugin.backend_loader import check_backend
from drakit.node_plugin.cpuhome import CpuHome
from drakit.node_plugin.driver import CoreConfigError, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.service.server import DEFAULT_GRACE_SECONDS
from drakit.node_plugin.sockets import SocketPathError, socket_paths
from drakit.plugin.backend import Backend
from drakit.plugin.errors import (
    BackendConfigError,
    BackgroundError,
    ErrorHandler,
    PluginStartError,
    log_background_error,
)
from drakit.telemetry.logs import get_logger
from drakit.telemetry.memory import release_freed_memory

if TYPE_CHECKING:
    # Only an embedding program's way in reads the options: the command's start-up does not
    # load them.
    from drakit.plugin.options import PluginOptions
    from drakit.plugin.running import RegistrationStatus

__all__ = [
    "PluginRuntime",
    "PluginStoppedError",
    "command_runtime",
    "plugin_config",
    "run_until_signal",
    "runtime_for",
]

_log = get_logger(__name__)
_POLL = 0.1


class PluginStoppedError(RuntimeError):
    """``start`` after ``stop`` (or after a failed start): a plugin runs once."""


class PluginRuntime:
    """One node plugin, started once and stopped once; thread-safe.

    ``checks`` run first at :meth:`start` (an embedding program's folders, sockets and
    backend), then the :class:`~drakit.node_plugin.app.NodePlugin` is made and started; what
    they or the start raise propagates, and nothing keeps running after it.
    """

    def __init__(
        self,
        config: PluginConfig,
        *,
        build: wiring.Wiring = wiring.build,
        on_error: ErrorHandler | None = None,
        metrics: PluginMetrics | None = None,
        checks: Callable[[], None] | None = None,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        self.config = config
        self.plugin: NodePlugin | None = None
        self._make = partial(NodePlugin, config, metrics=metrics, build=build, on_error=on_error)
        self._checks = checks
        self._grace = grace
        self._lock = threading.Lock()
        self._started = False
        self._stopper: threading.Thread | None = None
        self._stopped = threading.Event()

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = 0) -> bool:
        """Start serving (once), then wait up to ``timeout`` seconds until ready; whether it
        is. RuntimeError once :meth:`stop` was called."""
        with self._lock:
            if self._stopper is not None or self._stopped.is_set():
                raise PluginStoppedError("the plugin was stopped; make a new one to start again")
            if not self._started:
                try:
                    if self._checks is not None:
                        self._checks()
                    self.plugin = self._make()
                    self.plugin.start()  # undoes itself when it fails
                except BaseException:
                    self._stopped.set()
                    raise
                self._started = True
        return self.wait_ready(timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Begin stopping (once), wait up to ``timeout`` seconds; whether it has stopped."""
        with self._lock:
            if self._stopper is None and not self._stopped.is_set():
                self._stopper = threading.Thread(
                    target=self._stop, name="drakit-plugin-stop", daemon=True
                )
                self._stopper.start()
            stopper = self._stopper
        if stopper is not None and stopper is not threading.current_thread():
            stopper.join(timeout)
        return self._stopped.is_set()

    def _stop(self) -> None:
        try:
            if self.plugin is not None:
                self.plugin.stop(grace=self._grace)
        except Exception:
            _log.exception("The plugin failed to stop cleanly")
        finally:
            self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped or ``timeout`` seconds; whether it has stopped."""
        return self._stopped.wait(timeout)

    # -- state ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        with self._lock:
            return self._started and self._stopper is None and not self._stopped.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until started up (the publisher ready) or ``timeout`` seconds; whether it is.

        Polled every tenth of a second, because readiness is each service's own
        (``wait_ready``); False at once when the plugin is not running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running and self.plugin is not None:
            if self.plugin.started_up():
                return True
            left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
            if left <= 0 or self._stopped.wait(left):
                return False
        return False

    def publish_now(self) -> bool:
        """Have the publisher ask the backend again; False when not running."""
        return self.running and self.plugin is not None and self.plugin.publish_now()

    @property
    def registration(self) -> RegistrationStatus | None:
        """The kubelet's last verdict on the registration; None before it gave one."""
        status = self.plugin.registration if self.plugin is not None else None
        if status is None or status.registered is None:
            return None
        from drakit.plugin.running import RegistrationStatus  # noqa: PLC0415 (asked for rarely)

        return RegistrationStatus(registered=status.registered, error=status.error)


# -- drakit node-plugin's way in --------------------------------------------------------------


def command_errors(error: BackgroundError) -> None:
    """``drakit node-plugin``'s error handler: a recoverable failure was logged where it
    happened (with its retry), so only one that is not gets a line here."""
    if not error.recoverable:
        log_background_error(error)


def command_runtime(config: PluginConfig, build: wiring.Wiring | None = None) -> PluginRuntime:
    """The runtime of ``drakit node-plugin``: the parts of ``config`` (``build`` replaces
    them in tests that run the command with an in-memory core)."""
    return PluginRuntime(
        config,
        build=build or partial(wiring.build, on_error=command_errors),
        on_error=command_errors,
    )


def run_until_signal(plugin: PluginRuntime) -> int:
    """Start ``plugin``, serve until SIGTERM or SIGINT, then stop gracefully.

    What only a plugin that is its process's own does happens here: the process's
    start-up garbage is frozen (:func:`~drakit.node_plugin.app.settle_heap`), its threads
    get a home CPU (``--cpu-home``), and the memory start-up freed is given back once the
    plugin is ready.
    """
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    home = CpuHome() if plugin.config.cpu_home else None
    try:
        plugin.start(timeout=0)
        settle_heap()
        if home is not None:
            home.start()
        else:
            _log.info("CPU home off: the plugin's threads stay on the CPUs the kernel gives them")
        released = False
        # Polled often until started up (the publisher is ready within a second or two), so
        # that the release follows start-up closely; then once a second for the signal.
        while not stop.wait(timeout=1.0 if released else 0.1):
            if not released and plugin.wait_ready(0):
                # Start-up freed far more than the plugin keeps (import-time buffers, TLS and
                # gRPC set-up, the first lists and slice writes), and glibc keeps freed chunks
                # resident below ones in use: give them back once, for the plugin's idle life.
                release_freed_memory()
                released = True
        _log.info("Shutting down", signal=signal.Signals(received[0]).name)
    finally:
        if home is not None:
            home.stop()
        plugin.stop(timeout=None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


# -- the embedding program's way in -----------------------------------------------------------


def plugin_config(options: PluginOptions, backend: object) -> PluginConfig:
    """The plugin configuration of an embedding program's options; the ``backend`` field
    (which the command reads as ``--backend``) names the backend's class, for the logs."""
    kind = type(backend)
    return PluginConfig(
        driver_name=options.driver_name,
        node_name=options.node_name,
        kubeconfig=str(options.kubeconfig) if options.kubeconfig else None,
        registrar_dir=options.registrar_dir,
        plugins_dir=options.plugins_dir,
        cdi_root=options.cdi_root,
        backend=f"{kind.__module__}:{kind.__qualname__}",
        pod_uid=options.pod_uid,
        metrics_address=options.metrics_address,
        health_resend_seconds=options.health_resend_seconds,
        unprepare_timeout_seconds=options.unprepare_timeout_seconds,
        kube_api_qps=options.kube_api_qps,
        kube_api_burst=options.kube_api_burst,
    )


def runtime_for(backend: Backend, options: PluginOptions, on_error: ErrorHandler) -> Any:
    """The runtime behind ``drakit.plugin.KubeletPlugin(backend, options, on_error=...)``."""
    config = plugin_config(options, backend)
    build = partial(_assemble, backend=backend, options=options, on_error=on_error)
    runtime = PluginRuntime(
        config, build=build, on_error=on_error, checks=partial(_check, options, config, backend)
    )
    return _PublicErrors(runtime, backend)


def _assemble(
    config: PluginConfig,
    metrics: PluginMetrics,
    *,
    backend: Backend,
    options: PluginOptions,
    on_error: ErrorHandler,
) -> wiring.Parts:
    api = options.api_client if options.api_client is not None else _api_client(options)
    return wiring.assemble(config, metrics, backend, api, on_error)


def _api_client(options: PluginOptions) -> Any:
    try:
        return load_light_client(
            str(options.kubeconfig) if options.kubeconfig else None,
            user_agent=f"drakit-node-plugin/{options.driver_name}",
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
        )
    except KubeConfigError as exc:
        where = f"kubeconfig (${_variable('kubeconfig')})"
        raise PluginStartError(f"{where} {options.kubeconfig}: {exc}") from exc


def _check(options: PluginOptions, config: PluginConfig, backend: Backend) -> None:
    """What the command checks of its flags and ``--backend`` before it starts."""
    check_backend(f"backend {config.backend}", backend)
    if options.kubeconfig is not None and options.api_client is None:
        path = options.kubeconfig
        if not path.is_file() or not os.access(path, os.R_OK):
            _refuse("kubeconfig", path, "is not a readable file")
    for option, folder in (
        ("registrar_dir", options.registrar_dir),
        ("plugins_dir", options.plugin_data_dir),
        ("cdi_root", options.cdi_root),
    ):
        _writable(option, folder)
    try:
        socket_paths(
            config.registrar_dir, config.plugin_data_dir, config.driver_name, config.pod_uid
        )
    except SocketPathError as exc:
        raise PluginStartError(str(exc)) from exc


def _writable(option: str, folder: Path) -> None:
    """Create ``folder`` if needed and prove it writable by writing a probe file in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".drakit-probe-"):
            pass
    except OSError as exc:
        _refuse(option, folder, f"is not a writable folder: {exc.strerror or exc}")


def _refuse(option: str, value: object, reason: str) -> NoReturn:
    raise PluginStartError(f"{option} (${_variable(option)}) '{value}' {reason}")


def _variable(option: str) -> str:
    """The environment variable of ``option`` (drakit node-plugin's)."""
    from drakit.plugin.options import ENVIRONMENT  # noqa: PLC0415 (embedding programs only)

    return ENVIRONMENT[option]


class _PublicErrors:
    """A :class:`PluginRuntime` whose ``start`` raises the public API's exceptions
    (``PluginStartError``, ``BackendConfigError``) and closes the backend when it fails."""

    def __init__(self, runtime: PluginRuntime, backend: Backend) -> None:
        self._runtime = runtime
        self._backend = backend

    def start(self, timeout: float | None) -> bool:
        try:
            return self._runtime.start(timeout)
        except PluginStoppedError:
            raise  # nothing was started now: the backend was closed when it stopped
        except (PluginStartError, BackendConfigError):
            self._close_backend()
            raise
        except (CoreConfigError, SocketPathError, OSError) as exc:
            self._close_backend()
            raise PluginStartError(f"cannot start: {exc}") from exc
        except BaseException:
            self._close_backend()
            raise

    def _close_backend(self) -> None:
        try:
            self._backend.close()
        except Exception:
            _log.exception("The backend failed to close")

    def stop(self, timeout: float | None) -> bool:
        return self._runtime.stop(timeout)

    def wait(self, timeout: float | None) -> bool:
        return self._runtime.wait(timeout)

    def wait_ready(self, timeout: float | None) -> bool:
        return self._runtime.wait_ready(timeout)

    def publish_now(self) -> bool:
        return self._runtime.publish_now()

    @property
    def running(self) -> bool:
        return self._runtime.running

    @property
    def registration(self) -> RegistrationStatus | None:
        return self._runtime.registration
