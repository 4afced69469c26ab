"""The health policy on a real node (issue 31 point 2): a hostdev device whose device node is
deleted gets the policy's taint; under NoExecute the node plugin requests it, drakit's
controller grants it within its budget with a DeviceTaintRule, and kube-controller-manager's
device-taint eviction controller evicts the pod using it while a pod whose claim tolerates
the taint stays; the device node coming back lifts the taint and a new pod runs on it; under
NoSchedule the running pod stays and a new pod stays pending. The budget past its cap (a
device left NoSchedule, its pod running) is tested on three real nodes in
``test_cluster.py``.

The device nodes are made under /dev for the test and removed afterwards, also when it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from conftest import NodeAssets, make_stack
from node_rig import RealNodeStack, eventually

from drakit.controller.noexecute.rules import BUDGET_LABEL
from drakit.controller.noexecute.runner import rule_type
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import EVENTS, RESOURCE_CLAIM_TEMPLATES

pytestmark = pytest.mark.node

DRIVER = "health.drakit.dev"
RELEASE = "health"
TAINT_KEY = f"{DRIVER}/unhealthy"
_FULL = os.makedev(1, 7)  # the "full" device: reads zeros


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    # controllers="*": kube-controller-manager runs the device-taint eviction controller.
    with make_stack(node_assets, tmp_path_factory.mktemp("health-node"), controllers="*") as s:
        yield s


@pytest.fixture
def namespace(stack: RealNodeStack, install: Any) -> Iterator[str]:
    """A fresh namespace, deleted before the plugin is uninstalled (``install`` is set up
    first, so torn down last): its pods' claims are unprepared by the running plugin."""
    name = stack.create_namespace()
    yield name
    stack.delete_namespace(name)


@pytest.fixture
def device_folder() -> Iterator[Path]:
    """A folder under /dev for the test's device nodes; removed with them afterwards."""
    folder = Path("/dev") / f"drakit-health-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    try:
        yield folder
    finally:
        for node in folder.iterdir():
            node.unlink(missing_ok=True)
        folder.rmdir()


def _mknod(path: Path) -> None:
    os.mknod(path, 0o666 | 0o020000, _FULL)


@pytest.fixture
def install(stack: RealNodeStack, device_folder: Path) -> Iterator[Callable[..., None]]:
    """Install the hostdev plugin with a health policy; uninstalled afterwards."""

    def run(taint_effect: str, *, shareable: bool, per_node: int = 1) -> None:
        values = stack.chart_values(
            driverName=DRIVER,
            # The controller alone grants NoExecute (its budget; docs/health.md).
            controller={
                "enabled": True,
                "replicas": 1,
                "noExecuteBudget": {"perNode": per_node, "clusterPercent": 100},
            },
            nodePlugin={
                "backend": "hostdev",
                "backendConfig": {
                    "devices": [{"glob": f"{device_folder}/*", "shareable": shareable}],
                    "pollSeconds": 1,
                },
                "health": {
                    "taintEffect": taint_effect,
                    "checkInterval": 1,
                },
            },
        )
        stack.install(RELEASE, values)
        stack.running_plugin_pod(RELEASE)
        stack.eventually_or_logs(lambda: stack.node_slices(DRIVER), "hostdev slices", RELEASE)

    yield run
    with suppress(AssertionError):  # not installed: the test failed before
        stack.helm.run(
            "uninstall", RELEASE, "--namespace", "drakit-system", "--wait", "--timeout", "60s"
        )


def _template(stack: RealNodeStack, namespace: str, name: str, tolerate: bool = False) -> None:
    request: dict[str, Any] = {"deviceClassName": DRIVER}
    if tolerate:
        request["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}]
    template = {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": request}]}}},
    }
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)


def _pod(stack: RealNodeStack, namespace: str, name: str, template: str) -> None:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "echo ready; exec sleep 86400"],
                    "resources": {"claims": [{"name": "dev"}]},
                }
            ],
        },
    }
    stack.pods.create(pod, namespace)


