"""A backend's own metrics as the plugin serves them: :func:`metrics_text` renders a
``drakit.plugin.metrics.Registry`` in the Prometheus text format of ``/metrics``, and
:func:`metric_samples` reads the samples of one metric back from such a text (a
registry's, or a running plugin's scrape)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drakit.plugin.metrics import Registry

__all__ = ["metric_samples", "metrics_text"]

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics_text(registry: Registry) -> str:
    """``registry`` in the Prometheus text format, exactly as the plugin's ``/metrics``
    serves it (``# HELP``, ``# TYPE`` and the samples)."""
    from drakit.telemetry.endpoint import render_text  # noqa: PLC0415 (prometheus_client)

    return render_text(registry)


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` of every sample named exactly ``name`` in ``text``, in order
    (a histogram's are ``NAME_bucket``, ``NAME_sum`` and ``NAME_count``)."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match["name"] != name:
            continue
        labels = {k: _unescape(v) for k, v in _LABEL.findall(match["labels"] or "")}
        found.append((labels, float(match["value"])))
    return found


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
