"""``/metrics`` of a drakit registry: served over real HTTP, and the same text that
prometheus_client's own metric types print for the same metrics and the same events."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

from drakit.telemetry import metrics
from drakit.telemetry.endpoint import render_text, serve

BUCKETS = (0.001, 0.5, 1, 45, 12345678)
ODD_VALUE = 'quote " backslash \\ newline \n end'


def _declare_and_count(types: Any, reg: Any) -> None:
    """The same metrics and events with ``types``: drakit's module or prometheus_client."""
    counter = types.Counter(
        "claims_total", "Claims.", ("op", "result"), namespace="d", registry=reg
    )
    gauge = types.Gauge("devices", 'Devices "shown".\nLine \\ two.', ("pool",), registry=reg)
    histogram = types.Histogram("seconds", "Durations.", ("op",), buckets=BUCKETS, registry=reg)
    plain_counter = types.Counter("restarts", "Restarts.", registry=reg)
    plain_histogram = types.Histogram("sync_seconds", "Syncs.", buckets=BUCKETS, registry=reg)
    counter.labels("prepare", "success").inc(3)
    counter.labels("unprepare", ODD_VALUE).inc()
    counter.labels(op="prepare", result="error")
    gauge.labels("pool-a").set(32)
    gauge.labels("pool-b").inc(2)
    gauge.labels("pool-b").dec(0.5)
    for value in (0.0005, 0.5, 0.7, 45, 1e9):
        histogram.labels("prepare").observe(value)
    plain_counter.inc(7)
    plain_histogram.observe(0.25)


def _without_created_values(text: str) -> str:
    # _created holds each series' creation time, which differs between the two registries.
    return re.sub(r"^(\w+_created(?:\{.*\})?) \S+$", r"\1 T", text, flags=re.M)


def test_text_matches_prometheus_client_types_for_the_same_events() -> None:
    ours = metrics.Registry()
    theirs = prometheus_client.CollectorRegistry()
    _declare_and_count(metrics, ours)
    _declare_and_count(prometheus_client, theirs)
    expected = prometheus_client.generate_latest(theirs).decode()
    assert _without_created_values(render_text(ours)) == _without_created_values(expected)
    assert "d_claims_total{" in expected and "seconds_bucket{" in expected  # the test sees data


def test_endpoint_serves_the_registry_over_http_and_prometheus_parses_it() -> None:
    registry = metrics.Registry()
    counter = metrics.Counter("claims", "Claims.", ("result",), registry=registry)
    counter.labels(ODD_VALUE).inc(2)
    histogram = metrics.Histogram("seconds", "Durations.", buckets=(1,), registry=registry)
    histogram.observe(3)
    endpoint = serve(registry, "127.0.0.1:0")
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        endpoint.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    claims = {(s.name, s.labels.get("result")): s.value for s in families["claims"].samples}
    assert claims[("claims_total", ODD_VALUE)] == 2
    seconds = {(s.name, s.labels.get("le")): s.value for s in families["seconds"].samples}
    assert seconds[("seconds_bucket", "1.0")] == 0
    assert seconds[("seconds_bucket", "+Inf")] == 1
    assert seconds[("seconds_sum", None)] == 3
