"""A minimal DRA kubelet plugin for tests of the kubelet side.

It serves the real wire protocol on real Unix sockets: the registration
service (``pluginregistration.Registration``) on ``<registrar>/<driver>-reg.sock``
and the v1 ``DRAPlugin`` service on ``<plugin dir>/dra.sock``. Prepare gives
every claim one device with one CDI ID and writes a CDI spec for it;
unprepare removes the spec and succeeds even for unknown claims, as the
kubelet contract requires. Every call is recorded for the test to inspect.
"""

from __future__ import annotations

import json
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as dra
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as dra_grpc
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc

ClaimRef = tuple[str, str, str]  # namespace, name, uid


@dataclass
class FakeDRAPlugin:
    """One plugin instance; ``start`` serves, ``stop`` removes the sockets."""

    driver: str
    registrar_dir: Path
    plugin_dir: Path
    cdi_dir: Path
    pool: str
    request_name: str
    cdi_kind: str = "example.com/gpu"
    supported_versions: tuple[str, ...] = ("v1.DRAPlugin",)
    prepare_calls: list[list[ClaimRef]] = field(default_factory=list)
    unprepare_calls: list[list[ClaimRef]] = field(default_factory=list)
    registration_statuses: list[tuple[bool, str]] = field(default_factory=list)
    registered: threading.Event = field(default_factory=threading.Event)
    unprepared: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._servers: list[grpc.Server] = []

    @property
    def endpoint(self) -> Path:
        return self.plugin_dir / "dra.sock"

    @property
    def registration_socket(self) -> Path:
        return self.registrar_dir / f"{self.driver}-reg.sock"

    def device_name(self, claim_uid: str) -> str:
        return f"dev-{claim_uid[:8]}"

    def cdi_id(self, claim_uid: str) -> str:
        return f"{self.cdi_kind}={self.device_name(claim_uid)}"

    def start(self) -> None:
        """Serve the DRA service, then the registration socket (the kubelet dials at once)."""
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        dra_server = self._server_on(self.endpoint)
        dra_grpc.add_DRAPluginServicer_to_server(_DRAServicer(self), dra_server)
        dra_server.start()
        reg_server = self._server_on(self.registration_socket)
        reg_grpc.add_RegistrationServicer_to_server(_RegistrationServicer(self), reg_server)
        reg_server.start()

    def stop(self) -> None:
        """Stop serving; removing the registration socket makes the kubelet deregister."""
        self.registration_socket.unlink(missing_ok=True)
        for server in reversed(self._servers):
            server.stop(grace=None)
        self._servers.clear()
        self.endpoint.unlink(missing_ok=True)

    def _server_on(self, path: Path) -> grpc.Server:
        """A server bound to a fresh socket at ``path``, registered for ``stop``."""
        path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_insecure_port(f"unix:{path}")
        self._servers.append(server)
        return server

    def write_cdi_spec(self, claim_uid: str) -> None:
        spec = {
            "cdiVersion": "0.6.0",
            "kind": self.cdi_kind,
            "devices": [{"name": self.device_name(claim_uid), "containerEdits": {"env": ["X=1"]}}],
        }
        path = self.cdi_dir / f"{self.driver}-{claim_uid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(spec))
        tmp.rename(path)

    def remove_cdi_spec(self, claim_uid: str) -> None:
        (self.cdi_dir / f"{self.driver}-{claim_uid}.json").unlink(missing_ok=True)


class _DRAServicer(dra_grpc.DRAPluginServicer):
    def __init__(self, plugin: FakeDRAPlugin) -> None:
        self.plugin = plugin

    def NodePrepareResources(
        self, request: dra.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra.NodePrepareResourcesResponse:
        p = self.plugin
        p.prepare_calls.append([(c.namespace, c.name, c.uid) for c in request.claims])
        response = dra.NodePrepareResourcesResponse()
        for claim in request.claims:
            p.write_cdi_spec(claim.uid)
            device = dra.Device(
                request_names=[p.request_name],
                pool_name=p.pool,
                device_name=p.device_name(claim.uid),
                cdi_device_ids=[p.cdi_id(claim.uid)],
            )
            response.claims[claim.uid].devices.append(device)
        return response

    def NodeUnprepareResources(
        self, request: dra.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra.NodeUnprepareResourcesResponse:
        p = self.plugin
        p.unprepare_calls.append([(c.namespace, c.name, c.uid) for c in request.claims])
        response = dra.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            p.remove_cdi_spec(claim.uid)
            response.claims[claim.uid].CopyFrom(dra.NodeUnprepareResourceResponse())
        p.unprepared.set()
        return response


class _RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(self, plugin: FakeDRAPlugin) -> None:
        self.plugin = plugin

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        p = self.plugin
        return reg.PluginInfo(
            type="DRAPlugin",
            name=p.driver,
            endpoint=str(p.endpoint),
            supported_versions=list(p.supported_versions),
        )

    def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        self.plugin.registration_statuses.append((request.plugin_registered, request.error))
        if request.plugin_registered:
            self.plugin.registered.set()
        return reg.RegistrationStatusResponse()
