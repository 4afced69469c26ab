"""Helpers for node-plugin gRPC tests: configs, channels (imported by tests and conftest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from drakit.node_plugin.driver import PluginConfig

DRIVER = "gpu.example.com"


def make_config(root: Path, **overrides: object) -> PluginConfig:
    values: dict[str, Any] = {
        "driver_name": DRIVER,
        "node_name": "node-a",
        "kubeconfig": None,
        "registrar_dir": root / "registry",
        "plugins_dir": root / "plugins",
        "cdi_root": root / "cdi",
        "backend": "fake",
        **overrides,
    }
    for key in ("registrar_dir", "plugins_dir", "cdi_root"):
        Path(str(values[key])).mkdir(parents=True, exist_ok=True)
    return PluginConfig(**values)


# start_plugin(core=None, root=None, **config_overrides) -> (NodePlugin, FakeCore)
PluginFactory = Callable[..., Any]


def channel_to(path: Path) -> grpc.Channel:
    return grpc.insecure_channel(f"unix:{path}")
