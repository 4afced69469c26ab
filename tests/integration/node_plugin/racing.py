"""Helpers for racing prepare and unprepare on the real socket: a claim source whose GETs a
test can hold, a backend whose unprepare a test can hold, and what a claim left on the node."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from claims import DRIVER, NODE, claims_resource, make_config
from conftest import EXAMPLE_CONFIG, RecordingEvents

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.resources import Resource
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.checkpoint import FILE_NAME, read_document
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.device_metadata import HOST_SUBDIR
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin import BackendContext, ClaimRef, RequestContext

#: The example backend with device metadata on: a prepare writes a CDI spec, a metadata
#: folder and a checkpoint entry, the three things a late prepare could leave behind.
RACING_CONFIG: dict[str, Any] = {**EXAMPLE_CONFIG, "deviceMetadata": True}


class HeldGets:
    """The real claims Resource, with GETs of chosen claim names held until released."""

    def __init__(self, claims: Resource) -> None:
        self._claims = claims
        self._lock = threading.Lock()
        self._held: dict[str, tuple[threading.Event, threading.Event]] = {}

    def hold(self, name: str) -> tuple[threading.Event, threading.Event]:
        """(set once a GET of ``name`` is waiting, set it to let that GET go on)."""
        gates = (threading.Event(), threading.Event())
        with self._lock:
            self._held[name] = gates
        return gates

    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]:
        with self._lock:
            gates = self._held.pop(name, None)
        if gates is not None:
            reading, release = gates
            reading.set()
            release.wait(60)
        return self._claims.get(name, namespace)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._claims, attr)


class HeldUnprepare(ExampleBackend):
    """The example backend whose unprepare of a claim UID in ``stuck`` waits for ``release``
    (a stuck driver: a device reset that hangs); ``calls`` counts unprepares per UID."""

    def __init__(self, context: BackendContext) -> None:
        super().__init__(context)
        self.stuck: set[str] = set()
        self.release = threading.Event()
        self.calls: dict[str, int] = {}

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        self.calls[claim.uid] = self.calls.get(claim.uid, 0) + 1
        if claim.uid in self.stuck:
            self.release.wait(120)
        super().unprepare(claim, state, context)


@dataclass
class RacingPlugin:
    """A started plugin on a real socket, its folders and its claim source."""

    plugin: NodePlugin
    root: Path
    gets: HeldGets
    backend: Any
    events: RecordingEvents
    channels: list[grpc.Channel] = field(default_factory=list)

    def stub(self) -> v1_grpc.DRAPluginStub:
        channel = grpc.insecure_channel(f"unix:{self.plugin.sockets.dra}")
        self.channels.append(channel)
        return v1_grpc.DRAPluginStub(channel)

    def prepare(self, *refs: ClaimRef, timeout: float = 30) -> dict[str, str]:
        """Claim UID -> error ("" prepared) of one NodePrepareResources call."""
        request = v1.NodePrepareResourcesRequest(claims=[v1_claim(r) for r in refs])
        response = self.stub().NodePrepareResources(request, timeout=timeout)
        return {uid: r.error for uid, r in response.claims.items()}

    def unprepare(self, *refs: ClaimRef, timeout: float = 30) -> dict[str, str]:
        """Claim UID -> error ("" unprepared) of one NodeUnprepareResources call."""
        request = v1.NodeUnprepareResourcesRequest(claims=[v1_claim(r) for r in refs])
        response = self.stub().NodeUnprepareResources(request, timeout=timeout)
        return {uid: r.error for uid, r in response.claims.items()}

    def left_on_node(self, uid: str) -> list[str]:
        """What the node still holds of claim ``uid``: its CDI spec, its metadata folder, its
        checkpoint entry (empty: nothing)."""
        left = [f"CDI spec {p.name}" for p in (self.root / "cdi").glob(f"*{uid}*")]
        data_dir = self.root / "plugins" / DRIVER
        if (data_dir / HOST_SUBDIR / uid).exists():
            left.append(f"metadata folder {uid}")
        checkpoint = data_dir / FILE_NAME
        if checkpoint.exists() and uid in read_document(checkpoint).get("claims", {}):
            left.append(f"checkpoint entry {uid}")
        return left

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
        self.plugin.stop(grace=1)


def v1_claim(ref: ClaimRef) -> v1.Claim:
    return v1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)


def start_racing_plugin(api: Any, backend_class: str = "example", **config: Any) -> Iterator[Any]:
    """A generator for a fixture: yields start(**config overrides) -> RacingPlugin; stops
    every plugin it started. ``backend_class`` "held": the :class:`HeldUnprepare` backend."""
    started: list[tuple[RacingPlugin, tempfile.TemporaryDirectory[str]]] = []

    def start(**overrides: Any) -> RacingPlugin:
        folder = tempfile.TemporaryDirectory(prefix="drk-", dir="/tmp")  # short socket paths
        root = Path(folder.name)
        plugin_config = make_config(root, **{**config, **overrides})
        spec = "racing:HeldUnprepare" if backend_class == "held" else "example"
        backend = load_backend(spec, driver_name=DRIVER, node_name=NODE, config=RACING_CONFIG)
        gets = HeldGets(claims_resource(api))
        metrics, events = PluginMetrics(), RecordingEvents()
        core = PrepareCore(
            plugin_config, metrics, backend, gets, events=events,
            boot_id=lambda: "boot-1",
        )  # fmt: skip
        plugin = NodePlugin(plugin_config, core=core, metrics=metrics)
        plugin.start()
        racing = RacingPlugin(plugin, root, gets, backend, events)
        started.append((racing, folder))
        return racing

    yield start
    for racing, folder in started:
        racing.close()
        folder.cleanup()
