"""A stuck backend unprepare under the kubelet's real DRA manager (the kubelet harness): the
kubelet hears an error naming the claim and the timeout, prepares another pod's claim
meanwhile, retries the unprepare on its own, and completes it once the backend answers; the
plugin then holds nothing of the claim. This is the plugin's side of a node drain whose
driver hangs in unprepare."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from drakit.plugin import (
    BackendBase,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    KubeletPlugin,
    PluginOptions,
    PoolDescription,
    RequestContext,
)
from drakit.testing import Allocated, HarnessNode, allocate, claim, pod

DRIVER = "npu.example.com"


class HangingNpus(BackendBase):
    """Two NPUs; once ``hang`` is set, ``unprepare`` waits until ``release`` is set (a
    device reset that hangs). ``unprepares`` counts the calls per claim UID."""

    name = "npu"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.hang, self.release = threading.Event(), threading.Event()
        self.unprepares: dict[str, int] = {}

    def discover(self) -> tuple[PoolDescription, ...]:
        devices = (Device(name="npu-0"), Device(name="npu-1"))
        return (PoolDescription(self.context.node_name, devices),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits = tuple(ContainerEdits(env=(f"NPU_{d.device.upper()}=1",)) for d in claim.devices)
        return BackendPrepared(edits)

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        self.unprepares[claim.uid] = self.unprepares.get(claim.uid, 0) + 1
        if self.hang.is_set():
            self.release.wait(120)


def test_the_kubelet_retries_a_timed_out_unprepare_until_the_stuck_backend_answers(
    drakit_cluster: Any, drakit_api: Any, drakit_namespace: str, drakit_node: HarnessNode
) -> None:
    ns, node = drakit_namespace, drakit_node.name
    options = PluginOptions(
        DRIVER,
        node,
        kubeconfig=Path(drakit_cluster.kubeconfig),
        registrar_dir=drakit_node.folders.registrar,
        plugins_dir=drakit_node.folders.plugins,
        cdi_root=drakit_node.folders.cdi,
        unprepare_timeout_seconds=1.0,
    )
    backend = HangingNpus(options.backend_context())
    since = drakit_node.events.mark()
    plugin = KubeletPlugin(backend, options)
    try:
        assert plugin.start(timeout=60) is True
        drakit_node.events.wait("registered", timeout=60, since=since, driver=DRIVER)
        (held,), _ = allocate(
            drakit_api, ns, pod("held", node, ["c-held"]),
            [(claim("c-held", DRIVER), [Allocated(node, "npu-0")])], driver=DRIVER,
        )  # fmt: skip
        drakit_node.wait_prepared(ns, "held")

        backend.hang.set()
        since = drakit_node.events.mark()
        drakit_api.pods.delete("held", ns)
        failed = drakit_node.events.wait(
            "unprepare-failed", timeout=60, since=since, pod=f"{ns}/held"
        )
        assert f"ResourceClaim {ns}/c-held" in failed["error"]
        assert "--unprepare-timeout of 1s" in failed["error"]
        # The pod's termination waits for its unprepare, as the kubelet's does.
        assert drakit_api.pods.get("held", ns)["metadata"].get("deletionTimestamp")

        # The node is not held: another pod's claim is prepared meanwhile.
        allocate(
            drakit_api, ns, pod("next", node, ["c-next"]),
            [(claim("c-next", DRIVER), [Allocated(node, "npu-1")])], driver=DRIVER,
        )  # fmt: skip
        drakit_node.wait_prepared(ns, "next")

        backend.release.set()
        drakit_node.wait_unprepared(ns, "held")
        drakit_api.pods.wait_deleted("held", ns)
        uid = held["metadata"]["uid"]
        assert not [p for p in drakit_node.folders.cdi.iterdir() if uid in p.name]
        assert backend.unprepares[uid] == 1  # each retry waited for the same backend call
    finally:
        backend.release.set()
        assert plugin.stop(timeout=60)
