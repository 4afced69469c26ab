"""The PodResources cross-check on a real node: the chart with nodePlugin.podResources on, the
real kubelet's PodResources socket mounted read-only, and ``drakit devices --node`` showing
the node's view (read from the plugin's metrics address on 127.0.0.1, since the API server
never proxies to a loopback address).

The leak: a pod whose claim is prepared but whose container never starts (its image is never
pulled), then the kubelet SIGKILLed. A 1.37 kubelet writes its own DRA checkpoint
(``<kubeletDir>/dra_manager_state``) before it calls NodePrepareResources, and its reconcile
loop unprepares the claims of pods that are gone, so a kill alone heals once the kubelet is
back. A leak needs the kubelet to lose that record as well: the test removes it while the
kubelet is down (as a node whose kubelet state was wiped), deletes the pod, and starts the
kubelet again (the rig restarts it with its arguments). Nobody unprepares the claim then, and
the plugin must say so.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import NodeAssets, make_stack
from node_rig import RealNodeStack, eventually, load_example

from drakit.cli import main
from drakit.kubeapi.resources import EVENTS, RESOURCE_CLAIM_TEMPLATES

pytestmark = pytest.mark.node

RELEASE = "drakit"
TEMPLATE = "one-gpu"


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    with make_stack(node_assets, tmp_path_factory.mktemp("real-node-pr"), controllers="*") as s:
        check = {"enabled": True, "period": 1, "grace": 3, "eventAfter": 3}
        s.install(RELEASE, s.chart_values(nodePlugin={"podResources": check}))
        s.running_plugin_pod(RELEASE)
        eventually(s.node_slices, f"ResourceSlices of {s.node.name}")
        yield s


@pytest.fixture
def namespace(stack: RealNodeStack) -> Iterator[str]:
    name = stack.create_namespace()
    template = next(o for o in load_example("gpu-pod.yaml") if o["kind"] == "ResourceClaimTemplate")
    template["metadata"]["name"] = TEMPLATE
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, name)
    yield name
    stack.delete_namespace(name)


def _url(stack: RealNodeStack) -> str:
    return f"http://127.0.0.1:{stack.chart_values_of(RELEASE)['nodePlugin']['metrics']['port']}"


def _metric(stack: RealNodeStack, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"{_url(stack)}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _devices(stack: RealNodeStack, capsys: pytest.CaptureFixture[str]) -> str:
    args = ["devices", "--kubeconfig", stack.cluster.kubeconfig, "--node", stack.node.name]
    assert main([*args, "--node-view-url", _url(stack)]) == 0
    return capsys.readouterr().out


def _pod(name: str, image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "exec sleep 86400"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def _claim_of(stack: RealNodeStack, namespace: str, pod: str) -> dict[str, Any]:
    def generated() -> dict[str, Any] | None:
        p = stack.get_pod(pod, namespace) or {}
        statuses = (p.get("status") or {}).get("resourceClaimStatuses") or []
        name = next((s.get("resourceClaimName") for s in statuses), None)
        return stack.claims.get(name, namespace) if name else None

    found: dict[str, Any] = eventually(generated, f"the claim of {namespace}/{pod}")
    return found


def test_devices_node_shows_the_kubelets_view_of_a_running_pod(
    stack: RealNodeStack, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.pods.create(_pod("user"), namespace)
    stack.running_pod("user", namespace)
    claim = _claim_of(stack, namespace, "user")["metadata"]["name"]

    def listed() -> str | None:
        out = _devices(stack, capsys)
        view = out[out.index("Node view of") :] if "Node view of" in out else ""
        return view if f" {namespace}/user " in view else None

    view = eventually(listed, "the node view to list the pod")
    rows = [line.split() for line in view.splitlines() if f" {namespace}/user " in line]
    assert len(rows) == 1, view
    (row,) = rows
    assert row[:3] == [f"{namespace}/{claim}", f"{namespace}/user", "main"]
    assert row[4] == "completed"
    assert "finding:" not in view
    assert _metric(stack, "drakit_node_plugin_podresources_findings", kind="leak") == 0


def test_a_preparation_the_kubelet_forgot_after_a_sigkill_is_reported_as_a_leak(
    stack: RealNodeStack, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The image is never pulled: the claim is prepared, the container never starts.
    stack.pods.create(_pod("stuck", image="localhost/drakit-never-pulled:none"), namespace)
    claim = _claim_of(stack, namespace, "stuck")
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    eventually(
        lambda: f"{namespace}/{name} " in _devices(stack, capsys).partition("Node view of")[2],
        "the plugin to have prepared the claim",
    )

    kubelet = next(p for p in stack.node.processes if p.name == "kubelet")
    kubelet.kill()
    (stack.node.kubelet_dir / "dra_manager_state").unlink()
    stack.pods.delete("stuck", namespace, grace_period_seconds=0)
    stack.pod_gone("stuck", namespace)
    stack.node.restart_kubelet()

    def reported() -> str | None:
        out = _devices(stack, capsys)
        return out if f"finding: leak: claim {namespace}/{name}" in out else None

    out = eventually(reported, "the cross-check to report the leak")
    assert "prepared, but no container on the node uses it" in out
    assert _metric(stack, "drakit_node_plugin_podresources_findings", kind="leak") == 1

    def event() -> dict[str, Any] | None:
        events = stack.resource(EVENTS).list(namespace).items
        return next(
            (
                e
                for e in events
                if e.get("reason") == "PreparedClaimUnused"
                and (e.get("regarding") or {}).get("uid") == uid
            ),
            None,
        )

    found = eventually(event, "a PreparedClaimUnused Event on the claim")
    assert found["type"] == "Warning"
