"""The webhook's HTTPS endpoint: ``POST /validate-resource-claim-parameters`` and ``GET /readyz``.

A threading HTTP/1.1 server (the apiserver keeps connections open and sends requests
concurrently) whose TLS context can be swapped while it runs: each accepted connection
takes the context current at that moment, so a rotated certificate is served from the
next connection on, and connections made before keep theirs until they close.

Hostile input is bounded: at most :data:`MAX_CONNECTIONS` connections at once (more are
closed at accept), :data:`IO_TIMEOUT` seconds for any single read or write (the TLS
handshake included), :data:`BODY_DEADLINE` seconds for a whole request body, bodies of at
most :data:`MAX_BODY` bytes with a Content-Length, JSON of any depth decoded without
recursion limits (:mod:`drakit.kubeapi.deepjson`). A failure of one request is logged as
one line and never ends the server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from drakit.kubeapi.deepjson import depth_safe
from drakit.webhook.review import BadReviewError, Validator, answer

__all__ = ["MAX_BODY", "REVIEW_PATH", "WebhookServer"]

logger = logging.getLogger(__name__)

REVIEW_PATH = "/validate-resource-claim-parameters"
#: An AdmissionReview of an UPDATE carries the object twice, each at most the apiserver's
#: 3 MiB request limit.
MAX_BODY = 8 * 1024 * 1024
MAX_CONNECTIONS = 64
#: Longer than Go's TLS handshake timeout (10 s) and shorter than the apiserver's default
#: webhook timeout (10 s) plus slack: a silent peer loses its connection within it.
IO_TIMEOUT = 30.0
BODY_DEADLINE = 10.0
_CHUNK = 64 * 1024

_loads = depth_safe(json.loads)


class WebhookServer(ThreadingHTTPServer):
    """Serves admission reviews for ``driver`` with ``validate``; ``ready`` gates /readyz.

    :meth:`use` must be called with a TLS context before connections are served (until
    then they are closed at accept).
    """

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        *,
        driver: str,
        validate: Validator,
        ready: Callable[[], bool],
    ) -> None:
        self.driver = driver
        self.validate = validate
        self.ready = ready
        self._context: ssl.SSLContext | None = None
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def use(self, context: ssl.SSLContext) -> None:
        """Serve new connections with ``context`` (a certificate rotation)."""
        self._context = context

    def get_request(self) -> tuple[Any, Any]:
        conn, peer = self.socket.accept()
        context = self._context
        if context is None or not self._slots.acquire(blocking=False):
            conn.close()
            raise OSError("connection refused: no certificate yet or too many connections")
        conn.settimeout(IO_TIMEOUT)
        try:
            # The handshake runs in the connection's thread (_Handler.setup), so a peer
            # that never completes it cannot hold up accept.
            wrapped = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError):
            self._slots.release()
            conn.close()
            raise OSError("TLS wrap failed") from None
        return wrapped, peer

    def shutdown_request(self, request: Any) -> None:
        with contextlib.suppress(OSError):  # the peer may be gone already
            request.shutdown(socket.SHUT_WR)
        self.close_request(request)

    def close_request(self, request: Any) -> None:
        try:
            request.close()
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, no traceback: a peer that hangs up or fails TLS is not news."""
        logger.debug("Connection failed", extra={"peer": str(client_address)}, exc_info=False)


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    protocol_version = "HTTP/1.1"
    timeout = IO_TIMEOUT
    server_version = "drakit-webhook"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError) as exc:
            logger.debug("TLS handshake failed", extra={"peer": str(self.client_address)})
            raise ConnectionAbortedError(str(exc)) from None

    def do_GET(self) -> None:
        if self.path in ("/readyz", "/livez"):
            ok = self.path == "/livez" or self.server.ready()
            self._send(200 if ok else 503, b"ok" if ok else b"CA bundle not published yet")
        else:
            self._send(404, b"not found")

    def do_POST(self) -> None:
        if self.path.partition("?")[0] != REVIEW_PATH:
            self._discard_and_send(404, b"not found")
            return
        content_type = self.headers.get("Content-Type", "").partition(";")[0].strip()
        if content_type != "application/json":
            self._discard_and_send(415, b"expected Content-Type application/json")
            return
        body = self._body()
        if body is None:
            return
        try:
            review = _loads(body, 2)  # the objects are 2 levels down: review, request
            reply = answer(review, self.server.driver, self.server.validate)
        except (ValueError, BadReviewError) as exc:  # not JSON, or not an AdmissionReview
            self._send(400, f"not an AdmissionReview: {exc}"[:1024].encode())
            return
        except Exception as exc:  # a bug here or in the driver's model: this request only
            logger.error("Review failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            self._send(500, b"internal error while reviewing")
            return
        _log_decision(reply)
        self._send(200, json.dumps(reply).encode(), "application/json")

    def _body(self) -> bytes | None:
        """The request body, or None after answering why it cannot be read."""
        if self.headers.get("Transfer-Encoding"):
            self._send(411, b"a Content-Length is required", close=True)
            return None
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, b"a Content-Length is required", close=True)
            return None
        if length < 0 or length > MAX_BODY:
            self._send(413, f"body larger than {MAX_BODY} bytes".encode(), close=True)
            return None
        deadline = time.monotonic() + BODY_DEADLINE
        chunks: list[bytes] = []
        left = length
        while left:
            if time.monotonic() > deadline:
                self._send(408, b"body not received in time", close=True)
                return None
            chunk = self.rfile.read(min(left, _CHUNK))
            if not chunk:
                self.close_connection = True
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _discard_and_send(self, code: int, text: bytes) -> None:
        """Answer without reading the body: the connection cannot be reused after."""
        self._send(code, text, close=True)

    def _send(
        self, code: int, body: bytes, content_type: str = "text/plain", *, close: bool = False
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("Request", extra={"peer": str(self.client_address), "line": format % args})


def _log_decision(reply: dict[str, Any]) -> None:
    response = reply["response"]
    if response.get("allowed"):
        logger.debug("Admitted", extra={"uid": response.get("uid")})
    else:
        logger.info(
            "Denied",
            extra={"uid": response.get("uid"), "reason": response["status"]["message"]},
        )
