"""What happened during a soak, in order: fault events, workload actions and every API write
a watch observed (pods and claims of the workload's namespace, ResourceSlices, the leader
Lease), so that a violation can be read against what led to it.

Watches reconnect (and relist) on their own when the apiserver restarts or etcd compacts;
the gap is recorded too.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    LEASES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
    ResourceType,
)

#: Entries kept (a 30-minute soak writes some 100k; older ones drop off).
MAX_ENTRIES = 400_000


@dataclass(frozen=True)
class Entry:
    at: float  # seconds since the soak started
    source: str
    what: str
    data: dict[str, Any]

    def line(self) -> str:
        return json.dumps(
            {"t": round(self.at, 3), "source": self.source, "what": self.what, **self.data},
            sort_keys=True,
        )


class Timeline:
    """Thread-safe, bounded, in-memory log of the run; :meth:`save` writes it as JSON lines."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self._entries: deque[Entry] = deque(maxlen=MAX_ENTRIES)
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def add(self, source: str, what: str, data: dict[str, Any]) -> None:
        with self._lock:
            self._entries.append(Entry(self.elapsed(), source, what, data))

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def save(self, path: Path) -> None:
        path.write_text("".join(e.line() + "\n" for e in self.entries()))

    def around(self, at: float, before: float = 30.0, after: float = 5.0) -> Iterator[Entry]:
        for entry in self.entries():
            if at - before <= entry.at <= at + after:
                yield entry


def summarize(obj: KubeObject) -> dict[str, Any]:
    """The fields of an object that matter for the invariants, small enough to keep."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": meta.get("name"), "rv": meta.get("resourceVersion")}
    if meta.get("deletionTimestamp"):
        out["deleting"] = True
    if meta.get("finalizers"):
        out["finalizers"] = meta["finalizers"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    kind = obj.get("kind")
    if kind == "Pod":
        out.update(node=spec.get("nodeName"), phase=status.get("phase"))
    elif kind == "ResourceClaim":
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        out["devices"] = [f"{r.get('pool')}/{r.get('device')}" for r in results]
        out["reservedFor"] = [r.get("name") for r in status.get("reservedFor") or []]
    elif kind == "ResourceSlice":
        out.update(
            node=spec.get("nodeName"),
            pool=(spec.get("pool") or {}).get("name"),
            generation=(spec.get("pool") or {}).get("generation"),
        )
    elif kind == "Lease":
        out["holder"] = spec.get("holderIdentity")
    return out


class ApiRecorder:
    """Background watches feeding a :class:`Timeline`; :meth:`stop` ends them."""

    def __init__(self, client: Any, namespace: str, timeline: Timeline) -> None:
        self.timeline = timeline
        self._stop = threading.Event()
        self._streams: list[Any] = []
        self._lock = threading.Lock()
        targets: list[tuple[ResourceType, str | None]] = [
            (PODS, namespace),
            (RESOURCE_CLAIMS, namespace),
            (RESOURCE_SLICES, None),
            (LEASES, "kube-system"),
        ]
        self._threads = [
            threading.Thread(
                target=self._follow,
                args=(Resource(client, t), ns),
                daemon=True,
                name=f"record-{t.kind}",
            )
            for t, ns in targets
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for stream in self._streams:
                with contextlib.suppress(Exception):
                    stream.close()
        for thread in self._threads:
            thread.join(timeout=10)

    def _follow(self, resource: Resource, namespace: str | None) -> None:
        kind = resource.rtype.kind
        while not self._stop.is_set():
            try:
                listed = resource.list(namespace)
                stream = resource.watch(
                    namespace, resource_version=listed.resource_version, timeout_seconds=300
                )
                with self._lock:
                    self._streams.append(stream)
                for event in stream:
                    if self._stop.is_set():
                        return
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        obj = event.object
                        obj.setdefault("kind", kind)
                        self.timeline.add("api", f"{event.type} {kind}", summarize(obj))
            except (ApiError, OSError, ValueError) as err:
                if self._stop.is_set():
                    return
                self.timeline.add(
                    "recorder",
                    f"watch {kind} broke",
                    {"error": f"{type(err).__name__}: {err}"[:200]},
                )
                self._stop.wait(1.0)
