"""The kubelet plugin-registration service (``pluginregistration.Registration``).

The kubelet finds the registration socket in its plugin registry directory,
calls ``GetInfo`` (1 s deadline) and then ``NotifyRegistrationStatus`` with
its verdict. ``GetInfo`` answers from values fixed at start-up, so it never
waits on anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from drakit.telemetry.logs import get_logger

PLUGIN_TYPE = "DRAPlugin"
SERVICE = reg.DESCRIPTOR.services_by_name["Registration"].full_name

_log = get_logger(__name__)


@dataclass(frozen=True)
class RegistrationStatus:
    """What the kubelet last told us; ``registered`` is None before it spoke."""

    registered: bool | None = None
    error: str = ""


class RegistrationServicer(reg_grpc.RegistrationServicer):
    """Answers the kubelet's registration handshake for one plugin instance."""

    def __init__(
        self,
        driver_name: str,
        endpoint: str,
        supported_versions: Sequence[str],
        on_status: Callable[[RegistrationStatus], None] = lambda _: None,
    ) -> None:
        self._info = reg.PluginInfo(
            type=PLUGIN_TYPE,
            name=driver_name,
            endpoint=endpoint,
            supported_versions=list(supported_versions),
        )
        self._on_status = on_status
        self._lock = threading.Lock()
        self._status = RegistrationStatus()

    @property
    def status(self) -> RegistrationStatus:
        with self._lock:
            return self._status

    def GetInfo(  # noqa: N802 (gRPC method name)
        self, request: reg.InfoRequest, context: grpc.ServicerContext
    ) -> reg.PluginInfo:
        _log.debug("GetInfo", peer=context.peer())
        return self._info

    def NotifyRegistrationStatus(  # noqa: N802 (gRPC method name)
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        status = RegistrationStatus(registered=request.plugin_registered, error=request.error)
        with self._lock:
            self._status = status
        if status.registered:
            _log.info("Kubelet registered the plugin", driver=self._info.name)
        else:
            # The kubelet retries with backoff; we keep serving and say why.
            _log.error(
                "Kubelet rejected the plugin registration",
                driver=self._info.name,
                error=status.error,
                supported_versions=list(self._info.supported_versions),
            )
        self._on_status(status)
        return reg.RegistrationStatusResponse()
