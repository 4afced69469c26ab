"""drakit on a real node: the Helm chart on a real kubelet with containerd and
runc, drakit's image built from deploy/Dockerfile, and containers that receive
their devices through CDI.

The control plane runs kube-controller-manager with every controller,
including the resourceclaim controller; drakit's controller runs beside it in
``scoped`` mode (claims only for pods that name drakit's scheduler).
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import NodeAssets, make_stack
from node_rig import DRIVER, RealNodeStack, eventually, load_example, template_pod

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import RESOURCE_CLAIM_TEMPLATES

pytestmark = pytest.mark.node

RELEASE = "drakit"


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    with make_stack(node_assets, tmp_path_factory.mktemp("real-node"), controllers="*") as s:
        s.install(RELEASE, s.chart_values())
        s.running_plugin_pod(RELEASE)
        eventually(s.node_slices, f"ResourceSlices of {s.node.name}")
        yield s


@pytest.fixture
def namespace(stack: RealNodeStack) -> Iterator[str]:
    """A fresh namespace; deleted afterwards, even when the test failed, so that its pods
    give their devices back before the next test."""
    name = stack.create_namespace()
    yield name
    stack.delete_namespace(name)


# -- helpers -------------------------------------------------------------------------------------


def metrics(stack: RealNodeStack, release: str = RELEASE) -> str:
    port = stack.chart_values_of(release)["nodePlugin"]["metrics"]["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def metric_value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{want}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def cdi_env_of_claim(stack: RealNodeStack, claim_uid: str) -> list[str]:
    """Every environment entry the claim's CDI spec gives a container."""
    env: list[str] = []
    for path in stack.node.cdi_root.glob(f"*{claim_uid}*"):
        spec = json.loads(path.read_text())
        for device in spec.get("devices", []):
            env += device.get("containerEdits", {}).get("env", [])
        env += spec.get("containerEdits", {}).get("env", [])
    return sorted(env)


def gpu_lines(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if line.startswith("GPU_"))


def generated_claim(
    stack: RealNodeStack, namespace: str, pod: str, pod_claim: str = "gpu"
) -> dict[str, Any]:
    def claim() -> dict[str, Any] | None:
        p = stack.get_pod(pod, namespace) or {}
        for status in (p.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == pod_claim and status.get("resourceClaimName"):
                try:
                    return stack.claims.get(status["resourceClaimName"], namespace)
                except NotFound:
                    return None
        return None

    found: dict[str, Any] = eventually(claim, f"the claim generated for {namespace}/{pod}")
    return found


def plugin_restart_count(pod: dict[str, Any]) -> int:
    return int(
        next(s["restartCount"] for s in pod["status"]["containerStatuses"] if s["name"] == "plugin")
    )


def create_template(stack: RealNodeStack, namespace: str, name: str = "one-gpu") -> None:
    template = next(o for o in load_example("gpu-pod.yaml") if o["kind"] == "ResourceClaimTemplate")
    template["metadata"]["name"] = name
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)


# -- the chart on the node -----------------------------------------------------------------------


def test_node_plugin_daemonset_registers_with_the_kubelet_and_publishes_the_nodes_slices(
    stack: RealNodeStack,
) -> None:
    pod = stack.running_plugin_pod()
    assert pod["spec"]["nodeName"] == stack.node.name
    assert pod["spec"]["containers"][0]["image"] == f"localhost/drakit:{stack.image_tag}"
    registrar = stack.node.kubelet_dir / "plugins_registry"
    assert any(p.name.endswith("-reg.sock") for p in registrar.iterdir())
    eventually(
        lambda: metric_value(metrics(stack), "drakit_node_plugin_registered") == 1, "registration"
    )
    slices = stack.node_slices()
    devices = [d["name"] for s in slices for d in s["spec"].get("devices", [])]
    assert sorted(devices) == [f"gpu-{i}" for i in range(8)]
    assert {s["spec"]["pool"]["name"] for s in slices} == {stack.node.name}