def _taints(stack: RealNodeStack) -> dict[str, str]:
    """Device name -> effect its health taint has, for the node's devices of DRIVER: the
    slice's (the plugin's NoSchedule), NoExecute where the budget's DeviceTaintRule selects
    the device."""
    effects = {
        d["name"]: t["effect"]
        for s in stack.node_slices(DRIVER)
        for d in s["spec"].get("devices") or ()
        for t in d.get("taints") or ()
        if t["key"] == TAINT_KEY
    }
    rules = stack.resource(rule_type("v1")).list(label_selector=f"{BUDGET_LABEL}={DRIVER}")
    for rule in rules.items:
        device = rule["spec"]["deviceSelector"]["device"]
        if device in effects:
            effects[device] = "NoExecute"
    return effects


def _alive(stack: RealNodeStack, name: str, namespace: str) -> bool:
    """The pod exists, is not being deleted and runs."""
    pod = stack.get_pod(name, namespace)
    return bool(
        pod
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def _evicted(stack: RealNodeStack, name: str, namespace: str) -> bool:
    pod = stack.get_pod(name, namespace)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def _pending_unschedulable(stack: RealNodeStack, name: str, namespace: str) -> bool:
    pod = stack.get_pod(name, namespace) or {}
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _node_events(stack: RealNodeStack, reason: str) -> list[dict[str, Any]]:
    with suppress(NotFound):
        return [
            e
            for e in stack.resource(EVENTS).list("default").items
            if e.get("reason") == reason
            and (e.get("regarding") or {}).get("name") == stack.node.name
        ]
    return []


def test_noexecute_evicts_the_user_keeps_the_tolerating_pod_and_recovery_readmits(
    stack: RealNodeStack, namespace: str, device_folder: Path, install: Any
) -> None:
    device = device_folder / "accel0"
    _mknod(device)
    install("NoSchedule,DeviceNodeMissing=NoExecute", shareable=True)
    _template(stack, namespace, "plain")
    _template(stack, namespace, "tolerant", tolerate=True)
    _pod(stack, namespace, "victim", "plain")
    _pod(stack, namespace, "stayer", "tolerant")
    stack.running_pod("victim", namespace)
    stack.running_pod("stayer", namespace)

    device.unlink()
    eventually(lambda: set(_taints(stack).values()) == {"NoExecute"}, "the NoExecute taint")
    eventually(lambda: _evicted(stack, "victim", namespace), "the untolerating pod evicted")
    assert _alive(stack, "stayer", namespace), "the pod tolerating the taint must stay"
    assert _node_events(stack, "DeviceUnhealthy")

    _mknod(device)
    eventually(lambda: _taints(stack) == {}, "the taint lifted once the device node is back")
    assert _node_events(stack, "DeviceRecovered")
    _pod(stack, namespace, "newcomer", "plain")
    stack.running_pod("newcomer", namespace)
    assert _alive(stack, "stayer", namespace)


def test_noschedule_keeps_the_running_pod_and_holds_new_pods_back(
    stack: RealNodeStack, namespace: str, device_folder: Path, install: Any
) -> None:
    device = device_folder / "accel0"
    _mknod(device)
    install("NoSchedule", shareable=True)
    _template(stack, namespace, "plain")
    _pod(stack, namespace, "runner", "plain")
    stack.running_pod("runner", namespace)

    device.unlink()
    eventually(lambda: set(_taints(stack).values()) == {"NoSchedule"}, "the NoSchedule taint")
    _pod(stack, namespace, "latecomer", "plain")
    eventually(
        lambda: _pending_unschedulable(stack, "latecomer", namespace),
        "the new pod unschedulable (the only device is tainted)",
    )
    assert _alive(stack, "runner", namespace), "NoSchedule must not evict the running pod"
