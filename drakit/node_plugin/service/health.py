"""DRAResourceHealth servicers (KEP-4680), v1 and v1alpha1.

``NodeWatchResources`` streams a full report at once, then every change as it
happens, and the full report again at least every ``resend_seconds`` (and
well within the shortest per-device ``health_check_timeout_seconds``) so the
kubelet never lets a device decay to Unknown because the plugin was quiet.
A stream that fails (the backend's health report raised) ends with the error, which also
goes to ``on_error``; the kubelet opens a new one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import grpc

from drakit.kubeletapi.gen.dra_health.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra_health.v1alpha1 import api_pb2 as v1alpha1
from drakit.kubeletapi.gen.dra_health.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from drakit.node_plugin.driver import DriverCore, HealthSubscription
from drakit.plugin.errors import BackgroundError, ErrorHandler
from drakit.plugin.health import DeviceHealth, HealthStatus
from drakit.telemetry.logs import get_logger

V1_VERSION = "v1.DRAResourceHealth"
V1ALPHA1_VERSION = "v1alpha1.DRAResourceHealth"
V1_SERVICE = v1.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name
V1ALPHA1_SERVICE = v1alpha1.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name

# The kubelet's default staleness timeout is 30 s; stay clearly below it.
DEFAULT_RESEND_SECONDS = 20.0

_log = get_logger(__name__)

# Both API versions share numbers: UNKNOWN 0, HEALTHY 1, UNHEALTHY 2.
_STATUS_NUMBER = {HealthStatus.UNKNOWN: 0, HealthStatus.HEALTHY: 1, HealthStatus.UNHEALTHY: 2}


class _HealthApi(Protocol):
    """The parts of a generated dra-health module this file uses."""

    NodeWatchResourcesResponse: Any
    DeviceHealth: Any
    DeviceIdentifier: Any


def _response(api: _HealthApi, devices: Sequence[DeviceHealth]) -> Any:
    return api.NodeWatchResourcesResponse(
        devices=[
            api.DeviceHealth(
                device=api.DeviceIdentifier(pool_name=d.pool_name, device_name=d.device_name),
                health=_STATUS_NUMBER[d.health],
                last_updated_time=d.last_updated,
                health_check_timeout_seconds=d.health_check_timeout_seconds,
                message=d.message,
            )
            for d in devices
        ]
    )


def resend_interval(devices: Sequence[DeviceHealth], ceiling: float) -> float:
    """How long the stream may stay quiet: ``ceiling``, or half the shortest device timeout."""
    timeouts = [
        d.health_check_timeout_seconds for d in devices if d.health_check_timeout_seconds > 0
    ]
    return min([ceiling, *(t / 2 for t in timeouts)])


class HealthStreams:
    """Runs watch streams for one core; ``stop`` ends them all (for shutdown)."""

    def __init__(
        self,
        core: DriverCore,
        resend_seconds: float = DEFAULT_RESEND_SECONDS,
        on_error: ErrorHandler | None = None,
    ) -> None:
        self._core = core
        self._resend_seconds = resend_seconds
        self._on_error = on_error
        self._lock = threading.Lock()
        self._open: set[HealthSubscription] = set()
        self._stopped = False

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            subscriptions = list(self._open)
        for subscription in subscriptions:
            subscription.close()

    def watch(self, api: _HealthApi, version: str, context: grpc.ServicerContext) -> Iterator[Any]:
        """Yield responses for one stream until the client or the server goes away."""
        subscription = self._core.watch_health()  # before the snapshot: no gap
        with self._lock:
            if self._stopped:
                subscription.close()
            self._open.add(subscription)
        context.add_callback(subscription.close)
        log = _log.bind(method="NodeWatchResources", api=version)
        log.info("Health stream opened", peer=context.peer())
        try:
            yield from self._stream(api, subscription)
        except Exception as err:
            # gRPC logs the failure and ends the stream with it; the hook hears of it too.
            if self._on_error is not None:
                self._on_error(BackgroundError("stream device health to the kubelet", err))
            raise
        finally:
            subscription.close()
            with self._lock:
                self._open.discard(subscription)
            log.info("Health stream closed", peer=context.peer())

    def _stream(self, api: _HealthApi, subscription: HealthSubscription) -> Iterator[Any]:
        snapshot = self._core.health_snapshot()
        yield _response(api, snapshot)
        due = time.monotonic() + resend_interval(snapshot, self._resend_seconds)
        while not subscription.closed:
            changes = subscription.next_change(timeout=max(0.0, due - time.monotonic()))
            if subscription.closed:
                return
            if changes:
                yield _response(api, changes)
            if time.monotonic() >= due:
                snapshot = self._core.health_snapshot()
                yield _response(api, snapshot)
                due = time.monotonic() + resend_interval(snapshot, self._resend_seconds)


class HealthV1(v1_grpc.DRAResourceHealthServicer):
    """``v1.DRAResourceHealth`` (kubelet 1.37+ prefers it)."""

    def __init__(self, streams: HealthStreams) -> None:
        self._streams = streams

    def NodeWatchResources(  # noqa: N802 (gRPC method name)
        self, request: v1.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[v1.NodeWatchResourcesResponse]:
        return self._streams.watch(v1, V1_VERSION, context)


class HealthV1alpha1(v1alpha1_grpc.DRAResourceHealthServicer):
    """``v1alpha1.DRAResourceHealth`` (kubelets 1.34-1.36)."""

    def __init__(self, streams: HealthStreams) -> None:
        self._streams = streams

    def NodeWatchResources(  # noqa: N802 (gRPC method name)
        self, request: v1alpha1.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[v1alpha1.NodeWatchResourcesResponse]:
        return self._streams.watch(v1alpha1, V1ALPHA1_VERSION, context)


def add_health_servicers(server: grpc.Server, streams: HealthStreams) -> list[tuple[str, str]]:
    """Serve both health versions; returns (advertised version, full service name)."""
    v1_grpc.add_DRAResourceHealthServicer_to_server(HealthV1(streams), server)
    v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(HealthV1alpha1(streams), server)
    return [(V1_VERSION, V1_SERVICE), (V1ALPHA1_VERSION, V1ALPHA1_SERVICE)]
