"""The webhook's server under attack, over real loopback sockets and real TLS (issue 41,
finding 1): a slow TLS handshake, a slow head and a slow body are each cut at the one
deadline of their request; connections are bounded per client address; a body that would
cost too much to decode is refused before it is decoded; and a review is answered while
attackers hold connections.

Attackers connect from other loopback addresses (127.0.0.2 and up) than the reviews
(127.0.0.1): every 127/8 address reaches the listener on Linux.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import http.client
import json
import select
import socket
import ssl
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from helpers.waiting import eventually

from drakit.node_plugin.config import validate_parameters
from drakit.telemetry.boundedhttp import Limits
from drakit.webhook import server as server_module
from drakit.webhook.certs import Issued, issue, server_context
from drakit.webhook.server import LIMITS, REVIEW_PATH, WebhookServer

DRIVER = "gpu.example.com"
#: A deadline short enough for a test, and silences allowed longer than any test takes, so
#: only the deadline can cut a client that keeps sending.
QUICK = dataclasses.replace(LIMITS, deadline=1.0, read_timeout=60.0, keepalive=60.0)
#: Nothing is cut by time while a test runs; room for the attackers of five addresses.
PATIENT = dataclasses.replace(
    LIMITS, deadline=60.0, read_timeout=60.0, keepalive=60.0, max_connections=32, max_per_address=4
)
#: How many bytes a trickling client sends at most, one each TRICKLE seconds, before the
#: test gives up on the server cutting it (6 s: six times the QUICK deadline).
TRICKLE, TRICKLE_BYTES = 0.1, 60


class Params(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"

    def validate_config(self) -> None:
        if self.interval != "Default":
            raise ValueError(f"unknown time-slice interval: {self.interval}")


class Hook:
    def __init__(self, server: WebhookServer, issued: Issued) -> None:
        self.server = server
        self.issued = issued
        self.port = server.server_address[1]

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.issued.ca_pem.decode())

    def raw(self, source: str = "127.0.0.1") -> socket.socket:
        return socket.create_connection(
            ("127.0.0.1", self.port), timeout=30, source_address=(source, 0)
        )

    def tls(self, source: str = "127.0.0.1") -> ssl.SSLSocket:
        return self.context().wrap_socket(self.raw(source), server_hostname="127.0.0.1")

    def post(self, body: bytes, source: str = "127.0.0.1") -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context(), timeout=30,
            source_address=(source, 0),
        )  # fmt: skip
        try:
            conn.request("POST", REVIEW_PATH, body=body,
                         headers={"Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@contextlib.contextmanager
def webhook(limits: Limits) -> Iterator[Hook]:
    issued = issue(("127.0.0.1",), 3600, name="test-webhook")
    server = WebhookServer(
        ("127.0.0.1", 0),
        driver=DRIVER,
        validate=lambda params: validate_parameters(Params, params),
        ready=lambda: True,
        limits=limits,
    )
    server.use(server_context(issued))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Hook(server, issued)
    finally:
        server.shutdown()
        thread.join(10)


def review(interval: str = "Default") -> bytes:
    config = {"opaque": {"driver": DRIVER, "parameters": {"interval": interval}}}
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "abc", "operation": "CREATE",
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "object": {"metadata": {"name": "c", "namespace": "n"},
                       "spec": {"devices": {"config": [config]}}},
        },
    }).encode()  # fmt: skip


def head(length: int) -> bytes:
    return (
        f"POST {REVIEW_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def client_hello() -> bytes:
    """The first flight of a real TLS client."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    with pytest.raises(ssl.SSLWantReadError):
        context.wrap_bio(incoming, outgoing, server_hostname="x").do_handshake()
    return outgoing.read()


