"""A client of the kubelet's PodResources API (v1), reduced to this driver's DRA devices.

The kubelet serves ``PodResourcesLister`` on ``/var/lib/kubelet/pod-resources/kubelet.sock``
(the chart mounts that folder read-only). ``List`` returns every pod with each container's
``dynamic_resources``: the claims it uses and, per claim, the devices with their driver,
pool and device name (KEP-3695). ``Get`` returns one pod. Both are on by default from 1.34
(gates KubeletPodResourcesDynamicResources and KubeletPodResourcesGet: beta in 1.34 and
1.35, GA and locked on from 1.36).

Only devices whose ``driver_name`` is this driver are kept; a claim with devices of several
drivers appears with this driver's devices only, and a container using no device of this
driver does not appear at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grpc

from drakit.kubeletapi.gen.podresources.v1 import api_pb2 as pb
from drakit.kubeletapi.gen.podresources.v1 import api_pb2_grpc as pb_grpc
from drakit.node_plugin.crosscheck import ContainerUse, DeviceRef

__all__ = ["DEFAULT_SOCKET", "PodResourcesClient", "PodResourcesError", "uses_of_pods"]

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
# The kubelet's own server limit for a List answer (16 MiB): a node with hundreds of pods.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class PodResourcesError(RuntimeError):
    """The kubelet's PodResources API could not be read; the message says which call and why."""


def uses_of_pods(pods: Iterable[Any], driver: str) -> list[ContainerUse]:
    """The containers of ``pods`` (PodResources messages) using devices of ``driver``."""
    out = []
    for pod in pods:
        for container in pod.containers:
            for claim in container.dynamic_resources:
                devices = tuple(
                    DeviceRef(
                        r.pool_name, r.device_name, r.share_id if r.HasField("share_id") else ""
                    )
                    for r in claim.claim_resources
                    if r.driver_name == driver
                )
                if devices:
                    out.append(
                        ContainerUse(
                            pod.namespace,
                            pod.name,
                            container.name,
                            claim.claim_namespace,
                            claim.claim_name,
                            devices,
                        )
                    )
    return out


def _share(resource: Any) -> str:
    return str(resource.share_id) if resource.HasField("share_id") else ""


class PodResourcesClient:
    """``List`` and ``Get`` on the kubelet's socket; thread-safe (one gRPC channel)."""

    def __init__(self, socket_path: Path, driver: str, *, timeout: float = 10.0) -> None:
        self.socket_path = socket_path
        self.driver = driver
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            f"unix://{socket_path}",
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
        )
        self._stub = pb_grpc.PodResourcesListerStub(self._channel)

    def list_uses(self) -> list[ContainerUse]:
        """Every container on the node that uses devices of this driver."""
        try:
            answer = self._stub.List(pb.ListPodResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PodResourcesError(self._why("List", exc)) from exc
        return uses_of_pods(answer.pod_resources, self.driver)

    def pod_uses(self, namespace: str, name: str) -> list[ContainerUse] | None:
        """The containers of one pod using devices of this driver; None when the kubelet
        no longer has the pod."""
        request = pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            answer = self._stub.Get(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise PodResourcesError(self._why(f"Get {namespace}/{name}", exc)) from exc
        return uses_of_pods([answer.pod_resources], self.driver)

    def _why(self, call: str, exc: grpc.RpcError) -> str:
        code = exc.code()
        reason = exc.details() or (code.name if code else "unknown error")
        hint = ""
        if code == grpc.StatusCode.UNAVAILABLE:
            hint = " (is the kubelet running, and the pod-resources folder mounted?)"
        elif code == grpc.StatusCode.UNIMPLEMENTED:
            hint = (
                " (the kubelet's KubeletPodResourcesGet gate is off; it is on by default from 1.34)"
            )
        return f"PodResources {call} on {self.socket_path}: {reason}{hint}"

    def close(self) -> None:
        self._channel.close()