def test_gpu_pod_example_containers_see_exactly_their_claims_cdi_environment(
    stack: RealNodeStack, namespace: str
) -> None:
    stack.apply_example("gpu-pod.yaml", namespace)
    stack.running_pod("gpu-demo", namespace)
    claim = generated_claim(stack, namespace, "gpu-demo")
    main = stack.container_output(namespace, "gpu-demo", "main")
    sidecar = stack.container_output(namespace, "gpu-demo", "sidecar")
    expected = cdi_env_of_claim(stack, claim["metadata"]["uid"])
    assert expected, "the claim's CDI spec gives no environment"
    assert gpu_lines(main) == sorted(e for e in expected if e.startswith("GPU_"))
    assert gpu_lines(sidecar) == []
    # The same output as `kubectl logs` reads it: apiserver -> kubelet, on loopback.
    status, body = stack.cluster.request(
        f"/api/v1/namespaces/{namespace}/pods/gpu-demo/log?container=main"
    )
    assert status == 200
    assert gpu_lines(body.decode()) == gpu_lines(main)

    stack.delete_pod("gpu-demo", namespace)
    stack.pod_gone("gpu-demo", namespace)
    eventually(
        lambda: not cdi_env_of_claim(stack, claim["metadata"]["uid"]),
        "the claim's CDI spec to be removed",
    )
    eventually(
        lambda: not _claim_exists(stack, namespace, claim["metadata"]["name"]),
        "the generated claim to be deleted",
    )


def test_shared_claim_example_gives_both_pods_the_same_device(
    stack: RealNodeStack, namespace: str
) -> None:
    stack.apply_example("shared-claim.yaml", namespace)
    for pod in ("reader", "writer"):
        stack.running_pod(pod, namespace)
    claim = stack.claims.get("shared-gpu", namespace)
    expected = sorted(
        e for e in cdi_env_of_claim(stack, claim["metadata"]["uid"]) if e.startswith("GPU_")
    )
    assert expected
    assert gpu_lines(stack.container_output(namespace, "reader", "main")) == expected
    assert gpu_lines(stack.container_output(namespace, "writer", "main")) == expected

    for pod in ("reader", "writer"):
        stack.delete_pod(pod, namespace)
    for pod in ("reader", "writer"):
        stack.pod_gone(pod, namespace)
    eventually(
        lambda: (
            not (stack.claims.get("shared-gpu", namespace).get("status") or {}).get("allocation")
        ),
        "the shared claim to be deallocated",
    )
    assert not cdi_env_of_claim(stack, claim["metadata"]["uid"])


def test_drakit_controller_schedules_an_opted_in_pod_beside_the_resourceclaim_controller(
    stack: RealNodeStack, namespace: str
) -> None:
    create_template(stack, namespace)
    stack.pods.create(
        template_pod("drakit-scheduled", "one-gpu", schedulerName="drakit"), namespace
    )
    pod = stack.running_pod("drakit-scheduled", namespace)
    assert pod["spec"]["nodeName"] == stack.node.name
    claim = generated_claim(stack, namespace, "drakit-scheduled")
    output = stack.container_output(namespace, "drakit-scheduled", "main")
    assert gpu_lines(output) == [
        e for e in cdi_env_of_claim(stack, claim["metadata"]["uid"]) if e.startswith("GPU_")
    ]
    stack.delete_pod("drakit-scheduled", namespace)
    stack.pod_gone("drakit-scheduled", namespace)


# -- the hostdev backend with a real device node -------------------------------------------------


@pytest.fixture
def device_folder() -> Iterator[Path]:
    """A folder under /dev holding one character device made for the test."""
    folder = Path("/dev") / f"drakit-test-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    try:
        os.mknod(
            folder / "accel0", 0o666 | 0o020000, os.makedev(1, 7)
        )  # the "full" device: reads zeros
        yield folder
    finally:
        (folder / "accel0").unlink(missing_ok=True)
        folder.rmdir()


