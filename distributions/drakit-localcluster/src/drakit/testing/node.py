"""A simulated node and the plugin under test on it, as ``drakit.testing``'s fixtures run them.

:class:`HarnessNode` is a Node object the scheduler accepts (``drakit.localcluster.stack``'s recipe)
with the kubelet harness acting as its kubelet: the kubelet's own plugin manager and DRA
manager, so registration, PrepareResources and UnprepareResources go over real Unix sockets
exactly as on a node. :class:`PluginUnderTest` is ``drakit node-plugin`` with a backend,
registered with that harness. Both write their logs in the node's folder; a failed wait
raises with the end of the log that explains it.
"""

from __future__ import annotations

import contextlib
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import NODES, Resource
from drakit.localcluster import stack
from drakit.localcluster.devstack import STEP_TIMEOUT, harness_binary, plugin_environment
from drakit.localcluster.events import HarnessEvent, HarnessEvents
from drakit.localcluster.stack import Component, NodeFolders
from drakit.testing.cdi import CDIContainer, cdi_specs, container_edits


@dataclass
class HarnessNode:
    """One Node and its kubelet harness; :meth:`start` then :meth:`stop`."""

    api: Any
    name: str
    folders: NodeFolders
    kubeconfig: str
    kube_version: str
    feature_gates: str
    harness: Component | None = None
    events: HarnessEvents = field(init=False)

    def __post_init__(self) -> None:
        self.events = HarnessEvents(self.folders.root / "kubelet-harness-events.jsonl")

    def start(self) -> None:
        """Create the Node (Ready, untainted) and start its harness; returns once it is ready."""
        self.folders.create()
        stack.create_ready_node(self.api, self.name)
        self.harness = Component(
            "kubelet-harness",
            stack.harness_command(
                harness_binary(self.kube_version),
                kubeconfig=self.kubeconfig,
                node=self.name,
                folders=self.folders,
                feature_gates=self.feature_gates,
                events=self.events.path,
            ),
            self.folders.root / "kubelet-harness.log",
        )
        self.harness.start()
        self.events.wait("ready", timeout=STEP_TIMEOUT, process=self.harness)

    def stop(self) -> None:
        """Stop the harness and delete the Node (its ResourceSlices go with it). Idempotent."""
        if self.harness is not None:
            self.harness.terminate()
            self.harness = None
        with contextlib.suppress(NotFound):
            Resource(self.api, NODES).delete(self.name)

    def wait_prepared(
        self, namespace: str, pod: str, timeout: float = STEP_TIMEOUT
    ) -> HarnessEvent:
        """The kubelet's ``prepared`` event of the pod: ``containers`` maps each container to
        its CDI device IDs. Raises (with the last prepare error) when it does not come."""
        return self.events.wait(
            "prepared", timeout=timeout, process=self.harness, pod=f"{namespace}/{pod}"
        )

    def wait_unprepared(
        self, namespace: str, pod: str, timeout: float = STEP_TIMEOUT
    ) -> HarnessEvent:
        """The kubelet's ``unprepared`` event of the pod (after its deletion)."""
        return self.events.wait(
            "unprepared", timeout=timeout, process=self.harness, pod=f"{namespace}/{pod}"
        )

    def container(self, cdi_ids: list[str]) -> CDIContainer:
        """What a container runtime gives a container with these CDI devices (the
        ``containers`` entry of :meth:`wait_prepared`), from the CDI specs the plugin wrote:
        its environment, device nodes, mounts and hooks (:func:`container_edits`).
        AssertionError when an ID does not resolve, as the runtime would refuse it."""
        return container_edits(self.folders.cdi, cdi_ids)

    def container_env(self, cdi_ids: list[str]) -> list[str]:
        """``NAME=VALUE`` of the environment those CDI devices give a container."""
        return list(self.container(cdi_ids).env)

    def container_device_nodes(self, cdi_ids: list[str]) -> list[str]:
        """The device-node paths those CDI devices put in the container."""
        return list(self.container(cdi_ids).device_nodes)

    def cdi_specs(self) -> list[dict[str, Any]]:
        """The CDI spec files the plugins on this node wrote, parsed (:func:`cdi_specs`)."""
        return cdi_specs(self.folders.cdi)


@dataclass
class PluginUnderTest:
    """``drakit node-plugin`` with ``backend`` (``module:Class``) for ``driver`` on ``node``."""

    node: HarnessNode
    backend: str
    driver: str
    backend_config: Path | None = None
    python_path: tuple[Path, ...] = ()
    process: Component | None = None
    #: The port of the plugin's ``/metrics`` endpoint on 127.0.0.1 (set by :meth:`start`).
    metrics_port: int | None = None

    @property
    def log(self) -> Path:
        return self.node.folders.root / f"node-plugin-{self.driver}.log"

    def start(self) -> None:
        """Start the plugin; returns once the kubelet (harness) has registered it."""
        since = self.node.events.mark()
        self.metrics_port = stack.allocate_port()
        self.process = Component(
            "node-plugin",
            [
                *stack.node_plugin_command(
                    kubeconfig=self.node.kubeconfig,
                    node=self.node.name,
                    folders=self.node.folders,
                    metrics_port=self.metrics_port,
                    driver=self.driver,
                    backend=self.backend,
                    backend_config=self.backend_config,
                ),
                "--cpu-home=off",  # a test machine's CPUs are shared: no pinning
            ],
            self.log,
        )
        self.process.start(env=plugin_environment(self.python_path))
        self.node.events.wait(
            "registered",
            timeout=STEP_TIMEOUT,
            process=self.process,
            since=since,
            driver=self.driver,
        )

    def scrape(self) -> str:
        """The plugin's ``/metrics`` text (Prometheus exposition format)."""
        if self.metrics_port is None:
            raise RuntimeError("the plugin has not been started")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return str(reply.read().decode())

    def stop(self) -> int | None:
        """SIGTERM the plugin (SIGKILL after 15 s); its exit code. Idempotent."""
        if self.process is None:
            return None
        code = self.process.terminate()
        self.process = None
        return code


def backend_spec(backend: str | type) -> tuple[str, tuple[Path, ...]]:
    """``module:Class`` for a backend class (or the spec itself), and the folder its module
    must be imported from when that module is a file outside any installed package."""
    if isinstance(backend, str):
        return backend, ()
    module = sys.modules.get(backend.__module__)
    spec = f"{backend.__module__}:{backend.__qualname__}"
    where = getattr(module, "__file__", None) or _defining_file(backend)
    if where is None:
        return spec, ()
    depth = backend.__module__.count(".") + 1
    return spec, (Path(where).resolve().parents[depth - 1],)


def _defining_file(cls: type) -> str | None:
    """The file of a class whose module is no longer in ``sys.modules`` (a test removed it
    after importing the class from a folder it put on ``sys.path``): its methods know it."""
    for member in vars(cls).values():
        code = getattr(getattr(member, "__func__", member), "__code__", None)
        if code is not None:
            return str(code.co_filename)
    return None
