"""Runs upstream's admission webhook and drakit's as real processes, sends both the same
AdmissionReview over HTTPS, and classifies every disagreement.

Upstream's side is ``dra-example-webhook`` of sigs.k8s.io/dra-example-driver v0.4.0
(``hack/build-binaries.sh dra-example-webhook``), serving a certificate the test issues;
drakit's is ``drakit webhook`` with the example driver's admission backend, which makes its
own CA and publishes it into a ValidatingWebhookConfiguration of the test's control plane
(the test reads it from there to verify the connection).

An answer is an :class:`Outcome`: allowed, denied, an HTTP error, or ``crash`` (the
connection closed with no answer: Go's server does that when a handler panics). Both
charts use ``failurePolicy: Fail``, so the apiserver admits a request only on ``allowed``;
two answers agree when both admit or both do not.

A disagreement is either one of the exception classes of :data:`EXCEPTIONS` (each
documented with its evidence in docs/reference-parity.md) or a failure.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from admission_cases import Case
from helpers.waiting import eventually

from drakit.webhook import jsonbudget

REPO = Path(__file__).resolve().parents[3]
REVIEW_PATH = "/validate-resource-claim-parameters"
#: The profiles upstream's webhook serves (v0.4.0 refuses to start for net).
PROFILES = ("gpu", "cpu")
#: The page that lists the exception classes; the test holds it to exactly these.
PARITY_PAGE = REPO / "docs" / "reference-parity.md"

# ---------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    """One webhook's answer to one review."""

    kind: str  # "allowed", "denied", "http <status>" or "crash"
    message: str = ""

    @property
    def admitted(self) -> bool:
        """What the apiserver does with it under ``failurePolicy: Fail``."""
        return self.kind == "allowed"

    def __str__(self) -> str:
        return f"{self.kind}: {self.message[:300]}" if self.message else self.kind


def outcome_of(status: int, body: bytes) -> Outcome:
    if status != 200:
        return Outcome(f"http {status}", body.decode(errors="replace"))
    response = json.loads(body).get("response") or {}
    if response.get("allowed") is True:
        return Outcome("allowed")
    return Outcome("denied", str((response.get("status") or {}).get("message", "")))


class Endpoint:
    """Keep-alive HTTPS connection to one webhook (one per thread)."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.port = port
        self.context = context
        self.conn: http.client.HTTPSConnection | None = None

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)

    def review(self, body: bytes) -> Outcome:
        """The answer to ``body``. A connection that closes without an answer is retried
        once on a new connection (a kept-alive one may have been closed while idle); if the
        new one closes too, the webhook crashed on this request."""
        fresh = self.conn is None
        for _ in range(2):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request(
                    "POST", REVIEW_PATH, body, headers={"Content-Type": "application/json"}
                )
                answer = self.conn.getresponse()
                data = answer.read()
                if answer.will_close:
                    self.close()
                return outcome_of(answer.status, data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if fresh:
                    break
                fresh = True
        return Outcome("crash", "connection closed without an answer")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------------------- processes


def driver_of(profile: str) -> str:
    """Upstream's default driver name of a profile."""
    return f"{profile}.example.com"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Webhook:
    """A running webhook: its port, the context that trusts it, its process and log."""

    name: str
    port: int
    context: ssl.SSLContext
    process: subprocess.Popen[bytes]
    log: Path

    def endpoint(self) -> Endpoint:
        return Endpoint(self.port, self.context)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        """Fail with the log when the process is gone (a crash must not end the server)."""
        code = self.process.poll()
        if code is not None:
            raise AssertionError(f"{self.name} exited ({code}):\n{self.log_text()[-3000:]}")


def wait_until_served(webhook: Webhook, timeout: float = 60.0) -> None:
    """Until GET /readyz answers over TLS (the server is up and presents its certificate)."""
    last: list[Exception] = []

    def ready() -> bool:
        webhook.alive()
        conn = http.client.HTTPSConnection(
            "127.0.0.1", webhook.port, context=webhook.context, timeout=5
        )
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError as exc:
            last[:] = [exc]
            return False
        finally:
            conn.close()

    eventually(
        ready,
        lambda: f"{webhook.name} serving (last error: {last})\n{webhook.log_text()[-3000:]}",
        timeout,
    )


