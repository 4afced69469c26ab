"""Upstream's driver metrics (dra-example-driver pkg/metrics) as the example driver's
registry renders them: names, labels, help, buckets and the series that exist from the
start. The scrape of a running plugin after a real prepare is in
test_plugin_on_kubelet_harness.py."""

from __future__ import annotations

from example_driver.driver import ExampleDriver

from drakit.plugin import BackendContext, MetricsReporter
from drakit.testing import metric_samples, metrics_text


def backend() -> ExampleDriver:
    return ExampleDriver(BackendContext("gpu.example.com", "node-1", {"numDevices": 1}))


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_the_backend_reports_metrics_of_its_own_to_the_plugin() -> None:
    assert isinstance(backend(), MetricsReporter)


def test_before_any_claim_the_counters_exist_at_zero_and_no_duration() -> None:
    text = metrics_text(backend().metrics)
    for operation in ("prepare", "unprepare"):
        name = f"dra_example_driver_{operation}_claims_total"
        assert f"# TYPE {name} counter" in text
        assert f'{name}{{result="success"}} 0.0' in text
        assert f'{name}{{result="error"}} 0.0' in text
        assert not lines(text, f"dra_example_driver_{operation}_claim_duration_seconds_bucket")
    assert "dra_example_driver_fatal_background_errors_total 0.0" in text
    assert (
        "# HELP dra_example_driver_fatal_background_errors_total [BETA] Total number of fatal "
        "background errors reported by the driver." in text
    )


def test_each_outcome_is_counted_and_timed_by_result_in_the_default_buckets() -> None:
    driver = backend()
    driver.claim_finished("prepare", "", 0.03)
    driver.claim_finished("prepare", "invalid opaque config", 2.0)
    driver.claim_finished("unprepare", "", 0.001)
    text = metrics_text(driver.metrics)
    assert 'dra_example_driver_prepare_claims_total{result="success"} 1.0' in text
    assert 'dra_example_driver_prepare_claims_total{result="error"} 1.0' in text
    assert 'dra_example_driver_unprepare_claims_total{result="success"} 1.0' in text
    buckets = {
        labels["le"]: value
        for labels, value in metric_samples(
            text, "dra_example_driver_prepare_claim_duration_seconds_bucket"
        )
        if labels["result"] == "success"
    }
    assert list(buckets) == [
        "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"
    ]  # fmt: skip
    assert (buckets["0.025"], buckets["0.05"], buckets["+Inf"]) == (0.0, 1.0, 1.0)
    assert 'dra_example_driver_prepare_claim_duration_seconds_sum{result="error"} 2.0' in text
