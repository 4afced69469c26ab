"""Plugin DaemonSets, plugin pods and lookalikes in the real apiserver for the ``drakit devices
--node`` tests (the views they serve: :mod:`helpers.nodeviews`).

No kube-controller-manager runs: a DaemonSet here is an object only, and its "pods" are
made by the test with the owner reference the DaemonSet controller would set (their status
is written through the status subresource, as the kubelet would).
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
import uuid
from collections.abc import Mapping
from typing import Any

from drakit.kubeapi.resources import PODS, Resource, ResourceType

DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)

SELECTOR = {"app.kubernetes.io/name": "drakit", "app.kubernetes.io/instance": "drakit"}
CHART_LABELS = {**SELECTOR, "app.kubernetes.io/component": "node-plugin"}
PORT_ANNOTATION = "drakit.dev/node-view-port"


def create_daemonset(
    api: Any,
    namespace: str,
    *,
    name: str = "drakit-node-plugin",
    labels: Mapping[str, str] = CHART_LABELS,
    port: int = 9400,
) -> dict[str, Any]:
    """A DaemonSet shaped like the chart's (selector, template labels and port annotation);
    its nodeSelector matches no node, so nothing would ever run it."""
    pod_labels = {**SELECTOR, "app.kubernetes.io/component": "node-plugin"}
    return Resource(api, DAEMONSETS).create(
        {
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {
                "selector": {"matchLabels": pod_labels},
                "template": {
                    "metadata": {
                        "labels": pod_labels,
                        "annotations": {PORT_ANNOTATION: str(port)},
                    },
                    "spec": {
                        "nodeSelector": {"drakit.test/never": "true"},
                        "containers": [{"name": "plugin", "image": "drakit"}],
                    },
                },
            },
        }
    )


def owner_of(ds: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """The ownerReferences entry the DaemonSet controller sets on its pods."""
    meta = ds["metadata"]
    ref = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    return {**ref, **changes}


def create_pod(
    api: Any,
    namespace: str,
    node: str,
    *,
    name: str | None = None,
    owner: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    port: int | str = 9400,
    ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """A Running pod on ``node`` annotated with the node-view port, with pod IP ``ip``."""
    pods = Resource(api, PODS)
    meta: dict[str, Any] = {
        "name": name or f"plugin-{uuid.uuid4().hex[:5]}",
        "namespace": namespace,
        "labels": dict(CHART_LABELS if labels is None else labels),
        "annotations": {PORT_ANNOTATION: str(port)},
    }
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    pod = pods.create(
        {
            "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": "drakit"}]},
        }
    )
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    return pods.update_status(pod)


def local_global_ipv4() -> str | None:
    """An IPv4 address of this machine that the apiserver's pod proxy dials (a global
    unicast one: it refuses loopback and link-local), or None when there is none."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, interface in socket.if_nameindex():
            request = struct.pack("256s", interface.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), 0x8915, request)  # SIOCGIFADDR
            except OSError:
                continue
            address = ipaddress.ip_address(socket.inet_ntoa(answer[20:24]))
            if not (address.is_loopback or address.is_link_local or address.is_unspecified):
                return str(address)
    finally:
        probe.close()
    return None
