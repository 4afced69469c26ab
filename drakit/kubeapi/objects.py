"""Small helpers for Kubernetes objects held as plain JSON dicts.

drakit keeps API objects as the decoded JSON the apiserver sent (``KubeObject``), not as the
generated client models: those models drop fields newer than the client, and the allocator's
``from_dict`` takes plain dicts anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

from drakit.allocator.holdings import decode_claim
from drakit.allocator.model import ModelError, ResourceClaim

__all__ = [
    "KubeObject",
    "decodable",
    "object_key",
    "object_ref",
    "resource_version_int",
    "split_key",
]

KubeObject = dict[str, Any]

_Model_co = TypeVar("_Model_co", covariant=True)


class _FromDict(Protocol[_Model_co]):
    def from_dict(self, data: Mapping[str, Any], path: str = "") -> _Model_co: ...


def decodable(model: _FromDict[_Model_co], objects: Iterable[KubeObject]) -> list[_Model_co]:
    """``model.from_dict`` of every object that decodes; the others are skipped (callers that
    act on an object log why it does not decode where they use it)."""
    out = []
    for obj in objects:
        try:
            out.append(model.from_dict(obj))
        except ModelError:
            continue
    return out


def held_claims(objects: Iterable[KubeObject]) -> list[ResourceClaim]:
    """The models that device usage is counted from, one per claim that holds or may hold
    devices: the full model, or, for an allocated claim that does not decode, what its
    allocation holds (:func:`drakit.allocator.holdings.decode_claim`). Fails closed: an
    undecodable allocated claim never shows its devices as free."""
    out = []
    for obj in objects:
        model = decode_claim(obj).model
        if model is not None:
            out.append(model)
    return out


def object_key(obj: KubeObject) -> str:
    """The cache key of an object: ``<namespace>/<name>``, or ``<name>`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of ``object_key``: ``(namespace or None, name)``."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)


def resource_version_int(obj: KubeObject) -> int:
    """``metadata.resourceVersion`` as an integer.

    Kubernetes documents resourceVersions as opaque, but every apiserver backed by etcd issues
    integers and the scheduler's assume cache compares them as such; so do we. Raises ValueError
    naming the object when the version is missing or not an integer.
    """
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(rv))
    except (TypeError, ValueError):
        raise ValueError(
            f"{obj.get('kind', 'object')} {object_key(obj)!r}: metadata.resourceVersion "
            f"{rv!r} is not an integer"
        ) from None


def object_ref(obj: KubeObject) -> dict[str, str]:
    """An ObjectReference (apiVersion, kind, namespace, name, uid, resourceVersion) to ``obj``."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    return {k: v for k, v in ref.items() if v}
