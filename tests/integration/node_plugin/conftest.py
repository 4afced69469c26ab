"""Fixtures for node-plugin core tests: a PrepareCore on the session's real apiserver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claims import DRIVER, NODE, claims_resource, make_config

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.metrics import PluginMetrics

EXAMPLE_CONFIG: dict[str, Any] = {
    "gpus": 4,
    "partitionable": {"gpus": 1, "memory": "40Gi", "partitions": 2},
    "consumable": {"devices": 1, "memory": "80Gi", "default": "10Gi", "step": "1Gi"},
}


class RecordingEvents:
    """Records the events the core asks for (the real recorder is tested in kubeapi)."""

    def __init__(self) -> None:
        self.events: list[tuple[dict[str, Any], str, str, str]] = []

    def warning(self, regarding: dict[str, Any], reason: str, action: str, note: str = "") -> None:
        self.events.append((regarding, reason, action, note))


CoreFactory = Callable[..., PrepareCore]


@pytest.fixture
def make_core(api: RateLimitedApiClient, tmp_path: Path) -> Iterator[CoreFactory]:
    """make_core(root=tmp_path, backend=None, events=None, device_status=None, outputs=None,
    **config) -> started PrepareCore."""
    cores: list[PrepareCore] = []

    def make(root: Path | None = None, backend: Any = None, **overrides: Any) -> PrepareCore:
        events = overrides.pop("events", None) or RecordingEvents()
        boot_id = overrides.pop("boot_id", None) or (lambda: "boot-1")
        status = overrides.pop("device_status", None)
        outputs = overrides.pop("outputs", None)
        config = make_config(root or tmp_path, **overrides)
        backend = backend or load_backend(
            "example", driver_name=DRIVER, node_name=NODE, config=EXAMPLE_CONFIG
        )
        core = PrepareCore(
            config, PluginMetrics(), backend, claims_resource(api), events=events,
            boot_id=boot_id, device_status=status, outputs=outputs,
        )  # fmt: skip
        core.start()
        cores.append(core)
        return core

    yield make
    for core in cores:
        core.stop()
