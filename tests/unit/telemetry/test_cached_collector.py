"""Scrape-time families recounted only after a change, at most once per interval."""

from __future__ import annotations

from collections.abc import Iterable

from helpers.clock import FakeClock

from drakit.telemetry.cachedcollector import CachedCollector
from drakit.telemetry.metrics import Family, GaugeFamily


class CountingSource:
    """A collector that counts how often it was asked to compute."""

    def __init__(self) -> None:
        self.computed = 0
        self.value = 1.0

    def collect(self) -> Iterable[Family]:
        self.computed += 1
        family = GaugeFamily("things", "Things.")
        family.add_metric([], self.value)
        yield family


def values(cached: CachedCollector) -> list[float]:
    return [s.value for f in cached.collect() for s in f.samples]


def test_scrapes_without_a_change_reuse_the_first_count() -> None:
    source = CountingSource()
    cached = CachedCollector(source, min_interval=5.0, clock=FakeClock())
    for _ in range(3):
        assert values(cached) == [1.0]
    assert source.computed == 1


def test_a_change_is_counted_once_the_interval_has_passed() -> None:
    clock = FakeClock()
    source = CountingSource()
    cached = CachedCollector(source, min_interval=5.0, clock=clock)
    values(cached)
    source.value = 2.0
    cached.changed()
    assert values(cached) == [1.0]  # within the interval: the last count
    clock.advance(5.0)
    assert values(cached) == [2.0]
    assert values(cached) == [2.0]
    assert source.computed == 2


def test_time_alone_does_not_cause_a_recount() -> None:
    clock = FakeClock()
    source = CountingSource()
    cached = CachedCollector(source, min_interval=5.0, clock=clock)
    values(cached)
    clock.advance(3600.0)
    values(cached)
    assert source.computed == 1