def test_hostdev_backend_hands_a_real_device_node_to_a_container(
    stack: RealNodeStack, namespace: str, device_folder: Path
) -> None:
    driver = "hostdev.drakit.dev"
    values = stack.chart_values(
        driverName=driver,
        controller={"enabled": False},
        nodePlugin={
            "backend": "hostdev",
            "backendConfig": {"devices": [{"glob": f"{device_folder}/*"}]},
        },
    )
    stack.install("hostdev", values)
    try:
        stack.running_plugin_pod("hostdev")
        stack.eventually_or_logs(
            lambda: stack.node_slices(driver), "the hostdev plugin's slices", "hostdev"
        )
        template = {
            "metadata": {"name": "accel"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]
                    }
                }
            },
        }
        stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)
        device = f"{device_folder}/accel0"
        pod = template_pod("accel-user", "accel")
        pod["spec"]["containers"][0]["command"] = [
            "sh",
            "-c",
            f"stat -c 'node %F %t:%T' {device}; head -c 4 {device} | od -An -tx1; "
            "echo ready; exec sleep 86400",
        ]
        stack.pods.create(pod, namespace)
        stack.running_pod("accel-user", namespace)
        output = stack.container_output(namespace, "accel-user", "main")
        assert "node character special file 1:7" in output
        assert "00 00 00 00" in output  # it opened the device and read from it
        stack.delete_pod("accel-user", namespace)
        stack.pod_gone("accel-user", namespace)
    finally:
        stack.helm.run(
            "uninstall", "hostdev", "--namespace", "drakit-system", "--wait", "--timeout", "60s"
        )
        stack.releases.remove("hostdev")


