"""List+watch informers: a local, indexed, eventually-consistent copy of one resource.

Two threads per informer:

- the **reflector** lists (paginated) and then watches from the list's resourceVersion with
  bookmarks. When the server ends a watch (its timeout) it watches again from the last
  resourceVersion it saw; after a 410 Gone it lists again at once; after any other failure of
  the list or the watch it lists again after an exponential backoff (0.8 s doubling to 30 s,
  reset by the next event).
- the **dispatcher** is the only writer of the store. It applies each change and then calls the
  event handlers, one change at a time, in the order the server sent them. Handlers therefore
  never run concurrently with each other and always see a store that already contains the
  change. Every ``resync_period`` seconds it calls ``on_update(obj, obj)`` for every object,
  which lets level-triggered controllers repair what an earlier failure left behind.

After a relist, objects that vanished meanwhile get ``on_delete`` with their last known state,
changed ones ``on_update`` and new ones ``on_add``. Objects in the store are shared: handlers and
readers must not change them (``copy.deepcopy`` first).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.errors import ApiError, Gone
from drakit.kubeapi.objects import KubeObject, object_key
from drakit.kubeapi.resources import Resource, WatchStream
from drakit.kubeapi.retry import Backoff
from drakit.telemetry.logs import get_logger

__all__ = ["EventHandlers", "IndexFunc", "Indexer", "Informer", "namespace_index"]

logger = get_logger(__name__)

#: An index function maps an object to the index values it should be found under.
IndexFunc = Callable[[KubeObject], Iterable[str]]

NAMESPACE_INDEX = "namespace"


def namespace_index(obj: KubeObject) -> list[str]:
    """Index function: the object's namespace (cluster-scoped objects are not indexed)."""
    namespace = (obj.get("metadata") or {}).get("namespace")
    return [namespace] if namespace else []


@dataclass(frozen=True)
class EventHandlers:
    """Callbacks for changes; any may be None. ``on_add`` gets ``is_initial=True`` for objects
    that were there when the handler was registered or the informer first listed.
    ``on_error`` gets each failure of a list or watch (the API error), on the reflector's
    thread, before the informer pauses and lists again (as client-go's watch error handler)."""

    on_add: Callable[[KubeObject, bool], None] | None = None
    on_update: Callable[[KubeObject, KubeObject], None] | None = None
    on_delete: Callable[[KubeObject], None] | None = None
    on_error: Callable[[Exception], None] | None = None


