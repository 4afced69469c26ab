"""drakit.kubeapi.http11 against a real HTTP server on 127.0.0.1 whose answers each test scripts.

Every request through the light client also runs against the real apiserver in
tests/integration/kubeapi/test_resources.py (and test_lightclient.py); these tests cover
what the apiserver does not do on demand: close an idle connection, cut an answer short,
send a malformed one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from helpers.scriptedhttp import Handler, Reader, ScriptedServer, ok

from drakit.kubeapi import http11
from drakit.kubeapi.http11 import ConnectionPool, ProtocolError


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Handler) -> ScriptedServer:
        server = ScriptedServer(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def keep_answering(read: Reader, conn: socket.socket) -> None:
    while read():
        conn.sendall(ok(b'{"ok": true}'))


def pool_for(server: ScriptedServer) -> ConnectionPool:
    return ConnectionPool(f"http://127.0.0.1:{server.port}", maxsize=2)


def get(pool: ConnectionPool, path: str = "/x", method: str = "GET") -> bytes:
    response = pool.request(method, path, headers={}, timeout=(5.0, 5.0))
    try:
        return response.data
    finally:
        response.release_conn()


def test_connection_is_reused_for_the_next_request_once_the_answer_was_read(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(keep_answering)
    pool = pool_for(server)
    assert [get(pool) for _ in range(3)] == [b'{"ok": true}'] * 3
    assert server.connections == 1
    pool.clear()


def test_get_on_a_connection_the_server_closed_is_sent_again_on_a_new_one(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def answer_once_then_close(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(ok(b"first"))
        read()  # the next request arrives, and the connection is closed without an answer

    server = serve(answer_once_then_close)
    pool = pool_for(server)
    assert get(pool) == b"first"
    # The server waits for the second request before closing, so the pooled connection
    # looks open when it is taken: only the failed exchange shows that it is gone.
    assert get(pool) == b"first"
    assert server.connections == 2
    pool.clear()


def test_post_on_a_connection_the_server_closed_is_not_sent_twice(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def answer_once_then_close(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(ok(b"first"))
        read()

    server = serve(answer_once_then_close)
    pool = pool_for(server)
    assert get(pool, method="POST") == b"first"
    with pytest.raises(ProtocolError, match="closed before an answer"):
        get(pool, method="POST")
    assert server.requests == [b"POST /x HTTP/1.1", b"POST /x HTTP/1.1"]
    pool.clear()


def test_chunked_answer_is_streamed_chunk_by_chunk(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def chunked(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"a":1}\n', b'{"b":2}\n'):
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")
        keep_answering(read, conn)

    server = serve(chunked)
    pool = pool_for(server)
    response = pool.request("GET", "/watch", headers={}, timeout=(5.0, 5.0))
    assert list(response.stream()) == [b'{"a":1}\n', b'{"b":2}\n']
    response.release_conn()
    assert get(pool) == b'{"ok": true}'
    assert server.connections == 1  # read to its end: the connection was kept
    pool.clear()


def test_answer_cut_inside_the_body_raises_and_is_not_reused(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def cut(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")

    server = serve(cut)
    pool = pool_for(server)
    with pytest.raises(ProtocolError, match="inside the body"):
        get(pool)
    pool.clear()


def test_malformed_status_line_is_a_protocol_error_naming_it(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def garbage(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")

    server = serve(garbage)
    with pytest.raises(ProtocolError, match=r"bad status line b'SSH-2\.0"):
        get(pool_for(server))


def test_endless_header_line_is_refused_without_reading_it_all(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def huge_header(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (200 * 1024) + b"\r\n\r\n")

    server = serve(huge_header)
    with pytest.raises(ProtocolError, match="too long"):
        get(pool_for(server))


def test_shutdown_from_another_thread_ends_a_read_waiting_for_data(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    release = threading.Event()

    def hold_open(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        release.wait(10)

    server = serve(hold_open)
    response = pool_for(server).request("GET", "/watch", headers={}, timeout=(5.0, 30.0))
    received: list[bytes] = []
    ended = threading.Event()

    def consume() -> None:
        with contextlib.suppress(OSError):  # the shut-down socket may report an error
            received.extend(response.stream())
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    response.shutdown()
    assert ended.wait(10)
    assert received == []
    response.close()
    release.set()


def test_header_value_with_a_line_break_is_refused_before_sending(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(keep_answering)
    pool = pool_for(server)
    with pytest.raises(ValueError, match="line break"):
        pool.request("GET", "/x", headers={"Authorization": "Bearer a\r\nX-Evil: 1"})
    assert get(pool) == b'{"ok": true}'
    assert server.requests == [b"GET /x HTTP/1.1"]  # the refused one was never sent
    pool.clear()


def test_interim_answers_are_skipped_for_the_final_one(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    def early_hints(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"final"))

    pool = pool_for(serve(early_hints))
    assert get(pool) == b"final"
    pool.clear()


def close_after_reading_the_second_request(read: Reader, conn: socket.socket) -> None:
    read()
    conn.sendall(ok(b"first"))
    read()  # the next request arrives whole, and the connection is closed without an answer


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_write_whose_answer_was_lost_is_not_sent_twice(
    serve: Callable[[Handler], ScriptedServer], method: str
) -> None:
    # The server read the request and may have carried it out: Go's transport replays
    # only GET, HEAD, OPTIONS and TRACE (or a request with an Idempotency-Key) then.
    server = serve(close_after_reading_the_second_request)
    pool = pool_for(server)
    assert get(pool, method=method) == b"first"
    with pytest.raises(ProtocolError, match="closed before an answer"):
        get(pool, method=method)
    assert server.requests == [f"{method} /x HTTP/1.1".encode()] * 2
    pool.clear()


def test_post_with_an_idempotency_key_is_sent_again_on_a_new_connection(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(close_after_reading_the_second_request)
    pool = pool_for(server)
    key = {"Idempotency-Key": "claim-1"}
    for _ in range(2):
        response = pool.request("POST", "/x", headers=key, body=b"{}", timeout=(5.0, 5.0))
        assert response.data == b"first"
        response.release_conn()
    assert server.connections == 2
    pool.clear()


def test_post_not_written_before_the_connection_failed_is_sent_on_a_new_one(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(keep_answering)
    pool = pool_for(server)
    assert get(pool, method="POST") == b'{"ok": true}'
    # The pooled connection can no longer write, yet nothing shows it when it is taken:
    # the POST fails before a byte of it left, so it is safe to send on a new connection.
    idle = pool._idle[0]
    idle.sock.shutdown(socket.SHUT_WR)
    assert get(pool, method="POST") == b'{"ok": true}'
    assert server.requests == [b"POST /x HTTP/1.1"] * 2
    assert server.connections == 2
    pool.clear()


def answer_chunk_size(size_line: bytes) -> Handler:
    def answer(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size_line)
        read()  # keeps the connection open: the client must not wait for its end

    return answer


@pytest.mark.parametrize(
    "size_line",
    [b"-5\r\n", b"ffffffffffffffffffffffff\r\n", b"1000000000\r\n", b"0x10\r\n", b"1_0\r\n"],
    ids=["negative", "beyond-64-bits", "64-GiB", "0x-prefix", "underscore"],
)
def test_chunk_size_that_is_negative_huge_or_not_hex_is_a_protocol_error(
    serve: Callable[[Handler], ScriptedServer], size_line: bytes
) -> None:
    server = serve(answer_chunk_size(size_line))
    with pytest.raises(ProtocolError, match="chunk size"):
        get(pool_for(server))


@pytest.mark.parametrize("length", [b"-1", b"+5", b"99999999999999999999", b"1_0"])
def test_content_length_that_is_negative_huge_or_not_digits_is_a_protocol_error(
    serve: Callable[[Handler], ScriptedServer], length: bytes
) -> None:
    def answer(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\nabc")

    with pytest.raises(ProtocolError, match="Content-Length"):
        get(pool_for(serve(answer)))


def test_chunked_body_beyond_the_limit_is_a_protocol_error(
    serve: Callable[[Handler], ScriptedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http11, "MAX_BODY", 1000)

    def endless(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(3):  # each chunk under the limit, together over it
            conn.sendall(b"190\r\n" + b"a" * 400 + b"\r\n")
        conn.sendall(b"0\r\n\r\n")

    with pytest.raises(ProtocolError, match="larger than 1000 bytes"):
        get(pool_for(serve(endless)))
