"""Hostile callers of the DRA socket, against the real core, socket and apiserver.

Whoever reaches the plugin's DRA socket chooses claim namespaces, names and
UIDs and the size and pace of its calls. Each test performs one attack of
issue 12 and checks that it now fails for the attacker's claims only, with
no request sent, no file written and no Event posted for them.
"""

from __future__ import annotations

import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest
from claims import DRIVER, NODE, claims_resource, create_claim, make_config, result
from conftest import EXAMPLE_CONFIG, RecordingEvents
from helpers.waiting import eventually
from kubernetes import client

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.errors import InvalidPathSegment, NotFound
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.localcluster import LocalCluster
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.checkpoint import FILE_NAME, read_document
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.service.calls import MAX_CLAIMS_PER_CALL
from drakit.plugin import BackendPrepared, ClaimRef, ClaimToPrepare, RequestContext

pytestmark = pytest.mark.integration


class GatedBackend(ExampleBackend):
    """The example backend whose prepare of ``gate_uid`` waits until the test opens the gate."""

    gate_uid: ClassVar[str] = ""
    gate: ClassVar[threading.Event] = threading.Event()
    entered: ClassVar[threading.Event] = threading.Event()
    prepared: ClassVar[list[str]] = []

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        type(self).prepared.append(claim.uid)
        if claim.uid == type(self).gate_uid:
            type(self).entered.set()
            assert type(self).gate.wait(timeout=60), "the test never opened the gate"
        return super().prepare(claim, context)


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A short directory: Unix socket paths must stay under 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="drh-", dir="/tmp") as d:
        yield Path(d)


class Plugin:
    """A started node plugin with the real core, and what the test looks at."""

    def __init__(self, node_plugin: NodePlugin, events: RecordingEvents, root: Path) -> None:
        self.node_plugin = node_plugin
        self.events = events
        self.root = root
        self.channel = grpc.insecure_channel(f"unix:{node_plugin.sockets.dra}")
        self.dra = v1_grpc.DRAPluginStub(self.channel)

    def checkpoint_claims(self) -> dict[str, Any]:
        path = self.root / "plugins" / DRIVER / FILE_NAME
        claims: dict[str, Any] = read_document(path)["claims"]
        return claims

    def cdi_files(self) -> list[str]:
        return sorted(p.name for p in (self.root / "cdi").iterdir())

    def prepare(self, *refs: ClaimRef, timeout: float = 30) -> v1.NodePrepareResourcesResponse:
        request = v1.NodePrepareResourcesRequest(claims=[_claim(r) for r in refs])
        return self.dra.NodePrepareResources(request, timeout=timeout)

    def unprepare(self, *refs: ClaimRef) -> v1.NodeUnprepareResourcesResponse:
        request = v1.NodeUnprepareResourcesRequest(claims=[_claim(r) for r in refs])
        return self.dra.NodeUnprepareResources(request, timeout=30)


def _claim(ref: ClaimRef) -> v1.Claim:
    return v1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)


@pytest.fixture
def plugin(api: RateLimitedApiClient, short_root: Path) -> Iterator[Any]:
    started: list[Plugin] = []

    def start(backend: Any = None) -> Plugin:
        config = make_config(short_root, health_resend_seconds=30)
        backend = backend or load_backend(
            "example", driver_name=DRIVER, node_name=NODE, config=EXAMPLE_CONFIG
        )
        metrics, events = PluginMetrics(), RecordingEvents()
        core = PrepareCore(
            config, metrics, backend, claims_resource(api), events=events,
            boot_id=lambda: "boot-1",
        )  # fmt: skip
        node_plugin = NodePlugin(config, core=core, metrics=metrics)
        node_plugin.start()
        started.append(Plugin(node_plugin, events, short_root))
        return started[-1]

    yield start
    for p in started:
        p.channel.close()
        p.node_plugin.stop(grace=1)


@pytest.fixture
def victim_secret(cluster: LocalCluster, namespace: str) -> Iterator[dict[str, str]]:
    core = client.CoreV1Api(cluster.api_client())
    secret = core.create_namespaced_secret(
        namespace, {"metadata": {"name": "victim"}, "stringData": {"password": "hunter2"}}
    )
    yield {"namespace": namespace, "name": "victim", "uid": secret.metadata.uid}


