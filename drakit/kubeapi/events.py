"""An Event recorder (events.k8s.io/v1) that cannot flood the API server.

``record`` never blocks and never raises: events go to a background writer. Repeats of the same
event (same object, type, reason, action and note) are aggregated into the first Event's
``series`` (count and last-observed time) and written at most once per ``min_interval`` per
event; a repeat after ``series_window`` of quiet starts a new Event. On top of that each object
gets a token bucket (``burst`` events, then one per ``refill_seconds``) against loops that
produce ever-different notes; what the bucket refuses is dropped and logged at debug level.

The writer sends one request at a time. When events come faster than the apiserver takes
them (a burst of pods scheduled), at most ``max_queued`` wait; later ones are dropped,
counted in ``dropped`` and reported in a warning at most once a minute, as client-go's
broadcaster drops past its 1,000 queued events: memory stays bounded and a slow apiserver
is not sent a backlog it cannot take.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.objects import KubeObject, object_ref
from drakit.kubeapi.ratelimit import TokenBucket
from drakit.kubeapi.resources import EVENTS, PatchType, Resource
from drakit.telemetry.logs import get_logger

__all__ = ["NORMAL", "WARNING", "EventRecorder"]

logger = get_logger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_NOTE_BYTES = 1024
MAX_TRACKED = 4096  # aggregation and rate-limit state is kept for this many keys (LRU)
#: Characters of the object's name an Event name keeps (then "." and at most 16 hex digits).
NAME_PREFIX_CHARS = 200
MAX_QUEUED = 1000  # events waiting for the writer (client-go's maxQueuedEvents)
DROP_WARNING_INTERVAL = 60.0


@dataclass
class _Series:
    """What we know about one aggregated event."""

    name: str
    namespace: str
    count: int
    written_count: int
    last_written: float
    last_seen: float
    last_seen_time: str


@dataclass(frozen=True)
class _Occurrence:
    key: tuple[str, ...]
    bucket_key: str
    body: KubeObject
    observed: str  # MicroTime
    done: threading.Event | None = field(default=None, compare=False)


class EventRecorder:
    """Records Events about objects as ``reporting_controller`` / ``reporting_instance``."""

    def __init__(
        self,
        api: Any,
        *,
        reporting_controller: str,
        reporting_instance: str,
        min_interval: float = 30.0,
        series_window: float = 600.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
        max_queued: int = MAX_QUEUED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._events = Resource(api, EVENTS)
        self._controller = reporting_controller
        self._instance = reporting_instance
        self._min_interval = min_interval
        self._series_window = series_window
        self._burst = burst
        self._refill = 1.0 / refill_seconds
        self._clock = clock
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        # Series with repeats not written yet: the writer's timeout and flush look at these
        # only, not at every tracked series (up to MAX_TRACKED, scanned per event before).
        self._pending: dict[tuple[str, ...], _Series] = {}
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._queue: queue.SimpleQueue[_Occurrence | threading.Event | None] = queue.SimpleQueue()
        self._max_queued = max_queued
        self._queued = 0  # occurrences in the queue; markers and the stop sentinel not counted
        self._queued_lock = threading.Lock()
        #: Events dropped because ``max_queued`` were waiting (since the start).
        self.dropped = 0
        self._dropped_since_warning = 0
        self._last_drop_warning: float | None = None
        self._thread = threading.Thread(target=self._write_loop, name="event-recorder", daemon=True)
        self._stopped = False
        self._thread.start()

    def record(
        self,
        regarding: KubeObject,
        *,
        type: str,  # the Event field's name, shadowing the builtin on purpose
        reason: str,
        action: str,
        note: str = "",
        related: KubeObject | None = None,
    ) -> None:
        """Record an event about ``regarding`` (an object, or an ObjectReference dict).

        ``type`` is Normal or Warning; ``reason`` is UpperCamelCase
        (``FailedResourceClaimCreation``); ``action`` says what was tried (``Allocate``,
        ``Bind``...). Raises ValueError only for a bad ``type``.
        """
        if type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be {NORMAL} or {WARNING}, got {type!r}")
        if self._stopped:
            return
        ref = _reference(regarding)
        note = _truncate(note)
        key = (ref.get("uid", ""), ref.get("kind", ""), ref.get("namespace", ""),
               ref.get("name", ""), type, reason, action, note)  # fmt: skip
        body: KubeObject = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {},
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "regarding": ref,
            "type": type,
            "reason": reason,
            "action": action,
            "note": note,
        }
        if related is not None:
            body["related"] = _reference(related)
        bucket_key = "/".join(key[:4])
        if self._admit():
            self._queue.put(_Occurrence(key, bucket_key, body, _micro_time()))

    def _admit(self) -> bool:
        """Count one more queued occurrence, or drop it (counted, warned) when full."""
        with self._queued_lock:
            if self._queued < self._max_queued:
                self._queued += 1
                return True
            self.dropped += 1
            self._dropped_since_warning += 1
            now = self._clock()
            if (
                self._last_drop_warning is not None
                and now - self._last_drop_warning < DROP_WARNING_INTERVAL
            ):
                return False
            dropped, self._dropped_since_warning = self._dropped_since_warning, 0
            self._last_drop_warning = now
        logger.warning(
            "Events dropped: the writer is behind the apiserver",
            dropped=dropped,
            queued=self._max_queued,
        )
        return False

    def normal(self, regarding: KubeObject, reason: str, action: str, note: str = "") -> None:
        self.record(regarding, type=NORMAL, reason=reason, action=action, note=note)

    def warning(self, regarding: KubeObject, reason: str, action: str, note: str = "") -> None:
        self.record(regarding, type=WARNING, reason=reason, action=action, note=note)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything recorded so far was handled, and write pending repeats now."""
        marker = threading.Event()
        self._queue.put(marker)
        return marker.wait(timeout)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Flush and stop the writer. Later ``record`` calls are ignored. Idempotent."""
        if self._stopped:
            return
        self.flush(timeout)
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)

    # -- writer thread -------------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._next_flush_in())
            except queue.Empty:
                self._flush_due(force=False)
                continue
            if item is None:
                return
            if isinstance(item, threading.Event):
                self._flush_due(force=True)
                item.set()
                continue
            with self._queued_lock:
                self._queued -= 1
            try:
                self._handle(item)
            except Exception:
                logger.exception("Event recorder failed")

    def _handle(self, occ: _Occurrence) -> None:
        now = self._clock()
        series = self._series.get(occ.key)
        if series is not None and now - series.last_seen < self._series_window:
            series.count += 1
            series.last_seen = now
            series.last_seen_time = occ.observed
            self._series.move_to_end(occ.key)
            if now - series.last_written >= self._min_interval:
                self._write_series(occ.key, series)
            else:
                self._pending[occ.key] = series
            return
        if not self._allowed(occ.bucket_key):
            logger.debug("Event dropped by rate limit", object=occ.bucket_key)
            return
        self._create(occ, now)

    def _allowed(self, bucket_key: str) -> bool:
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = TokenBucket(self._refill, self._burst, clock=self._clock)
            self._buckets[bucket_key] = bucket
            if len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(bucket_key)
        return bucket.reserve() <= 0

    def _create(self, occ: _Occurrence, now: float) -> None:
        ref = occ.body["regarding"]
        namespace = ref.get("namespace") or "default"  # cluster-scoped objects: "default"
        body = {
            **occ.body,
            "metadata": {"name": _event_name(ref.get("name", "event")), "namespace": namespace},
            "eventTime": occ.observed,
        }
        try:
            created = self._events.create(body)
        except ApiError as err:
            logger.warning(
                "Could not record event",
                reason=occ.body["reason"],
                object=occ.bucket_key,
                cause=str(err),
            )
            return
        meta = created["metadata"]
        self._pending.pop(occ.key, None)  # a new Event replaces the old series, as before
        self._series[occ.key] = _Series(
            name=meta["name"],
            namespace=meta["namespace"],
            count=1,
            written_count=1,
            last_written=now,
            last_seen=now,
            last_seen_time=occ.observed,
        )
        if len(self._series) > MAX_TRACKED:
            evicted, _ = self._series.popitem(last=False)
            self._pending.pop(evicted, None)

    def _write_series(self, key: tuple[str, ...], series: _Series) -> None:
        patch = {"series": {"count": series.count, "lastObservedTime": series.last_seen_time}}
        try:
            self._events.patch(series.name, patch, series.namespace, patch_type=PatchType.MERGE)
        except NotFound:
            self._series.pop(key, None)  # expired (events have a TTL): the next repeat recreates
            self._pending.pop(key, None)
            return
        except ApiError as err:
            logger.warning("Could not update event series", event=series.name, cause=str(err))
        series.written_count = series.count
        series.last_written = self._clock()
        self._pending.pop(key, None)

    def _flush_due(self, *, force: bool) -> None:
        now = self._clock()
        for key, series in list(self._pending.items()):
            if force or now - series.last_written >= self._min_interval:
                self._write_series(key, series)

    def _next_flush_in(self) -> float | None:
        if not self._pending:
            return None
        oldest = min(s.last_written for s in self._pending.values())
        return max(0.0, oldest + self._min_interval - self._clock())


def _reference(obj: KubeObject) -> dict[str, str]:
    if "metadata" in obj:
        return object_ref(obj)
    return {k: str(v) for k, v in obj.items() if v}


def _truncate(note: str) -> str:
    raw = note.encode("utf-8")
    if len(raw) <= MAX_NOTE_BYTES:
        return note
    return raw[: MAX_NOTE_BYTES - 3].decode("utf-8", "ignore") + "..."


def _event_name(object_name: str) -> str:
    """A valid Event name (DNS subdomain, at most 217 characters) for an object's event.

    Like client-go: the object's name plus a hex timestamp, unique enough per object. The
    name is cut to 200 characters, and the cut must not end in "." or "-": "name-.ts"
    and "name..ts" hold a label that does not end alphanumeric, which the apiserver
    refuses. An object name is a DNS subdomain already, so only its end needs care.
    """
    prefix = object_name[:NAME_PREFIX_CHARS].rstrip(".-") or "event"
    return f"{prefix}.{time.time_ns():x}"


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
