"""An NPU driver with its own main: drakit's kubelet plugin runs inside the driver's process.

The NPUs are listed in an inventory file (one device name a line) that the vendor's own
tooling keeps. The driver publishes them, reads the file again on SIGHUP and publishes the
change at once, logs what goes wrong in the background with its own handler, and stops
cleanly on SIGTERM or SIGINT. It is configured as ``drakit node-plugin`` is ($DRIVER_NAME,
$NODE_NAME, $KUBECONFIG, the kubelet's folders, ...), plus $NPU_INVENTORY, the file.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from drakit.plugin import (
    BackendBase,
    BackendContext,
    BackendPrepared,
    BackgroundError,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    DeviceAttribute,
    KubeletPlugin,
    PluginOptions,
    PoolDescription,
    RequestContext,
)

log = logging.getLogger("npu-driver")


class InventoryBackend(BackendBase):
    """The NPUs the inventory file lists, each handed to containers by name."""

    name = "npu"

    def __init__(self, context: BackendContext, inventory: Path) -> None:
        super().__init__(context)
        self.inventory = inventory

    def discover(self) -> tuple[PoolDescription, ...]:
        names = self.inventory.read_text().split()
        devices = tuple(
            Device(name=name, attributes={"index": DeviceAttribute.of(index)})
            for index, name in enumerate(names)
        )
        return (PoolDescription(name=self.context.node_name, devices=devices),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits = tuple(
            ContainerEdits(env=(f"NPU_VISIBLE_{device.device.replace('-', '_').upper()}=1",))
            for device in claim.devices
        )
        return BackendPrepared(edits, state={"devices": [d.device for d in claim.devices]})

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        context.log.info("Released NPUs", devices=state.get("devices", []))


def report(error: BackgroundError) -> None:
    """The driver's error handler: the plugin retries recoverable failures by itself."""
    log.warning("drakit: %s (recoverable: %s)", error, error.recoverable)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    options = PluginOptions.from_env()  # as drakit node-plugin reads its environment
    backend = InventoryBackend(options.backend_context(), Path(os.environ["NPU_INVENTORY"]))

    received: list[int] = []
    wake = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        wake.set()

    for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)

    plugin = KubeletPlugin(backend, options, on_error=report)
    if plugin.start(timeout=60):
        log.info("NPU driver ready")
    else:
        log.warning("NPU driver serving; it publishes once the API server answers")
    try:
        while True:
            wake.wait()
            wake.clear()
            while received:
                if received.pop(0) != signal.SIGHUP:
                    return 0
                log.info("Inventory changed: publishing now")
                plugin.publish_now()
    finally:
        if plugin.stop(timeout=30):
            log.info("NPU driver stopped")
        else:
            log.warning("NPU driver still stopping after 30 s")


if __name__ == "__main__":
    sys.exit(main())
