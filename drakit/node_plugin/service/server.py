"""The two gRPC servers of a plugin instance, on Unix sockets.

* :class:`DraServer` on the DRA socket: DRAPlugin v1 and v1beta1,
  DRAResourceHealth v1 and v1alpha1 (when the core reports health),
  ``grpc.health.v1`` and server reflection.
* :class:`RegistrationServer` on the registration socket: the kubelet's
  plugin-registration handshake (plus reflection, for grpcurl).

Start the DRA server first: the kubelet connects to the endpoint as soon as it
learns it from GetInfo. Stop in reverse: removing the registration socket is
how the kubelet learns the plugin is going away.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from drakit.node_plugin.driver import DriverCore
from drakit.node_plugin.service.calls import DriverCalls
from drakit.node_plugin.service.direct import DirectUnary
from drakit.node_plugin.service.dra import add_dra_servicers
from drakit.node_plugin.service.health import (
    DEFAULT_RESEND_SECONDS,
    HealthStreams,
    add_health_servicers,
)
from drakit.node_plugin.service.registration import SERVICE as REGISTRATION_SERVICE
from drakit.node_plugin.service.registration import RegistrationServicer, RegistrationStatus
from drakit.node_plugin.sockets import SocketIdentity, remove_dead_sockets, remove_stale_socket
from drakit.plugin.errors import ErrorHandler
from drakit.telemetry.logs import get_logger

_log = get_logger(__name__)

# How long a stop waits for in-flight calls; the kubelet's own deadline is 45 s.
DEFAULT_GRACE_SECONDS = 30.0

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_UNKNOWN = health_pb2.HealthCheckResponse.UNKNOWN


class UnixServer:
    """A grpc.Server bound to one Unix socket, which it owns on disk."""

    def __init__(
        self, socket_path: Path, max_workers: int, dead_siblings: str | None = None
    ) -> None:
        """``dead_siblings``: a glob in the socket's folder naming earlier instances' sockets
        of this driver; those nobody listens on any more are removed at start."""
        self.socket_path = socket_path
        self._dead_siblings = dead_siblings
        self._executor = futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="grpc"
        )
        self.server = grpc.server(self._executor)
        self._identity: SocketIdentity | None = None

    def start(self) -> None:
        """Bind, serve, then move the socket into place. Raises OSError if binding fails.

        gRPC binds a temporary hidden name (the kubelet's plugin watcher
        ignores dot files) which is then renamed over the final path. So the
        socket appears only once it serves, a stale socket is replaced
        atomically, and gRPC's own unlink-on-shutdown hits the temporary name,
        never a successor's socket at the final path.
        """
        if remove_stale_socket(self.socket_path):
            _log.info("Removed stale socket", socket=str(self.socket_path))
        if self._dead_siblings:
            folder = self.socket_path.parent
            for dead in remove_dead_sockets(folder, self._dead_siblings, self.socket_path):
                _log.info("Removed a dead instance's socket", socket=str(dead))
        temporary = self.socket_path.with_name(f".t{secrets.token_hex(3)}")
        try:
            self.server.add_insecure_port(f"unix:{temporary}")
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.socket_path}: {exc}") from exc
        self.server.start()
        self._started()
        temporary.replace(self.socket_path)
        self._identity = SocketIdentity.of(self.socket_path)
        _log.info("Serving", socket=str(self.socket_path))

    def _started(self) -> None:
        """Runs once the server serves, before its socket is moved into place."""

    def remove_socket(self) -> None:
        if self._identity is not None:
            self._identity.remove_if_still_ours()

    def stop(self, grace: float) -> None:
        """Refuse new calls, let in-flight ones finish within ``grace``, remove the socket,
        and end the worker threads (gRPC leaves the executor it was given running: a plugin
        stopped inside a program that goes on would keep them)."""
        self.server.stop(grace).wait()
        self.remove_socket()
        # Idle workers end at once; one still in a call past the grace ends when it returns.
        self._executor.shutdown(wait=False, cancel_futures=True)


class DraServer(UnixServer):
    """The DRA socket: kubelet-facing services backed by one driver core."""

    def __init__(
        self,
        socket_path: Path,
        core: DriverCore,
        calls: DriverCalls,
        health_resend_seconds: float = DEFAULT_RESEND_SECONDS,
        max_workers: int = 16,
        *,
        health_versions: Collection[str] | None = None,
        on_error: ErrorHandler | None = None,
    ) -> None:
        """``health_versions``: the DRAResourceHealth versions to advertise (those the
        node's kubelet calls, e.g. only ``v1alpha1.DRAResourceHealth`` before 1.37);
        None advertises both. Both are served either way. ``on_error`` hears of every
        health stream that fails."""
        # The folder is this driver's own (<plugins>/<driver>/): every socket in it is one
        # of its instances.
        super().__init__(socket_path, max_workers, dead_siblings="*.sock")
        # Prepare and unprepare skip grpcio's thread hand-offs (see direct.py); None (and
        # logged) on an untested grpcio or with DRAKIT_GRPC_DIRECT=0, and then grpcio
        # serves them as any other method.
        self.direct = DirectUnary.attach(self.server, max_threads=max_workers)
        self.grpc_health = health.HealthServicer(experimental_non_blocking=True)
        health_pb2_grpc.add_HealthServicer_to_server(self.grpc_health, self.server)
        self.health_streams = HealthStreams(core, health_resend_seconds, on_error)
        services = add_dra_servicers(self.server, calls, self.direct)
        if core.supports_health():
            services += [
                (version, name)
                for version, name in add_health_servicers(self.server, self.health_streams)
                if health_versions is None or version in health_versions
            ]
        # Versions in the kubelet's preference order: v1 before v1beta1.
        self.supported_versions = [version for version, _ in services]
        self.service_names = [name for _, name in services]
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server
        )
        self.grpc_health.set(REGISTRATION_SERVICE, _UNKNOWN)

    def _started(self) -> None:
        if self.direct is not None:
            self.direct.start()

    def start(self) -> None:
        super().start()
        for name in ["", *self.service_names]:
            self.grpc_health.set(name, _SERVING)

    def record_registration(self, status: RegistrationStatus) -> None:
        """Mirror the kubelet's verdict as the health of ``pluginregistration.Registration``."""
        self.grpc_health.set(REGISTRATION_SERVICE, _SERVING if status.registered else _NOT_SERVING)

    def stop(self, grace: float) -> None:
        self.grpc_health.enter_graceful_shutdown()
        self.health_streams.stop()  # streams never end on their own
        super().stop(grace)
        if self.direct is not None:
            self.direct.stop()


class RegistrationServer(UnixServer):
    """The registration socket in the kubelet's plugin registry directory."""

    def __init__(
        self,
        socket_path: Path,
        driver_name: str,
        dra_socket: Path,
        supported_versions: list[str],
        on_status: Callable[[RegistrationStatus], None],
    ) -> None:
        # Driver names are DNS subdomains: no glob characters. The hashed third name form
        # does not show the driver, so it is never taken for a sibling.
        super().__init__(socket_path, max_workers=2, dead_siblings=f"{driver_name}-*reg.sock")
        self.servicer = RegistrationServicer(
            driver_name, str(dra_socket), supported_versions, on_status
        )
        reg_grpc.add_RegistrationServicer_to_server(self.servicer, self.server)
        reflection.enable_server_reflection(
            [REGISTRATION_SERVICE, reflection.SERVICE_NAME], self.server
        )

    def stop(self, grace: float) -> None:
        # Deregister first: the kubelet reacts to the file disappearing.
        self.remove_socket()
        super().stop(grace)
