"""DRAPlugin servicers for the kubelet's DRA API v1 and v1beta1.

Thin by design: protobuf in, :class:`~drakit.plugin.ClaimRef` out to
:class:`~drakit.node_plugin.service.calls.DriverCalls`, protobuf back. v1beta1 is v1
without ``share_id``; a v1beta1 kubelet cannot use consumable-capacity shares,
so the field is dropped rather than faked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, NoReturn, Protocol, TypeVar

import grpc

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2 as v1beta1
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from drakit.node_plugin.driver import PreparedDevice
from drakit.node_plugin.service.calls import DriverCalls, call_deadline, claim_count_problem
from drakit.node_plugin.service.direct import DirectUnary
from drakit.plugin.claims import ClaimRef

# Names the kubelet knows these services by in GetInfo's supported_versions.
V1_VERSION = "v1.DRAPlugin"
V1BETA1_VERSION = "v1beta1.DRAPlugin"

V1_SERVICE = v1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name
V1BETA1_SERVICE = v1beta1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name


def base_request_name(name: str) -> str:
    """``req/sub`` -> ``req``: the kubelet matches container claims by base request."""
    return name.split("/", 1)[0]


def _claim_refs(claims: Iterable[v1.Claim | v1beta1.Claim]) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]


class UnaryContext(Protocol):
    """What the servicers use of a call's context: grpc.ServicerContext, or the
    :class:`~drakit.node_plugin.service.direct_call.DirectContext` of a directly served call."""

    def is_active(self) -> bool: ...
    def time_remaining(self) -> float | None: ...
    def add_callback(self, callback: Callable[[], None]) -> bool: ...
    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn: ...


def _refuse_oversized(method: str, count: int, context: UnaryContext) -> None:
    """Abort the call with INVALID_ARGUMENT when it carries more claims than the cap."""
    problem = claim_count_problem(method, count)
    if problem:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)


def _v1_device(device: PreparedDevice) -> v1.Device:
    out = v1.Device(
        request_names=[base_request_name(n) for n in device.request_names],
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=list(device.cdi_device_ids),
    )
    if device.share_id is not None:
        out.share_id = device.share_id
    return out


def _v1beta1_device(device: PreparedDevice) -> v1beta1.Device:
    return v1beta1.Device(
        request_names=[base_request_name(n) for n in device.request_names],
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=list(device.cdi_device_ids),
    )


T = TypeVar("T")
PrepareRequest = v1.NodePrepareResourcesRequest | v1beta1.NodePrepareResourcesRequest
UnprepareRequest = v1.NodeUnprepareResourcesRequest | v1beta1.NodeUnprepareResourcesRequest


class _DRAPlugin:
    """Both DRAPlugin versions: the same calls, answered in the version's own messages.

    A version sets ``api`` (for logs), its response types and how a prepared device is
    written (v1beta1 cannot carry a share ID).
    """

    api: ClassVar[str]
    prepare_response: ClassVar[type[Any]]
    unprepare_response: ClassVar[type[Any]]
    device: Callable[[PreparedDevice], Any]

    def __init__(self, calls: DriverCalls) -> None:
        self._calls = calls

    def _call(
        self,
        method: str,
        operation: Callable[..., T],
        request: PrepareRequest | UnprepareRequest,
        context: UnaryContext,
    ) -> T:
        """Refuse an oversized call, else run ``operation`` with the caller's liveness and
        deadline."""
        _refuse_oversized(method, len(request.claims), context)
        return operation(
            _claim_refs(request.claims),
            api=self.api,
            is_active=context.is_active,
            deadline=call_deadline(context.time_remaining()),
            after_reply=context.add_callback,
        )

    def NodePrepareResources(  # noqa: N802 (gRPC method name)
        self, request: PrepareRequest, context: UnaryContext
    ) -> Any:
        results = self._call("NodePrepareResources", self._calls.prepare, request, context)
        response = self.prepare_response()
        for uid, result in results.items():
            entry = response.claims[uid]
            entry.error = result.error
            if not result.error:
                entry.devices.extend(self.device(d) for d in result.devices)
        return response

    def NodeUnprepareResources(  # noqa: N802 (gRPC method name)
        self, request: UnprepareRequest, context: UnaryContext
    ) -> Any:
        results = self._call("NodeUnprepareResources", self._calls.unprepare, request, context)
        response = self.unprepare_response()
        for uid, error in results.items():
            response.claims[uid].error = error
        return response


class DRAPluginV1(_DRAPlugin, v1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``."""

    api = "v1"
    prepare_response = v1.NodePrepareResourcesResponse
    unprepare_response = v1.NodeUnprepareResourcesResponse
    device = staticmethod(_v1_device)


class DRAPluginV1beta1(_DRAPlugin, v1beta1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`` (kubelets before 1.34)."""

    api = "v1beta1"
    prepare_response = v1beta1.NodePrepareResourcesResponse
    unprepare_response = v1beta1.NodeUnprepareResourcesResponse
    device = staticmethod(_v1beta1_device)


def add_dra_servicers(
    server: grpc.Server, calls: DriverCalls, direct: DirectUnary | None = None
) -> list[tuple[str, str]]:
    """Serve both DRAPlugin versions, through ``direct`` when given (both are unary);
    returns (advertised version, full service name)."""
    servicers: list[tuple[Callable[[Any, Any], None], _DRAPlugin]] = [
        (v1_grpc.add_DRAPluginServicer_to_server, DRAPluginV1(calls)),
        (v1beta1_grpc.add_DRAPluginServicer_to_server, DRAPluginV1beta1(calls)),
    ]
    for add_to_server, servicer in servicers:
        if direct is None:
            add_to_server(servicer, server)
        else:
            direct.add_servicer(add_to_server, servicer)
    return [(V1_VERSION, V1_SERVICE), (V1BETA1_VERSION, V1BETA1_SERVICE)]
