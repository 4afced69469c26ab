"""drakit.testing reads a backend's metrics as the plugin's /metrics serves them."""

from __future__ import annotations

from drakit.plugin.metrics import Counter, Histogram, Registry
from drakit.testing import metric_samples, metrics_text


def test_a_registry_is_rendered_as_served_and_its_samples_read_back_with_their_labels() -> None:
    registry = Registry()
    claims = Counter("npu_claims_total", "Claims prepared.", ["result"], registry=registry)
    claims.labels('a "quoted" one').inc(2)
    seconds = Histogram("npu_seconds", "Time.", buckets=(0.1, 1.0), registry=registry)
    seconds.observe(0.5)
    text = metrics_text(registry)
    assert "# TYPE npu_claims_total counter" in text
    assert metric_samples(text, "npu_claims_total") == [({"result": 'a "quoted" one'}, 2.0)]
    assert metric_samples(text, "npu_seconds_bucket") == [
        ({"le": "0.1"}, 0.0), ({"le": "1.0"}, 1.0), ({"le": "+Inf"}, 1.0)
    ]  # fmt: skip
    assert metric_samples(text, "npu_seconds_count") == [({}, 1.0)]
    assert metric_samples(text, "npu_seconds") == []  # a histogram has no sample of its name
