"""Metrics of a driver's own, served on the node plugin's ``/metrics`` endpoint.

A backend that keeps metrics implements :class:`MetricsReporter` besides
:class:`~drakit.plugin.Backend`. Its metrics live in a :class:`Registry` of the metric types
here (:class:`Counter`, :class:`Gauge`, :class:`Histogram`: drakit's own, the ones its
endpoint serves). This module is public as a whole: ``from drakit.plugin import metrics``
(``drakit.plugin.Counter`` is the partitionable devices' counter, another thing).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from drakit.telemetry.metrics import Counter, Gauge, Histogram, Registry

__all__ = ["Counter", "Gauge", "Histogram", "MetricsReporter", "Registry", "metrics_reporter"]


@runtime_checkable
class MetricsReporter(Protocol):
    """A backend with metrics of its own implements this as well as :class:`Backend`.

    ``metrics`` is a :class:`Registry` holding them (counters, gauges and histograms of this
    module); the plugin serves them on its ``/metrics`` endpoint (``--metrics-address``) next
    to its own, so their names must not start with ``drakit_``. ``claim_finished`` is called
    once for every claim of every NodePrepareResources and NodeUnprepareResources call, once
    the claim's outcome is known: ``operation`` is ``prepare`` or ``unprepare``, ``error`` the
    claim's error (``""`` on success, including a claim prepared already), ``seconds`` the
    time the plugin spent on the call (the claims of one call are prepared together: one read
    of the claims, one lock, one checkpoint save per phase). It runs on the call's thread
    before the reply: it must be quick, and an exception it raises is logged and ignored.
    """

    metrics: Registry

    def claim_finished(self, operation: str, error: str, seconds: float) -> None:
        """Record one claim's outcome."""
        ...


def metrics_reporter(backend: object) -> MetricsReporter | None:
    """The backend when it reports metrics of its own (:class:`MetricsReporter`), else None."""
    return backend if isinstance(backend, MetricsReporter) else None
