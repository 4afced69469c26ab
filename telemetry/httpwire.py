"""HTTP/1.x framing for :mod:`drakit.telemetry.boundedhttp`: the request head, refusals, and
the socket look-alike a handler class gets for one request that has been read in full.

Only what the server must know before a handler runs is parsed here (the request line, the
body's length, whether the connection may be kept); the handler parses the head again its
own way (``http.server``), from the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["BadRequestError", "Exchange", "RequestHead", "keeps_alive", "parse_head", "refusal"]

_VERSIONS = ("HTTP/1.0", "HTTP/1.1")
_MAX_LENGTH_DIGITS = 19  # an int64, as Go's server allows


class BadRequestError(Exception):
    """The head cannot be served: answer ``status`` with ``reason`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class RequestHead:
    """What the server needs of a request head: the body's length and keep-alive."""

    method: str
    target: str
    version: str
    length: int
    keep_alive: bool


def parse_head(head: bytes, max_body: int) -> RequestHead:
    """The head (request line and headers, ending in an empty line) of one request.

    Raises BadRequestError: 400 for a malformed head or conflicting Content-Length, 411 for a
    Transfer-Encoding (bodies must have a Content-Length), 413 for a Content-Length over
    ``max_body``, 505 for a version other than HTTP/1.0 and 1.1.
    """
    request_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not all(parts):
        raise BadRequestError(400, "malformed request line")
    method, target, version = parts
    if version not in _VERSIONS:
        raise BadRequestError(505, f"HTTP version {version[:16]!r} not supported")
    lengths, tokens, chunked = set(), [], False
    for name, value in _fields(lines):
        if name == "content-length":
            lengths.add(value)
        elif name == "transfer-encoding":
            chunked = True
        elif name == "connection":
            tokens += [t.strip().lower() for t in value.split(",")]
    if chunked:
        raise BadRequestError(411, "a Content-Length is required (no Transfer-Encoding)")
    length = _length(lengths)
    if length > max_body:
        raise BadRequestError(413, f"body larger than {max_body} bytes")
    keep = version == "HTTP/1.1" and "close" not in tokens
    return RequestHead(method, target, version, length, keep)


def _fields(lines: Iterable[str]) -> Iterable[tuple[str, str]]:
    """(lower-case name, value) of each header line; BadRequestError for a malformed one."""
    for line in lines:
        name, colon, value = line.partition(":")
        # No space before the colon and no folded lines (RFC 9112 5.1, 5.2): both have
        # been used to make two parsers read different heads.
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise BadRequestError(400, "malformed header line")
        yield name.lower(), value.strip(" \t")


def _length(values: set[str]) -> int:
    if not values:
        return 0
    if len(values) > 1:
        raise BadRequestError(400, "conflicting Content-Length headers")
    (value,) = values
    if not (value.isascii() and value.isdigit()) or len(value) > _MAX_LENGTH_DIGITS:
        raise BadRequestError(400, "malformed Content-Length")
    return int(value)


def refusal(status: int, reason: str) -> bytes:
    """A complete HTTP/1.1 answer ``status`` with ``reason`` as its text body, closing."""
    body = reason.encode()
    phrase = HTTPStatus(status).phrase
    return (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def keeps_alive(answer: bytes) -> bool:
    """True when ``answer`` (a complete response) lets the connection be reused: HTTP/1.1,
    a Content-Length, no ``Connection: close``, and not an interim 1xx in front."""
    end = answer.find(b"\r\n\r\n")
    if end < 0:
        return False
    status_line, *lines = answer[:end].decode("latin-1").split("\r\n")
    if not status_line.startswith("HTTP/1.1 ") or status_line.startswith("HTTP/1.1 1"):
        return False
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip().lower()
    return "content-length" in fields and "close" not in fields.get("connection", "")


class _Request(io.RawIOBase):
    """The head, then the body, as one readable stream (no copy of the body)."""

    def __init__(self, head: bytes, body: bytes) -> None:
        super().__init__()
        self._parts = [memoryview(head), memoryview(body)]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._parts and not self._parts[0]:
            self._parts.pop(0)
        if not self._parts:
            return 0
        part = self._parts[0]
        n = min(len(buffer), len(part))
        buffer[:n] = part[:n]
        self._parts[0] = part[n:]
        return n


class Exchange:
    """The ``request`` a handler class is constructed with: one request already read in
    full (``head``, ``body``) and a buffer for the answer.

    It has what :mod:`socketserver` and :mod:`http.server` handlers use of a socket:
    ``makefile("rb")`` reads the head then the body, ``sendall`` and ``makefile("wb")``
    append to the answer, timeouts and options are ignored (the server enforces its own).
    A handler never touches the connection, so a slow client can never hold it.
    """

    def __init__(self, head: bytes, body: bytes, peer: Any) -> None:
        self.head = head
        #: The whole body (its length was the request's Content-Length).
        self.body = body
        self.peer = peer
        self._answer = bytearray()

    def answer(self) -> bytes:
        """Everything the handler wrote."""
        return bytes(self._answer)

    def makefile(self, mode: str = "rb", buffering: int = -1, **_: Any) -> Any:
        if "r" in mode:
            return io.BufferedReader(_Request(self.head, self.body))
        return _AnswerWriter(self)

    def sendall(self, data: Any) -> None:
        self._answer += data

    def send(self, data: Any) -> int:
        self._answer += data
        return len(data)

    def getpeername(self) -> Any:
        return self.peer

    def fileno(self) -> int:
        return -1

    def settimeout(self, timeout: float | None) -> None:
        """Ignored: the server bounds time itself."""

    def setsockopt(self, *args: Any) -> None:
        """Ignored."""

    def shutdown(self, how: int) -> None:
        """Ignored: the server closes the connection."""

    def close(self) -> None:
        """Ignored: the server closes the connection."""


class _AnswerWriter(io.RawIOBase):
    def __init__(self, exchange: Exchange) -> None:
        super().__init__()
        self._exchange = exchange

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._exchange.sendall(data)
        return len(data)
