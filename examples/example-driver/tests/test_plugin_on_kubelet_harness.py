"""The example driver as ``drakit node-plugin`` runs it, driven by the kubelet's real DRA
manager (the kubelet harness) against the real kube-apiserver, through drakit's test kit
(``drakit.testing``) as any driver's tests would be: it registers, publishes its GPUs, and
prepares a claim with opaque config into CDI specs whose environment is what upstream's e2e
suite reads; with gpuDeviceStatus the claim's status.devices carries the GPU's uuid, model
and driverVersion."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from example_driver.driver import ExampleDriver

from drakit.testing import (
    Allocated,
    HarnessNode,
    KubeAPI,
    PluginUnderTest,
    StartPlugin,
    allocate,
    claim,
    eventually,
    metric_samples,
    opaque_config,
    pod,
)

pytestmark = pytest.mark.integration

DRIVER = "gpu.example-harness.example.com"
WAIT = 60.0
GPU_DEVICE = re.compile(r'(?m)^declare -x GPU_DEVICE_[A-Z0-9_]+="(gpu-.+)"$')
GPU_CONFIG = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 10}},
}


@pytest.fixture
def plugin(drakit_node: HarnessNode, drakit_plugin: StartPlugin) -> PluginUnderTest:
    """The example driver with 2 GPUs and device status on."""
    config = drakit_node.folders.root / "config.json"
    config.write_text(json.dumps({"profile": "gpu", "numDevices": 2, "deviceStatus": True}))
    return drakit_plugin(ExampleDriver, DRIVER, backend_config=config)


def published_devices(api: KubeAPI, node: str) -> dict[str, Any]:
    """The devices of the driver's ResourceSlices for ``node``, once there are any."""
    return eventually(
        lambda: api.published_devices(DRIVER, node),
        what=f"a ResourceSlice of {DRIVER} for node {node}",
        timeout=WAIT,
    )


def allocate_gpu_1(
    api: KubeAPI, namespace: str, node: str, *, with_config: bool = True, config: Any = GPU_CONFIG
) -> None:
    """A claim for one GPU (with ``config``), a pod on ``node`` using it, and the allocation
    and reservation kube-scheduler would write (gpu-1 of the node's pool)."""
    configs = [opaque_config(DRIVER, config, requests=["gpu"])] if with_config else []
    allocate(
        api,
        namespace,
        pod("pod0", node, ["one-gpu"], container="ctr0"),
        [
            (
                claim("one-gpu", DRIVER, request="gpu", config=configs),
                [Allocated(node, "gpu-1", "gpu")],
            )
        ],
        driver=DRIVER,
    )


@pytest.mark.usefixtures("plugin")
def test_plugin_publishes_gpus_and_prepares_a_configured_claim_for_the_kubelet(
    drakit_api: KubeAPI, drakit_namespace: str, drakit_node: HarnessNode
) -> None:
    assert sorted(published_devices(drakit_api, drakit_node.name)) == ["gpu-0", "gpu-1"]

    allocate_gpu_1(drakit_api, drakit_namespace, drakit_node.name)
    ids = drakit_node.wait_prepared(drakit_namespace, "pod0")["containers"]["ctr0"]
    env = drakit_node.container(ids).environ  # every ID resolves, as the runtime needs
    export = "".join(f'declare -x {k}="{v}"\n' for k, v in sorted(env.items()))
    assert GPU_DEVICE.findall(export) == ["gpu-1"]
    assert env["GPU_DEVICE_1_SHARING_STRATEGY"] == "SpacePartitioning"
    assert env["GPU_DEVICE_1_PARTITION_COUNT"] == "10"
    assert env["DRA_ADMIN_ACCESS"] == "false"


