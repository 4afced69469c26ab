"""drakit's metric values (telemetry.metrics): labels, counting, buckets, sample lookup."""

from __future__ import annotations

import threading

import pytest

from drakit.telemetry.metrics import Counter, Gauge, GaugeFamily, Histogram, Registry, format_float


def test_counter_exposes_total_and_created_samples_under_a_name_without_total() -> None:
    registry = Registry()
    counter = Counter("claims_total", "Claims.", namespace="drakit", registry=registry)
    counter.inc()
    counter.inc(2.5)
    (family,) = registry.collect()
    assert (family.name, family.type) == ("drakit_claims", "counter")
    assert [s.name for s in family.samples] == ["drakit_claims_total", "drakit_claims_created"]
    assert registry.get_sample_value("drakit_claims_total") == 3.5
    assert counter.get() == 3.5
    assert registry.get_sample_value("drakit_claims_created") is not None


def test_created_samples_are_left_out_when_the_environment_disables_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Registry()
    Counter("events", "Events.", registry=registry).inc()
    monkeypatch.setenv("PROMETHEUS_DISABLE_CREATED_SERIES", "true")
    assert [s.name for f in registry.collect() for s in f.samples] == ["events_total"]


def test_counter_refuses_to_go_down() -> None:
    counter = Counter("events", "Events.", registry=Registry())
    with pytest.raises(ValueError, match="non-negative"):
        counter.inc(-1)


def test_labelled_series_appear_in_creation_order_with_their_own_values() -> None:
    registry = Registry()
    counter = Counter("calls", "Calls.", ("operation", "result"), registry=registry)
    counter.labels("prepare", "success").inc(3)
    counter.labels(operation="unprepare", result="error").inc()
    counter.labels("prepare", "error")  # exported at 0 from its first labels() call
    samples = [s for f in registry.collect() for s in f.samples]
    totals = [(s.labels, s.value) for s in samples if s.name.endswith("_total")]
    assert totals == [
        ({"operation": "prepare", "result": "success"}, 3.0),
        ({"operation": "unprepare", "result": "error"}, 1.0),
        ({"operation": "prepare", "result": "error"}, 0.0),
    ]
    assert counter.labels("prepare", "success") is counter.labels("prepare", "success")


def test_label_values_are_checked_against_the_label_names() -> None:
    gauge = Gauge("depth", "Depth.", ("name",), registry=Registry())
    with pytest.raises(ValueError, match="label count"):
        gauge.labels("a", "b")
    with pytest.raises(ValueError, match="label names"):
        gauge.labels(queue="a")
    with pytest.raises(ValueError, match="both"):
        gauge.labels("a", name="a")
    with pytest.raises(ValueError, match="missing label values"):
        gauge.set(1)
    with pytest.raises(ValueError, match="No label names"):
        Gauge("plain", "Plain.", registry=Registry()).labels("x")


def test_bad_names_and_duplicate_registrations_are_refused() -> None:
    registry = Registry()
    Counter("events", "Events.", registry=registry)
    with pytest.raises(ValueError, match="duplicated"):
        Gauge("events_total", "Clash with the counter's sample.", registry=registry)
    with pytest.raises(ValueError, match="invalid metric name"):
        Gauge("bad-name", "Dash.", registry=registry)
    with pytest.raises(ValueError, match="invalid label name"):
        Histogram("latency", "Le is reserved.", ("le",), buckets=(1,), registry=registry)
    with pytest.raises(ValueError, match="invalid label name"):
        Gauge("g", "Reserved prefix.", ("__x",), registry=registry)


def test_gauge_goes_up_down_and_is_set() -> None:
    registry = Registry()
    gauge = Gauge("in_flight", "In flight.", ("operation",), registry=registry)
    child = gauge.labels("prepare")
    child.inc()
    child.inc(4)
    child.dec(2)
    assert registry.get_sample_value("in_flight", {"operation": "prepare"}) == 3
    child.set(-1.5)
    assert registry.get_sample_value("in_flight", {"operation": "prepare"}) == -1.5
    assert child.get() == -1.5
    assert registry.get_sample_value("in_flight", {"operation": "other"}) is None
    assert registry.get_sample_value("in_flight") is None


def test_histogram_counts_cumulative_buckets_with_inf_count_and_sum() -> None:
    registry = Registry()
    histogram = Histogram("duration_seconds", "D.", buckets=(0.01, 0.1, 1), registry=registry)
    for value in (0.005, 0.01, 0.05, 2, 30):
        histogram.observe(value)
    (family,) = registry.collect()
    buckets = [(s.labels["le"], s.value) for s in family.samples if s.name.endswith("_bucket")]
    assert buckets == [("0.01", 2.0), ("0.1", 3.0), ("1.0", 3.0), ("+Inf", 5.0)]
    assert registry.get_sample_value("duration_seconds_count") == 5
    assert registry.get_sample_value("duration_seconds_sum") == pytest.approx(32.065)
    assert [s.name for s in family.samples][-3:] == [
        "duration_seconds_count",
        "duration_seconds_sum",
        "duration_seconds_created",
    ]


def test_histogram_bucket_bounds_must_ascend_and_timer_observes_its_block() -> None:
    with pytest.raises(ValueError, match="sorted"):
        Histogram("h", "H.", buckets=(1, 0.5), registry=Registry())
    registry = Registry()
    histogram = Histogram("h", "H.", ("op",), buckets=(1000,), registry=registry)
    with pytest.raises(RuntimeError), histogram.labels("x").time():
        raise RuntimeError("the block failed")
    assert registry.get_sample_value("h_count", {"op": "x"}) == 1
    assert registry.get_sample_value("h_bucket", {"op": "x", "le": "1000.0"}) == 1


def test_concurrent_increments_from_many_threads_are_all_counted() -> None:
    registry = Registry()
    counter = Counter("events", "Events.", ("worker",), registry=registry)
    histogram = Histogram("sizes", "Sizes.", buckets=(1, 10), registry=registry)

    def work() -> None:
        for _ in range(2000):
            counter.labels("shared").inc()
            histogram.observe(5)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.get_sample_value("events_total", {"worker": "shared"}) == 16000
    assert registry.get_sample_value("sizes_bucket", {"le": "10.0"}) == 16000
    assert registry.get_sample_value("sizes_sum") == 80000


def test_scrape_time_collectors_are_collected_in_registration_order() -> None:
    registry = Registry()

    class Claims:
        def collect(self) -> list[GaugeFamily]:
            family = GaugeFamily("claims", "Claims by state.", labels=["state"])
            family.add_metric(["allocated"], 2)
            return [family]

    registry.register(Claims())
    Gauge("after", "Registered second.", registry=registry)
    assert [f.name for f in registry.collect()] == ["claims", "after"]
    assert registry.get_sample_value("claims", {"state": "allocated"}) == 2
    with pytest.raises(ValueError, match="label values"):
        GaugeFamily("g", "G.", labels=["a"]).add_metric(["x", "y"], 1)


def test_floats_print_as_prometheus_prints_them() -> None:
    assert [format_float(v) for v in (0.005, 1, 45, float("inf"), 1e-08, 12345678.0)] == [
        "0.005",
        "1.0",
        "45.0",
        "+Inf",
        "1e-08",
        "1.2345678e+07",
    ]
