"""An in-memory DriverCore for the gRPC tests (and for subprocess plugins).

It "prepares" a claim by handing out one device per claim, remembers what it
prepared, and records which calls ran under the serialize lock. Behaviour
switches (``fail_uids``, ``raise_on_prepare``, ...) let tests provoke the
error paths of the servicers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from drakit.node_plugin.driver import CallContext, PluginConfig, PreparedDevice, PrepareResult
from drakit.node_plugin.health_feed import HealthFeed, HealthFeedSubscription
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.wiring import Parts, serialize_lock
from drakit.plugin import ClaimRef, DeviceHealth, HealthStatus

POOL = "node-a"


class FakeCore:
    def __init__(
        self, devices: int = 2, health: bool = True, driver: str = "gpu.example.com"
    ) -> None:
        self.driver = driver
        self.prepared: dict[str, PrepareResult] = {}
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []  # (op, request_id, uids)
        self.deadlines: list[float | None] = []  # CallContext.deadline of each call
        self.fail_uids: set[str] = set()
        self.skip_uids: set[str] = set()
        self.raise_on_prepare: Exception | None = None
        self.raise_on_unprepare: Exception | None = None
        self.share_id: str | None = None
        self.request_names: tuple[str, ...] = ("gpu",)
        self.hold: threading.Event | None = None  # prepare waits for it (inside the lock)
        self.entered = threading.Event()
        self.started = False
        self.stopped = False
        self._health_supported = health
        self._lock = threading.Lock()
        self.feed = HealthFeed()
        now = int(time.time())
        self.health = {
            f"gpu-{i}": DeviceHealth(POOL, f"gpu-{i}", HealthStatus.HEALTHY, now)
            for i in range(devices)
        }

    # DriverCore -----------------------------------------------------------
    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True
        self.feed.close()

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        if self.raise_on_prepare is not None:
            raise self.raise_on_prepare
        with call.serialize:
            self.entered.set()
            if self.hold is not None:
                self.hold.wait(timeout=30)
            with self._lock:
                self.calls.append(("prepare", call.request_id, tuple(c.uid for c in claims)))
                self.deadlines.append(call.deadline)
            results = {}
            for claim in claims:
                if claim.uid in self.skip_uids:
                    continue
                if claim.uid in self.fail_uids:
                    results[claim.uid] = PrepareResult(
                        error=f"claim {claim.name} cannot be prepared"
                    )
                    continue
                results[claim.uid] = self.prepared.setdefault(claim.uid, self._result(claim))
            return results

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        if self.raise_on_unprepare is not None:
            raise self.raise_on_unprepare
        with call.serialize:
            with self._lock:
                self.calls.append(("unprepare", call.request_id, tuple(c.uid for c in claims)))
                self.deadlines.append(call.deadline)
            out = {}
            for claim in claims:
                self.prepared.pop(claim.uid, None)
                out[claim.uid] = "busy" if claim.uid in self.fail_uids else ""
            return out

    def supports_health(self) -> bool:
        return self._health_supported

    def health_snapshot(self) -> list[DeviceHealth]:
        return list(self.health.values())

    def watch_health(self) -> HealthFeedSubscription:
        return self.feed.subscribe()

    # test helpers ---------------------------------------------------------
    def set_health(self, device: str, status: HealthStatus, message: str = "") -> None:
        changed = DeviceHealth(POOL, device, status, int(time.time()), message=message)
        self.health[device] = changed
        self.feed.publish([changed])

    def _result(self, claim: ClaimRef) -> PrepareResult:
        device = PreparedDevice(
            request_names=self.request_names,
            pool_name=POOL,
            device_name=f"gpu-{len(self.prepared) % max(len(self.health), 1)}",
            cdi_device_ids=(f"k8s.{self.driver}/gpu={claim.uid}-gpu",),
            share_id=self.share_id,
        )
        return PrepareResult(devices=(device,))


def build_fake_parts(config: PluginConfig, metrics: PluginMetrics) -> Parts:
    """Wiring for subprocess plugins (``fake_plugin_cli.py``): an in-memory core."""
    return Parts(FakeCore(driver=config.driver_name), serialize_lock(config))
