"""The pieces of a local drakit stack, as ``make demo`` and the e2e tests run them.

A local stack is the control plane (``drakit.localcluster``) plus, as child
processes: ``drakit controller``, one ``drakit node-plugin`` per simulated
node and one ``kubelet-harness`` (the kubelet's real DRA code) per node.
This module knows how to make a fake Node the scheduler accepts, where each
node's folders go, the command lines of the three programs and how to wait
for them; it holds no policy about what a scenario does with them.

Every child runs in its own process group, writes to its own log file and
dies with the process that started it (``PR_SET_PDEATHSIG``), so an
interrupted demo or test run leaves no process behind.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drakit.kubeapi.errors import AlreadyExists, Conflict
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    Resource,
    ResourceType,
)
from drakit.localcluster.assets import repo_root
from drakit.localcluster.process import ManagedProcess, StartError, free_port

#: The driver name the demo and the e2e tests use, and its DeviceClass.
DRIVER = "gpu.drakit.dev"
DEVICE_CLASS = "gpu.drakit.dev"
#: The ``spec.schedulerName`` that makes drakit's controller schedule a pod.
DRAKIT_SCHEDULER = "drakit"
#: The drakit checkout this runs from (the stack runs from a checkout: it needs its
#: examples, chart and hack/ scripts); the working folder for an installed wheel.
REPO_ROOT = repo_root() or Path.cwd()
#: Example workloads (``deploy/examples/*.yaml``) shown in the README; the demo and the
#: e2e tests create exactly these.
EXAMPLES_DIR = REPO_ROOT / "deploy" / "examples"
#: Attempts at making a new Node Ready while other controllers write it too.
CONFLICT_RETRIES = 5
_EXAMPLE_KINDS: dict[str, ResourceType] = {
    t.kind: t for t in (PODS, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)
}


class Component(ManagedProcess):
    """A long-running child (node plugin, controller, harness) with its log file.

    Adds to ``ManagedProcess`` what scenarios need: the exit code, a hard
    kill (SIGKILL, no clean-up, as a crashing process) and a graceful stop
    that reports how the process ended.
    """

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s (then SIGKILL); return the exit code."""
        self.stop(timeout=timeout)
        return self.returncode


@dataclass(frozen=True)
class NodeFolders:
    """The host folders of one simulated node.

    Kept short on purpose (Unix socket paths are limited to 107 bytes): the
    root is something like ``/tmp/dk-1a2b3c/node-a``.
    """

    root: Path

    @property
    def registrar(self) -> Path:
        """The kubelet's plugin registration folder (``plugins_registry``)."""
        return self.root / "reg"

    @property
    def plugins(self) -> Path:
        """The kubelet's plugins folder; the plugin keeps ``<driver>/`` in it."""
        return self.root / "plugins"

    @property
    def cdi(self) -> Path:
        """Where the node plugin writes CDI specs (``/var/run/cdi`` on a real node)."""
        return self.root / "cdi"

    @property
    def kubelet_state(self) -> Path:
        """The kubelet harness's DRA checkpoint folder."""
        return self.root / "kubelet"

    def create(self) -> NodeFolders:
        for path in (self.registrar, self.plugins, self.cdi, self.kubelet_state):
            path.mkdir(parents=True, exist_ok=True)
        return self

    def cdi_spec_files(self) -> list[Path]:
        return sorted(self.cdi.glob("*.json")) if self.cdi.is_dir() else []


