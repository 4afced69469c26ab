"""The chart the reference suite installs, staged for this machine's real node.

The suite installs ``HELM_CHART_PATH`` once per spec with only the values it knows
(driverName, numDevices, ...). What it cannot pass, this environment's facts, goes into
a copy of the chart as changed ``values.yaml`` defaults: the image, the apiserver on
127.0.0.1, the node's kubelet plugin and registration folders, its CDI folder.

Upstream's Go chart has no values for the apiserver address, the host network or the CDI
folder, so its staged copy also gets the few template patches listed in GO_PATCHES, each
with its reason. A patch whose text is not found fails the staging: upstream changed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class StagingError(ValueError):
    """The chart cannot be staged; the message names the file and what is missing."""


@dataclass(frozen=True)
class NodeFacts:
    """What a chart must know about the node and control plane it runs on."""

    apiserver_host: str
    apiserver_port: int
    kubelet_dir: Path
    cdi_root: Path

    @property
    def registrar_dir(self) -> Path:
        return self.kubelet_dir / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        return self.kubelet_dir / "plugins"


@dataclass(frozen=True)
class Patch:
    """Replace ``old`` (found exactly once) by ``new`` in ``template``."""

    template: str
    old: str
    new: str
    reason: str


def api_env(indent: int) -> str:
    """Container env entries pointing client-go's in-cluster config at the apiserver.

    The kubelet would announce the ``kubernetes`` Service's ClusterIP, which nothing
    routes on this node (no service proxy); explicit env entries win over the kubelet's.
    """
    pad = " " * indent
    return (
        f"{pad}- name: KUBERNETES_SERVICE_HOST\n"
        f'{pad}  value: "{{{{ .Values.apiServer.host }}}}"\n'
        f"{pad}- name: KUBERNETES_SERVICE_PORT\n"
        f'{pad}  value: "{{{{ .Values.apiServer.port }}}}"\n'
    )


GO_PATCHES = (
    Patch(
        "kubeletplugin.yaml",
        "      containers:\n      - name: plugin\n",
        "      hostNetwork: true\n      containers:\n      - name: plugin\n",
        "host network: pods reach the apiserver on the host's 127.0.0.1 "
        "(no pod network routes to it)",
    ),
    Patch(
        "kubeletplugin.yaml",
        "        env:\n        - name: DRIVER_NAME\n",
        "        env:\n" + api_env(8) + "        - name: DRIVER_NAME\n",
        "apiserver address: KUBERNETES_SERVICE_HOST/PORT = 127.0.0.1:PORT instead of the ClusterIP",
    ),
    Patch(
        "kubeletplugin.yaml",
        "        hostPath:\n          path: /var/run/cdi\n",
        '        hostPath:\n          path: "{{ .Values.cdiRoot }}"\n',
        "CDI folder: the node's containerd reads CDI specs from its own folder, not the host's "
        "/var/run/cdi",
    ),
    Patch(
        "controller-deployment.yaml",
        "    spec:\n      priorityClassName: system-cluster-critical\n",
        "    spec:\n      hostNetwork: true\n      priorityClassName: system-cluster-critical\n",
        "host network for the controller (BindingConditions), as for the kubelet plugin",
    ),
    Patch(
        "controller-deployment.yaml",
        '        command: ["dra-example-controller"]\n',
        '        command: ["dra-example-controller"]\n        env:\n' + api_env(8),
        "apiserver address for the controller, as for the kubelet plugin",
    ),
    Patch(
        "webhook-deployment.yaml",
        "    spec:\n      {{- if .Values.webhook.priorityClassName }}\n",
        "    spec:\n      hostNetwork: true\n      {{- if .Values.webhook.priorityClassName }}\n",
        "host network for the webhook: the apiserver reaches it through its Service's endpoint "
        "(--enable-aggregator-routing), the node's address, which no pod network routes to",
    ),
)


def go_values(facts: NodeFacts, webhook_port: int | None = None) -> dict[str, Any]:
    """values.yaml changes for upstream's chart (the image keeps its default name).

    ``webhook_port``: the webhook's containerPort. On the host network the chart's 443
    may be taken; the Service keeps its port 443 and routes to this one.
    """
    values: dict[str, Any] = {
        "apiServer": {"host": facts.apiserver_host, "port": str(facts.apiserver_port)},
        "cdiRoot": str(facts.cdi_root),
        "kubeletPlugin": {
            "kubeletRegistrarDirectoryPath": str(facts.registrar_dir),
            "kubeletPluginsDirectoryPath": str(facts.plugins_dir),
            # Every release's plugin shares the host network: fixed ports would collide
            # between specs running in parallel, and would listen beyond loopback.
            "containers": {"plugin": {"healthcheckPort": -1, "metricsPort": -1}},
        },
    }
    if webhook_port is not None:
        values["webhook"] = {"containerPort": webhook_port}
    return values


def drakit_values(
    facts: NodeFacts, image_repository: str, image_tag: str, webhook_port: int
) -> dict[str, Any]:
    """values.yaml changes for drakit's example chart (contract: the issue 34 brief)."""
    return {
        "image": {"repository": image_repository, "tag": image_tag, "pullPolicy": "Never"},
        "apiServer": {"host": facts.apiserver_host, "port": str(facts.apiserver_port)},
        "cdiRoot": str(facts.cdi_root),
        "kubeletPlugin": {
            "kubeletRegistrarDirectoryPath": str(facts.registrar_dir),
            "kubeletPluginsDirectoryPath": str(facts.plugins_dir),
        },
        # One node, no service proxy: the webhook beside the apiserver on the host network,
        # called by URL at 127.0.0.1 (the chart's default is a Service).
        "webhook": {"endpoint": "hostNetwork", "port": webhook_port, "replicas": 1},
    }


def drakit_cluster_values(image_repository: str, image_tag: str) -> dict[str, Any]:
    """values.yaml changes for drakit's example chart on several nodes in their own network
    namespaces (``local-node up --nodes N``): the image alone. Everything else is the chart's
    default for a real cluster: pods on pod IPs, the webhook behind its Service with its
    replicas and PodDisruptionBudget, the default kubelet and CDI folders (each node's own)."""
    return {"image": {"repository": image_repository, "tag": image_tag, "pullPolicy": "Never"}}


def stage_chart(
    source: Path, dest: Path, values: dict[str, Any], patches: tuple[Patch, ...] = ()
) -> Path:
    """Copy the chart ``source`` to ``dest`` with ``values`` merged into its values.yaml
    defaults and ``patches`` applied to its templates; returns ``dest``."""
    if not (source / "Chart.yaml").is_file():
        raise StagingError(f"{source} is not a Helm chart (no Chart.yaml)")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest)
    for path in dest.rglob("*"):  # the module cache's files are read-only
        path.chmod(path.stat().st_mode | 0o200)
    values_file = dest / "values.yaml"
    defaults = yaml.safe_load(values_file.read_text()) or {}
    values_file.write_text(yaml.safe_dump(merge(defaults, values), sort_keys=False))
    for patch in patches:
        apply_patch(dest / "templates" / patch.template, patch)
    return dest


def apply_patch(path: Path, patch: Patch) -> None:
    """Replace the patch's text, which must occur exactly once in ``path``."""
    text = path.read_text()
    count = text.count(patch.old)
    if count != 1:
        raise StagingError(
            f"{path}: the text to patch ({patch.reason}) occurs {count} times, expected once; "
            f"has upstream's chart changed?"
        )
    path.write_text(text.replace(patch.old, patch.new))


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, nested mappings key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
