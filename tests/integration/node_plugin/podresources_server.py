"""A small PodResources server (the kubelet's PodResourcesLister) for tests: real gRPC on a
real Unix socket, answering with the pods a test sets."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from claims import DRIVER, NODE

from drakit.kubeletapi.gen.podresources.v1 import api_pb2 as pb
from drakit.kubeletapi.gen.podresources.v1 import api_pb2_grpc as pb_grpc
from drakit.plugin import ClaimRef


class FakeKubelet(pb_grpc.PodResourcesListerServicer):
    """A PodResources server holding pods a test sets; Get answers NOT_FOUND for others, and
    ``gone`` pods are listed but already unknown to Get (a pod deleted between the two)."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], pb.PodResources] = {}
        self.gone: set[tuple[str, str]] = set()
        self.calls: list[str] = []

    def run(
        self, namespace: str, name: str, container: str, claim: ClaimRef, *devices: str
    ) -> None:
        resources = [
            pb.ClaimResource(
                driver_name=DRIVER,
                pool_name=NODE,
                device_name=d,
                cdi_devices=[pb.CDIDevice(name=f"{DRIVER}/gpu={d}")],
            )
            for d in devices
        ]
        # Another driver's device in the same claim: never this driver's business.
        resources.append(
            pb.ClaimResource(driver_name="net.example.com", pool_name=NODE, device_name="nic-0")
        )
        self.pods[(namespace, name)] = pb.PodResources(
            name=name,
            namespace=namespace,
            containers=[
                pb.ContainerResources(
                    name=container,
                    dynamic_resources=[
                        pb.DynamicResource(
                            claim_name=claim.name,
                            claim_namespace=claim.namespace,
                            claim_resources=resources,
                        )
                    ],
                ),
                pb.ContainerResources(name="sidecar"),
            ],
        )

    def List(self, request: Any, context: Any) -> pb.ListPodResourcesResponse:
        self.calls.append("List")
        return pb.ListPodResourcesResponse(pod_resources=list(self.pods.values()))

    def Get(self, request: Any, context: Any) -> pb.GetPodResourcesResponse:
        key = (request.pod_namespace, request.pod_name)
        self.calls.append(f"Get {key[0]}/{key[1]}")
        if key not in self.pods or key in self.gone:
            context.abort(grpc.StatusCode.NOT_FOUND, f"pod {key[1]} not found")
        return pb.GetPodResourcesResponse(pod_resources=self.pods[key])


@contextmanager
def serving_kubelet() -> Iterator[tuple[FakeKubelet, Path]]:
    """A FakeKubelet serving on a fresh socket (a short /tmp path: sockets are limited to
    107 bytes), stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="drk-pr-", dir="/tmp") as folder:
        socket = Path(folder) / "kubelet.sock"
        servicer = FakeKubelet()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_PodResourcesListerServicer_to_server(servicer, server)
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        try:
            yield servicer, socket
        finally:
            server.stop(grace=None)
