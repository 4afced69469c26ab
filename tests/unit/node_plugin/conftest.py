"""Fixtures for node-plugin gRPC tests: real plugin instances on real Unix sockets."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The helper modules next to this file (fake_core, plugin_harness) are plain modules,
# importable because pytest puts a conftest's folder on sys.path (rootdir-less "prepend"
# import mode); subprocess plugins get the folder through PYTHONPATH.
from fake_core import FakeCore
from plugin_harness import PluginFactory, make_config

from drakit.node_plugin.app import NodePlugin


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path: pytest's tmp_path can exceed the socket limit."""
    with tempfile.TemporaryDirectory(prefix="drk-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def start_plugin(short_tmp: Path) -> Iterator[PluginFactory]:
    """Start plugin instances (stopped at teardown); returns (plugin, fake core)."""
    started: list[NodePlugin] = []

    def start(
        core: FakeCore | None = None, root: Path | None = None, **overrides: Any
    ) -> tuple[NodePlugin, FakeCore]:
        core = core or FakeCore()
        plugin = NodePlugin(make_config(root or short_tmp, **overrides), core=core)
        plugin.start()
        started.append(plugin)
        return plugin, core

    yield start
    for plugin in started:
        plugin.stop(grace=1)
