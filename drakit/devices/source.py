"""Reading what ``drakit devices`` shows: slices, claims and classes, once or kept current.

The user's rights decide what can be read. ResourceSlices and DeviceClasses are cluster-scoped
and must be readable (there is nothing to show without slices). ResourceClaims are namespaced:
``probe_claim_scope`` tries all namespaces first and falls back to one namespace when that is
forbidden, and says what is hidden and why, so a partial view is never mistaken for the whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from drakit.allocator.holdings import decode_claim
from drakit.allocator.model import DeviceClass, ModelError, ResourceClaim, ResourceSlice
from drakit.kubeapi.errors import Forbidden
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, Resource

__all__ = ["ClaimScope", "ClusterReader", "Snapshot", "Watcher", "decode_all"]


@dataclass(frozen=True)
class ClaimScope:
    """Which claims can be read: ``namespace=None`` means all; ``hidden`` explains the rest."""

    namespace: str | None
    readable: bool
    hidden: str = ""

    @property
    def complete(self) -> bool:
        return self.namespace is None and self.readable


@dataclass(frozen=True)
class Snapshot:
    """Decoded objects plus the problems met while decoding them (one line each)."""

    slices: list[ResourceSlice]
    claims: list[ResourceClaim]
    classes: dict[str, DeviceClass]
    scope: ClaimScope
    problems: list[str]


def decode_all(
    slices: Iterable[KubeObject],
    claims: Iterable[KubeObject],
    classes: Iterable[KubeObject],
    scope: ClaimScope,
) -> Snapshot:
    """Model objects from raw ones; an undecodable object is skipped and named in problems."""
    problems: list[str] = []
    return Snapshot(
        slices=_decode(ResourceSlice, "ResourceSlice", slices, problems),
        claims=_decode_claims(claims, problems),
        classes={c.name: c for c in _decode(DeviceClass, "DeviceClass", classes, problems)},
        scope=scope,
        problems=problems,
    )


def _decode(model: Any, kind: str, objects: Iterable[KubeObject], problems: list[str]) -> list[Any]:
    out = []
    for obj in objects:
        try:
            out.append(model.from_dict(obj))
        except ModelError as err:
            problems.append(f"skipped {kind} {_name_of(obj)}: {err}")
    return out


def _decode_claims(objects: Iterable[KubeObject], problems: list[str]) -> list[ResourceClaim]:
    """Claim models, failing closed: an allocated claim that does not decode still shows the
    devices its allocation holds (and is named in problems)."""
    out = []
    for obj in objects:
        decoded = decode_claim(obj)
        if decoded.model is not None:
            out.append(decoded.model)
        if decoded.error is not None:
            held = " (its allocated devices are shown)" if decoded.model is not None else ""
            problems.append(f"skipped ResourceClaim {_name_of(obj)}: {decoded.error}{held}")
    return out


def _name_of(obj: KubeObject) -> str:
    meta = obj.get("metadata") or {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    return name or "<unnamed>"


class ClusterReader:
    """One-shot reads with the caller's credentials."""

    def __init__(self, api: Any, fallback_namespace: str) -> None:
        self.slices = Resource(api, RESOURCE_SLICES)
        self.claims = Resource(api, RESOURCE_CLAIMS)
        self.classes = Resource(api, DEVICE_CLASSES)
        self.fallback_namespace = fallback_namespace

    def probe_claim_scope(self) -> ClaimScope:
        """All namespaces if allowed, else the fallback namespace, else none; lists once."""
        try:
            self.claims.list(None, page_size=1)
        except Forbidden as err:
            all_reason = _reason(err)
        else:
            return ClaimScope(None, readable=True)
        ns = self.fallback_namespace
        try:
            self.claims.list(ns, page_size=1)
        except Forbidden as err:
            return ClaimScope(
                ns,
                readable=False,
                hidden=(
                    f"you may not list ResourceClaims in all namespaces ({all_reason}) nor in "
                    f"namespace {ns} ({_reason(err)}): no claim is visible, so allocated "
                    "devices cannot be told from free ones (state 'unknown')"
                ),
            )
        return ClaimScope(
            ns,
            readable=True,
            hidden=(
                f"you may not list ResourceClaims in all namespaces ({all_reason}); showing "
                f"claims of namespace {ns} only. Devices held by claims in other namespaces "
                "look free to you: they are shown as 'unknown' and not counted as allocated"
            ),
        )

    def snapshot(self, scope: ClaimScope, *, with_classes: bool) -> Snapshot:
        """Everything in one go; raises Forbidden when slices (or needed classes) are hidden."""
        slices = self.slices.list().items
        claims = self.claims.list(scope.namespace).items if scope.readable else []
        classes = self.classes.list().items if with_classes else []
        return decode_all(slices, claims, classes, scope)


def _reason(err: Forbidden) -> str:
    text = str(err)
    return text if len(text) <= 300 else text[:297] + "..."


class Watcher:
    """Informers on slices, claims (in the readable scope) and classes; ``changed`` is set on
    every event after the first sync. ``snapshot()`` decodes the informers' current stores."""

    def __init__(self, reader: ClusterReader, scope: ClaimScope, *, with_classes: bool) -> None:
        self.scope = scope
        self.changed = threading.Event()
        self._informers: list[Informer] = [Informer(reader.slices, name="devices-slices")]
        if scope.readable:
            self._informers.append(
                Informer(reader.claims, namespace=scope.namespace, name="devices-claims")
            )
        if with_classes:
            self._informers.append(Informer(reader.classes, name="devices-classes"))
        mark: Callable[..., None] = lambda *_args: self.changed.set()  # noqa: E731
        for informer in self._informers:
            informer.add_handlers(EventHandlers(on_add=mark, on_update=mark, on_delete=mark))

    def start(self, timeout: float) -> bool:
        """Start the informers; True once all listed within ``timeout`` seconds."""
        for informer in self._informers:
            informer.start()
        return all(informer.wait_for_sync(timeout) for informer in self._informers)

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()

    def snapshot(self) -> Snapshot:
        stores = {i.resource.rtype.plural: i.store.objects() for i in self._informers}
        return decode_all(
            stores.get(RESOURCE_SLICES.plural, []),
            stores.get(RESOURCE_CLAIMS.plural, []),
            stores.get(DEVICE_CLASSES.plural, []),
            self.scope,
        )