@pytest.mark.usefixtures("plugin")
@pytest.mark.parametrize("with_config", [True, False], ids=["opaque config", "no config"])
def test_prepared_gpu_is_reported_in_the_claim_status(
    drakit_api: KubeAPI, drakit_namespace: str, drakit_node: HarnessNode, with_config: bool
) -> None:
    # With opaque config the status was never written: drakit.testing's client stored the
    # parameters with json.dumps' ", " separators, which the apiserver's re-encoding on the
    # status patch changed ("status.allocation: field cannot be modified once set").
    gpu_1 = published_devices(drakit_api, drakit_node.name)["gpu-1"]
    allocate_gpu_1(drakit_api, drakit_namespace, drakit_node.name, with_config=with_config)
    (entry,) = drakit_api.claims.wait(
        "one-gpu",
        drakit_namespace,
        until=lambda c: c.get("status", {}).get("devices"),
        what="status.devices written",
        timeout=WAIT,
    )
    assert (entry["driver"], entry["pool"], entry["device"]) == (DRIVER, drakit_node.name, "gpu-1")
    assert entry["data"] == {
        "uuid": {"string": gpu_1["attributes"]["uuid"]["string"]},
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.0.0"},
    }


def samples(text: str, name: str) -> dict[str, float]:
    """``{labels: value}`` of every sample named ``name`` in an exposition ("" for none)."""
    found: dict[str, float] = {}
    for labels, value in metric_samples(text, name):
        written = ",".join(f'{k}="{v}"' for k, v in labels.items())
        found[f"{{{written}}}" if written else ""] = value
    return found


def test_upstreams_driver_metrics_are_served_after_a_real_prepare(
    plugin: PluginUnderTest, drakit_api: KubeAPI, drakit_namespace: str, drakit_node: HarnessNode
) -> None:
    before = plugin.scrape()
    # Upstream creates both counter series at zero, before any claim.
    assert samples(before, "dra_example_driver_prepare_claims_total") == {
        '{result="success"}': 0.0, '{result="error"}': 0.0,
    }  # fmt: skip
    assert samples(before, "dra_example_driver_unprepare_claims_total") == {
        '{result="success"}': 0.0, '{result="error"}': 0.0,
    }  # fmt: skip
    assert samples(before, "dra_example_driver_fatal_background_errors_total") == {"": 0.0}
    assert (
        "# HELP dra_example_driver_prepare_claim_duration_seconds [BETA] Latency in seconds of "
        "resource claim prepare operations handled by the driver." in before
    )

    allocate_gpu_1(drakit_api, drakit_namespace, drakit_node.name)
    drakit_node.wait_prepared(drakit_namespace, "pod0")
    after = plugin.scrape()
    assert samples(after, "dra_example_driver_prepare_claims_total")['{result="success"}'] == 1
    buckets = {
        labels["le"]: value
        for labels, value in metric_samples(
            after, "dra_example_driver_prepare_claim_duration_seconds_bucket"
        )
        if labels["result"] == "success"
    }
    assert list(buckets) == [
        "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"
    ]  # fmt: skip
    assert buckets["+Inf"] == 1
    assert samples(after, "dra_example_driver_prepare_claim_duration_seconds_count") == {
        '{result="success"}': 1.0
    }


def test_a_claim_the_plugin_refuses_is_counted_as_a_prepare_error(
    plugin: PluginUnderTest, drakit_api: KubeAPI, drakit_namespace: str, drakit_node: HarnessNode
) -> None:
    # Refused before the backend prepares anything (the config, as upstream's kubelet
    # plugin refuses it): upstream counts it, so the example driver does too.
    sharing = {
        "strategy": "TimeSlicing",
        "timeSlicingConfig": {"interval": "Short"},
        "spacePartitioningConfig": {"partitionCount": 2},
    }
    allocate_gpu_1(
        drakit_api, drakit_namespace, drakit_node.name, config={**GPU_CONFIG, "sharing": sharing}
    )
    errors = '{result="error"}'
    eventually(
        lambda: samples(plugin.scrape(), "dra_example_driver_prepare_claims_total").get(errors),
        what="a prepare error counted",
        timeout=WAIT,
    )
    after = plugin.scrape()
    assert samples(after, "dra_example_driver_prepare_claims_total")['{result="success"}'] == 0
    assert samples(after, "dra_example_driver_prepare_claim_duration_seconds_count")[errors] >= 1
