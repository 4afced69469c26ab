"""A local stack around one driver's backend: what ``drakit dev`` and ``drakit.testing`` run.

``DevStack`` starts, in this order, the local control plane (etcd, kube-apiserver,
kube-scheduler; no kube-controller-manager), a Node the scheduler accepts (``stack``'s
recipe: not-ready taint lifted, allocatable, Ready condition), the kubelet harness for it
(the kubelet's own DRA and plugin managers, with the control plane's feature gates),
``drakit node-plugin`` with the driver's backend, ``drakit webhook`` with the backend's
``config_model`` and its ValidatingWebhookConfiguration (when the settings ask for it:
``drakit dev`` does when the backend has a config model of its own), ``drakit controller``
(it generates claims from ResourceClaimTemplates, which kube-controller-manager would
otherwise do) and the driver's DeviceClass. ``stop`` undoes all of it in reverse order and
is idempotent.

The pieces (command lines, the Node recipe, folders, waiting) are ``stack``'s, shared with
``make demo``; this module only decides the order and what a driver author may vary.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.localcluster import stack
from drakit.localcluster.events import HarnessEvents
from drakit.localcluster.stack import Component, NodeFolders

#: Seconds each component gets to say it is ready (the harness, the plugin's registration).
STEP_TIMEOUT = 60.0


@dataclass(frozen=True)
class DevSettings:
    """What a driver author chooses; everything else follows the demo's recipe."""

    #: ``module:Class`` of the backend (or a built-in backend name such as ``example``).
    backend: str
    #: The driver name the plugin registers and publishes (a DNS subdomain).
    driver: str
    #: The DeviceClass that selects every device of ``driver``; default: the driver name.
    device_class: str = ""
    node: str = "dev-node"
    #: A file passed as ``--backend-config`` (None: the backend's defaults).
    backend_config: Path | None = None
    #: Folders put in front of the node plugin's PYTHONPATH so ``backend`` imports
    #: (``drakit dev`` passes the current folder, as ``python -m`` would).
    python_path: tuple[Path, ...] = ()
    #: Kubernetes version of the control plane and harness (None: drakit's default).
    kube_version: str | None = None
    #: Also run ``drakit controller --claim-generation=all`` (templates need it here).
    controller: bool = True
    #: Also run ``drakit webhook`` for the driver's opaque config (the backend's
    #: ``config_model``), so a claim with bad config is refused when it is created.
    webhook: bool = False

    @property
    def webhook_configuration(self) -> str:
        """The name of the ValidatingWebhookConfiguration ``webhook`` creates."""
        return f"drakit-dev.{self.driver}"

    @property
    def class_name(self) -> str:
        return self.device_class or self.driver


