"""DirectUnary: unary methods served from their own completion queue, over real Unix sockets."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_core import FakeCore
from grpc._cython import cygrpc  # type: ignore[attr-defined]  # faults injected at the core
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from helpers.childpython import python_output
from helpers.waiting import eventually
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.driver import CallContext, PrepareResult
from drakit.node_plugin.service.direct import DirectUnary
from drakit.plugin import ClaimRef

PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"


@pytest.fixture(autouse=True)
def direct_path_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the direct path: CI's fallback run (DRAKIT_GRPC_DIRECT=0)
    must not turn it off under them."""
    monkeypatch.delenv("DRAKIT_GRPC_DIRECT", raising=False)


Handler = Callable[[v1.NodePrepareResourcesRequest, Any], v1.NodePrepareResourcesResponse]


class Servicer(v1_grpc.DRAPluginServicer):
    """Prepare runs ``on_prepare``; unprepare answers empty."""

    def __init__(self, on_prepare: Handler) -> None:
        self.on_prepare = on_prepare

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        return self.on_prepare(request, context)

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        return v1.NodeUnprepareResourcesResponse()


class Served:
    """A grpc.Server on a Unix socket with DRAPlugin v1 served directly, gRPC health by grpcio."""

    def __init__(
        self,
        socket: Path,
        on_prepare: Handler,
        max_threads: int = 4,
        add_to_server: Callable[[Any, Any], None] = v1_grpc.add_DRAPluginServicer_to_server,
    ) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        direct = DirectUnary.attach(self.server, max_threads=max_threads)
        assert direct is not None, "the pinned grpcio must support direct serving"
        self.direct = direct
        self.direct.add_servicer(add_to_server, Servicer(on_prepare))
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.server.add_insecure_port(f"unix:{socket}")
        self.server.start()
        self.direct.start()
        self.channel = channel_to(socket)
        self.stub = v1_grpc.DRAPluginStub(self.channel)

    def stop(self) -> None:
        self.channel.close()
        self.server.stop(grace=1).wait()
        self.direct.stop()


