"""A small publish/subscribe hub for device health changes.

The core (or its backend) calls :meth:`HealthFeed.publish` with the devices
whose health changed; every open :class:`HealthFeedSubscription` (one per
kubelet health stream) receives them. A slow subscriber never blocks the
publisher: pending changes for one subscriber are merged per device, newest
wins, so a subscriber always catches up with the latest state.
"""

from __future__ import annotations

import threading

from drakit.plugin.health import DeviceHealth

_DeviceKey = tuple[str, str]


class HealthFeedSubscription:
    """One subscriber's queue of pending changes (implements ``HealthSubscription``)."""

    def __init__(self, feed: HealthFeed) -> None:
        self._feed = feed
        self._cond = threading.Condition()
        self._pending: dict[_DeviceKey, DeviceHealth] = {}
        self._closed = False

    def _offer(self, devices: list[DeviceHealth]) -> None:
        with self._cond:
            if self._closed:
                return
            for device in devices:
                self._pending[(device.pool_name, device.device_name)] = device
            self._cond.notify_all()

    def next_change(self, timeout: float) -> list[DeviceHealth] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._pending or self._closed, timeout=timeout)
            if self._closed or not self._pending:
                return None
            changes = list(self._pending.values())
            self._pending.clear()
            return changes

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        self._feed._forget(self)


class HealthFeed:
    """Fan-out of health changes to any number of subscribers; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: set[HealthFeedSubscription] = set()

    def subscribe(self) -> HealthFeedSubscription:
        subscription = HealthFeedSubscription(self)
        with self._lock:
            self._subscribers.add(subscription)
        return subscription

    def publish(self, changed: list[DeviceHealth]) -> None:
        """Deliver ``changed`` to every current subscriber; never blocks on them."""
        if not changed:
            return
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            subscription._offer(changed)

    def close(self) -> None:
        """Close every subscription (their streams end); idempotent."""
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            subscription.close()

    def _forget(self, subscription: HealthFeedSubscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)
