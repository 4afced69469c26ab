"""``make demo DEMO_ARGS=--real-node``: the demo on a real node (root, Linux).

Steps: a control plane (etcd, kube-apiserver, kube-scheduler and
kube-controller-manager v1.37.2), a real node (containerd, runc and the
kubelet, built from their Go modules), drakit's image built from
deploy/Dockerfile and imported into the node, the Helm chart installed, then
``deploy/examples/gpu-pod.yaml``: the claim, its allocation, and each
container's own output showing the environment its claim's CDI spec gives
it. Clean-up deletes the pod, checks the CDI spec is gone and the claim
deleted, stops everything and restores the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from drakit.demo.text import Printer, table
from drakit.localcluster import stack

NAMESPACE = "demo"
POD = "gpu-demo"
RELEASE = "drakit"
RELEASE_NAMESPACE = "drakit-system"
IMAGE_REPOSITORY = "localhost/drakit"
EXAMPLE_IMAGE = "docker.io/library/busybox:1.36"
STEP_TIMEOUT = 120.0
CHART = stack.REPO_ROOT / "deploy" / "helm" / "drakit"


class RealNodeError(Exception):
    """A step of the real-node demo failed; the message says what and where to look."""


@dataclass
class RealNodeDemo:
    out: Printer
    root: Path
    cluster: Any = None
    node: Any = None
    client: Any = None
    helm: Path | None = None
    claim: dict[str, Any] | None = None
    image_tag: str = ""


def run(out: Printer, root: Path, hold: Callable[[], None]) -> bool:
    """The whole real-node flow; returns False when a step failed (already reported)."""
    demo = RealNodeDemo(out, root)
    try:
        for action in (start_control_plane, start_node, install_chart, run_workload):
            action(demo)
        hold()
        clean_up(demo)
    except RealNodeError as err:
        out.fail(str(err))
        return False
    finally:
        stop(demo)
    return True


def start_control_plane(demo: RealNodeDemo) -> None:
    from drakit.kubeapi.client import load_client  # noqa: PLC0415
    from drakit.localcluster import ClusterConfig, LocalCluster, MissingBinaryError, StartError  # noqa: PLC0415

    if os.geteuid() != 0:
        raise RealNodeError(
            "--real-node needs root: the kubelet, containerd and runc manage cgroups and mounts"
        )
    demo.out.step(
        "Control plane: etcd, kube-apiserver, kube-scheduler, kube-controller-manager v1.37.2"
    )
    began = time.monotonic()
    config = ClusterConfig(
        work_dir=demo.root / "cluster",
        with_scheduler=True,
        with_controller_manager=True,
        real_nodes=True,
    )
    demo.cluster = LocalCluster(config)
    try:
        demo.cluster.start()
    except (StartError, MissingBinaryError) as err:
        raise RealNodeError(f"the control plane did not start: {err}") from err
    demo.client = load_client(demo.cluster.kubeconfig)
    demo.out.ok(f"ready in {time.monotonic() - began:.1f}s")
    demo.out.kv("kubeconfig", demo.cluster.kubeconfig)


def start_node(demo: RealNodeDemo) -> None:
    from drakit.localcluster.assets import MissingBinaryError, build_binaries, require_binary  # noqa: PLC0415
    from drakit.localcluster.node import LocalNode, NodeConfig  # noqa: PLC0415
    from drakit.localcluster.process import StartError  # noqa: PLC0415

    demo.out.step("A real node: containerd, runc and the kubelet (built from their Go modules)")
    began = time.monotonic()
    try:
        build_binaries(("node", "helm"))
        demo.helm = require_binary("helm")
        demo.node = LocalNode(
            NodeConfig(kubeconfig=Path(demo.cluster.kubeconfig), node_name="demo-node")
        )
        demo.node.start()
    except (StartError, MissingBinaryError, OSError) as err:
        raise RealNodeError(f"the node did not start: {err}") from err
    demo.out.ok(f"node {demo.node.name} Ready in {time.monotonic() - began:.1f}s")
    demo.out.kv("kubelet dir", str(demo.node.kubelet_dir))
    demo.out.kv("CDI specs", str(demo.node.cdi_root))
    demo.out.step("drakit's image from deploy/Dockerfile (buildah, no Docker daemon)")
    archive = build_image()
    demo.image_tag = import_images(demo.node, archive)
    demo.out.ok(f"imported {archive.name} into the node's containerd")


def build_image() -> Path:
    """drakit's image as an OCI archive (hack/build-image.sh; cached by content hash)."""
    script = stack.REPO_ROOT / "hack" / "build-image.sh"
    proc = subprocess.run([str(script)], capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise RealNodeError(f"hack/build-image.sh failed:\n{proc.stderr.strip()[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def import_images(node: Any, archive: Path) -> str:
    """Import drakit's image ``archive`` into ``node`` (a LocalNode) as IMAGE_REPOSITORY, and
    name its busybox as the examples' image (no registry needed); returns the image tag."""
    from drakit.localcluster.images import BUSYBOX_IMAGE  # noqa: PLC0415

    node.import_image(archive, base_name=IMAGE_REPOSITORY)
    node.tag_image(BUSYBOX_IMAGE, EXAMPLE_IMAGE)
    return archive.name.removeprefix("drakit-").removesuffix(".oci.tar")


def chart_values(server: str, node: Any, tag: str) -> dict[str, Any]:
    """Chart values for one LocalNode: the local image (pullPolicy Never), the node's kubelet
    and CDI folders, host network with the apiserver at ``server`` (https://HOST:PORT)."""
    from drakit.localcluster.process import free_port  # noqa: PLC0415

    host, port = server.removeprefix("https://").rsplit(":", 1)
    return {
        "image": {"repository": IMAGE_REPOSITORY, "tag": tag, "pullPolicy": "Never"},
        "kubeletDir": str(node.kubelet_dir),
        "cdiRoot": str(node.cdi_root),
        "apiServer": {"host": host, "port": port},
        "nodePlugin": {"hostNetwork": True, "metrics": {"port": free_port()}},
        "controller": {"hostNetwork": True, "replicas": 1, "metrics": {"port": free_port()}},
    }


def helm(binary: Path, home: Path, kubeconfig: str, *args: str, timeout: float = 300) -> str:
    """Run the pinned helm with a private home (config, cache, data under ``home``) against
    ``kubeconfig``; returns its output, raises RealNodeError with its stderr on failure."""
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    proc = subprocess.run(
        [str(binary), *args], env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    if proc.returncode != 0:
        raise RealNodeError(f"helm {args[0]} failed: {proc.stderr.strip()}")
    return proc.stdout


def install_chart(demo: RealNodeDemo) -> None:
    demo.out.step("helm install drakit deploy/helm/drakit")
    values = chart_values(demo.cluster.server, demo.node, demo.image_tag)
    values_file = demo.root / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    assert demo.helm is not None
    helm(
        demo.helm,
        demo.root / "helm",
        demo.cluster.kubeconfig,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "--values",
        str(values_file),
    )
    demo.out.line("values: local image (pullPolicy Never), the node's kubelet and CDI folders,")
    demo.out.line("        host network with the apiserver on loopback")
    pod = _wait(lambda: _ready_plugin_pod(demo), "the node plugin pod to be Ready")
    demo.out.ok(f"node plugin pod {pod['metadata']['name']} Ready on {pod['spec']['nodeName']}")
    slices = _wait(lambda: _node_slices(demo), "the node plugin's ResourceSlices")
    rows = [
        (s["metadata"]["name"], s["spec"]["pool"]["name"], str(len(s["spec"].get("devices") or [])))
        for s in slices
    ]
    demo.out.block(table(("SLICE", "POOL", "DEVICES"), rows))


def run_workload(demo: RealNodeDemo) -> None:
    from drakit.kubeapi.resources import NAMESPACES, PODS, RESOURCE_CLAIMS, Resource  # noqa: PLC0415

    demo.out.step(f"Workload: deploy/examples/gpu-pod.yaml in namespace {NAMESPACE}")
    Resource(demo.client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    _wait(lambda: _service_account_ready(demo), "the namespace's default ServiceAccount")
    stack.create_objects(demo.client, stack.load_example("gpu-pod.yaml"), NAMESPACE)
    pods, claims = Resource(demo.client, PODS), Resource(demo.client, RESOURCE_CLAIMS)
    pod = _wait(lambda: _running(pods.get(POD, NAMESPACE)), f"pod {POD} to run")
    [status] = pod["status"]["resourceClaimStatuses"]
    claim = claims.get(status["resourceClaimName"], NAMESPACE)
    results = claim["status"]["allocation"]["devices"]["results"]
    demo.out.ok(
        f"claim {claim['metadata']['name']} allocated by kube-scheduler; "
        f"pod running on {pod['spec']['nodeName']}"
    )
    demo.out.block(
        table(
            ("REQUEST", "DRIVER", "POOL", "DEVICE"),
            [(r["request"], r["driver"], r["pool"], r["device"]) for r in results],
        )
    )
    demo.out.ok("each container's own output (kubectl logs gpu-demo -c CONTAINER):")
    for container in ("main", "sidecar"):
        output = _wait(partial(_printed, demo, container), f"container {container} to print")
        lines = [line for line in output.splitlines() if line != "ready"] or [
            "(no GPU_* environment)"
        ]
        demo.out.line(f"{container}:")
        demo.out.block(lines)
    demo.claim = claim


def clean_up(demo: RealNodeDemo) -> None:
    from drakit.kubeapi.errors import NotFound  # noqa: PLC0415
    from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource  # noqa: PLC0415

    claim = demo.claim
    assert claim is not None
    demo.out.step(f"Clean-up: delete pod {NAMESPACE}/{POD}")
    Resource(demo.client, PODS).delete(POD, NAMESPACE)
    uid = claim["metadata"]["uid"]
    _wait(
        lambda: not list(demo.node.cdi_root.glob(f"*{uid}*")), "the claim's CDI spec to be removed"
    )
    demo.out.ok("unprepared by the kubelet through drakit's plugin; CDI spec removed")

    def deleted() -> bool:
        try:
            Resource(demo.client, RESOURCE_CLAIMS).get(claim["metadata"]["name"], NAMESPACE)
        except NotFound:
            return True
        return False

    _wait(deleted, "the generated claim to be deleted")
    demo.out.ok(f"claim {claim['metadata']['name']} deleted")


def stop(demo: RealNodeDemo) -> None:
    demo.out.step("Stopping the node (restoring the machine) and the control plane")
    if demo.node is not None:
        # The node's folder goes with it; its component logs stay with the demo's.
        shutil.copytree(demo.node.paths.logs, demo.root / "node-logs", dirs_exist_ok=True)
        demo.node.stop()
    if demo.cluster is not None:
        demo.cluster.stop()


# -- helpers -------------------------------------------------------------------------------------


def _wait(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception:  # not there yet (NotFound, a pod without status)
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise RealNodeError(f"timed out after {STEP_TIMEOUT:g}s waiting for {what}")


def _ready_plugin_pod(demo: RealNodeDemo) -> Any:
    from drakit.kubeapi.resources import PODS, Resource  # noqa: PLC0415

    selector = "app.kubernetes.io/component=node-plugin"
    for pod in Resource(demo.client, PODS).list(RELEASE_NAMESPACE, label_selector=selector).items:
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod["status"].get("conditions") or []
        ):
            return pod
    return None


def _node_slices(demo: RealNodeDemo) -> list[Any]:
    from drakit.kubeapi.resources import RESOURCE_SLICES, Resource  # noqa: PLC0415

    return [
        s
        for s in Resource(demo.client, RESOURCE_SLICES).list().items
        if s["spec"].get("nodeName") == demo.node.name
    ]


def _service_account_ready(demo: RealNodeDemo) -> bool:
    status, _ = demo.cluster.request(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
    return bool(status == 200)


def _running(pod: Any) -> Any:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return pod if statuses and all("running" in (s.get("state") or {}) for s in statuses) else None


def _printed(demo: RealNodeDemo, container: str) -> str | None:
    """The container's output as ``kubectl logs`` gets it (apiserver -> kubelet on loopback)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}/log?container={container}"
    status, body = demo.cluster.request(path)
    text = body.decode(errors="replace") if status == 200 else ""
    return text if "ready" in text else None
