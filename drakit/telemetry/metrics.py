"""drakit's metric values: counters, gauges and histograms with label children, in a registry.

The programs count with these types, not with prometheus_client's: importing
prometheus_client costs a node plugin about 1.5 MiB (it brings ``urllib.request``,
``http.server`` and ``wsgiref`` for its HTTP server), and a plugin serves no ``/metrics``
unless ``--metrics-address`` is given. :mod:`drakit.telemetry.endpoint` (imported only when an
endpoint starts) renders a :class:`Registry` through prometheus_client, so the text served
is what prometheus_client's own types would print.

Names, samples and rules follow prometheus_client's, so ``/metrics`` and
:meth:`Registry.get_sample_value` look the same as with its types:

- a metric's full name is ``namespace + "_" + name``; a counter's family name drops a
  ``_total`` suffix, and its samples are ``<name>_total`` and ``<name>_created``;
- a gauge has one sample ``<name>``; a histogram has cumulative ``<name>_bucket{le=...}``
  samples (``+Inf`` always last), ``<name>_count``, ``<name>_sum`` and ``<name>_created``;
- ``_created`` samples (Unix time of the child's creation) are left out when the
  environment sets ``PROMETHEUS_DISABLE_CREATED_SERIES`` to true, as prometheus_client does;
- a metric without label names is one value, created with the metric; a metric with label
  names has one child per label values, created by the first :meth:`labels` call and
  exported from then on (call it at start-up to export a series before its first event).

Every method is thread-safe.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Generic, NamedTuple, Protocol, TypeVar

__all__ = [
    "Collector",
    "Counter",
    "Family",
    "Gauge",
    "GaugeFamily",
    "Histogram",
    "Registry",
    "Sample",
    "format_float",
]

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_INF = math.inf


def _created_series_enabled() -> bool:
    # prometheus_client's switch, read the same way, so a deployment that set it keeps its output.
    flag = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False")
    return flag.lower() not in ("true", "1", "t")


class Sample(NamedTuple):
    """One exposed series: full sample name, labels, value."""

    name: str
    labels: dict[str, str]
    value: float


class Family:
    """One metric family as scraped: name (a counter's without ``_total``), help, type
    (``counter``, ``gauge`` or ``histogram``) and its samples."""

    __slots__ = ("documentation", "name", "samples", "type")

    def __init__(self, name: str, documentation: str, type_: str) -> None:
        self.name = name
        self.documentation = documentation
        self.type = type_
        self.samples: list[Sample] = []


class GaugeFamily(Family):
    """A gauge family built at scrape time by a :class:`Collector` (values from a cache)."""

    __slots__ = ("_labelnames",)

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        _check_metric_name(name)
        super().__init__(name, documentation, "gauge")
        self._labelnames = tuple(_check_label_names(labels))

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        """Add the series with these label values (in the order of the label names)."""
        if len(labels) != len(self._labelnames):
            raise ValueError(f"{self.name}: {len(labels)} label values for {self._labelnames}")
        series = dict(zip(self._labelnames, labels, strict=True))
        self.samples.append(Sample(self.name, series, value))


class Collector(Protocol):
    """Anything a :class:`Registry` collects: the metric types here, or a source of
    families computed when scraped."""

    def collect(self) -> Iterable[Family]: ...


def format_float(value: float) -> str:
    """A float as Prometheus (Go) prints it: ``+Inf``, ``-Inf``, ``NaN``, exponents from 1e+07
    (prometheus_client's rule, used for the ``le`` label of histogram buckets)."""
    if value == _INF:
        return "+Inf"
    if value == -_INF:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _check_metric_name(name: str) -> str:
    if not _METRIC_NAME.match(name):
        raise ValueError(f"invalid metric name {name!r}")
    return name


def _check_label_names(names: Iterable[str], reserved: Sequence[str] = ()) -> list[str]:
    checked = list(names)
    for name in checked:
        if not _LABEL_NAME.match(name) or name.startswith("__") or name in reserved:
            raise ValueError(f"invalid label name {name!r}")
    if len(set(checked)) != len(checked):
        raise ValueError(f"duplicate label names in {checked}")
    return checked


class Registry:
    """The metrics of one component, collected in the order they were registered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._collectors: list[Collector] = []
        self._names: set[str] = set()

    def register(self, collector: Collector, names: Iterable[str] = ()) -> None:
        """Collect ``collector`` from now on; ValueError if one of its exposed ``names`` is
        already taken (names of scrape-time collectors are not known and not checked)."""
        wanted = set(names)
        with self._lock:
            taken = wanted & self._names
            if taken:
                raise ValueError(f"duplicated metric names in registry: {sorted(taken)}")
            self._names |= wanted
            self._collectors.append(collector)

    def collect(self) -> Iterator[Family]:
        """Every family of every collector, in registration order."""
        with self._lock:
            collectors = list(self._collectors)
        for collector in collectors:
            yield from collector.collect()

    def get_sample_value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The value of the sample ``name`` with exactly ``labels`` (none by default), or None.

        Same contract as prometheus_client's ``CollectorRegistry.get_sample_value``; meant for
        tests, as it collects everything.
        """
        wanted = labels or {}
        for family in self.collect():
            for sample in family.samples:
                if sample.name == name and sample.labels == wanted:
                    return sample.value
        return None


class _Child:
    """One series' state behind its own lock."""

    __slots__ = ("_created", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._created = time.time()

    def samples(self, created: bool) -> list[tuple[str, dict[str, str], float]]:
        """``(suffix, extra labels, value)`` of this series."""
        raise NotImplementedError


class CounterChild(_Child):
    """A value that only goes up."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        super().__init__()
        self._value = 0.0

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` (ValueError if negative: counters only go up)."""
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with self._lock:
            self._value += amount

    def get(self) -> float:
        """The current count."""
        with self._lock:
            return self._value

    def samples(self, created: bool) -> list[tuple[str, dict[str, str], float]]:
        with self._lock:
            value = self._value
        out: list[tuple[str, dict[str, str], float]] = [("_total", {}, value)]
        if created:
            out.append(("_created", {}, self._created))
        return out


class GaugeChild(_Child):
    """A value that goes up and down."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        super().__init__()
        self._value = 0.0

    def inc(self, amount: float = 1) -> None:
        with self._lock:
            self._value += amount

    def dec(self, amount: float = 1) -> None:
        with self._lock:
            self._value -= amount

    def set(self, value: float) -> None:
        with self._lock:
            self._value = float(value)

    def get(self) -> float:
        """The current value."""
        with self._lock:
            return self._value

    def samples(self, created: bool) -> list[tuple[str, dict[str, str], float]]:
        with self._lock:
            return [("", {}, self._value)]


class _Timer:
    """Observes the seconds its ``with`` block took (also when the block raises)."""

    __slots__ = ("_observe", "_started")

    def __init__(self, observe: Callable[[float], None]) -> None:
        self._observe = observe
        self._started = 0.0

    def __enter__(self) -> _Timer:
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._observe(max(time.perf_counter() - self._started, 0.0))


class HistogramChild(_Child):
    """Observations counted into buckets by upper bound, with their sum."""

    __slots__ = ("_bounds", "_counts", "_sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        super().__init__()
        self._bounds = bounds
        self._counts = [0.0] * len(bounds)
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        """Count ``amount`` in the first bucket whose bound is ≥ it, and add it to the sum."""
        index = bisect_left(self._bounds, amount)  # the last bound is +Inf
        with self._lock:
            self._sum += amount
            if not math.isnan(amount):  # NaN lands in no bucket, as in prometheus_client
                self._counts[index] += 1

    def time(self) -> _Timer:
        """A context manager that observes the duration of its block in seconds."""
        return _Timer(self.observe)

    def samples(self, created: bool) -> list[tuple[str, dict[str, str], float]]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        out: list[tuple[str, dict[str, str], float]] = []
        cumulative = 0.0
        for bound, count in zip(self._bounds, counts, strict=True):
            cumulative += count
            out.append(("_bucket", {"le": format_float(bound)}, cumulative))
        out.append(("_count", {}, cumulative))
        if self._bounds[0] >= 0:  # prometheus_client leaves the sum out for negative buckets
            out.append(("_sum", {}, total))
        if created:
            out.append(("_created", {}, self._created))
        return out


ChildT = TypeVar("ChildT", bound=_Child)


class _Metric(Generic[ChildT]):
    """A named family of series: one per label values (or one only, without label names)."""

    _type = ""
    _suffixes: tuple[str, ...] = ("",)
    _reserved_labels: tuple[str, ...] = ()

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        namespace: str = "",
        registry: Registry | None = None,
    ) -> None:
        if not name:
            raise ValueError("Metric name should not be empty")
        full = f"{namespace}_{name}" if namespace else name
        if self._type == "counter" and full.endswith("_total"):
            full = full[: -len("_total")]
        self.name = _check_metric_name(full)
        self.documentation = documentation
        self.labelnames = tuple(_check_label_names(labelnames, self._reserved_labels))
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ...], ChildT] = {}
        if not self.labelnames:
            self._children[()] = self._new_child()
        if registry is not None:
            registry.register(self, (self.name + suffix for suffix in self._suffixes))

    def _new_child(self) -> ChildT:
        raise NotImplementedError

    def labels(self, *values: object, **by_name: object) -> ChildT:
        """The series of these label values (positional, or by name), created on first use;
        values are turned into strings."""
        if values and not by_name:
            # The hot path (every call counts and times itself): a series that exists,
            # named by strings. A dict read needs no lock; creation below takes it.
            known = self._children.get(values)  # type: ignore[arg-type]
            if known is not None:  # only a key of len(labelnames) strings can be found
                return known
        if not self.labelnames:
            raise ValueError(f"No label names were set when constructing {self.name}")
        if values and by_name:
            raise ValueError("Can't pass both *args and **kwargs")
        if by_name:
            if sorted(by_name) != sorted(self.labelnames):
                raise ValueError(f"Incorrect label names for {self.name}: {sorted(by_name)}")
            key = tuple(str(by_name[label]) for label in self.labelnames)
        else:
            if len(values) != len(self.labelnames):
                raise ValueError(f"Incorrect label count for {self.name}")
            key = tuple(str(value) for value in values)
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._new_child()
            return child

    def _only(self) -> ChildT:
        if self.labelnames:
            raise ValueError(f"{self._type} metric {self.name} is missing label values")
        return self._children[()]

    def collect(self) -> list[Family]:
        """This metric as one family, its series in the order they were created."""
        family = Family(self.name, self.documentation, self._type)
        created = _created_series_enabled()
        with self._lock:
            children = list(self._children.items())
        for key, child in children:
            series = dict(zip(self.labelnames, key, strict=True))
            for suffix, extra, value in child.samples(created):
                family.samples.append(Sample(self.name + suffix, {**series, **extra}, value))
        return [family]


class Counter(_Metric[CounterChild]):
    """A counter; exposed as ``<name>_total`` (and ``<name>_created``)."""

    _type = "counter"
    _suffixes = ("", "_total", "_created")

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` to the counter without labels."""
        self._only().inc(amount)

    def get(self) -> float:
        """The count of the counter without labels."""
        return self._only().get()


class Gauge(_Metric[GaugeChild]):
    """A gauge; exposed as ``<name>``."""

    _type = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def inc(self, amount: float = 1) -> None:
        self._only().inc(amount)

    def dec(self, amount: float = 1) -> None:
        self._only().dec(amount)

    def set(self, value: float) -> None:
        self._only().set(value)

    def get(self) -> float:
        """The value of the gauge without labels."""
        return self._only().get()


class Histogram(_Metric[HistogramChild]):
    """A histogram over fixed ``buckets`` (upper bounds, ascending; ``+Inf`` is added)."""

    _type = "histogram"
    _suffixes = ("", "_bucket", "_count", "_sum", "_created")
    _reserved_labels = ("le",)

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        buckets: Sequence[float],
        namespace: str = "",
        registry: Registry | None = None,
    ) -> None:
        bounds = [float(bound) for bound in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if bounds and bounds[-1] != _INF:
            bounds.append(_INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        self._bounds = tuple(bounds)
        super().__init__(name, documentation, labelnames, namespace=namespace, registry=registry)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self._bounds)

    def observe(self, amount: float) -> None:
        self._only().observe(amount)

    def time(self) -> _Timer:
        """A context manager that observes the duration of its block in seconds."""
        return self._only().time()
