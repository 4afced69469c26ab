"""Device status on the real node: the chart with ``nodePlugin.deviceStatus: true`` (the
plugin's RBAC for ``resourceclaims/status`` and the granular ``associated-node:patch`` of
its driver, checked by the apiserver's granular status authorization of Kubernetes 1.37),
kube-scheduler allocating, the real kubelet preparing, and the plugin writing
``status.devices`` of a claim with and without opaque config.

The example backend reports no device status, so the plugin runs the test backend
tests/integration/node_plugin/status_backend.py (the example backend plus a ``Ready``
entry per device), mounted into drakit's image from a ConfigMap and named by the
DaemonSet's ``BACKEND``.

The claims are written by this tier's client (``load_client``, the full client), whose
bytes decide the case with config: written with ``json.dumps``' ", " separators, their
opaque parameters make the apiserver refuse every patch of the allocated claim (it
re-encodes them compactly and finds ``status.allocation`` changed), so the status never
arrived.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import NodeAssets, make_stack
from helpers.rawclaims import raw_claim_text
from node_rig import (
    DRIVER,
    EXAMPLE_IMAGE,
    RELEASE_NAMESPACE,
    ROOT,
    RealNodeStack,
    eventually,
)

from drakit.kubeapi import gojson
from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, PatchType, ResourceType

pytestmark = pytest.mark.node

RELEASE = "drakit"
STATUS_BACKEND = ROOT / "tests" / "integration" / "node_plugin" / "status_backend.py"
MOUNT = "/opt/status-backend"
BACKEND = "status_backend:StatusBackend"
GPU_CONFIG = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}

DAEMON_SETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
CONFIG_MAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)


def _plugin_daemonset(stack: RealNodeStack) -> dict[str, Any]:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=node-plugin"
    (daemonset,) = (
        stack.resource(DAEMON_SETS).list(RELEASE_NAMESPACE, label_selector=selector).items
    )
    return dict(daemonset)


def _run_status_backend(stack: RealNodeStack) -> None:
    """The chart's plugin DaemonSet, patched to run the status-reporting test backend."""
    stack.resource(CONFIG_MAPS).create(
        {
            "metadata": {"name": "status-backend"},
            "data": {"status_backend.py": STATUS_BACKEND.read_text()},
        },
        RELEASE_NAMESPACE,
    )
    daemonset = _plugin_daemonset(stack)
    pod_spec = daemonset["spec"]["template"]["spec"]
    index = next(i for i, c in enumerate(pod_spec["containers"]) if c["name"] == "plugin")
    container = f"/spec/template/spec/containers/{index}"
    env = pod_spec["containers"][index]["env"]
    backend = next(i for i, e in enumerate(env) if e["name"] == "BACKEND")
    volume = {"name": "status-backend", "configMap": {"name": "status-backend"}}
    mount = {"name": "status-backend", "mountPath": MOUNT, "readOnly": True}
    stack.resource(DAEMON_SETS).patch(
        daemonset["metadata"]["name"],
        [
            {"op": "test", "path": f"{container}/env/{backend}/name", "value": "BACKEND"},
            {"op": "replace", "path": f"{container}/env/{backend}/value", "value": BACKEND},
            {
                "op": "add",
                "path": f"{container}/env/-",
                "value": {"name": "PYTHONPATH", "value": MOUNT},
            },
            {"op": "add", "path": f"{container}/volumeMounts/-", "value": mount},
            {"op": "add", "path": "/spec/template/spec/volumes/-", "value": volume},
        ],
        RELEASE_NAMESPACE,
        patch_type=PatchType.JSON,
    )


def _runs_status_backend(pod: dict[str, Any]) -> bool:
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
    env = next(c for c in pod["spec"]["containers"] if c["name"] == "plugin")["env"]
    return ready and {"name": "BACKEND", "value": BACKEND} in env


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    work = tmp_path_factory.mktemp("device-status")
    with make_stack(node_assets, work, controllers="*") as s:
        s.install(RELEASE, s.chart_values(nodePlugin={"deviceStatus": True}))
        _run_status_backend(s)
        # Every plugin pod, terminating ones included, runs the status backend: the one
        # that ran the example backend is gone, and the kubelet has no other instance of
        # the driver left to call (a pod made while the old one still stops may have its
        # prepare sent there and wait out the kubelet's back-off).
        s.eventually_or_logs(
            lambda: (
                (pods := s.all_plugin_pods(RELEASE))
                and len(pods) == 1
                and _runs_status_backend(pods[0])
            ),
            "one ready plugin pod, running the status backend",
            RELEASE,
        )
        eventually(s.node_slices, f"ResourceSlices of {s.node.name}")
        yield s


@pytest.fixture
def namespace(stack: RealNodeStack) -> Iterator[str]:
    name = stack.create_namespace()
    yield name
    stack.delete_namespace(name)


def _claim(config: list[dict[str, Any]]) -> dict[str, Any]:
    devices: dict[str, Any] = {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]
    }
    if config:
        devices["config"] = config
    return {"metadata": {"name": "gpu"}, "spec": {"devices": devices}}


def _pod() -> dict[str, Any]:
    """A pod kube-scheduler places, using claim ``gpu``."""
    return {
        "metadata": {"name": "user"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": EXAMPLE_IMAGE,
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("config", "strategy"),
    [([{"opaque": {"driver": DRIVER, "parameters": GPU_CONFIG}}], "TimeSlicing"), ([], "none")],
    ids=["with-opaque-config", "without-config"],
)
def test_the_plugin_writes_the_device_status_of_a_claim_on_the_real_node(
    stack: RealNodeStack, namespace: str, config: list[dict[str, Any]], strategy: str
) -> None:
    stack.resource(RESOURCE_CLAIMS).create(_claim(config), namespace)
    stack.resource(PODS).create(_pod(), namespace)

    def status_devices() -> list[dict[str, Any]]:
        stored = stack.claims.get("gpu", namespace)
        return list((stored.get("status") or {}).get("devices") or ())

    try:
        (entry,) = stack.eventually_or_logs(
            status_devices, f"status.devices of {namespace}/gpu written by the plugin", RELEASE
        )
    except AssertionError as err:
        raise AssertionError(f"{err}\nevents in {namespace}:\n{stack.events(namespace)}") from None
    claim = stack.claims.get("gpu", namespace)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (entry["driver"], entry["pool"], entry["device"]) == (
        DRIVER,
        stack.node.name,
        result["device"],
    )
    assert entry["data"] == {"device": result["device"], "strategy": strategy}
    assert [(c["type"], c["status"]) for c in entry["conditions"]] == [("Ready", "True")]
    # The opaque parameters as written, in the spec and in the allocation kube-scheduler
    # copied them into (the apiserver refuses any status write that would change the
    # latter); their stored bytes are the compact form the client sent, once in each.
    assert claim["spec"]["devices"].get("config", []) == config
    allocated = claim["status"]["allocation"]["devices"].get("config", [])
    assert [c["opaque"] for c in allocated] == [c["opaque"] for c in config]
    sent = gojson.dumps(GPU_CONFIG).decode()
    assert raw_claim_text(stack.client, namespace, "gpu").count(sent) == 2 * len(config)
    stack.running_pod("user", namespace)
