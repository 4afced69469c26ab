"""Device health as the kubelet's health services see it: a cache plus a change feed.

The backend reports health (``health()``) and says when it may have changed (``subscribe``);
this component keeps the last report and publishes only the devices whose health or
message changed to every health stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from drakit.node_plugin.driver import HealthSubscription
from drakit.node_plugin.health_feed import HealthFeed
from drakit.plugin.health import DeviceHealth

__all__ = ["HealthMonitor"]


class HealthMonitor:
    """Health cache and feed for one backend; thread-safe.

    ``health`` is the backend's health report, or None when it reports none (then the
    snapshot stays empty and the health services are not advertised).
    """

    def __init__(self, health: Callable[[], Sequence[DeviceHealth]] | None) -> None:
        self._report = health
        self._feed = HealthFeed()
        self._health: dict[tuple[str, str], DeviceHealth] = {}
        self._lock = threading.Lock()

    @property
    def supported(self) -> bool:
        return self._report is not None

    def start(self) -> None:
        """Take the first report (no change is published for it)."""
        if self._report is not None:
            current = {(h.pool_name, h.device_name): h for h in self._report()}
            with self._lock:
                self._health = current

    def snapshot(self) -> list[DeviceHealth]:
        with self._lock:
            return list(self._health.values())

    def watch(self) -> HealthSubscription:
        return self._feed.subscribe()

    def on_change(self) -> None:
        """Publish devices whose health changed (called from the backend's threads)."""
        if self._report is None:
            return
        current = {(h.pool_name, h.device_name): h for h in self._report()}
        with self._lock:
            changed = [
                h
                for key, h in current.items()
                if key not in self._health
                or (self._health[key].health, self._health[key].message) != (h.health, h.message)
            ]
            self._health = current
        self._feed.publish(changed)

    def close(self) -> None:
        self._feed.close()
