"""An in-memory stand-in for :class:`drakit.kubeapi.resources.Resource`, for logic tests.

It keeps what the apiserver guarantees that drakit's logic relies on: every write gets a new
``resourceVersion`` (one counter per fake API, like etcd's), ``generateName`` picks a unique
name, an update with a stale ``resourceVersion`` is a Conflict, a delete's UID/RV
preconditions are checked, and every change is logged as a watch event
(:meth:`FakeApi.events_since`). It does no validation, defaulting, admission, field
selection or server-side apply: behaviour that depends on those keeps its test against the
real apiserver (tests/integration/). A test may register a mutation of what gets stored
(:meth:`FakeApi.on_write`), as an apiserver with a feature gate off drops the fields it
does not know.
"""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

from drakit.kubeapi.errors import AlreadyExists, Conflict, Invalid, NotFound
from drakit.kubeapi.resources import ObjectList, ResourceType

__all__ = ["FakeApi", "FakeResource"]

KubeObject = dict[str, Any]


class FakeApi:
    """One in-memory store shared by every :class:`FakeResource` made from it; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions = itertools.count(1)
        self._names = itertools.count(1)
        self._objects: dict[tuple[str, str, str], KubeObject] = {}
        self._events: list[tuple[int, str, KubeObject]] = []
        self._on_write: dict[str, list[Callable[[KubeObject], None]]] = {}

    def resource(self, rtype: ResourceType) -> FakeResource:
        return FakeResource(self, rtype)

    def on_write(self, rtype: ResourceType, mutate: Callable[[KubeObject], None]) -> None:
        """Change every object of ``rtype`` in place before it is stored, on create and
        update (what defaulting, a mutating webhook or a disabled feature gate does)."""
        with self._lock:
            self._on_write.setdefault(rtype.plural, []).append(mutate)

    def _store(self, plural: str, key: tuple[str, str, str], kind: str, obj: KubeObject) -> None:
        """Apply the write mutations, stamp, log and keep ``obj`` (lock held)."""
        for mutate in self._on_write.get(plural, ()):
            mutate(obj)
        self._objects[key] = self._record(kind, obj)

    def events_since(self, resource_version: str = "0") -> list[tuple[str, KubeObject]]:
        """(ADDED | MODIFIED | DELETED, object) after ``resource_version``, oldest first."""
        after = int(resource_version or 0)
        with self._lock:
            return [(kind, copy.deepcopy(obj)) for rv, kind, obj in self._events if rv > after]

    def _record(self, kind: str, obj: KubeObject) -> KubeObject:
        """Stamp a new resourceVersion on ``obj`` and log the event (lock held)."""
        rv = next(self._versions)
        obj["metadata"]["resourceVersion"] = str(rv)
        self._events.append((rv, kind, copy.deepcopy(obj)))
        return obj


class FakeResource:
    """The subset of ``Resource`` drakit's logic uses: get, list, create, update, delete."""

    def __init__(self, api: FakeApi, rtype: ResourceType) -> None:
        self.api = api
        self.rtype = rtype

    def _key(self, name: str, namespace: str | None) -> tuple[str, str, str]:
        return (self.rtype.plural, (namespace or "") if self.rtype.namespaced else "", name)

    def _missing(self, name: str) -> NotFound:
        return NotFound(f'{self.rtype.plural} "{name}" not found', code=404, reason="NotFound")

    def get(self, name: str, namespace: str | None = None) -> KubeObject:
        with self.api._lock:
            obj = self.api._objects.get(self._key(name, namespace))
            if obj is None:
                raise self._missing(name)
            return copy.deepcopy(obj)

    def list(self, namespace: str | None = None, **_ignored: Any) -> ObjectList:
        """Every object of the type (in ``namespace`` when given); selectors are not applied."""
        with self.api._lock:
            items = [
                copy.deepcopy(obj)
                for (plural, ns, _), obj in sorted(self.api._objects.items())
                if plural == self.rtype.plural and (namespace is None or ns == namespace)
            ]
            return ObjectList(items=items, resource_version=str(len(self.api._events)))

    def create(self, obj: KubeObject, namespace: str | None = None, **_options: Any) -> KubeObject:
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})
        namespace = namespace or meta.get("namespace")
        with self.api._lock:
            if not meta.get("name"):
                meta["name"] = f"{meta.get('generateName', '')}{next(self.api._names):05d}"
            key = self._key(meta["name"], namespace)
            if key in self.api._objects:
                raise AlreadyExists(f"{meta['name']} already exists", code=409,
                                    reason="AlreadyExists")  # fmt: skip
            if self.rtype.namespaced:
                meta["namespace"] = namespace
            meta["uid"] = str(uuid.uuid4())
            meta["generation"] = 1
            body.setdefault("apiVersion", self.rtype.api_version)
            body.setdefault("kind", self.rtype.kind)
            self.api._store(self.rtype.plural, key, "ADDED", body)
            return copy.deepcopy(body)

    def update(self, obj: KubeObject, *, subresource: str | None = None, **_options: Any
               ) -> KubeObject:  # fmt: skip
        """PUT: Conflict when ``metadata.resourceVersion`` is set and stale. The status
        subresource replaces only ``status``; the main resource keeps the stored status."""
        meta = obj.get("metadata") or {}
        with self.api._lock:
            key = self._key(meta.get("name", ""), meta.get("namespace"))
            stored = self.api._objects.get(key)
            if stored is None:
                raise self._missing(meta.get("name", ""))
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and wanted_rv != stored["metadata"]["resourceVersion"]:
                raise Conflict("the object has been modified", code=409, reason="Conflict")
            body = copy.deepcopy(stored)
            if subresource == "status":
                body["status"] = copy.deepcopy(obj.get("status"))
            else:
                body.update({k: copy.deepcopy(v) for k, v in obj.items() if k != "status"})
                body["metadata"] = {**stored["metadata"], **copy.deepcopy(meta)}
                if body.get("spec") != stored.get("spec"):
                    body["metadata"]["generation"] = stored["metadata"]["generation"] + 1
            self.api._store(self.rtype.plural, key, "MODIFIED", body)
            return copy.deepcopy(body)

    def update_status(self, obj: KubeObject, **options: Any) -> KubeObject:
        return self.update(obj, subresource="status", **options)

    def patch(
        self,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        **_options: Any,
    ) -> KubeObject:
        """A JSON patch (test, add, remove, replace; ``-`` appends): applied to the stored
        object, only its ``status`` kept for the status subresource and everything but the
        status otherwise. A failed ``test`` or a missing path is the apiserver's bare 422."""
        with self.api._lock:
            key = self._key(name, namespace)
            stored = self.api._objects.get(key)
            if stored is None:
                raise self._missing(name)
            patched = copy.deepcopy(stored)
            for op in patch:
                _apply_op(patched, op)
            body = copy.deepcopy(stored)
            if subresource == "status":
                body["status"] = patched.get("status")
            else:
                body.update({k: v for k, v in patched.items() if k != "status"})
            self.api._store(self.rtype.plural, key, "MODIFIED", body)
            return copy.deepcopy(body)

    def delete(self, name: str, namespace: str | None = None, **options: Any) -> KubeObject | None:
        """Delete now (no finalizers, no grace); Conflict when the ``uid`` or
        ``resource_version`` precondition fails."""
        uid, resource_version = options.get("uid"), options.get("resource_version")
        with self.api._lock:
            key = self._key(name, namespace)
            stored = self.api._objects.get(key)
            if stored is None:
                raise self._missing(name)
            meta = stored["metadata"]
            if (uid and uid != meta["uid"]) or (
                resource_version and resource_version != meta["resourceVersion"]
            ):
                raise Conflict(f"precondition failed for {name}", code=409, reason="Conflict")
            del self.api._objects[key]
            self.api._record("DELETED", stored)
            return copy.deepcopy(stored)


_PATCH_FAILED = "the server rejected our request due to an error in our request"


def _apply_op(obj: KubeObject, op: dict[str, Any]) -> None:
    """One RFC 6902 operation on ``obj`` in place; Invalid (no causes) when it cannot apply."""
    *parents, last = [
        p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]
    ]
    target: Any = obj
    try:
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        kind = op["op"]
        if kind == "test":
            current = target[int(last)] if isinstance(target, list) else target[last]
            if current != op["value"]:
                raise LookupError(op["path"])
        elif kind in ("add", "replace") and isinstance(target, list):
            if last == "-":
                target.append(copy.deepcopy(op["value"]))
            elif kind == "add":
                target.insert(int(last), copy.deepcopy(op["value"]))
            else:
                target[int(last)] = copy.deepcopy(op["value"])
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in target:
                raise LookupError(op["path"])
            target[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise LookupError(kind)
    except (LookupError, ValueError, TypeError):
        raise Invalid(_PATCH_FAILED, code=422, reason="Invalid") from None
