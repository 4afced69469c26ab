"""The publisher's failures reach its error hook (``on_error``, what an embedding program's
``KubeletPlugin`` handler gets) as recoverable BackgroundErrors, here with credentials the
apiserver refuses for ResourceSlices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.plugin_access import PluginAccess, plugin_access
from helpers.waiting import eventually
from publisher_support import DRIVER, Pool, StaticBackend, plain_devices

from drakit.kubeapi.client import load_client
from drakit.localcluster import LocalCluster
from drakit.node_plugin.publisher import Publisher
from drakit.plugin import BackgroundError

# What a plugin needs to find its Node, without any right on ResourceSlices.
NODE_ONLY = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]


@pytest.fixture
def node_only(
    api: Any, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> Iterator[PluginAccess]:
    granted = plugin_access(api, namespace, cluster.kubeconfig, tmp_path, rules=NODE_ONLY)
    yield granted
    granted.delete()


def test_a_refused_watch_of_the_slices_goes_to_the_error_hook_as_recoverable(
    node: Any, node_name: str, node_only: PluginAccess
) -> None:
    heard: list[BackgroundError] = []
    client = load_client(str(node_only.kubeconfig), qps=0)
    backend = StaticBackend([Pool(node_name, plain_devices(2))])
    publisher = Publisher(client, DRIVER, node_name, backend, on_error=heard.append)
    publisher.start()
    try:
        (error, *_) = eventually(
            lambda: [e for e in list(heard) if e.what == "watch ResourceSlices"],
            "the refused list of the slices reported",
        )
    finally:
        publisher.stop()
        client.close()
    assert type(error.cause).__name__ == "Forbidden" and error.recoverable
    assert "resourceslices" in str(error)