def trickle(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data`` a byte every TRICKLE seconds until the server ends the connection;
    return what it sent before. Fails if TRICKLE_BYTES were sent and it never did."""
    for byte in data[:TRICKLE_BYTES]:
        try:
            sock.sendall(bytes([byte]))
        except OSError:  # reset: the server closed first
            return b""
        readable, _, _ = select.select([sock], [], [], TRICKLE)
        if readable and (answer := answered(sock)) is not None:
            return answer
    pytest.fail(f"the server still read a client sending a byte every {TRICKLE} s")


def answered(sock: socket.socket) -> bytes | None:
    """What the server sent before it closed ``sock``; None while it has sent nothing but
    TLS records of its own (the session tickets that follow a TLS 1.3 handshake)."""
    sock.setblocking(False)
    try:
        first = sock.recv(65536)
    except (ssl.SSLWantReadError, BlockingIOError):
        return None
    except OSError:
        return b""
    finally:
        sock.settimeout(30)
    return first + read_to_end(sock) if first else b""


def send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def read_to_end(sock: socket.socket) -> bytes:
    received = b""
    with contextlib.suppress(OSError):  # a reset after the answer ends it too
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_slow_tls_handshake_is_cut_at_the_request_deadline() -> None:
    with webhook(QUICK) as hook, hook.raw() as sock:
        assert trickle(sock, client_hello()) == b""  # no TLS, so no HTTP answer
        assert hook.post(review())[0] == 200


def test_a_slow_head_is_cut_at_the_request_deadline() -> None:
    with webhook(QUICK) as hook, hook.tls() as sock:
        answer = trickle(sock, head(10) + b"x" * 100)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"request not received in time" in answer


def test_a_slow_body_is_cut_at_the_request_deadline() -> None:
    # The old server read the body with read(65536), which waits for 64 KiB: a client
    # sending a byte at a time held it until it had sent them all.
    with webhook(QUICK) as hook, hook.tls() as sock:
        sock.sendall(head(1000))
        answer = trickle(sock, review().ljust(1000))
        assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_the_deadline_counts_from_accept_not_from_each_read() -> None:
    # A handshake, then a head, each well within the deadline alone: together they are not.
    with webhook(QUICK) as hook, hook.raw() as sock:
        hello = client_hello()
        sock.sendall(hello[: len(hello) // 2])
        assert trickle(sock, hello[len(hello) // 2 :]) == b""


def test_connections_past_the_per_address_bound_are_refused_at_accept() -> None:
    with webhook(PATIENT) as hook, contextlib.ExitStack() as held:
        for _ in range(PATIENT.max_per_address):
            held.enter_context(hook.tls("127.0.0.2")).sendall(head(10)[:20])
        wait_until(
            lambda: hook.server.http.busy == PATIENT.max_per_address, "held connections read"
        )
        with pytest.raises(OSError):  # closed before the handshake: SSLEOFError or a reset
            hook.tls("127.0.0.2").close()
        assert hook.post(review())[0] == 200  # another address still gets in


def test_idle_connections_of_an_address_make_room_for_its_new_ones() -> None:
    # The apiserver keeps idle connections open: at its bound, new ones replace the oldest.
    with webhook(PATIENT) as hook, contextlib.ExitStack() as held:
        idle = [held.enter_context(hook.tls("127.0.0.2")) for _ in range(PATIENT.max_per_address)]
        wait_until(lambda: hook.server.http.busy == 0, "handshakes done")
        assert hook.post(review(), source="127.0.0.2")[0] == 200
        assert read_to_end(idle[0]) == b""  # the oldest was closed to make room


def test_a_review_is_answered_while_attackers_hold_connections_and_large_bodies() -> None:
    # From three addresses: more slow heads than the old server had threads (64), and large
    # bodies stopped short of their end, holding the whole large-body budget.
    with webhook(PATIENT) as hook, contextlib.ExitStack() as held:
        for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            for _ in range(24):
                with contextlib.suppress(OSError):  # refused past the bound
                    held.enter_context(hook.tls(source)).sendall(head(10)[:20])
        large = 7 * 2**20
        for _ in range(PATIENT.body_budget // large + 1):
            with contextlib.suppress(OSError):
                sock = held.enter_context(hook.tls("127.0.0.5"))
                # Blocks once the budget is held and the server stops reading: in a thread,
                # which ends when the server closes the connection.
                data = head(large + 1) + b"[" + b"0," * (large // 2 - 1)
                threading.Thread(target=send_quietly, args=(sock, data), daemon=True).start()
        hello = client_hello()
        for _ in range(PATIENT.max_per_address):
            held.enter_context(hook.raw("127.0.0.6")).sendall(hello[:100])  # and no more
        assert hook.server.http.connections <= PATIENT.max_connections
        status, body = hook.post(review("Bogus"))
        assert status == 200, body
        assert json.loads(body)["response"]["allowed"] is False


def test_large_bodies_past_the_budget_wait_their_turn_and_are_then_answered() -> None:
    limits = dataclasses.replace(PATIENT, body_budget=2**20)
    body = review().ljust(700 * 1024)
    with webhook(limits) as hook, hook.tls("127.0.0.2") as holder:
        holder.sendall(head(len(body)) + body[:-10])  # holds 700 KiB of the 1 MiB budget
        wait_until(lambda: hook.server.http.held_body_bytes == len(body), "the budget held")
        second: list[tuple[int, bytes]] = []
        waiting = threading.Thread(target=lambda: second.append(hook.post(body)), daemon=True)
        waiting.start()
        wait_until(lambda: hook.server.http.busy == 2, "the second head read")
        assert not second  # its body is not read while the budget is held
        holder.sendall(body[-10:])
        assert holder.makefile("rb").readline() == b"HTTP/1.1 200 OK\r\n"
        waiting.join(30)
        assert second and second[0][0] == 200, second


def test_a_large_body_that_waits_past_its_deadline_gets_503() -> None:
    limits = dataclasses.replace(QUICK, body_budget=2**20)
    body = review().ljust(700 * 1024)
    with webhook(limits) as hook, hook.tls() as waiting, hook.tls("127.0.0.2") as holder:
        # The waiting one was accepted first, so its deadline falls before the holder's.
        holder.sendall(head(len(body)) + body[:1000])
        wait_until(lambda: hook.server.http.held_body_bytes == len(body), "the budget held")
        waiting.sendall(head(len(body)))
        answer = read_to_end(waiting)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"too many large requests at once" in answer


def test_a_body_of_many_small_values_is_refused_without_being_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 8 MiB of [{},{},...]: about 180 MiB once decoded, which the old server did before
    # looking at it. The refusal must cost about the body, and never call the decoder.
    decoded: list[Any] = []
    monkeypatch.setattr(server_module, "json", SimpleNamespace(
        loads=lambda body: decoded.append(body) or json.loads(body), dumps=json.dumps))  # fmt: skip
    body = b"[" + b",".join([b"{}"] * (8 * 2**20 // 3 - 1)) + b"]"
    with webhook(PATIENT) as hook:
        gc.collect()
        tracemalloc.start()
        try:
            status, text = hook.post(body)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert status == 413, text
    assert text.startswith(b"AdmissionReview refused before decoding: decoding it could take")
    assert decoded == []
    # The body is held a few times over (the client's, the server's buffer and its copy,
    # TLS records); decoding it would take twenty times its size.
    assert peak < 6 * len(body)


def test_a_body_nested_too_deep_is_refused_without_being_decoded() -> None:
    with webhook(PATIENT) as hook:
        status, text = hook.post(b'{"a":' + b"[" * 300 + b"]" * 300 + b"}")
        assert status == 400
        assert b"refused before decoding: JSON nested more than 216 levels deep" in text
        assert hook.post(review())[0] == 200


def wait_until(check: Callable[[], bool], what: str) -> None:
    eventually(check, what=what, timeout=30)