def test_container_reads_its_device_metadata_file_on_the_real_node(
    stack: RealNodeStack, namespace: str
) -> None:
    """KEP-5304: the example backend with ``deviceMetadata``; the container finds the file
    at upstream's path for a claim from a template and reads the claim, the request and
    the device's attributes from it."""
    driver = "metadata.drakit.dev"
    values = stack.chart_values(
        driverName=driver,
        controller={"enabled": False},
        nodePlugin={"backend": "example", "backendConfig": {"gpus": 2, "deviceMetadata": True}},
    )
    stack.install("metadata", values)
    try:
        stack.running_plugin_pod("metadata")
        stack.eventually_or_logs(
            lambda: stack.node_slices(driver), "the metadata plugin's slices", "metadata"
        )
        template = {
            "metadata": {"name": "meta"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]
                    }
                }
            },
        }
        stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)
        path = (
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/"
            f"{driver}-metadata.json"
        )
        pod = template_pod("meta-user", "meta")
        pod["spec"]["containers"][0]["command"] = [
            "sh",
            "-c",
            f"echo BEGIN; cat {path}; echo; echo END; echo ready; exec sleep 86400",
        ]
        stack.pods.create(pod, namespace)
        stack.running_pod("meta-user", namespace)
        output = stack.container_output(namespace, "meta-user", "main")
        text = output.split("BEGIN", 1)[1].split("END", 1)[0]
        metadata = json.JSONDecoder().raw_decode(text.strip())[0]
        claim = generated_claim(stack, namespace, "meta-user")
        assert (metadata["kind"], metadata["apiVersion"]) == (
            "DeviceMetadata",
            "metadata.resource.k8s.io/v1beta1",
        )
        assert metadata["metadata"]["name"] == claim["metadata"]["name"]
        assert metadata["metadata"]["uid"] == claim["metadata"]["uid"]
        assert metadata["podClaimName"] == "gpu"
        (request,) = metadata["requests"]
        (device,) = request["devices"]
        (allocated,) = claim["status"]["allocation"]["devices"]["results"]
        assert request["name"] == "gpu"
        assert (device["driver"], device["pool"], device["name"]) == (
            driver,
            allocated["pool"],
            allocated["device"],
        )
        assert device["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}
        stack.delete_pod("meta-user", namespace)
        stack.pod_gone("meta-user", namespace)
    finally:
        stack.helm.run(
            "uninstall", "metadata", "--namespace", "drakit-system", "--wait", "--timeout", "60s"
        )
        stack.releases.remove("metadata")


# -- failures and upgrades -----------------------------------------------------------------------


def test_plugin_killed_with_sigkill_is_restarted_and_prepared_claims_survive(
    stack: RealNodeStack, namespace: str
) -> None:
    create_template(stack, namespace)
    stack.pods.create(template_pod("before-kill", "one-gpu"), namespace)
    stack.running_pod("before-kill", namespace)
    claim = generated_claim(stack, namespace, "before-kill")
    spec_before = cdi_env_of_claim(stack, claim["metadata"]["uid"])
    plugin = stack.running_plugin_pod()
    restarts = plugin_restart_count(plugin)

    os.kill(stack.container_pid(plugin, "plugin"), signal.SIGKILL)

    def restarted() -> bool:
        p = stack.get_pod(plugin["metadata"]["name"], "drakit-system")
        return bool(p) and plugin_restart_count(p) > restarts and _running(p)

    eventually(restarted, "the kubelet to restart the plugin container")
    assert stack.running_pod("before-kill", namespace)
    assert cdi_env_of_claim(stack, claim["metadata"]["uid"]) == spec_before
    stack.pods.create(template_pod("after-kill", "one-gpu"), namespace)
    stack.running_pod("after-kill", namespace)
    assert gpu_lines(stack.container_output(namespace, "after-kill", "main"))
    for name in ("before-kill", "after-kill"):
        stack.delete_pod(name, namespace)


def test_kubelet_restart_keeps_a_dra_pod_running_without_preparing_it_again(
    stack: RealNodeStack, namespace: str
) -> None:
    create_template(stack, namespace)
    stack.pods.create(template_pod("survivor", "one-gpu"), namespace)
    pod = stack.running_pod("survivor", namespace)
    container_id = pod["status"]["containerStatuses"][0]["containerID"]
    prepares = metric_value(
        metrics(stack), "drakit_node_plugin_claims_total", operation="prepare", result="success"
    )

    stack.node.restart_kubelet()

    def kubelet_synced() -> bool:  # the restarted kubelet reported the pod again
        p = stack.get_pod("survivor", namespace) or {}
        return bool(p) and p["status"]["containerStatuses"][0].get("containerID") == container_id

    eventually(kubelet_synced, "the restarted kubelet to report the pod")
    pod = stack.running_pod("survivor", namespace)
    status = pod["status"]["containerStatuses"][0]
    assert status["containerID"] == container_id
    assert status["restartCount"] == 0
    after = metric_value(
        metrics(stack), "drakit_node_plugin_claims_total", operation="prepare", result="success"
    )
    assert after == prepares
    stack.delete_pod("survivor", namespace)
    stack.pod_gone("survivor", namespace)


def test_liveness_probe_restarts_a_plugin_whose_sockets_stop_answering(
    stack: RealNodeStack,
) -> None:
    # A removed socket fails the probe at once; the generous timeout only keeps a starved
    # machine (python starting slowly) from failing a healthy plugin.
    probe = {
        "initialDelaySeconds": 1,
        "periodSeconds": 2,
        "timeoutSeconds": 15,
        "failureThreshold": 2,
    }
    stack.install(
        RELEASE,
        stack.chart_values_of(RELEASE)
        | {"nodePlugin": stack.chart_values_of(RELEASE)["nodePlugin"] | {"livenessProbe": probe}},
    )
    eventually(
        lambda: (
            (p := stack.running_plugin_pod())
            and p["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] == 2
            and len(stack.plugin_pods()) == 1
            and p
        ),
        "the plugin pod with the fast probe",
    )
    plugin = stack.running_plugin_pod()
    restarts = plugin_restart_count(plugin)
    sockets = eventually(
        lambda: len(_sockets(stack)[0]) == 1 and _sockets(stack)[0], "one DRA socket"
    )
    sockets[0].unlink()  # the plugin process lives on, but nobody can reach it any more

    def restarted() -> bool:
        p = stack.get_pod(plugin["metadata"]["name"], "drakit-system")
        return bool(p) and plugin_restart_count(p) > restarts and _running(p)

    eventually(restarted, "the liveness probe to restart the plugin")
    eventually(
        lambda: metric_value(metrics(stack), "drakit_node_plugin_registered") == 1,
        "re-registration",
    )


# -- small helpers ---------------------------------------------------------------------------------


def _claim_exists(stack: RealNodeStack, namespace: str, name: str) -> bool:
    try:
        stack.claims.get(name, namespace)
    except NotFound:
        return False
    return True


def _sockets(stack: RealNodeStack) -> tuple[list[Path], list[Path]]:
    """(DRA sockets, registration sockets) of the example driver on the node."""
    dra = sorted((stack.node.kubelet_dir / "plugins" / DRIVER).glob("*.sock"))
    registration = sorted((stack.node.kubelet_dir / "plugins_registry").glob(f"{DRIVER}*.sock"))
    return dra, registration


def _running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (
        bool(statuses)
        and all("running" in (s.get("state") or {}) for s in statuses)
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in pod["status"].get("conditions") or []
        )
    )
