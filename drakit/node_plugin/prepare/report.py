"""How a claim's failure is told: a log line, a metric, and an Event on the claim."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from drakit.kubeapi.resources import RESOURCE_CLAIMS
from drakit.node_plugin.claims import ClaimError
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger

# Failures that say nothing about the claim itself: logged and answered, no Event.
_NO_EVENT_REASONS = frozenset({"CallAbandoned"})


class ClaimEvents(Protocol):
    """Where per-claim failures are reported (a Kubernetes Event recorder)."""

    def warning(
        self, regarding: dict[str, Any], reason: str, action: str, note: str = ""
    ) -> None: ...


def claim_object(ref: ClaimRef) -> dict[str, Any]:
    """The reference an Event about a claim names when the claim was not read."""
    return {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": RESOURCE_CLAIMS.kind,
        "namespace": ref.namespace,
        "name": ref.name,
        "uid": ref.uid,
    }


class ClaimReports:
    """Logs, counts and raises Events for claims that failed; thread-safe."""

    def __init__(self, metrics: PluginMetrics, events: ClaimEvents | None) -> None:
        self.metrics = metrics
        self.events = events

    def failed(
        self,
        ref: ClaimRef,
        obj: Mapping[str, Any] | None,
        error: ClaimError,
        action: str,
        log: StructuredLogger,
    ) -> None:
        """Log, count and (unless it says nothing about the claim) raise an Event; ``obj``
        is the claim as read (None: not read, the Event names ``ref``)."""
        log.warning(
            f"{action} failed for a claim",
            claim=f"{ref.namespace}/{ref.name}",
            claim_uid=ref.uid,
            reason=error.reason,
            error=str(error),
        )
        self.metrics.claim_errors.labels(action.lower(), error.reason).inc()
        if self.events is not None and error.reason not in _NO_EVENT_REASONS:
            regarding = dict(obj) if obj else claim_object(ref)
            self.events.warning(regarding, error.reason, action, str(error))
