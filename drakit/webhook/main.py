"""The ``drakit webhook`` program: serve admission reviews, publish the CA bundle, rotate.

Start-up: load the backend's ``config_model`` (without constructing the backend: the
webhook needs no devices), start the server, then let the :class:`~.rotation.Rotator`
read (or create) the CA state, publish its bundle in the ValidatingWebhookConfiguration
and serve its certificate; ``/readyz`` answers 200 once the apiserver has had that CA for
``propagation`` seconds, ``/livez`` whenever the server answers at all (it depends on
nothing outside the process).

With ``--ca-secret`` the state is a Secret (:class:`~.castore.SecretStore`): a restarted
replica serves the certificate the apiserver already trusts, replicas share it, and a
rotation publishes the new CA beside the old one before anyone serves it. Without it the
state is this process's (:class:`~.castore.MemoryStore`): one replica, a new CA on every
start, and reviews fail from the start until the apiserver has the new bundle.

Every ``resync`` seconds the configuration is read again and re-patched if someone
(``helm upgrade``, a re-created configuration) changed the bundle.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drakit.telemetry.logs import get_logger
from drakit.webhook.cabundle import BundlePublisher
from drakit.webhook.server import WebhookServer

if TYPE_CHECKING:
    from drakit.webhook.castore import Store

__all__ = ["WebhookConfig", "run"]

logger = get_logger(__name__)


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
    #: (namespace, name) of the Secret holding the CA state; None: kept in memory.
    ca_secret: tuple[str, str] | None = None

    @property
    def hosts(self) -> tuple[str, ...]:
        """The serving certificate's SANs: 127.0.0.1, the bind address, the DNS names."""
        extra = (self.bind_address,) if self.bind_address not in ("", "0.0.0.0", "::") else ()
        return tuple(dict.fromkeys(("127.0.0.1", *extra, *self.dns_names)))


def run(config: WebhookConfig, validate: Callable[[Any], object]) -> int:
    """Serve until SIGTERM or SIGINT; the process exit code.

    cryptography (the 'webhook' extra) is imported only here: without it, the flags are
    still checked and the command says which extra to install.
    """
    from drakit.kubeapi.lightclient import load_light_client  # noqa: PLC0415
    from drakit.kubeapi.resources import Resource  # noqa: PLC0415
    from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS  # noqa: PLC0415
    from drakit.webhook.certs import issue, server_context  # noqa: PLC0415
    from drakit.webhook.rotation import Rotator  # noqa: PLC0415

    api = load_light_client(config.kubeconfig, user_agent="drakit-webhook")
    publisher = BundlePublisher(
        Resource(api, VALIDATING_WEBHOOK_CONFIGURATIONS), config.webhook_configuration
    )
    store = _store(config, api, publisher)
    stop = threading.Event()
    ready = threading.Event()
    server = WebhookServer(
        (config.bind_address, config.port),
        driver=config.driver_name,
        validate=validate,
        ready=ready.is_set,
    )
    rotator = Rotator(
        store=store,
        issue_certs=lambda: issue(config.hosts, config.cert_lifetime, name="drakit-webhook"),
        publish=publisher.publish,
        serve=lambda issued: server.use(server_context(issued)),
        resync=config.resync,
        propagation=config.propagation,
        ready=ready,
    )
    _stop_on_signals(stop)
    serving = threading.Thread(target=server.serve_forever, name="webhook-server", daemon=True)
    serving.start()
    logger.info(
        "Serving admission reviews",
        address=f"{config.bind_address}:{config.port}",
        driver=config.driver_name,
    )
    try:
        while not stop.wait(rotator.step()):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _store(config: WebhookConfig, api: Any, publisher: BundlePublisher) -> Store:
    """The Secret of ``--ca-secret``, or this process's memory."""
    from drakit.kubeapi.resources import Resource  # noqa: PLC0415
    from drakit.webhook.castore import SECRETS, MemoryStore, SecretStore  # noqa: PLC0415

    if config.ca_secret is None:
        return MemoryStore()

    namespace, name = config.ca_secret
    return SecretStore(
        Resource(api, SECRETS),
        namespace,
        name,
        configuration=config.webhook_configuration,
        owner=publisher.owner_reference,
    )


def _stop_on_signals(stop: threading.Event, signals: Sequence[int] = ()) -> None:
    def handle(signum: int, frame: object) -> None:
        stop.set()

    for signum in signals or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
