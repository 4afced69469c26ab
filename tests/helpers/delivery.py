"""Knowing that a component has seen an object's version: the proof a test waits for before
it asserts that the component did nothing about it."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from drakit.kubeapi.informer import EventHandlers

__all__ = ["delivered"]


class HandlerSource(Protocol):
    """An :class:`~drakit.kubeapi.informer.Informer` or an
    :class:`~drakit.kubeapi.assume_cache.AssumeCache`."""

    def add_handlers(self, handlers: EventHandlers) -> None: ...


def delivered(source: HandlerSource, namespace: str, name: str, version: str) -> threading.Event:
    """An event set once ``source`` has delivered ``namespace/name`` at resourceVersion
    ``version`` to its handlers.

    The handlers added here come last, and both sources call their handlers in order, one
    event after the other: once it is set, the handlers registered before (the component's)
    have had that version too. A version delivered already is delivered again as the replay
    that registering handlers starts with.
    """
    seen = threading.Event()

    def check(obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name"), meta.get("resourceVersion")) == (
            namespace,
            name,
            version,
        ):
            seen.set()

    source.add_handlers(
        EventHandlers(
            on_add=lambda obj, _initial: check(obj), on_update=lambda _old, new: check(new)
        )
    )
    return seen