@dataclass
class DevStack:
    """The running stack of one driver; ``start()``, then ``stop()`` (also on failure).

    ``root`` holds the control plane's data, the node's folders and every component's
    log (``root/logs``); it should be short (socket paths are limited to 107 bytes).
    ``say`` receives one line per finished start step.
    """

    settings: DevSettings
    root: Path
    say: Callable[[str], None] = lambda _line: None
    cluster: Any = None
    client: Any = None
    folders: NodeFolders | None = None
    events: HarnessEvents | None = None
    components: list[Component] = field(default_factory=list)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> str:
        return str(self.cluster.kubeconfig) if self.cluster is not None else ""

    def start(self) -> None:
        """Start every part; on any failure, stop what started and re-raise.

        Raises StartError (or the launcher's MissingBinaryError) naming the part that
        did not come up, with the end of its log.
        """
        try:
            self._start_control_plane()
            self._start_node()
            self._start_plugin()
            if self.settings.webhook:
                self._start_webhook()
            if self.settings.controller:
                self._start_controller()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components (newest first), then the control plane. Idempotent."""
        while self.components:
            self.components.pop().terminate()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    def __enter__(self) -> DevStack:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- steps ------------------------------------------------------------------------------

    def _start_control_plane(self) -> None:
        from drakit.kubeapi.client import load_client  # noqa: PLC0415
        from drakit.localcluster import ClusterConfig, LocalCluster  # noqa: PLC0415

        config = ClusterConfig(
            work_dir=self.root / "cluster",
            with_scheduler=True,
            with_controller_manager=False,
            kube_version=self.settings.kube_version,
        )
        self.cluster = LocalCluster(config)
        self.cluster.start()
        self.client = load_client(self.cluster.kubeconfig, qps=100, burst=200)
        self.say(f"control plane: {self.cluster.server} (Kubernetes {self.cluster.kube_version})")

    def _start_node(self) -> None:
        name = self.settings.node
        stack.create_ready_node(self.client, name)
        stack.ensure_device_class(self.client, self.settings.class_name, self.settings.driver)
        self.folders = NodeFolders(self.root / "node").create()
        events_file = self.logs / "kubelet-harness-events.jsonl"
        self.events = HarnessEvents(events_file)
        harness = self._component(
            "kubelet-harness",
            stack.harness_command(
                harness_binary(self.cluster.kube_version),
                kubeconfig=self.cluster.kubeconfig,
                node=name,
                folders=self.folders,
                feature_gates=self.cluster.feature_gates,
                events=events_file,
            ),
        )
        self.events.wait("ready", timeout=STEP_TIMEOUT, process=harness)
        self.say(f"node {name}: kubelet harness ready, DeviceClass {self.settings.class_name}")

    def _start_plugin(self) -> None:
        assert self.folders is not None and self.events is not None
        plugin = self._component(
            "node-plugin",
            stack.node_plugin_command(
                kubeconfig=self.cluster.kubeconfig,
                node=self.settings.node,
                folders=self.folders,
                metrics_port=stack.allocate_port(),
                driver=self.settings.driver,
                backend=self.settings.backend,
                backend_config=self.settings.backend_config,
            ),
            env=plugin_environment(self.settings.python_path),
        )
        self.events.wait(
            "registered", timeout=STEP_TIMEOUT, process=plugin, driver=self.settings.driver
        )
        self.say(f"node plugin: {self.settings.backend} registered as {self.settings.driver}")

    def _start_webhook(self) -> None:
        from drakit.localcluster.webhook import LocalWebhook  # noqa: PLC0415

        name = self.settings.webhook_configuration
        webhook = LocalWebhook(
            api=self.client,
            kubeconfig=self.cluster.kubeconfig,
            backend=self.settings.backend,
            driver=self.settings.driver,
            name=name,
            log=self.logs / "webhook.log",
            env=plugin_environment(self.settings.python_path),
        )
        self.components.append(webhook.start(timeout=STEP_TIMEOUT))
        self.say(
            f"webhook: drakit webhook refuses invalid opaque config of {self.settings.driver} "
            f"when a claim is created (ValidatingWebhookConfiguration {name})"
        )

    def _start_controller(self) -> None:
        port = stack.allocate_port()
        controller = self._component(
            "controller",
            stack.controller_command(kubeconfig=self.cluster.kubeconfig, metrics_port=port),
        )
        stack.wait_until(
            lambda: stack.scrape(stack.metrics_url(port)) is not None,
            timeout=STEP_TIMEOUT,
            what="the controller's metrics endpoint",
            watch=[controller],
        )
        self.say("controller: generates claims from ResourceClaimTemplates")

    def _component(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> Component:
        component = Component(name, argv, self.logs / f"{name}.log")
        component.start(env=env)
        self.components.append(component)
        return component


def plugin_environment(python_path: tuple[Path, ...]) -> dict[str, str]:
    """This process's environment with ``python_path`` in front of PYTHONPATH."""
    env = dict(os.environ)
    parts = [str(p) for p in python_path]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def harness_binary(kube_version: str) -> Path:
    """The kubelet harness of ``kube_version``: the cached build, else built from the checkout
    (``hack/build-binaries.sh kubelet-harness``, needs Go).

    Raises the launcher's MissingBinaryError saying what to do when it can be neither
    found nor built.
    """
    from drakit.localcluster import assets  # noqa: PLC0415

    return assets.require_binary("kubelet-harness", "kubelet-harness", kube_version=kube_version)


def python_path_of(backend: str, cwd: Path) -> tuple[Path, ...]:
    """Where the node plugin should look for ``backend``'s module: the current folder,
    unless the module is already importable from this interpreter's path."""
    module = backend.partition(":")[0]
    if ":" not in backend or module in sys.modules:
        return ()
    return (cwd,)