@pytest.fixture
def serve(short_tmp: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(on_prepare: Handler, max_threads: int = 4, **options: Any) -> Served:
        served = Served(short_tmp / f"d{len(started)}.sock", on_prepare, max_threads, **options)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


def answer(_request: Any, _context: Any) -> v1.NodePrepareResourcesResponse:
    response = v1.NodePrepareResourcesResponse()
    response.claims["uid-1"].error = ""
    return response


def prepare(stub: v1_grpc.DRAPluginStub, timeout: float = 10) -> Any:
    return stub.NodePrepareResources(v1.NodePrepareResourcesRequest(), timeout=timeout)


def test_direct_method_answers_and_other_services_stay_with_grpcio(
    serve: Callable[..., Served],
) -> None:
    served = serve(answer)
    assert "uid-1" in prepare(served.stub).claims
    check = health_pb2_grpc.HealthStub(served.channel).Check(health_pb2.HealthCheckRequest())
    assert check.status == health_pb2.HealthCheckResponse.SERVING


def test_abort_reaches_the_client_with_its_code_and_details(serve: Callable[..., Served]) -> None:
    def refuse(_request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "too many claims")

    served = serve(refuse)
    with pytest.raises(grpc.RpcError) as err:
        prepare(served.stub)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "too many claims"


def test_handler_exception_is_unknown_and_the_next_call_is_served(
    serve: Callable[..., Served],
) -> None:
    calls = []

    def fail_once(request: Any, context: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("backend exploded")
        return answer(request, context)

    served = serve(fail_once)
    with pytest.raises(grpc.RpcError) as err:
        prepare(served.stub)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert "backend exploded" in (err.value.details() or "")
    assert "uid-1" in prepare(served.stub).claims


def test_undecodable_request_is_internal_and_never_reaches_the_handler(
    serve: Callable[..., Served],
) -> None:
    reached = []
    served = serve(lambda request, context: reached.append(request) or answer(request, context))
    raw = served.channel.unary_unary(PREPARE)
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\xff\xff\xff not protobuf", timeout=10)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert reached == []


def test_deadline_makes_the_call_inactive_and_runs_its_callbacks(
    serve: Callable[..., Served],
) -> None:
    observed: dict[str, Any] = {}
    ended = threading.Event()

    def wait_for_cancel(request: Any, context: Any) -> Any:
        observed["remaining"] = context.time_remaining()
        context.add_callback(ended.set)
        wait_until(lambda: not context.is_active(), 10)
        observed["active_after_deadline"] = context.is_active()
        return answer(request, context)

    served = serve(wait_for_cancel)
    with pytest.raises(grpc.RpcError) as err:
        prepare(served.stub, timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert ended.wait(10), "the call-end callback never ran"
    # The caller's deadline reached the handler (without one it is years away); the
    # client's and the core's clocks round differently, so no tighter bound.
    assert 0 < observed["remaining"] < 5
    assert observed["active_after_deadline"] is False


def test_callbacks_run_after_the_answer_and_late_ones_are_refused(
    serve: Callable[..., Served],
) -> None:
    contexts: list[Any] = []
    ran = threading.Event()

    def remember(request: Any, context: Any) -> Any:
        contexts.append(context)
        assert context.add_callback(ran.set) is True
        assert not ran.is_set()  # not before the handler returned
        return answer(request, context)

    served = serve(remember)
    prepare(served.stub)
    assert ran.wait(10)
    eventually(lambda: not contexts[0].is_active(), "the call's context to end", 10, interval=0.01)
    assert contexts[0].add_callback(lambda: None) is False


def backlogged(served: Served) -> int:
    """Calls the server received and holds until a handler slot frees (internal state:
    the observable event that a call was refused a handler of its own)."""
    direct = served.direct
    with direct._lock:
        return len(direct._backlog)


def test_handlers_stop_at_the_bound_and_one_more_thread_keeps_polling(
    serve: Callable[..., Served],
) -> None:
    release = threading.Event()
    running: list[str] = []
    lock = threading.Lock()

    def block(request: Any, context: Any) -> Any:
        with lock:
            running.append(threading.current_thread().name)
        release.wait(20)
        return answer(request, context)

    served = serve(block, max_threads=3)
    assert served.direct.thread_count == 2  # idle: one receives, one can start a handler
    with futures.ThreadPoolExecutor(max_workers=5) as clients:
        pending = [clients.submit(prepare, served.stub, 30) for _ in range(5)]
        eventually(
            lambda: backlogged(served) >= 2 and len(running) >= 3,
            "three calls running and two held back",
            10,
            interval=0.01,
        )
        # The fourth and fifth calls arrived and were held back instead of run
        assert backlogged(served) == 2
        assert len(running) == 3
        assert served.direct.thread_count == 4  # three in handlers, one draining the queue
        release.set()
        assert all("uid-1" in call.result(30).claims for call in pending)
    assert len(running) == 5
    assert all(name.startswith("grpc-direct-") for name in running)


def test_stop_ends_every_poller(short_tmp: Path) -> None:
    served = Served(short_tmp / "s.sock", answer)
    prepare(served.stub)
    pollers = [t for t in threading.enumerate() if t.name.startswith("grpc-direct-")]
    assert pollers
    served.stop()
    assert not any(t.is_alive() for t in pollers)


def test_attach_without_grpcio_internals_returns_none() -> None:
    class NotAGrpcioServer:
        pass

    assert DirectUnary.attach(NotAGrpcioServer(), max_threads=4) is None  # type: ignore[arg-type]


def test_streaming_methods_are_refused() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    direct = DirectUnary.attach(server, max_threads=2)
    assert direct is not None
    with pytest.raises(ValueError, match="Watch: only unary-unary"):
        direct.add_servicer(health_pb2_grpc.add_HealthServicer_to_server, health.HealthServicer())
    server.stop(None)
    direct.stop()


class ThreadRecordingCore(FakeCore):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def prepare(self, claims: Any, call: CallContext) -> dict[str, PrepareResult]:
        self.threads.append(threading.current_thread().name)
        return dict(super().prepare(claims, call))

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> dict[str, str]:
        self.threads.append(threading.current_thread().name)
        return dict(super().unprepare(claims, call))


def test_plugin_serves_prepare_and_unprepare_in_direct_pollers(
    start_plugin: PluginFactory,
) -> None:
    core = ThreadRecordingCore()
    plugin, _ = start_plugin(core=core)
    stub = v1_grpc.DRAPluginStub(channel_to(plugin.sockets.dra))
    claims = [v1.Claim(namespace="default", uid="uid-1", name="claim-1")]
    stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=claims), timeout=10)
    stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(claims=claims), timeout=10)
    assert len(core.threads) == 2
    assert all(name.startswith("grpc-direct-") for name in core.threads), core.threads


