"""JSON patches (RFC 6902) guarded by the ``resourceVersion`` read: writes that send only
what they change.

Why: a ResourceClaim's opaque config ``parameters`` (and a device status' ``data``) are
RawExtensions. The apiserver keeps their bytes as received and compares the old and new
``spec`` and ``status.allocation`` byte for byte on every update. A client that decodes
the claim and sends it back re-encodes those bytes (key order, ``\\u003c`` for ``<``,
``1e3`` read as 1000.0 and written ``1000.0``, spacing) and is refused with "field is
immutable" / "field cannot be modified once set". A JSON patch never carries the
unchanged fields: the apiserver applies it to the object as stored, in its own encoding,
and only the patched paths change.

A list of entries several writers share (``status.devices``: a list-map keyed by driver,
pool, device and shareID, "entries are owned by their respective drivers") is patched
entry by entry (:func:`list_map_ops`): a writer's patch names only its own entries, by
index, so the others' bytes never pass through it. Sending the whole list back re-encoded
them, and with granular status authorization (Kubernetes 1.36+) the apiserver then counts
their drivers as changed (it compares ``data`` byte for byte) and refuses the write unless
the writer may change every driver's entries.

The ``test`` of ``/metadata/resourceVersion`` first gives the patch the conflict
semantics of a PUT with a resourceVersion: it lands only on the object the change was
computed from. The apiserver answers a failed ``test`` with a bare 422 (no field causes);
:func:`guarded_patch` raises that as :class:`~drakit.kubeapi.errors.Conflict`, so the
callers' retry-on-conflict loops work unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

from drakit.kubeapi.errors import Conflict, Invalid
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import PatchType

__all__ = ["JsonPatchable", "guarded_patch", "list_map_ops", "pointer", "set_or_remove"]

Op = dict[str, Any]


class JsonPatchable(Protocol):
    """What :func:`guarded_patch` needs of a ``Resource``."""

    def patch(
        self,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = ...,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject: ...


def pointer(*segments: str) -> str:
    """A JSON pointer (RFC 6901) to ``segments``: ``~`` and ``/`` in a segment escaped."""
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in segments)


def set_or_remove(parent: Mapping[str, Any], key: str, value: Any, path: str) -> list[Op]:
    """The ops that make ``parent[key]`` (at ``path``) be ``value``: "add" (which replaces
    an existing member) for a value, "remove" for None or empty when present, nothing when
    it is already so. ``parent`` is the object as read (the guarded patch applies to that)."""
    if value in (None, [], {}):
        return [{"op": "remove", "path": path}] if key in parent else []
    if parent.get(key) == value:
        return []
    return [{"op": "add", "path": path, "value": value}]


def list_map_ops(
    items: Sequence[Mapping[str, Any]] | None,
    path: str,
    *,
    owner: tuple[str, str],
    wanted: Sequence[Mapping[str, Any]],
    key: Callable[[Mapping[str, Any]], Hashable],
) -> list[Op]:
    """The ops that make the entries of ``owner`` (field, value: ``("driver", name)``) in
    the list at ``path`` be ``wanted``, and touch no other entry.

    ``items`` is the list as read (None: absent); entries are matched by ``key``. An owned
    entry that changed is replaced where it is, one no longer wanted is removed (from the
    last index down, so the indices stay those read), a new one is appended. Each index
    named is first tested to still hold an entry of ``owner``; with the resourceVersion
    test of :func:`guarded_patch` the indices are exactly those read. No ops when nothing
    changes.
    """
    field, value = owner
    present = list(items or ())
    wanted_by_key = {key(entry): entry for entry in wanted}
    tests: list[Op] = []
    replaced: list[Op] = []
    removed: list[int] = []
    for index, entry in enumerate(present):
        if entry.get(field) != value:
            continue
        new = wanted_by_key.pop(key(entry), None)
        if new == entry:
            continue
        tests.append({"op": "test", "path": f"{path}/{index}/{field}", "value": value})
        if new is None:
            removed.append(index)
        else:
            replaced.append({"op": "replace", "path": f"{path}/{index}", "value": new})
    added = [entry for entry in wanted if key(entry) in wanted_by_key]
    if not present and added:
        return [{"op": "add", "path": path, "value": added}]
    return (
        tests
        + replaced
        + [{"op": "remove", "path": f"{path}/{index}"} for index in reversed(removed)]
        + [{"op": "add", "path": f"{path}/-", "value": entry} for entry in added]
    )


def guarded_patch(
    resource: JsonPatchable,
    obj: KubeObject,
    ops: list[Op],
    *,
    subresource: str | None = None,
    field_manager: str | None = None,
) -> KubeObject:
    """Apply ``ops`` to the object named by ``obj``'s metadata, only if it is still at
    ``obj``'s resourceVersion; returns the object as stored.

    Conflict when it changed since ``obj`` was read (or was replaced); NotFound when it is
    gone; any other refusal as the apiserver raised it. With no ops nothing is sent and
    ``obj`` is returned.
    """
    if not ops:
        return obj
    meta = obj.get("metadata") or {}
    rv = str(meta.get("resourceVersion") or "")
    if not rv:
        raise ValueError(f"{obj.get('kind', 'object')} {meta.get('name')}: no resourceVersion")
    guard: list[Op] = [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
    ]
    if not meta.get("uid"):
        guard = guard[1:]
    try:
        return resource.patch(
            str(meta.get("name")),
            guard + ops,
            meta.get("namespace"),
            patch_type=PatchType.JSON,
            subresource=subresource,
            field_manager=field_manager,
        )
    except Invalid as err:
        if not _failed_test(err):
            raise
        raise Conflict(
            f"{obj.get('kind', 'object')} {meta.get('namespace') or ''}/{meta.get('name')} "
            f"changed since resourceVersion {rv}: {err.message}",
            code=409,
            reason="Conflict",
            status=err.status,
        ) from err


def _failed_test(err: Invalid) -> bool:
    """A 422 that names no field: the patch could not be applied (the apiserver's answer
    to a failed ``test``); validation refusals name the object and their fields."""
    details = (err.status or {}).get("details") or {}
    return not err.causes and not details.get("name")
