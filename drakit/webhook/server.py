"""The webhook's HTTPS endpoint: ``POST /validate-resource-claim-parameters``, ``GET /readyz``
and ``GET /livez``.

Served by :class:`drakit.telemetry.boundedhttp.BoundedHTTPServer` with TLS, whose context
can be swapped while it runs: each accepted connection takes the context current at that
moment, so a rotated certificate is served from the next connection on, and connections made
before keep theirs until they close. HTTP/1.1 keep-alive, as the apiserver uses it.

Every body is hostile (the apiserver relays what any user with create rights on claims
wrote, and anyone who reaches the port may send anything), so cost is bounded before work:

- :data:`LIMITS`: at most 256 connections, 64 per client address, one 10 s deadline per
  request for the TLS handshake, head and body together, read without ever waiting on the
  client; bodies of at most :data:`MAX_BODY` bytes with a Content-Length; large bodies
  (over 64 KiB) buffered 24 MiB at a time and decoded one at a time, so a review of a
  normal claim (a few KiB) never waits behind them;
- :func:`drakit.webhook.jsonbudget.check` before decoding: a body whose decoding could take
  more than 48 MiB, or that nests more than 116 levels, gets 413 or 400 and is never decoded.

Worst-case memory under attack, beyond the idle process (about 50 MiB): 256 connections'
buffers and TLS state (a 16 KiB head, a 64 KiB body and ~50 KiB of TLS each: about 33 MiB),
24 MiB of large bodies and the 8 MiB copy of the one handed to a worker, one large body
decoding (at most 48 MiB), two small ones (at most about 6 MiB each): about 130 MiB
(docs/benchmarks.md has the figure measured under attack). A failure of one request is
logged as one line and never ends the server.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from drakit.telemetry.boundedhttp import BoundedHTTPServer, Limits
from drakit.telemetry.httpwire import Exchange
from drakit.telemetry.logs import get_logger
from drakit.telemetry.memory import release_freed_memory
from drakit.webhook.jsonbudget import BodyRefusedError, check
from drakit.webhook.review import BadReviewError, Validator, answer, decode_review

__all__ = ["LIMITS", "MAX_BODY", "REVIEW_PATH", "WebhookServer"]

logger = get_logger(__name__)

REVIEW_PATH = "/validate-resource-claim-parameters"
#: An AdmissionReview of an UPDATE carries the object twice, each at most the apiserver's
#: 3 MiB request limit.
MAX_BODY = 8 * 1024 * 1024
SMALL_BODY = 64 * 1024
LIMITS = Limits(
    workers=2,
    large_workers=1,
    max_connections=256,
    # The apiserver opens a connection per concurrent review (kube-controller-manager
    # creates claims from templates 50 at a time); its idle ones make room for new ones.
    max_per_address=64,
    read_timeout=10.0,
    # The apiserver's default webhook timeout: a request that takes longer is failed by it.
    deadline=10.0,
    keepalive=60.0,
    max_head=16 * 1024,
    max_body=MAX_BODY,
    small_body=SMALL_BODY,
    body_budget=24 * 1024 * 1024,
)


class WebhookServer:
    """Serves admission reviews for ``driver`` with ``validate``; ``ready`` gates /readyz.

    Listens from construction on; :meth:`use` must be called with a TLS context before
    connections are served (until then they are closed at accept).
    """

    def __init__(
        self,
        address: tuple[str, int],
        *,
        driver: str,
        validate: Validator,
        ready: Callable[[], bool],
        limits: Limits = LIMITS,
    ) -> None:
        self._context: ssl.SSLContext | None = None
        #: The HTTP server (its connection counts are for tests and diagnosis).
        self.http = BoundedHTTPServer(
            address[0],
            address[1],
            _handler_class(driver, validate, ready),
            limits,
            tls=lambda: self._context,
            name="webhook-http",
        )
        self.server_address = (self.http.server_name, self.http.server_port)
        self._stopped = threading.Event()

    def use(self, context: ssl.SSLContext) -> None:
        """Serve new connections with ``context`` (a certificate rotation)."""
        self._context = context

    def serve_forever(self) -> None:
        """Return when :meth:`shutdown` is called (the server's own threads serve)."""
        self._stopped.wait()

    def shutdown(self) -> None:
        """Stop serving: close the listening socket and every connection."""
        self.http.close()
        self._stopped.set()

    def server_close(self) -> None:
        """Same as :meth:`shutdown` (both are idempotent)."""
        self.shutdown()


@dataclass(frozen=True)
class _App:
    driver: str
    validate: Validator
    ready: Callable[[], bool]


def _handler_class(
    driver: str, validate: Validator, ready: Callable[[], bool]
) -> type[BaseHTTPRequestHandler]:
    class Handler(_ReviewHandler):
        app = _App(driver, validate, ready)

    return Handler


class _ReviewHandler(BaseHTTPRequestHandler):
    """One request, read in full by the server (``self.request`` is its Exchange)."""

    request: Exchange
    app: _App
    protocol_version = "HTTP/1.1"
    server_version = "drakit-webhook"
    sys_version = ""

    def handle(self) -> None:
        # One request: the Exchange holds exactly one, and http.server's loop would read its
        # body (which do_POST takes from the Exchange) as a next request and answer that too.
        self.handle_one_request()
        if len(self.request.body) > SMALL_BODY:
            # What decoding it took is free again: hand it back to the kernel, or the process
            # keeps the peak of any burst of large reviews resident for its whole life.
            release_freed_memory()

    def do_GET(self) -> None:
        if self.path in ("/readyz", "/livez"):
            ok = self.path == "/livez" or self.app.ready()
            self._send(200 if ok else 503, b"ok" if ok else b"CA bundle not published yet")
        else:
            self._send(404, b"not found")

    def do_POST(self) -> None:
        if self.path.partition("?")[0] != REVIEW_PATH:
            self._send(404, b"not found")
            return
        content_type = self.headers.get("Content-Type", "").partition(";")[0].strip()
        if content_type != "application/json":
            self._send(415, b"expected Content-Type application/json")
            return
        if "Content-Length" not in self.headers:
            self._send(411, b"a Content-Length is required")
            return
        body = self.request.body
        try:
            check(body)
        except BodyRefusedError as exc:
            logger.info(
                "Refused before decoding",
                peer=str(self.client_address),
                bytes=len(body),
                reason=str(exc),
            )
            self._send(exc.status, f"AdmissionReview refused before decoding: {exc}".encode())
            return
        try:
            review = decode_review(body)
            reply = answer(review, self.app.driver, self.app.validate)
        except (ValueError, BadReviewError) as exc:  # not JSON, or not an AdmissionReview
            self._send(400, f"not an AdmissionReview: {exc}"[:1024].encode())
            return
        except Exception as exc:  # a bug here or in the driver's model: this request only
            logger.error("Review failed", error=f"{type(exc).__name__}: {exc}")
            self._send(500, b"internal error while reviewing")
            return
        _log_decision(reply)
        self._send(200, json.dumps(reply).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("Request", peer=str(self.client_address), line=format % args)


def _log_decision(reply: dict[str, Any]) -> None:
    response = reply["response"]
    if response.get("allowed"):
        logger.debug("Admitted", uid=response.get("uid"))
    else:
        logger.info("Denied", uid=response.get("uid"), reason=response["status"]["message"])
