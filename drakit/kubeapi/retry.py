"""Backoff and the read-modify-write retry loop for optimistic concurrency.

``update_with_retry`` is the one correct way to change an object someone else may be writing:
GET the fresh object, apply a pure mutation, PUT it with its resourceVersion, and on Conflict do
it all again. The mutation must be safe to run more than once.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from drakit.kubeapi.errors import Conflict
from drakit.kubeapi.objects import KubeObject, object_key
from drakit.kubeapi.resources import Resource
from drakit.telemetry.logs import get_logger

__all__ = ["Backoff", "retry_on_conflict", "update_with_retry"]

logger = get_logger(__name__)

T = TypeVar("T")


class Backoff:
    """Exponential backoff with jitter: ``initial``, times ``factor`` per step, capped at ``cap``.

    ``next()`` returns the next delay; ``reset()`` starts over. Not thread-safe (one per loop).
    """

    def __init__(
        self,
        *,
        initial: float = 0.01,
        factor: float = 2.0,
        cap: float = 30.0,
        jitter: float = 0.1,
    ) -> None:
        self.initial = initial
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * self.factor)
        return delay * (1.0 + self.jitter * random.random())

    def reset(self) -> None:
        self._next = self.initial

    def sleep(self, stop: threading.Event | None = None) -> bool:
        """Wait for the next delay; returns False when ``stop`` was set meanwhile."""
        delay = self.next()
        if stop is None:
            time.sleep(delay)
            return True
        return not stop.wait(delay)


def retry_on_conflict(
    fn: Callable[[], T], *, attempts: int = 5, backoff: Backoff | None = None
) -> T:
    """Call ``fn`` until it does not raise Conflict, at most ``attempts`` times.

    The last Conflict is re-raised. ``fn`` must re-read what it writes (a Conflict means the
    copy it had is stale). AlreadyExists, also a 409, is not retried.
    """
    if attempts < 1:
        raise ValueError(f"retry_on_conflict: attempts must be at least 1, got {attempts}")
    backoff = backoff or Backoff(initial=0.01, cap=1.0)
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Conflict as err:
            if type(err) is not Conflict or attempt == attempts:
                raise
            logger.debug("Write conflict, retrying", attempt=attempt, cause=str(err))
            backoff.sleep()
    raise AssertionError("unreachable")


def update_with_retry(
    resource: Resource,
    name: str,
    mutate: Callable[[KubeObject], KubeObject | None],
    namespace: str | None = None,
    *,
    subresource: str | None = None,
    attempts: int = 5,
) -> KubeObject:
    """GET the object, ``mutate`` it, PUT it back; on Conflict start over (``attempts`` times).

    ``mutate`` receives a fresh copy and changes it in place (returning None) or returns a
    replacement. When the result equals what was read, nothing is written. Returns the object
    as stored. NotFound and every other error propagate.
    """

    def attempt() -> KubeObject:
        current = resource.get(name, namespace)
        snapshot = _fingerprint(current)
        candidate = mutate(current)
        wanted = current if candidate is None else candidate
        if _fingerprint(wanted) == snapshot:
            logger.debug("Nothing to update", object=object_key(wanted))
            return wanted
        return resource.update(wanted, subresource=subresource)

    return retry_on_conflict(attempt, attempts=attempts)


def _fingerprint(obj: KubeObject) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