def short_temp_root(prefix: str = "dk-") -> Path:
    """A fresh folder directly under /tmp (short enough for socket paths)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- API objects ------------------------------------------------------------------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def create_ready_node(api: Any, name: str) -> KubeObject:
    """Create a Node that the scheduler places pods on, with no kubelet behind it.

    The node is Ready, has room for pods and no taints: the apiserver's
    TaintNodesByCondition admission adds ``node.kubernetes.io/not-ready`` to
    every new Node and, without kube-controller-manager's node-lifecycle
    controller, nothing would remove it. Idempotent: an existing Node is
    made Ready again. Other controllers (kube-controller-manager's) may write
    the new Node at the same time: a conflict is retried with a fresh read.
    """
    nodes = Resource(api, NODES)
    body = {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
    with contextlib.suppress(AlreadyExists):
        nodes.create(body)
    for _ in range(CONFLICT_RETRIES):
        with contextlib.suppress(Conflict):
            return _make_ready(nodes, nodes.get(name))
    return _make_ready(nodes, nodes.get(name))


def _make_ready(nodes: Resource, node: KubeObject) -> KubeObject:
    node["spec"]["taints"] = []
    node = nodes.update(node)
    room = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    node["status"] = {
        "capacity": room,
        "allocatable": room,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "simulated node (drakit kubelet harness)",
                "lastHeartbeatTime": _now(),
                "lastTransitionTime": _now(),
            }
        ],
    }
    return nodes.update_status(node)


def ensure_device_class(api: Any, name: str = DEVICE_CLASS, driver: str = DRIVER) -> KubeObject:
    """The DeviceClass selecting every device of ``driver`` (as the Helm chart creates it)."""
    classes = Resource(api, DEVICE_CLASSES)
    body = {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }
    try:
        return classes.create(body)
    except AlreadyExists:
        return classes.get(name)


def load_example(name: str) -> list[KubeObject]:
    """The objects of ``deploy/examples/<name>`` (multi-document YAML), in file order.

    Raises StartError naming the file when it is missing, unreadable or holds
    a kind the demo does not create.
    """
    path = EXAMPLES_DIR / name
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError) as err:
        raise StartError(f"example {path}: {err}") from err
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in _EXAMPLE_KINDS:
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise StartError(
                f"example {path}: field kind: {kind!r} is not one of {', '.join(_EXAMPLE_KINDS)}"
            )
    return docs


def create_objects(api: Any, objects: Sequence[KubeObject], namespace: str) -> list[KubeObject]:
    """Create ``objects`` (from :func:`load_example`) in ``namespace``; returns what was stored."""
    return [Resource(api, _EXAMPLE_KINDS[obj["kind"]]).create(obj, namespace) for obj in objects]


# -- command lines ----------------------------------------------------------------------------


def drakit_command(*args: str) -> list[str]:
    """``drakit ARGS`` run with this interpreter (works without the console script on PATH)."""
    return [sys.executable, "-m", "drakit.cli", *args]


def node_plugin_command(
    *,
    kubeconfig: str,
    node: str,
    folders: NodeFolders,
    metrics_port: int,
    driver: str = DRIVER,
    pod_uid: str | None = None,
    backend_config: Path | None = None,
    backend: str = "example",
) -> list[str]:
    """``drakit node-plugin`` for ``node`` with ``backend`` (a built-in name or
    ``module:Class``; default the example backend) and text logs."""
    argv = drakit_command(
        "node-plugin",
        f"--driver-name={driver}",
        f"--node-name={node}",
        f"--kubeconfig={kubeconfig}",
        f"--kubelet-registrar-dir={folders.registrar}",
        f"--kubelet-plugins-dir={folders.plugins}",
        f"--cdi-root={folders.cdi}",
        f"--backend={backend}",
        f"--metrics-address=127.0.0.1:{metrics_port}",
        "--log-format=text",
    )
    if pod_uid:
        argv.append(f"--pod-uid={pod_uid}")
    if backend_config is not None:
        argv.append(f"--backend-config={backend_config}")
    return argv


def controller_command(
    *,
    kubeconfig: str,
    metrics_port: int,
    claim_generation: str = "all",
    scheduler_name: str = DRAKIT_SCHEDULER,
) -> list[str]:
    """``drakit controller``: claim generation for every pod, scheduling for ``drakit`` pods."""
    return drakit_command(
        "controller",
        f"--kubeconfig={kubeconfig}",
        f"--claim-generation={claim_generation}",
        f"--scheduler-name={scheduler_name}",
        f"--metrics-address=127.0.0.1:{metrics_port}",
        "--log-format=text",
    )


def harness_command(
    binary: Path,
    *,
    kubeconfig: str,
    node: str,
    folders: NodeFolders,
    feature_gates: str,
    events: Path,
) -> list[str]:
    """``kubelet-harness`` for ``node``; its events go to ``events`` as JSON lines."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--node-name={node}",
        f"--registrar-dir={folders.registrar}",
        f"--state-dir={folders.kubelet_state}",
        f"--feature-gates={feature_gates}",
        f"--output={events}",
    ]


def build_harness(repo_root: Path) -> Path:
    """Build (or reuse) ``kubelet-harness`` with ``hack/build-binaries.sh``; return its path.

    Raises StartError with the script's message when it cannot be built
    (for example Go is missing).
    """
    script = repo_root / "hack" / "build-binaries.sh"
    if not script.is_file():
        raise StartError(f"{script} not found: run from a drakit checkout")
    proc = subprocess.run(
        [str(script), "kubelet-harness"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise StartError(f"building the kubelet harness failed:\n{proc.stderr.strip()}")
    return Path(proc.stdout.strip().splitlines()[-1]) / "kubelet-harness"


# -- metrics and waiting ---------------------------------------------------------------------


def allocate_port() -> int:
    return free_port()


def metrics_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/metrics"


def scrape(url: str, timeout: float = 5.0) -> str | None:
    """The text of a Prometheus endpoint, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bytes(resp.read()).decode()
    except (urllib.error.URLError, OSError):
        return None


def metric_value(text: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """The value of the first sample ``name{labels...}`` in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        metric, _, label_text = series.partition("{")
        if metric != name:
            continue
        if labels and not all(f'{k}="{v}"' in label_text for k, v in labels.items()):
            continue
        return float(value)
    return None


def wait_until(
    check: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    watch: Sequence[Component] = (),
) -> Any:
    """Poll ``check`` until it returns something truthy and return that.

    Raises StartError naming ``what`` after ``timeout`` seconds, or as soon as
    one of the ``watch`` processes exits (with the end of its log).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        for proc in watch:
            if not proc.running():
                raise StartError(
                    f"{proc.name} exited (code {proc.returncode}) while waiting for {what}; "
                    f"last log lines ({proc.log_path}):\n{proc.log_tail()}"
                )
        if time.monotonic() > deadline:
            raise StartError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
