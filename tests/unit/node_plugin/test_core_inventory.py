"""The core's view of the backend's devices follows discover(), also when it is reused."""

from __future__ import annotations

import dataclasses
from typing import Any

from test_core_rollback import NODE, InMemoryClaims, RecordingBackend, call, config  # noqa: F401 (fixture)

from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import PluginConfig
from drakit.node_plugin.metrics import PluginMetrics


class ShrinkingBackend(RecordingBackend):
    """The example backend whose description can lose devices (a GPU fell off the bus)."""

    def __init__(self) -> None:
        super().__init__()
        self.pools = tuple(self._inner.discover())
        self.discovered = 0

    def discover(self) -> Any:
        self.discovered += 1
        return self.pools

    def drop_device(self, name: str) -> None:
        self.pools = tuple(
            dataclasses.replace(p, devices=tuple(d for d in p.devices if d.name != name))
            for p in self.pools
        )


def test_prepare_refuses_a_device_the_backend_stopped_describing(
    config: PluginConfig,  # noqa: F811 (the fixture imported above)
) -> None:
    claims = InMemoryClaims()
    backend = ShrinkingBackend()
    core = PrepareCore(config, PluginMetrics(), backend, claims, boot_id=lambda: "boot-1")  # type: ignore[arg-type]
    core.start()
    try:
        first = claims.add_allocated("gpu-1")
        assert core.prepare([first], call(config))[first.uid].error == ""
        backend.drop_device("gpu-1")
        second = claims.add_allocated("gpu-1")
        error = core.prepare([second], call(config))[second.uid].error
        assert f"device {NODE}/gpu-1 is not a device of this node" in error
        assert backend.discovered >= 2  # asked on every prepare, not once
    finally:
        core.stop()
