"""drakit.plugin.KubeletPlugin run in the test's own process, as a vendor's program runs it,
under the kubelet's real plugin and DRA managers (the kubelet harness) and a real apiserver:
it registers, publishes, serves a prepare, publishes now, reports a publish the apiserver
refuses to the error hook and recovers, and stops leaving no socket and no thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.plugin_access import PluginAccess, plugin_access
from helpers.waiting import eventually

from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import RESOURCE_SLICES, Resource
from drakit.node_plugin.sockets import socket_paths
from drakit.plugin import (
    BackendBase,
    BackendPrepared,
    BackgroundError,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    KubeletPlugin,
    PluginOptions,
    PoolDescription,
    RegistrationStatus,
    RequestContext,
)
from drakit.testing import Allocated, HarnessNode, allocate, claim, pod

DRIVER = "npu.example.com"


class ListedNpus(BackendBase):
    """The NPUs of a list the test changes, without telling the plugin (so it publishes
    them when asked to: publish_now)."""

    name = "npu"

    def __init__(self, *args: Any, names: list[str]) -> None:
        super().__init__(*args)
        self.names = names
        self.closed = False

    def discover(self) -> tuple[PoolDescription, ...]:
        devices = tuple(Device(name=name) for name in list(self.names))
        return (PoolDescription(self.context.node_name, devices),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits = tuple(ContainerEdits(env=(f"NPU_{d.device.upper()}=1",)) for d in claim.devices)
        return BackendPrepared(edits)

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def access(
    drakit_cluster: Any, drakit_api: Any, drakit_namespace: str, tmp_path: Path
) -> Iterator[PluginAccess]:
    granted = plugin_access(
        drakit_api.client, drakit_namespace, drakit_cluster.kubeconfig, tmp_path
    )
    yield granted
    granted.delete()


def published(api: Any, node: str) -> list[str]:
    """The device names of ``DRIVER``'s ResourceSlices on ``node``, sorted."""
    listed = Resource(api, RESOURCE_SLICES).list(
        field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
    )
    return sorted(d["name"] for s in listed.items for d in s["spec"].get("devices") or ())


def test_an_embedded_plugin_publishes_prepares_publishes_now_reports_a_refused_publish_and_stops(
    drakit_api: Any, drakit_namespace: str, drakit_node: HarnessNode, access: PluginAccess
) -> None:
    node = drakit_node.name
    names = ["npu-0"]
    heard: list[BackgroundError] = []
    client = load_client(str(access.kubeconfig), qps=0)  # a kubernetes ApiClient, used as is
    options = PluginOptions(
        DRIVER,
        node,
        api_client=client,
        registrar_dir=drakit_node.folders.registrar,
        plugins_dir=drakit_node.folders.plugins,
        cdi_root=drakit_node.folders.cdi,
    )
    backend = ListedNpus(options.backend_context(), names=names)
    threads_before = set(threading.enumerate())
    since = drakit_node.events.mark()
    plugin = KubeletPlugin(backend, options, on_error=heard.append)
    try:
        assert plugin.start(timeout=60) is True
        drakit_node.events.wait("registered", timeout=60, since=since, driver=DRIVER)
        eventually(lambda: plugin.registration == RegistrationStatus(True), "registration")
        eventually(lambda: published(drakit_api, node) == ["npu-0"], "npu-0 published")

        # The kubelet prepares a claim through the plugin.
        allocations = [(claim("c", DRIVER), [Allocated(node, "npu-0")])]
        allocate(drakit_api, drakit_namespace, pod("p", node, ["c"]), allocations, driver=DRIVER)
        prepared = drakit_node.wait_prepared(drakit_namespace, "p")
        assert "NPU_NPU-0=1" in drakit_node.container_env(prepared["containers"]["main"])

        # A device the backend did not announce appears once the program asks.
        names.append("npu-1")
        assert plugin.publish_now() is True
        eventually(lambda: published(drakit_api, node) == ["npu-0", "npu-1"], "npu-1 published")
        assert heard == []

        # The apiserver refuses: the hook hears of it, the plugin keeps trying.
        access.revoke()
        names.append("npu-2")

        def refused() -> list[BackgroundError]:
            plugin.publish_now()
            return [
                e
                for e in list(heard)
                if e.what == "publish ResourceSlices" and type(e.cause).__name__ == "Forbidden"
            ]

        error = eventually(refused, "a refused publish reported", interval=1)[0]
        assert error.recoverable is True
        assert "forbidden" in str(error).lower() and access.name in str(error)
        access.restore()
        eventually(
            lambda: plugin.publish_now() and published(drakit_api, node) == [
                "npu-0", "npu-1", "npu-2"
            ],
            "npu-2 published once allowed again",
        )  # fmt: skip
    finally:
        stopped = plugin.stop(timeout=60)
        client.close()
    assert stopped and backend.closed and not plugin.running
    drakit_node.events.wait("deregistered", timeout=60, since=since, driver=DRIVER)
    sockets = socket_paths(options.registrar_dir, options.plugin_data_dir, DRIVER, None)
    assert not sockets.registration.exists() and not sockets.dra.exists()
    eventually(lambda: not started_threads(threads_before), "the plugin's threads to end", 30)


def started_threads(before: set[threading.Thread]) -> list[str]:
    """The names of the threads alive now that were not alive ``before``."""
    return sorted(t.name for t in set(threading.enumerate()) - before)