# --- faults: a busy server, late calls, grpc core errors, a stop that cannot wait ------


def claim_request(uid: str) -> v1.NodePrepareResourcesRequest:
    return v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="default", uid=uid, name=uid)])


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` passed (False).

    Not ``eventually``: handlers poll with it, in the server's threads, where failing the test
    would only end the handler; a handler records the answer and the test asserts it.
    """
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class Gate:
    """Handlers that record their claim UID and block until released."""

    def __init__(self, blocking: int) -> None:
        self.blocking = blocking
        self.ran: list[str] = []
        self.all_blocked = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def enter(self, request: Any) -> str:
        uid: str = request.claims[0].uid
        with self._lock:
            self.ran.append(uid)
            if len(self.ran) == self.blocking:
                self.all_blocked.set()
        return uid


def test_cancellation_reaches_handlers_while_every_handler_slot_is_busy(
    serve: Callable[..., Served],
) -> None:
    gate = Gate(blocking=2)
    saw_cancel: dict[str, bool] = {}

    def wait_for_cancel(request: Any, context: Any) -> Any:
        uid = gate.enter(request)
        saw_cancel[uid] = wait_until(lambda: not context.is_active(), 20)
        return answer(request, context)

    served = serve(wait_for_cancel, max_threads=2)
    calls = [
        served.stub.NodePrepareResources.future(claim_request(uid), timeout=60)
        for uid in ("a", "b")
    ]
    assert gate.all_blocked.wait(10)
    for call in calls:
        call.cancel()
    eventually(lambda: len(saw_cancel) == 2, "both calls to see their cancellation", 30)
    assert saw_cancel == {"a": True, "b": True}


def test_a_call_whose_deadline_passed_while_it_waited_for_a_handler_slot_is_not_run(
    serve: Callable[..., Served],
) -> None:
    gate = Gate(blocking=2)

    def hold_the_first_two(request: Any, context: Any) -> Any:
        if gate.enter(request).startswith("hold"):
            gate.release.wait(30)
        return answer(request, context)

    served = serve(hold_the_first_two, max_threads=2)
    holds = [
        served.stub.NodePrepareResources.future(claim_request(uid), timeout=60)
        for uid in ("hold-1", "hold-2")
    ]
    assert gate.all_blocked.wait(10)
    with pytest.raises(grpc.RpcError) as err:
        served.stub.NodePrepareResources(claim_request("late"), timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    gate.release.set()
    assert all("uid-1" in hold.result(30).claims for hold in holds)
    served.stub.NodePrepareResources(claim_request("after"), timeout=10)
    assert sorted(gate.ran) == ["after", "hold-1", "hold-2"]


def test_a_call_whose_deadline_passed_while_its_request_was_decoded_is_not_run(
    serve: Callable[..., Served],
) -> None:
    gate = Gate(blocking=1)
    client_gave_up = threading.Event()

    def decode_late_slowly(data: bytes) -> v1.NodePrepareResourcesRequest:
        request = v1.NodePrepareResourcesRequest.FromString(data)
        if request.claims[0].uid == "late":  # a request that takes long to decode
            decoding_began = time.monotonic()
            client_gave_up.wait(30)
            # The server's deadline runs from when it received the call, before this decode
            # began, and may end after the client's (a loaded machine delivers the call
            # late): wait out the server's 0.5 s too, or the call is still live.
            time.sleep(max(0.0, decoding_began + 0.6 - time.monotonic()))
        return request

    def add_with_slow_decode(servicer: Servicer, server: Any) -> None:
        handler = grpc.unary_unary_rpc_method_handler(
            servicer.NodePrepareResources,
            request_deserializer=decode_late_slowly,
            response_serializer=v1.NodePrepareResourcesResponse.SerializeToString,
        )
        service = PREPARE.split("/")[1]
        server.add_registered_method_handlers(service, {"NodePrepareResources": handler})

    def hold_the_first(request: Any, context: Any) -> Any:
        if gate.enter(request) == "hold":
            gate.release.wait(30)
        return answer(request, context)

    served = serve(hold_the_first, max_threads=2, add_to_server=add_with_slow_decode)
    hold = served.stub.NodePrepareResources.future(claim_request("hold"), timeout=60)
    assert gate.all_blocked.wait(10)
    with pytest.raises(grpc.RpcError) as err:
        served.stub.NodePrepareResources(claim_request("late"), timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    client_gave_up.set()
    served.stub.NodePrepareResources(claim_request("after"), timeout=10)
    gate.release.set()
    assert "uid-1" in hold.result(30).claims
    assert sorted(gate.ran) == ["after", "hold"]


def fault_in_direct_threads(
    monkeypatch: pytest.MonkeyPatch, name: str, times: int, fault: Callable[..., Any]
) -> None:
    """Make ``cygrpc.<name>`` behave as ``fault`` the first ``times`` times a direct-path
    thread builds one (the client in this process builds them too, and must not see it)."""
    original = getattr(cygrpc, name)
    left = [times]

    def build(*args: Any) -> Any:
        if threading.current_thread().name.startswith("grpc-direct-") and left[0] > 0:
            left[0] -= 1
            return fault(original, *args)
        return original(*args)

    monkeypatch.setattr(cygrpc, name, build)


def test_a_batch_grpc_core_refuses_ends_the_call_unavailable(
    serve: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    served = serve(answer, max_threads=2)
    invalid_flags = 0xFF  # the core refuses the batch: GRPC_CALL_ERROR_INVALID_FLAGS

    def refused(original: Callable[..., Any], _flags: int) -> Any:
        return original(invalid_flags)

    fault_in_direct_threads(monkeypatch, "ReceiveMessageOperation", 1, refused)
    with pytest.raises(grpc.RpcError) as err:
        prepare(served.stub, timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "uid-1" in prepare(served.stub).claims


def test_a_grpc_core_error_ends_the_call_unavailable_and_costs_no_thread(
    serve: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    served = serve(answer, max_threads=2)

    def broken(_original: Callable[..., Any], *_args: Any) -> Any:
        raise RuntimeError("grpc core failed")

    # More failures than threads: each one used to kill the thread that met it.
    fault_in_direct_threads(monkeypatch, "ReceiveCloseOnServerOperation", 3, broken)
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as err:
            prepare(served.stub, timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "uid-1" in prepare(served.stub).claims


# In a child: a handler that outlives the stop. Once the queue is closed, the late answer
# must be dropped (the core aborts the process on a batch for a closed queue).
STOP_WITH_A_STUCK_HANDLER = """
import threading
from concurrent import futures
import grpc
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc
from drakit.node_plugin.service.direct import DirectUnary

entered, release, returned = threading.Event(), threading.Event(), threading.Event()

class Stuck(v1_grpc.DRAPluginServicer):
    def NodePrepareResources(self, request, context):
        entered.set()
        release.wait()
        returned.set()
        return v1.NodePrepareResourcesResponse()

server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
direct = DirectUnary.attach(server, max_threads=2)
direct.add_servicer(v1_grpc.add_DRAPluginServicer_to_server, Stuck())
server.add_insecure_port("unix:SOCKET")
server.start()
direct.start()
channel = grpc.insecure_channel("unix:SOCKET")
stub = v1_grpc.DRAPluginStub(channel)
call = stub.NodePrepareResources.future(v1.NodePrepareResourcesRequest(), timeout=60)
assert entered.wait(30)
server.stop(0).wait()
stopped = threading.Event()
threading.Thread(target=lambda: (direct.stop(), stopped.set()), daemon=True).start()
print("stop returned" if stopped.wait(30) else "stop hung", flush=True)
release.set()
assert returned.wait(30)
for thread in threading.enumerate():
    if thread.name.startswith("grpc-direct-"):
        thread.join(30)
print("late answer dropped", flush=True)
"""


def test_stop_returns_while_a_handler_is_stuck_and_its_late_answer_is_dropped(
    short_tmp: Path,
) -> None:
    code = STOP_WITH_A_STUCK_HANDLER.replace("SOCKET", str(short_tmp / "stuck.sock"))
    assert python_output(code).splitlines() == ["stop returned", "late answer dropped"]
