"""The soak's real node (``--real-node``): containerd, runc and the real kubelet on this
machine (``drakit.localcluster.node.LocalNode``), drakit's image imported into it and the
Helm chart's node plugin DaemonSet running there, as on a production node.

The kubelet reaches the apiserver through a chaos proxy of its own (its kubeconfig names
the proxy), and so does the plugin (the chart's ``apiServer`` host and port name the
plugin's proxy; the plugin pods use the host network). The chart's own controller is off
(the soak runs its two leader-elected replicas) and its DeviceClass gets a name of its own
(the soak's DeviceClass exists before the chart is installed and selects the same devices).

The plugin's devices are the simulated nodes' (``soak.stack.BACKEND_CONFIG``); pods reach
this node by the node label ``SCHEDULER_LABEL=real``, from kube-scheduler and from drakit
(``soak.workload`` splits the devices between the two, see there).

Faults (``soak.faults``): the plugin container SIGKILLed (the kubelet restarts it), the
kubelet or containerd SIGKILLed and started again by :meth:`respawn`, a rolling update of
the DaemonSet (``helm upgrade`` with a new pod-template annotation).

Root only; one real node per machine (``LocalNode`` takes a machine-wide lock and may wait
for another one to stop). :meth:`stop` restores the machine; after a SIGKILLed soak, the
next ``LocalNode.start`` on this machine does (``hoststate.sweep_nodes``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from drakit.demo.real_node import (
    CHART,
    RELEASE_NAMESPACE,
    build_image,
    chart_values,
    helm,
    import_images,
)
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NODES, Resource
from drakit.localcluster.assets import build_binaries, require_binary
from drakit.localcluster.node import LocalNode, NodeConfig
from drakit.localcluster.process import ManagedProcess
from drakit.localcluster.stack import DRIVER

REAL_NODE = "soak-real"
#: The value of ``soak.stack.SCHEDULER_LABEL`` on the real node.
REAL_LABEL_VALUE = "real"
RELEASE = "drakit-soak"
PLUGIN_CONTAINER = "plugin"
#: A pod-template annotation the rolling-update fault changes.
ROLLOUT_ANNOTATION = "soak.drakit.dev/rollout"
#: The real node's own processes, as named in the soak (``soak-real/kubelet``, ...).
PROCESSES = ("containerd", "kubelet")


class RealNode:
    """Start with :meth:`start`, stop with :meth:`stop` (idempotent, also after a failure)."""

    def __init__(self, root: Path, log: Callable[[str], None] = print) -> None:
        self.root = root
        self.log = log
        self.node: LocalNode | None = None
        self.helm_binary: Path | None = None
        self.kubeconfig = ""
        self.archive: Path | None = None
        self.values: dict[str, Any] = {}
        self.rollouts = 0

    @property
    def checkpoint_path(self) -> Path:
        """The chart's plugin keeps its checkpoint in ``<kubeletDir>/plugins/<driver>``."""
        assert self.node is not None
        return self.node.kubelet_dir / "plugins" / DRIVER / "checkpoint.json"

    @property
    def cdi_dir(self) -> Path:
        assert self.node is not None
        return self.node.cdi_root

    def prepare(self) -> None:
        """Build what the node needs (its binaries, helm, drakit's image; cached): before
        the control plane starts, so that nothing waits on a build."""
        build_binaries(("node", "helm"))
        self.helm_binary = require_binary("helm")
        self.archive = build_image()

    def start(
        self,
        admin_kubeconfig: str,
        kubelet_kubeconfig: str,
        plugin_server: str,
        backend_config: dict[str, Any],
        labels: dict[str, str],
    ) -> None:
        """Start the node (its kubelet using ``kubelet_kubeconfig``), label it with
        ``labels``, import drakit's image and install the chart, its plugin talking to
        ``plugin_server`` (https://127.0.0.1:PORT) with ``backend_config``."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = admin_kubeconfig
        if self.archive is None:
            self.prepare()
        assert self.archive is not None
        self.log(f"soak: starting the real node {REAL_NODE} (waits while another one runs)")
        self.node = LocalNode(NodeConfig(kubeconfig=Path(kubelet_kubeconfig), node_name=REAL_NODE))
        self.node.start()
        tag = import_images(self.node, self.archive)
        self._label(labels)
        values = chart_values(plugin_server, self.node, tag)
        values["logging"] = {"format": "text", "level": "info"}
        values["controller"] = {"enabled": False}
        values["nodePlugin"].update(
            backendConfig=backend_config,
            nodeSelector=labels,
            podAnnotations={ROLLOUT_ANNOTATION: "0"},
        )
        values["deviceClasses"] = {"example": {"name": f"soak-chart.{DRIVER}"}}
        self.values = values
        self._helm_upgrade(install=True)

    def _label(self, labels: dict[str, str]) -> None:
        client = load_client(self.kubeconfig)
        try:
            Resource(client, NODES).patch(REAL_NODE, {"metadata": {"labels": labels}})
        finally:
            client.close()

    def _helm_upgrade(self, *, install: bool = False) -> None:
        assert self.helm_binary is not None
        path = self.root / "values.yaml"
        path.write_text(yaml.safe_dump(self.values))
        args = ["upgrade", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE]
        if install:
            args += ["--install", "--create-namespace"]
        helm(self.helm_binary, self.root / "helm", self.kubeconfig, *args, "--values", str(path))

    def stop(self) -> None:
        """Stop the node and restore the machine (the chart goes with the control plane)."""
        if self.node is None:
            return
        self.node.stop()
        self.node = None

    # -- what the stack and faults use -------------------------------------------------------

    def components(self) -> Iterator[tuple[str, ManagedProcess]]:
        """``soak-real/containerd`` and ``soak-real/kubelet`` (none before the start)."""
        if self.node is None:
            return
        for name in PROCESSES:
            yield f"{REAL_NODE}/{name}", self.node.process(name)

    def respawn(self, component: str) -> None:
        """Start ``soak-real/kubelet`` or ``soak-real/containerd`` again (after a SIGKILL)."""
        assert self.node is not None
        self.node.respawn(component.rsplit("/", 1)[-1])

    def kill_plugin(self) -> list[int]:
        """SIGKILL every running plugin container of the chart on this node (the kubelet
        restarts it); returns the host pids killed. Asks containerd, not the apiserver."""
        assert self.node is not None
        listed = self.node.crictl(
            "ps",
            "--quiet",
            "--state",
            "Running",
            "--name",
            f"^{PLUGIN_CONTAINER}$",
            "--label",
            f"io.kubernetes.pod.namespace={RELEASE_NAMESPACE}",
        )
        killed = []
        for container in listed.stdout.split():
            info = json.loads(self.node.crictl("inspect", container).stdout)
            pid = int(info["info"]["pid"])
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        if not killed:
            raise RuntimeError(f"no running {PLUGIN_CONTAINER} container on {REAL_NODE}")
        return killed

    def rolling_update(self) -> int:
        """``helm upgrade`` with a new pod-template annotation: the DaemonSet replaces its
        pod (maxSurge 1: the new one starts beside the old); returns the rollout number."""
        self.rollouts += 1
        self.values["nodePlugin"]["podAnnotations"] = {ROLLOUT_ANNOTATION: str(self.rollouts)}
        self._helm_upgrade()
        return self.rollouts

    def copy_logs(self, into: Path) -> None:
        """The node's component logs and its pods' container logs, for a reproduction."""
        if self.node is None:
            return
        shutil.copytree(self.node.paths.logs, into, dirs_exist_ok=True)
        shutil.copytree(self.node.paths.pod_logs, into / "pods", dirs_exist_ok=True)
