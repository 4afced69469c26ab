"""The node plugin replaced or crashing while the kubelet keeps sending it work.

Both scenarios run on node B with the real kubelet DRA manager (harness) as
the client: a rolling update (a second plugin instance with another pod UID
starts, then the first stops) in the middle of a stream of pods, and a
plugin killed with SIGKILL while prepares are in flight, then restarted as
the same pod.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
from e2e_rig import (
    Api,
    E2EStack,
    NodeRig,
    claim_template,
    eventually,
    pod,
)
from harness.cdi import assert_cdi_ids_resolve

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as dra
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as dra_grpc
from drakit.localcluster.stack import DRIVER, metric_value
from drakit.node_plugin.serialize import LOCK_FILE_NAME

pytestmark = pytest.mark.e2e

PREPARES_IN_FLIGHT = ("drakit_node_plugin_requests_in_flight", {"operation": "prepare"})
PREPARED_CLAIMS = "drakit_node_plugin_prepared_claims"
PREPARED_OK = ("drakit_node_plugin_claims_total", {"operation": "prepare", "result": "success"})
#: Pods alive at once in the traffic loop (the example backend has 8 GPUs per node).
TRAFFIC_WINDOW = 4


class PodTraffic:
    """Creates a pod on the node every ``interval`` seconds until stopped, and deletes the
    pod ``TRAFFIC_WINDOW`` places back once the kubelet prepared it, so both prepares and
    unprepares are in flight."""

    def __init__(self, api: Api, node: NodeRig, since: int, interval: float = 0.3) -> None:
        self._api = api
        self._node = node
        self._since = since
        self._interval = interval
        self._stop = threading.Event()
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                name = f"load-{len(self.created)}"
                self._api.create_pod(pod(name, self._node.name, template="one-gpu"))
                self.created.append(name)
                if len(self.created) > TRAFFIC_WINDOW:
                    old = self.created[len(self.created) - TRAFFIC_WINDOW - 1]
                    prepared_ids(self._node, self._api, old, self._since)
                    self._api.delete_pod(old)
                    self.deleted.append(old)
                self._stop.wait(self._interval)
        except BaseException as err:  # reported by stop(), not lost in a thread
            self.errors.append(err)

    def wait_created(self, count: int) -> None:
        eventually(lambda: len(self.created) >= count or self.errors, f"{count} pods created")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self.errors, f"creating pods failed: {self.errors!r}"


def prepared_ids(node: NodeRig, api: Api, name: str, since: int) -> list[str]:
    event = node.harness.wait_for("prepared", pod=f"{api.namespace}/{name}", since=since)
    ids: list[str] = event["containers"]["main"]
    return ids


def prepared_pods(node: NodeRig, since: int) -> set[str]:
    return {str(ev["pod"]) for ev in node.harness.events[since:] if ev.get("event") == "prepared"}


def failures(node: NodeRig, since: int) -> list[dict[str, object]]:
    bad = ("prepare-failed", "unprepare-failed", "registration-failed")
    return [ev for ev in node.harness.events[since:] if ev.get("event") in bad]


def delete_all_and_wait_unprepared(node: NodeRig, api: Api, names: list[str], since: int) -> None:
    for name in names:
        api.delete_pod(name)
    for name in names:
        node.harness.wait_for("unprepared", pod=f"{api.namespace}/{name}", since=since)


def test_rolling_update_of_the_node_plugin_under_traffic_fails_no_prepare(
    e2e: E2EStack, api: Api
) -> None:
    node = e2e.node_b
    old = node.plugin
    api.templates.create(claim_template("one-gpu"), api.namespace)
    mark = node.harness.mark()
    traffic = PodTraffic(api, node, since=mark)
    traffic.start()
    try:
        traffic.wait_created(2)
        prepared_ids(node, api, "load-0", mark)

        new = node.start_plugin()  # second instance, another pod UID; registered when it returns
        assert old.process.terminate() == 0, old.process.log_tail(40)
        node.plugins.remove(old)
        assert not old.dra_socket.exists(), "the stopped instance removed its own socket"
        assert new.dra_socket.exists(), "and left its successor's alone"
        after_stop = len(traffic.created)
        traffic.wait_created(after_stop + 3)
    finally:
        traffic.stop()

    for name in traffic.created:
        ids = prepared_ids(node, api, name, mark)
        if name not in traffic.deleted:
            assert_cdi_ids_resolve(ids, node.folders.cdi)
    assert failures(node, mark) == []
    served = metric_value(new.metrics(), *PREPARED_OK)
    assert served is not None and served >= 3, "the new instance served the pods after the update"

    delete_all_and_wait_unprepared(node, api, traffic.created, mark)
    assert failures(node, mark) == []


def test_plugin_killed_mid_flight_prepares_pending_pods_after_restart_and_keeps_its_claims(
    e2e: E2EStack, api: Api
) -> None:
    node = e2e.node_b
    api.templates.create(claim_template("one-gpu"), api.namespace)
    mark = node.harness.mark()
    api.create_pod(pod("before", node.name, template="one-gpu"))
    ids_before = prepared_ids(node, api, "before", mark)
    claim_before = api.allocated_claim(api.generated_claim_name("before"))

    # New pods arrive and the plugin dies (SIGKILL: no clean-up) while the kubelet's
    # prepare calls for them are in flight: the test holds the plugin's cross-process
    # serialize lock, so the calls are inside the plugin, waiting, when it is killed.
    pending = ["during-0", "during-1", "during-2"]
    victim = node.plugin
    with holding_serialize_lock(node):
        for name in pending:
            api.create_pod(pod(name, node.name, template="one-gpu"))
        eventually(
            lambda: (metric_value(victim.metrics(), *PREPARES_IN_FLIGHT) or 0) >= 1,
            "a NodePrepareResources call in flight in the plugin",
        )
        victim.process.kill()
        node.plugins.remove(victim)
        assert victim.dra_socket.exists(), "a killed plugin leaves its socket behind"
        assert prepared_pods(node, mark) == {f"{api.namespace}/before"}, "the others wait"

        # Restarted as the same pod, with the lock still held so it can do no new work:
        # it already knows the claim it prepared before the crash (from its checkpoint).
        restarted = node.start_plugin(pod_uid=victim.pod_uid)
        assert metric_value(restarted.metrics(), PREPARED_CLAIMS) == 1

    # Pending pods are prepared once the plugin is back.
    for name in pending:
        assert_cdi_ids_resolve(prepared_ids(node, api, name, mark), node.folders.cdi)

    # The claim prepared before the crash is still known: the same answer, no new work.
    reply = prepare_directly(restarted.dra_socket, claim_before)
    uid = claim_before["metadata"]["uid"]
    assert reply.claims[uid].error == ""
    assert [list(d.cdi_device_ids) for d in reply.claims[uid].devices] == [ids_before]
    assert_cdi_ids_resolve(ids_before, node.folders.cdi)
    assert metric_value(restarted.metrics(), PREPARED_CLAIMS) == 1 + len(pending)

    names = ["before", *pending]
    delete_all_and_wait_unprepared(node, api, names, mark)
    eventually(lambda: node.cdi_spec_for(uid) is None, "the pre-crash claim's CDI spec removed")
    unexpected = [ev for ev in failures(node, mark) if ev.get("event") != "prepare-failed"]
    assert unexpected == []


@contextmanager
def holding_serialize_lock(node: NodeRig) -> Iterator[None]:
    """Hold the flock that serializes the node's plugin instances (``serialize.lock``)."""
    path = node.folders.plugins / DRIVER / LOCK_FILE_NAME
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare_directly(
    socket_path: object, claim_obj: dict[str, object]
) -> dra.NodePrepareResourcesResponse:
    """NodePrepareResources for one claim on the plugin's DRA socket, as the kubelet calls it."""
    meta = claim_obj["metadata"]
    assert isinstance(meta, dict)
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        stub = dra_grpc.DRAPluginStub(channel)
        request = dra.NodePrepareResourcesRequest(
            claims=[dra.Claim(namespace=meta["namespace"], uid=meta["uid"], name=meta["name"])]
        )
        last: list[grpc.RpcError] = []

        def answer() -> tuple[dra.NodePrepareResourcesResponse] | None:
            try:  # in a tuple: the answer is there even when the message would be falsy
                return (stub.NodePrepareResources(request, timeout=30),)
            except grpc.RpcError as err:
                last[:] = [err]
                return None

        (response,) = eventually(
            answer, lambda: f"an answer on {socket_path} (last error: {last})", 30
        )
        return response
