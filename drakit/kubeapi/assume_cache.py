"""The assume cache: an informer's objects plus the writes we made that it has not seen yet.

A controller that allocates devices must account for its own writes immediately. Between an
UpdateStatus and the informer delivering it, the next allocation would otherwise treat the
devices as free. So, per key, the cache holds two versions: ``api`` (the latest from the
informer) and ``latest`` (``api``, or a newer object we wrote and ``assume``d). Reads return
``latest``. The rules are the scheduler's (``pkg/scheduler/util/assumecache``):

- an informer add or update replaces both versions only if its resourceVersion is *greater*
  than that of ``latest``, as integers; older or equal ones (stale events, resyncs) are ignored,
  so they never overwrite an assumed object;
- ``assume(obj)`` needs the key to exist and ``obj``'s resourceVersion to be at least that of
  ``latest``; it replaces ``latest`` only. Only assume objects returned by an API write;
- ``restore(key)`` puts the informer's version back (after a failed write sequence);
- an informer delete removes the key.

Handlers get the resulting add/update/delete events one at a time, in the order the changes
were made, even when several threads change the cache: each change queues its events under
the lock, and the thread that made it delivers (or waits until another thread has delivered)
them after releasing the lock, before returning. When ``assume`` returns, every handler has
seen the assumed object. Handlers may read the cache; they must not write to it.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject, object_key, resource_version_int
from drakit.telemetry.logs import get_logger

__all__ = ["AssumeCache", "AssumeCacheError", "NotInCacheError", "OutOfSyncError"]

logger = get_logger(__name__)

IndexFunc = Callable[[KubeObject], list[str]]


class AssumeCacheError(Exception):
    """``assume`` was refused."""


class NotInCacheError(AssumeCacheError):
    """The object to assume is not in the cache (not yet seen, or deleted)."""


class OutOfSyncError(AssumeCacheError):
    """The object to assume is older than the cached one."""


@dataclass
class _Entry:
    api: KubeObject
    latest: KubeObject


class AssumeCache:
    """See the module docstring. ``informer`` may be None to feed events by hand (tests)."""

    def __init__(
        self,
        informer: Informer | None,
        *,
        description: str,
        index_fn: IndexFunc | None = None,
    ) -> None:
        self.description = description
        self._informer = informer
        self._index_fn = index_fn
        self._entries: dict[str, _Entry] = {}
        self._index: dict[str, set[str]] = {}
        self._handlers: list[EventHandlers] = []
        self._pending: deque[Callable[[], None]] = deque()
        self._cond = threading.Condition()
        self._emitter: int | None = None  # thread id of the thread delivering events
        if informer is not None:
            informer.add_handlers(
                EventHandlers(
                    on_add=lambda obj, _initial: self.informer_add(obj),
                    on_update=lambda _old, new: self.informer_add(new),
                    on_delete=self.informer_delete,
                )
            )

    # -- informer side -------------------------------------------------------------------------

    def informer_add(self, obj: KubeObject) -> None:
        """An add or update from the informer: stored only if newer than ``latest``."""
        key = object_key(obj)
        try:
            new_rv = resource_version_int(obj)
        except ValueError as err:
            logger.error("Ignoring informer event", cache=self.description, cause=str(err))
            return
        with self._cond:
            entry = self._entries.get(key)
            old = entry.latest if entry else None
            if old is not None and new_rv <= _rv_or_minus_one(old):
                return
            self._set_latest(key, old, obj)
            self._entries[key] = _Entry(api=obj, latest=obj)
            self._push(old, obj)
        self._emit()

    def informer_delete(self, obj: KubeObject) -> None:
        """A delete from the informer: the key is removed, whatever was assumed."""
        key = object_key(obj)
        with self._cond:
            entry = self._entries.pop(key, None)
            if entry is None:
                return
            self._set_latest(key, entry.latest, None)
            self._push(entry.latest, None)
        self._emit()

    # -- writer side ---------------------------------------------------------------------------

    def assume(self, obj: KubeObject) -> None:
        """Make ``obj`` (returned by an API write) the cached version until the informer catches
        up. Raises NotInCacheError, OutOfSyncError, or ValueError for a non-integer RV."""
        key = object_key(obj)
        new_rv = resource_version_int(obj)
        with self._cond:
            entry = self._entries.get(key)
            if entry is None:
                raise NotInCacheError(f"{self.description} {key!r} is not in the cache")
            stored_rv = resource_version_int(entry.latest)
            if new_rv < stored_rv:
                raise OutOfSyncError(
                    f"{self.description} {key!r} is out of sync "
                    f"(stored: {stored_rv}, assume: {new_rv})"
                )
            old = entry.latest
            self._set_latest(key, old, obj)
            entry.latest = obj
            self._push(old, obj)
        self._emit()

    def restore(self, key: str) -> None:
        """Drop an assumed version of ``key``; a missing key is not an error."""
        with self._cond:
            entry = self._entries.get(key)
            if entry is None or entry.latest is entry.api:
                return
            old = entry.latest
            self._set_latest(key, old, entry.api)
            entry.latest = entry.api
            self._push(old, entry.api)
        self._emit()

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: str) -> KubeObject | None:
        """The latest version (assumed or from the informer), or None."""
        with self._cond:
            entry = self._entries.get(key)
            return entry.latest if entry else None

    def get_api_obj(self, key: str) -> KubeObject | None:
        """The informer's version, ignoring what was assumed, or None."""
        with self._cond:
            entry = self._entries.get(key)
            return entry.api if entry else None

    def list(self, index_value: str | None = None) -> list[KubeObject]:
        """All latest objects, or those whose index function returned ``index_value``."""
        with self._cond:
            if index_value is None:
                return [entry.latest for entry in self._entries.values()]
            keys = sorted(self._index.get(index_value, ()))
            return [self._entries[k].latest for k in keys]

    def has_synced(self) -> bool:
        return self._informer is None or self._informer.has_synced()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._informer is None or self._informer.wait_for_sync(timeout)

    def add_handlers(self, handlers: EventHandlers) -> None:
        """Register handlers; they first get ``on_add(obj, True)`` for every cached object."""
        with self._cond:
            self._handlers.append(handlers)
            for entry in self._entries.values():
                obj = entry.latest
                if handlers.on_add is not None:
                    self._pending.append(functools.partial(handlers.on_add, obj, True))
        self._emit()

    # -- internals -----------------------------------------------------------------------------

    def _set_latest(self, key: str, old: KubeObject | None, new: KubeObject | None) -> None:
        if self._index_fn is None:
            return
        for value in self._index_fn(old) if old is not None else ():
            keys = self._index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._index[value]
        for value in self._index_fn(new) if new is not None else ():
            self._index.setdefault(value, set()).add(key)

    def _push(self, old: KubeObject | None, new: KubeObject | None) -> None:
        """Queue one event per handler; called with the lock held."""
        for handlers in self._handlers:
            if old is None and new is not None and handlers.on_add:
                self._pending.append(functools.partial(handlers.on_add, new, False))
            elif old is not None and new is not None and handlers.on_update:
                self._pending.append(functools.partial(handlers.on_update, old, new))
            elif old is not None and new is None and handlers.on_delete:
                self._pending.append(functools.partial(handlers.on_delete, old))

    def _emit(self) -> None:
        """Deliver queued events in FIFO order, one thread at a time; returns when the events
        queued by the caller have been delivered."""
        me = threading.get_ident()
        with self._cond:
            if self._emitter == me:
                return  # a handler changed the cache: the outer delivery loop picks this up
            while self._emitter is not None:
                self._cond.wait()
            self._emitter = me
        try:
            while True:
                with self._cond:
                    if not self._pending:
                        return
                    deliver = self._pending.popleft()
                try:
                    deliver()
                except Exception:
                    logger.exception("Assume cache event handler failed", cache=self.description)
        finally:
            with self._cond:
                self._emitter = None
                self._cond.notify()


def _rv_or_minus_one(obj: KubeObject) -> int:
    try:
        return resource_version_int(obj)
    except ValueError:
        return -1
