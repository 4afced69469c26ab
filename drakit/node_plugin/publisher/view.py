"""The publisher's view of its own slices: the informers' stores plus its own recent writes.

An informer learns about a write only when the watch event arrives. A sync that runs in
between would see a slice it just created as missing (and create a duplicate) or one it just
deleted as present. Like client-go's MutationCache (which the Go controller uses), this view
overlays the objects the publisher wrote, and tombstones for the ones it deleted, until the
informer has caught up with them (or, as a safety net, ``ttl`` seconds have passed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from drakit.kubeapi.informer import Informer
from drakit.kubeapi.objects import KubeObject, resource_version_int

__all__ = ["POOL_INDEX", "SliceView", "pool_index"]

POOL_INDEX = "pool"


def pool_index(obj: KubeObject) -> list[str]:
    """Index function: the slice's pool name."""
    name = ((obj.get("spec") or {}).get("pool") or {}).get("name")
    return [str(name)] if name else []


@dataclass
class _Entry:
    pool: str
    rv: int
    obj: KubeObject | None  # None: a tombstone for a deleted slice
    expires: float


class SliceView:
    """Thread-safe merge of informer stores and the publisher's own writes."""

    def __init__(
        self,
        informers: Sequence[Informer],
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._informers = tuple(informers)
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._overlay: dict[str, _Entry] = {}

    def record_written(self, obj: KubeObject) -> None:
        """Remember a slice the apiserver returned from a create or update."""
        self._put(obj, keep=True)

    def record_deleted(self, obj: KubeObject) -> None:
        """Remember that ``obj`` (as last seen) was deleted."""
        self._put(obj, keep=False)

    def observe(self, obj: KubeObject, deleted: bool = False) -> bool:
        """Informer event: drop overlay entries the informer has caught up with.

        Returns True when the event is the echo of the publisher's own write (the object it
        wrote, or the deletion it made), which needs no sync.
        """
        name = _name(obj)
        with self._lock:
            entry = self._overlay.get(name)
            if entry is None:
                return False
            own = entry.obj is None if deleted else entry.obj is not None and _rv(obj) == entry.rv
            if deleted or _rv(obj) >= entry.rv:
                del self._overlay[name]
            return own

    def pool_slices(self, pool: str) -> list[KubeObject]:
        """The slices of ``pool`` as they are after the publisher's own writes, by name."""
        found: dict[str, KubeObject] = {}
        for informer in self._informers:
            for obj in informer.store.by_index(POOL_INDEX, pool):
                found[_name(obj)] = obj
        now = self._clock()
        with self._lock:
            for name, entry in list(self._overlay.items()):
                if entry.expires <= now:
                    del self._overlay[name]
                    continue
                if entry.pool != pool:
                    continue
                seen = found.get(name)
                if seen is not None and _rv(seen) >= entry.rv and entry.obj is not None:
                    continue
                if entry.obj is None:
                    if seen is not None and _rv(seen) <= entry.rv:
                        del found[name]
                else:
                    found[name] = entry.obj
        return [found[name] for name in sorted(found)]

    def pool_names(self) -> set[str]:
        """Every pool that has at least one slice in view."""
        names: set[str] = set()
        for informer in self._informers:
            for obj in informer.store.objects():
                names.update(pool_index(obj))
        with self._lock:
            names.update(e.pool for e in self._overlay.values() if e.obj is not None)
        return names

    def _put(self, obj: KubeObject, *, keep: bool) -> None:
        pools = pool_index(obj)
        if not pools:
            return
        entry = _Entry(pools[0], _rv(obj), obj if keep else None, self._clock() + self._ttl)
        with self._lock:
            self._overlay[_name(obj)] = entry


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _rv(obj: KubeObject) -> int:
    try:
        return resource_version_int(obj)
    except ValueError:
        return 0
