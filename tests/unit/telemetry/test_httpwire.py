"""The request heads drakit's HTTP server accepts (drakit.telemetry.httpwire): the body's
length is known before a handler runs, and every ambiguous head is refused with its status."""

from __future__ import annotations

import pytest

from drakit.telemetry.httpwire import BadRequestError, keeps_alive, parse_head


def head(*lines: str, request_line: str = "POST /x HTTP/1.1") -> bytes:
    return ("\r\n".join([request_line, *lines]) + "\r\n\r\n").encode()


def test_the_body_length_and_keep_alive_come_from_the_head() -> None:
    request = parse_head(head("Host: a", "Content-Length: 12"), max_body=100)
    assert (request.method, request.target, request.length, request.keep_alive) == (
        "POST", "/x", 12, True,
    )  # fmt: skip
    assert not parse_head(head("Connection: Keep-Alive, close"), 100).keep_alive
    assert not parse_head(head(request_line="GET / HTTP/1.0"), 100).keep_alive
    assert parse_head(head(request_line="GET / HTTP/1.1"), 100).length == 0


@pytest.mark.parametrize(
    ("lines", "request_line", "status"),
    [
        (["Content-Length: 1", "Content-Length: 2"], "POST /x HTTP/1.1", 400),
        (["Content-Length: -1"], "POST /x HTTP/1.1", 400),
        (["Content-Length: 1e3"], "POST /x HTTP/1.1", 400),
        (["Content-Length: " + "9" * 20], "POST /x HTTP/1.1", 400),
        (["Content-Length : 1"], "POST /x HTTP/1.1", 400),  # a space before the colon
        (["X: a", " folded"], "POST /x HTTP/1.1", 400),
        (["no colon"], "POST /x HTTP/1.1", 400),
        (["Transfer-Encoding: chunked"], "POST /x HTTP/1.1", 411),
        (["Content-Length: 101"], "POST /x HTTP/1.1", 413),
        ([], "POST /x HTTP/2.0", 505),
        ([], "POST /x", 400),
        ([], "POST  /x HTTP/1.1", 400),
    ],
)
def test_ambiguous_or_oversized_heads_are_refused_with_their_status(
    lines: list[str], request_line: str, status: int
) -> None:
    with pytest.raises(BadRequestError) as refused:
        parse_head(head(*lines, request_line=request_line), max_body=100)
    assert refused.value.status == status


def test_an_answer_keeps_the_connection_only_when_it_says_how_long_it_is() -> None:
    assert keeps_alive(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert not keeps_alive(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    assert not keeps_alive(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert not keeps_alive(b"HTTP/1.1 200 OK\r\n\r\nok")
    assert not keeps_alive(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    )
