"""Device health: what a backend reports, and the interface that says it reports it."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class HealthStatus(enum.Enum):
    """Device health as the kubelet's health API knows it."""

    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


@dataclass(frozen=True)
class DeviceHealth:
    """Health of one device.

    ``last_updated`` is Unix seconds. ``health_check_timeout_seconds`` <= 0
    means the kubelet's default (30 s); the plugin re-sends the full report
    often enough for the shortest timeout it advertises. ``reason`` classifies an
    Unhealthy report for the health policy (``--health-taint-effect REASON=EFFECT``; hostdev
    says ``DeviceNodeMissing``); a short CamelCase word, empty when the backend has none.
    """

    pool_name: str
    device_name: str
    health: HealthStatus
    last_updated: int
    health_check_timeout_seconds: int = 0
    message: str = ""
    reason: str = ""


@runtime_checkable
class HealthReporter(Protocol):
    """A backend that reports device health implements this as well as :class:`Backend`.

    Then the plugin advertises the kubelet's health services, streams changes (announced
    through ``subscribe``) and taints devices reported Unhealthy in its ResourceSlices.
    A backend without ``health`` simply reports none.
    """

    def health(self) -> Sequence[DeviceHealth]:
        """Health of every device the backend reports on; thread-safe."""
        ...


def health_report(backend: object) -> Callable[[], Sequence[DeviceHealth]] | None:
    """``backend.health`` when it reports health (:class:`HealthReporter`), else None."""
    return backend.health if isinstance(backend, HealthReporter) else None