def test_path_traversal_in_a_claim_name_reads_no_secret_and_posts_no_event(
    plugin: Any, claims: Resource, namespace: str, victim_secret: dict[str, str]
) -> None:
    p = plugin()
    good = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    traversal = "../../../../../../api/v1/namespaces/" + namespace + "/secrets/victim"
    attacks = [
        ClaimRef(namespace, str(uuid.uuid4()), traversal),
        ClaimRef(f"../../../api/v1/namespaces/{namespace}/secrets", str(uuid.uuid4()), "victim"),
        ClaimRef(namespace, str(uuid.uuid4()), "victim?watch=true&timeoutSeconds=3600"),
        ClaimRef(namespace, str(uuid.uuid4()), "Victim"),
    ]
    response = p.prepare(good, *attacks)
    assert response.claims[good.uid].error == ""
    for ref, field in zip(attacks, ["name", "namespace", "name", "name"], strict=True):
        error = response.claims[ref.uid].error
        assert error.startswith(f"invalid claim reference: claim {field} ")
        assert victim_secret["uid"] not in error
    # Only the good claim was prepared and only it could have an Event (it has none).
    assert p.events.events == []
    assert list(p.checkpoint_claims()) == [good.uid]


def test_api_paths_quote_or_refuse_segments_for_every_caller(
    claims: Resource, namespace: str, victim_secret: dict[str, str]
) -> None:
    for name in ("..", ".", "a/../../secrets/victim", "100%", "../victim"):
        with pytest.raises(InvalidPathSegment):
            claims.get(name, namespace)
    # "?" and "#" are quoted into the name: a plain NotFound, not a watch or another object.
    for name in ("victim?watch=true", "victim#x", "victim name"):
        with pytest.raises(NotFound) as missing:
            claims.get(name, namespace)
        assert "resourceclaims" in str(missing.value)
    assert RESOURCE_CLAIMS.path(namespace, "a?b") == (
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/a%3Fb"
    )


def test_bad_uids_fail_alone_and_the_good_claim_is_unprepared_and_saved(
    plugin: Any, claims: Resource, namespace: str
) -> None:
    p = plugin()
    good = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert p.prepare(good).claims[good.uid].error == ""
    long_uid = ClaimRef(namespace, "a" * 10_000, "claim-long")
    nul_uid = ClaimRef(namespace, "5b8e1f7e-0000-4000-8000-00000000000\0", "claim-nul")
    dotted = ClaimRef(namespace, "../../../../etc/passwd", "claim-dots")
    response = p.unprepare(long_uid, good, nul_uid, dotted)
    assert response.claims[good.uid].error == ""
    for ref in (long_uid, nul_uid, dotted):
        assert "is not a UUID" in response.claims[ref.uid].error
    assert len(response.claims[long_uid.uid].error) < 300
    # The good claim's own checkpoint update was saved during this very call.
    assert p.checkpoint_claims() == {}
    assert p.cdi_files() == []
    prepared = p.prepare(long_uid, nul_uid, dotted)
    assert all("is not a UUID" in r.error for r in prepared.claims.values())
    assert p.cdi_files() == []
    assert p.events.events == []


def test_call_with_more_claims_than_the_cap_is_refused_whole_without_work(
    plugin: Any, claims: Resource, namespace: str
) -> None:
    p = plugin()
    good = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    flood = [ClaimRef(namespace, str(uuid.uuid4()), f"c-{i}") for i in range(MAX_CLAIMS_PER_CALL)]
    with pytest.raises(grpc.RpcError) as refused:
        p.prepare(good, *flood)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == (
        f"NodePrepareResources: {MAX_CLAIMS_PER_CALL + 1} claims in one call, at most "
        f"{MAX_CLAIMS_PER_CALL} are accepted; split the claims over several calls"
    )
    assert p.cdi_files() == []
    # At the cap the call is served.
    response = p.prepare(good, *flood[1:])
    assert response.claims[good.uid].error == ""
    assert len(response.claims) == MAX_CLAIMS_PER_CALL