@contextmanager
def stopped_at_exit(process: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def bundle_of(configs: Any, name: str) -> bytes:
    """The caBundle the drakit webhook published into configuration ``name`` (b"" until then)."""
    hooks = configs.get(name)["webhooks"]
    return base64.b64decode(hooks[0]["clientConfig"].get("caBundle", ""))


# ---------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Result:
    case: Case
    upstream: Outcome
    drakit: Outcome

    @property
    def agrees(self) -> bool:
        return self.upstream.admitted == self.drakit.admitted

    def report(self) -> str:
        return (
            f"{self.case.name} ({self.case.operation}):\n  upstream: {self.upstream}\n"
            f"  drakit:   {self.drakit}\n  body: {self.case.body.decode(errors='replace')[:2000]}"
        )


def run_cases(
    cases: Sequence[Case], upstream: Webhook, drakit: Webhook, workers: int = 4
) -> list[Result]:
    """Every case to both webhooks, ``workers`` connections to each at a time."""
    local = threading.local()
    opened: list[Endpoint] = []

    def one(case: Case) -> Result:
        if not hasattr(local, "pair"):
            local.pair = (upstream.endpoint(), drakit.endpoint())
            opened.extend(local.pair)
        go, py = local.pair
        return Result(case, go.review(case.body), py.review(case.body))

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, cases))
    finally:
        for endpoint in opened:
            endpoint.close()


# ---------------------------------------------------------------------------- exceptions


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def _sharing(params_text: str) -> dict[str, Any] | None:
    params = _json(params_text)
    sharing = params.get("sharing") if isinstance(params, dict) else None
    return sharing if isinstance(sharing, dict) else None


def update_unchanged_config(result: Result) -> bool:
    """An UPDATE whose config list is the stored one (the only UPDATE the apiserver lets
    through: the spec of claims and templates is immutable), refused by upstream."""
    case = result.case
    return (
        case.operation == "UPDATE"
        and case.config_text == case.old_config_text
        and not result.upstream.admitted
        and result.drakit.admitted
    )


def upstream_crash(result: Result) -> bool:
    """Upstream's handler panicked (the connection closed with no answer) on a request
    drakit admits: a strategy without its settings, which upstream's kubelet plugin
    normalises and accepts."""
    return result.upstream.kind == "crash" and result.drakit.admitted


def _other_strategy_settings(sharing: dict[str, Any]) -> bool:
    strategy = sharing.get("strategy")
    if strategy == "TimeSlicing":
        return sharing.get("spacePartitioningConfig") is not None
    if strategy == "SpacePartitioning":
        return sharing.get("timeSlicingConfig") is not None
    return False


def upstream_admits_what_its_plugin_refuses(result: Result) -> bool:
    """Upstream admits a strategy together with the other strategy's settings, which its
    own kubelet plugin refuses at prepare (GetTimeSlicingConfig/GetSpacePartitioningConfig);
    drakit refuses it at admission, with the plugin's message."""
    if not result.upstream.admitted or result.drakit.admitted:
        return False
    return any(
        (sharing := _sharing(text)) is not None and _other_strategy_settings(sharing)
        for text in result.case.our_parameters
    )


def nesting_bound(result: Result) -> bool:
    """drakit refuses, before decoding, a review nested deeper than its bound (the fourth
    review's finding 1: a body's nesting is bounded before it becomes Python objects);
    upstream's Go decoder takes up to 10000 levels and admits it (another driver's config,
    or an ignored field, nested that deep)."""
    return (
        result.upstream.admitted
        and result.drakit.kind == "http 400"
        and "nested more than" in result.drakit.message
        and jsonbudget.nesting(result.case.body) > jsonbudget.MAX_NESTING
    )


#: Exception class -> its test, in the order they are tried.
EXCEPTIONS: dict[str, Callable[[Result], bool]] = {
    "update-unchanged-config": update_unchanged_config,
    "upstream-crash": upstream_crash,
    "upstream-admits-what-its-plugin-refuses": upstream_admits_what_its_plugin_refuses,
    "nesting-bound": nesting_bound,
}


def classify(result: Result) -> str | None:
    """The exception class of a disagreement; None when it is none of them."""
    for name, test in EXCEPTIONS.items():
        if test(result):
            return name
    return None


def documented_exceptions(page: Path = PARITY_PAGE) -> set[str]:
    """The class names in the parity page's table of admission exceptions (rows whose
    first cell is a name in backticks, between the markers)."""
    text = page.read_text()
    start = text.index("<!-- admission-exceptions:start -->")
    end = text.index("<!-- admission-exceptions:end -->")
    return set(re.findall(r"^\|\s*`([a-z0-9-]+)`\s*\|", text[start:end], re.MULTILINE))
