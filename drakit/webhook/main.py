"""The ``drakit webhook`` program: serve admission reviews, publish the CA bundle, rotate.

Start-up: load the backend's ``config_model`` (without constructing the backend: the
webhook needs no devices), issue a CA and serving certificate, start serving, then
publish the CA in the ValidatingWebhookConfiguration; ``/readyz`` answers 200 from the
first successful publication on.

Rotation (:class:`Rotator`), at two thirds of the certificate's lifetime: issue a new CA
and certificate, publish the bundle *new CA + current CA* (the apiserver then trusts
both), wait ``propagation`` seconds for the apiserver to see it, and only then serve the
new certificate. The previous CA stays in the bundle until the next rotation, so no
connection ever meets a certificate the apiserver does not trust yet. Every ``resync``
seconds the configuration is read again and re-patched if someone (``helm upgrade``, a
re-created configuration) changed the bundle.

A restarted process has new keys and publishes a bundle of its new CA only: reviews fail
from its start until the apiserver sees that bundle (about a second; the webhook's
failurePolicy decides what happens to them meanwhile).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drakit.kubeapi.errors import ApiError
from drakit.webhook.cabundle import BundleError, BundlePublisher
from drakit.webhook.server import WebhookServer

if TYPE_CHECKING:
    from drakit.webhook.certs import Issued

__all__ = ["Rotator", "WebhookConfig", "run"]

logger = logging.getLogger(__name__)

RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0)


@dataclass(frozen=True)
class WebhookConfig:
    """What ``drakit webhook`` runs with (validated by the command)."""

    driver_name: str
    backend: str
    bind_address: str
    port: int
    webhook_configuration: str
    dns_names: tuple[str, ...] = ()
    kubeconfig: str | None = None
    cert_lifetime: float = 30 * 24 * 3600.0
    resync: float = 10.0
    propagation: float = 5.0

    @property
    def hosts(self) -> tuple[str, ...]:
        """The serving certificate's SANs: 127.0.0.1, the bind address, the DNS names."""
        extra = (self.bind_address,) if self.bind_address not in ("", "0.0.0.0", "::") else ()
        return tuple(dict.fromkeys(("127.0.0.1", *extra, *self.dns_names)))


class Rotator:
    """Keeps the server's certificate fresh and the configuration's bundle trusting it.

    ``publish(bundle) -> bool`` writes the bundle (raising on failure); ``serve(issued)``
    makes the server present a certificate. :meth:`step` does whatever is due and returns
    how long to sleep; tests drive it with short lifetimes.
    """

    def __init__(
        self,
        *,
        issue_certs: Callable[[], Issued],
        publish: Callable[[bytes], bool],
        serve: Callable[[Issued], None],
        resync: float,
        propagation: float,
        ready: threading.Event | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self._issue = issue_certs
        self._publish = publish
        self._serve = serve
        self._resync = resync
        self._propagation = propagation
        self._clock = clock
        self._sleep = sleep
        self.current = issue_certs()
        self.previous: Issued | None = None
        #: Set while the last publication succeeded (``/readyz``).
        self.ready = ready or threading.Event()
        self._failures = 0
        serve(self.current)

    def bundle(self) -> bytes:
        """Current CA first, then the previous one while it is still valid."""
        cas = [self.current.ca_pem]
        if self.previous is not None and self.previous.ca_not_after > self._clock():
            cas.append(self.previous.ca_pem)
        return b"".join(cas)

    def step(self) -> float:
        """Publish (and rotate when due); the seconds until the next step."""
        try:
            if self._clock() >= self.current.renew_at:
                self._rotate()
            self._publish(self.bundle())
        except (ApiError, BundleError, OSError) as exc:
            return self._failed(exc)
        self._failures = 0
        self.ready.set()
        return max(0.05, min(self._resync, self.current.renew_at - self._clock()))

    def _rotate(self) -> None:
        """New CA and certificate: trusted first (bundle of both), served second."""
        fresh = self._issue()
        self._publish(fresh.ca_pem + self.current.ca_pem)
        self._sleep(self._propagation)  # the apiserver's informer picks up the new bundle
        self.previous, self.current = self.current, fresh
        self._serve(fresh)
        logger.info("Rotated serving certificate", extra={"renew_at": int(fresh.renew_at)})

    def _failed(self, exc: Exception) -> float:
        """Log, and retry with backoff; readiness reflects the last publication."""
        delay = RETRY_SECONDS[min(self._failures, len(RETRY_SECONDS) - 1)]
        self._failures += 1
        self.ready.clear()
        logger.warning(
            "Cannot publish CA bundle",
            extra={"error": f"{type(exc).__name__}: {str(exc)[:500]}", "retry_in": delay},
        )
        return delay


def run(config: WebhookConfig, validate: Callable[[Any], object]) -> int:
    """Serve until SIGTERM or SIGINT; the process exit code."""
    from drakit.kubeapi.lightclient import load_light_client  # noqa: PLC0415
    from drakit.kubeapi.resources import Resource  # noqa: PLC0415
    from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS  # noqa: PLC0415
    from drakit.webhook.certs import issue, server_context  # noqa: PLC0415 (cryptography)

    api = load_light_client(config.kubeconfig, user_agent="drakit-webhook")
    publisher = BundlePublisher(
        Resource(api, VALIDATING_WEBHOOK_CONFIGURATIONS), config.webhook_configuration
    )
    stop = threading.Event()
    ready = threading.Event()
    server = WebhookServer(
        (config.bind_address, config.port),
        driver=config.driver_name,
        validate=validate,
        ready=ready.is_set,
    )
    rotator = Rotator(
        issue_certs=lambda: issue(config.hosts, config.cert_lifetime, name="drakit-webhook"),
        publish=publisher.publish,
        serve=lambda issued: server.use(server_context(issued)),
        resync=config.resync,
        propagation=config.propagation,
        ready=ready,
        sleep=stop.wait,
    )
    _stop_on_signals(stop)
    serving = threading.Thread(target=server.serve_forever, name="webhook-server", daemon=True)
    serving.start()
    logger.info(
        "Serving admission reviews",
        extra={"address": f"{config.bind_address}:{config.port}", "driver": config.driver_name},
    )
    try:
        while not stop.wait(rotator.step()):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _stop_on_signals(stop: threading.Event, signals: Sequence[int] = ()) -> None:
    def handle(signum: int, frame: object) -> None:
        stop.set()

    for signum in signals or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