@pytest.mark.parametrize("leave", ["deadline", "cancel"])
def test_work_stops_for_a_caller_whose_deadline_passed_or_who_hung_up(
    plugin: Any, claims: Resource, namespace: str, leave: str
) -> None:
    backend = load_backend(
        f"{__name__}:GatedBackend", driver_name=DRIVER, node_name=NODE, config=EXAMPLE_CONFIG
    )
    GatedBackend.gate.clear()
    GatedBackend.entered.clear()
    GatedBackend.prepared = []
    p = plugin(backend)
    first = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    second = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    GatedBackend.gate_uid = first.uid
    request = v1.NodePrepareResourcesRequest(claims=[_claim(first), _claim(second)])
    timeout = 3 if leave == "deadline" else 60
    pending = p.dra.NodePrepareResources.future(request, timeout=timeout)
    assert GatedBackend.entered.wait(timeout=30)
    if leave == "cancel":
        pending.cancel()
    with pytest.raises(grpc.FutureCancelledError if leave == "cancel" else grpc.RpcError):
        pending.result()
    GatedBackend.gate.set()
    # The server finishes the claim it was in the middle of and starts nothing more.
    after = p.prepare(first)
    assert after.claims[first.uid].error == ""
    assert GatedBackend.prepared == [first.uid]
    assert second.uid not in p.checkpoint_claims()
    assert not any(second.uid in name for name in p.cdi_files())
    assert p.events.events == []


class GatedClaims:
    """The real claims API; GETs of names starting with ``a-`` wait for a permit."""

    def __init__(self, real: Resource) -> None:
        self.real = real
        self.permits = threading.Semaphore(0)
        self.started: list[str] = []
        self.cond = threading.Condition()

    def get(self, name: str, namespace: str | None = None) -> Any:
        with self.cond:
            self.started.append(name)
            self.cond.notify_all()
        if name.startswith("a-"):
            assert self.permits.acquire(timeout=60), "the test never released this GET"
        return self.real.get(name, namespace)

    def wait_started(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.started) >= count, timeout=30)


def test_a_big_call_does_not_starve_the_next_callers_claim_reads(
    api: RateLimitedApiClient, short_root: Path, claims: Resource, namespace: str
) -> None:
    gated = GatedClaims(claims)
    config = make_config(short_root, health_resend_seconds=30)
    backend = load_backend("example", driver_name=DRIVER, node_name=NODE, config=EXAMPLE_CONFIG)
    metrics = PluginMetrics()
    core = PrepareCore(config, metrics, backend, gated, boot_id=lambda: "boot-1")  # type: ignore[arg-type]
    node_plugin = NodePlugin(config, core=core, metrics=metrics)
    node_plugin.start()
    try:
        with grpc.insecure_channel(f"unix:{node_plugin.sockets.dra}") as channel:
            dra = v1_grpc.DRAPluginStub(channel)
            big = [ClaimRef(namespace, str(uuid.uuid4()), f"a-{i}") for i in range(100)]
            first = dra.NodePrepareResources.future(
                v1.NodePrepareResourcesRequest(claims=[_claim(r) for r in big]), timeout=120
            )
            gated.wait_started(16)  # the big call holds every worker of the fetch pool
            good = create_claim(claims, namespace, [result("gpu", "gpu-0")])
            second = dra.NodePrepareResources.future(
                v1.NodePrepareResourcesRequest(claims=[_claim(good)]), timeout=120
            )
            eventually(
                lambda: core.reader._pool._pool._work_queue.qsize() > 0,
                "the second call's GET queued behind the big call's",
                interval=0.01,
            )
            gated.permits.release()  # one GET of the big call finishes, no more
            assert second.result(timeout=60).claims[good.uid].error == ""
            # The second caller's GET ran as soon as one worker was free, not after the
            # 84 GETs the big call had still to do.
            assert gated.started.index(good.name) == 16
            for _ in range(100):
                gated.permits.release()
            assert len(first.result().claims) == 100
    finally:
        node_plugin.stop(grace=1)


class FailOneBackend(ExampleBackend):
    """The example backend, failing the prepare of ``failing_uid`` (a TypeError: a bug)."""

    failing_uid: ClassVar[str] = ""

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        if claim.uid == type(self).failing_uid:
            raise TypeError("backend bug")
        return super().prepare(claim, context)


def test_one_claims_failure_in_a_batch_leaves_the_others_prepared_and_saved(
    plugin: Any, claims: Resource, namespace: str
) -> None:
    backend = load_backend(
        f"{__name__}:FailOneBackend", driver_name=DRIVER, node_name=NODE, config=EXAMPLE_CONFIG
    )
    p = plugin(backend)
    before = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    failing = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    after = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    FailOneBackend.failing_uid = failing.uid
    response = p.prepare(before, failing, after)
    assert response.claims[before.uid].error == ""
    assert response.claims[after.uid].error == ""
    assert "backend example: backend bug" in response.claims[failing.uid].error
    saved = p.checkpoint_claims()
    assert {uid: e["state"] for uid, e in saved.items()} == {
        before.uid: "PrepareCompleted",
        after.uid: "PrepareCompleted",
    }
    assert len(p.cdi_files()) == 2