class Indexer:
    """A thread-safe store of objects by key (``<namespace>/<name>``) with secondary indexes.

    Only the informer's dispatcher writes to it.
    """

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, KubeObject] = {}
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index}
        self._indexers.update(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Add an index; existing objects are indexed immediately."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"index {name!r} already exists")
            self._indexers[name] = fn
            self._indices[name] = {}
            for key, obj in self._objects.items():
                self._index_one(name, key, obj)

    def get(self, key: str) -> KubeObject | None:
        with self._lock:
            return self._objects.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> KubeObject | None:
        return self.get(f"{namespace}/{name}" if namespace else name)

    def objects(self) -> list[KubeObject]:
        with self._lock:
            return list(self._objects.values())

    def all_keys(self) -> list[str]:
        with self._lock:
            return list(self._objects)

    def by_index(self, index: str, value: str) -> list[KubeObject]:
        """Objects whose ``index`` function returned ``value``; KeyError for an unknown index."""
        with self._lock:
            keys = self._indices[index].get(value, set())
            return [self._objects[k] for k in sorted(keys)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    # -- writes (dispatcher only) --------------------------------------------------------------

    def _upsert(self, obj: KubeObject) -> KubeObject | None:
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                self._unindex(key, old)
            self._objects[key] = obj
            for name in self._indexers:
                self._index_one(name, key, obj)
            return old

    def _delete(self, key: str) -> KubeObject | None:
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def _index_one(self, name: str, key: str, obj: KubeObject) -> None:
        for value in self._indexers[name](obj):
            self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: KubeObject) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


# Messages from the reflector (and registration) to the dispatcher.
@dataclass(frozen=True)
class _Replace:
    items: list[KubeObject]


@dataclass(frozen=True)
class _Change:
    type: str
    obj: KubeObject


@dataclass(frozen=True)
class _Attach:
    handlers: EventHandlers
    attached: threading.Event


_STOP = object()


class Informer:
    """Keeps ``store`` in sync with the objects of one resource (optionally filtered).

    ``start()`` runs it in background threads; ``stop()`` ends them. Handlers registered with
    ``add_handlers`` are called on the dispatcher thread and must return quickly (typically:
    put a key on a work queue).
    """

    def __init__(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float = 0.0,
        indexers: dict[str, IndexFunc] | None = None,
        watch_timeout_seconds: int | None = None,
        name: str | None = None,
        transform: Callable[[KubeObject], KubeObject] | None = None,
    ) -> None:
        """``transform`` (as client-go's ``SetTransform``) turns each listed or watched object
        into what the store keeps and the handlers get, before either sees it; it must keep
        ``metadata.name``, ``namespace`` and ``resourceVersion`` and must not fail."""
        self.resource = resource
        self.name = name or resource.rtype.plural
        self._log = logger.bind(informer=self.name)
        self.store = Indexer(indexers)
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._resync_period = resync_period
        self._watch_timeout = watch_timeout_seconds
        self._transform = transform
        self._handlers: list[EventHandlers] = []
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._watch_lock = threading.Lock()
        self._watch: WatchStream | None = None
        self._threads: list[threading.Thread] = []
        self.last_resource_version = ""
        self.relists = 0  # how often the reflector listed again after its first list

    # -- lifecycle -----------------------------------------------------------------------------

    def add_handlers(self, handlers: EventHandlers) -> None:
        """Register handlers. Once running, they first get ``on_add(obj, True)`` for every
        object in the store, then every later change (possibly one already in that replay)."""
        if not self._threads:
            self._handlers.append(handlers)
            return
        attached = threading.Event()
        self._events.put(_Attach(handlers, attached))
        while not attached.wait(0.5):
            if self._stopping.is_set():
                return

    def start(self) -> None:
        """Start the reflector and dispatcher threads. Call once."""
        if self._threads:
            raise RuntimeError(f"informer {self.name} already started")
        for target, role in ((self._dispatch_loop, "dispatch"), (self._reflect_loop, "reflect")):
            thread = threading.Thread(target=target, name=f"informer-{self.name}-{role}")
            thread.daemon = True
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop watching and dispatching; returns once the threads ended. Idempotent."""
        self._stopping.set()
        with self._watch_lock:
            if self._watch is not None:
                self._watch.close()
        self._events.put(_STOP)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def has_synced(self) -> bool:
        """True once the first list has been stored and delivered to the handlers."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until ``has_synced()`` (True) or ``timeout`` seconds or stop (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._synced.is_set():
            if self._stopping.is_set():
                return False
            remaining = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if remaining <= 0:
                return False
            self._synced.wait(remaining)
        return True

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def is_running(self) -> bool:
        """True while any of the informer's threads is alive."""
        return any(thread.is_alive() for thread in self._threads)

    # -- reflector -----------------------------------------------------------------------------

    def _reflect_loop(self) -> None:
        backoff = Backoff(initial=0.8, cap=30.0)
        rv: str | None = None
        while not self._stopping.is_set():
            try:
                if rv is None:
                    rv = self._list()
                rv = self._watch_from(rv, backoff)
            except Gone as err:
                self._log.info("Watch expired, listing again", cause=str(err))
                rv = None
            except ApiError as err:
                if self._stopping.is_set():
                    break
                delay = backoff.next()
                self._log.warning(
                    "List or watch failed, listing again after a pause",
                    cause=f"{type(err).__name__}: {err}",
                    delay_seconds=delay,
                )
                rv = None  # events may have been lost with the stream: start from a fresh list
                for handlers in list(self._handlers):
                    self._call(handlers.on_error, err)
                self._stopping.wait(delay)
            except Exception as err:
                self._log.exception("Informer reflector crashed, listing again")
                rv = None
                for handlers in list(self._handlers):
                    self._call(handlers.on_error, err)
                self._stopping.wait(backoff.next())

    def _list(self) -> str:
        listed = self.resource.list(
            self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
        )
        if self.last_resource_version:
            self.relists += 1
        self.last_resource_version = listed.resource_version
        items = listed.items
        if self._transform is not None:
            items = [self._transform(obj) for obj in items]
        self._events.put(_Replace(items))
        return listed.resource_version

    def _watch_from(self, rv: str, backoff: Backoff) -> str:
        stream = self.resource.watch(
            self._namespace,
            resource_version=rv,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=self._watch_timeout,
        )
        with self._watch_lock:
            if self._stopping.is_set():
                stream.close()
            self._watch = stream
        try:
            for event in stream:
                backoff.reset()
                rv = event.resource_version or rv
                self.last_resource_version = rv
                if event.type != "BOOKMARK":
                    obj = event.object
                    if self._transform is not None:
                        obj = self._transform(obj)
                    self._events.put(_Change(event.type, obj))
        finally:
            with self._watch_lock:
                self._watch = None
            stream.close()
        return rv

    # -- dispatcher ----------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        next_resync = self._next_resync()
        while True:
            timeout = None if next_resync is None else max(0.0, next_resync - time.monotonic())
            try:
                message = self._events.get(timeout=timeout)
            except queue.Empty:
                self._resync()
                next_resync = self._next_resync()
                continue
            if message is _STOP or self._stopping.is_set():
                return
            try:
                self._apply(message)
            except Exception:
                self._log.exception("Informer dispatch failed")

    def _apply(self, message: Any) -> None:
        if isinstance(message, _Change):
            self._apply_change(message)
        elif isinstance(message, _Replace):
            self._apply_replace(message.items)
            self._synced.set()
        elif isinstance(message, _Attach):
            for obj in self.store.objects():
                self._call(message.handlers.on_add, obj, True)
            self._handlers.append(message.handlers)
            message.attached.set()

    def _apply_change(self, change: _Change) -> None:
        if change.type == "DELETED":
            # The server's final state is newer than the stored copy; report that one.
            self.store._delete(object_key(change.obj))
            self._notify_delete(change.obj)
            return
        old = self.store._upsert(change.obj)
        if old is None:
            self._notify_add(change.obj, initial=False)
        else:
            self._notify_update(old, change.obj)

    def _apply_replace(self, items: list[KubeObject]) -> None:
        initial = not self._synced.is_set()
        listed = {object_key(obj) for obj in items}
        for key in self.store.all_keys():
            if key not in listed:
                gone = self.store._delete(key)
                if gone is not None:
                    self._notify_delete(gone)
        for obj in items:
            old = self.store._upsert(obj)
            if old is None:
                self._notify_add(obj, initial=initial)
            elif _rv(old) != _rv(obj):
                self._notify_update(old, obj)

    def _resync(self) -> None:
        for obj in self.store.objects():
            self._notify_update(obj, obj)

    def _next_resync(self) -> float | None:
        return time.monotonic() + self._resync_period if self._resync_period > 0 else None

    def _notify_add(self, obj: KubeObject, *, initial: bool) -> None:
        for handlers in self._handlers:
            self._call(handlers.on_add, obj, initial)

    def _notify_update(self, old: KubeObject, new: KubeObject) -> None:
        for handlers in self._handlers:
            self._call(handlers.on_update, old, new)

    def _notify_delete(self, obj: KubeObject) -> None:
        for handlers in self._handlers:
            self._call(handlers.on_delete, obj)

    def _call(self, fn: Callable[..., None] | None, *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            # One broken handler must not starve the others or stop the informer.
            self._log.exception("Informer event handler failed")


def _rv(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
