"""``drakit webhook``: validate a driver's opaque device config at admission.

Every flag has an environment-variable twin (shown in ``--help``). Validation happens before
anything listens or connects: a bad value is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from drakit.envflags import EnvDefault
from drakit.flags import (
    ConfigError,
    Subcommands,
    add_command,
    add_kubeconfig_flag,
    add_log_flags,
    check_log_flags,
    check_number,
)
from drakit.telemetry.logs import configure as configure_logging

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from drakit.webhook.main import WebhookConfig

EXIT_INVALID = 2  # bad flags, environment or backend: nothing was started
EXIT_FAILED = 1  # valid configuration, but start-up failed

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_NAME_MAX = 253
_DRIVER_NAME_MAX = 63

DESCRIPTION = """\
Run a validating admission webhook for a driver's opaque device config.

The apiserver sends it every CREATE and UPDATE of ResourceClaims and ResourceClaimTemplates
(resource.k8s.io v1, v1beta2, v1beta1) that the ValidatingWebhookConfiguration's rules
select, as AdmissionReview v1 to POST /validate-resource-claim-parameters. Each entry of
spec.devices.config whose opaque.driver is --driver-name is validated with the backend's
config_model (strictly, then its validate_config() if it has one), exactly as the node
plugin validates it when it prepares the claim. An invalid entry denies the request; the
message names the object, the field (spec.devices.config[i].opaque.parameters) and the
model's reason. Other drivers' entries and other objects are allowed. The backend class is
only imported for its config_model: it is not constructed and needs no devices.

TLS needs nothing from outside: the webhook makes its own CA and serving certificate
(SANs 127.0.0.1, --bind-address, --dns-name) and writes the CA into
webhooks[].clientConfig.caBundle of every webhook of --webhook-configuration (RBAC: get and
patch on that one ValidatingWebhookConfiguration). With --ca-secret the CA and the serving
key are kept in that Secret (created when missing; RBAC: get and update on it, create on
Secrets of its namespace): restarts and every replica serve the same certificate. Without
it they are kept in memory (one replica; a restart makes a new CA). Before the certificate
expires, or when the Secret's annotation webhook.drakit.dev/rotate gets a new value, it
makes a new CA, publishes old and new CA together, and switches to the new certificate
only after the apiserver has had the bundle for a few seconds; deleting the Secret starts
over with a new CA at once. GET /readyz answers 200 once the apiserver trusts the served
certificate; GET /livez answers 200 while the process serves (it checks nothing outside).
"""

EPILOG = """\
example (behind the Service gpu-webhook in namespace gpu-system, whose pods share the CA
Secret gpu-system/gpu-webhook-ca):
  drakit webhook --backend mydriver.backend:MyBackend --driver-name gpu.example.com \\
    --bind-address 0.0.0.0 --port 9443 --webhook-configuration gpu-example-webhook \\
    --dns-name gpu-webhook.gpu-system.svc --ca-secret gpu-system/gpu-webhook-ca
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "webhook",
        summary="validate a driver's opaque device config at admission",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    env = EnvDefault
    add_kubeconfig_flag(p, "in-cluster service account")
    p.add_argument(
        "--backend",
        metavar="MODULE:CLASS",
        action=env,
        env="BACKEND",
        required=True,
        help="the driver's backend class (or a built-in backend name); its config_model "
        "validates the opaque parameters",
    )
    p.add_argument(
        "--driver-name",
        metavar="NAME",
        action=env,
        env="DRIVER_NAME",
        required=True,
        help="validate the config entries whose opaque.driver is NAME",
    )
    p.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        action=env,
        env="WEBHOOK_CONFIGURATION",
        required=True,
        help="the ValidatingWebhookConfiguration whose webhooks get the CA bundle",
    )
    p.add_argument(
        "--bind-address",
        metavar="ADDRESS",
        action=env,
        env="BIND_ADDRESS",
        default="127.0.0.1",
        help="IP address to listen on (default: %(default)s)",
    )
    p.add_argument(
        "--port",
        metavar="PORT",
        action=env,
        env="WEBHOOK_PORT",
        default="9443",
        help="HTTPS port (default: %(default)s)",
    )
    p.add_argument(
        "--dns-name",
        metavar="NAME",
        action="append",
        dest="dns_names",
        help="another name of the serving certificate (repeat the flag for several), e.g. "
        "the Service's NAME.NAMESPACE.svc when the configuration uses a Service "
        "[env DNS_NAMES, comma-separated]",
    )
    p.add_argument(
        "--ca-secret",
        metavar="NAMESPACE/NAME",
        action=env,
        env="CA_SECRET",
        default="",
        help="keep the CA and serving certificate in this Secret, shared by restarts and "
        "replicas (default: in memory)",
    )
    p.add_argument(
        "--cert-lifetime",
        metavar="SECONDS",
        action=env,
        env="CERT_LIFETIME",
        default=str(30 * 24 * 3600),
        help="validity of each serving certificate; it is replaced after two thirds of it "
        "(default: %(default)s, 30 days)",
    )
    p.add_argument(
        "--resync",
        metavar="SECONDS",
        action=env,
        env="RESYNC",
        default="10",
        help="how often the configuration's caBundle is checked and restored when something "
        "else changed it (default: %(default)s)",
    )
    add_log_flags(p)
    p.set_defaults(func=run)  # fmt: skip


def build_config(args: argparse.Namespace) -> WebhookConfig:
    """Validate the flags into a ``WebhookConfig``; raises ConfigError naming the flag."""
    from drakit.webhook.main import WebhookConfig  # noqa: PLC0415

    check_log_flags(args)
    dns_names = args.dns_names or [
        n.strip() for n in os.environ.get("DNS_NAMES", "").split(",") if n.strip()
    ]
    lifetime = check_number("--cert-lifetime", args.cert_lifetime, float, 3.0)
    return WebhookConfig(
        driver_name=_dns_name("--driver-name", args.driver_name, _DRIVER_NAME_MAX),
        backend=args.backend,
        bind_address=_ip("--bind-address", args.bind_address),
        port=_port(args.port),
        webhook_configuration=_dns_name(
            "--webhook-configuration", args.webhook_configuration, _DNS_NAME_MAX
        ),
        dns_names=tuple(_dns_name("--dns-name", n, _DNS_NAME_MAX) for n in dns_names),
        kubeconfig=args.kubeconfig,
        cert_lifetime=lifetime,
        ca_secret=_secret_name(args.ca_secret),
        resync=check_number("--resync", args.resync, float, 1.0),
        # A short test lifetime gets a short wait, a real one the apiserver's few seconds.
        propagation=min(5.0, lifetime / 10),
    )


def load_validator(spec: str) -> Callable[[Mapping[str, Any]], object]:
    """The check of one entry's parameters with ``spec``'s ``config_model``; ConfigError
    when the backend cannot be imported or has no pydantic model as a class attribute."""
    from drakit.node_plugin.backends.base import BackendConfigError  # noqa: PLC0415
    from drakit.node_plugin.backends.registry import resolve_backend_class  # noqa: PLC0415
    from drakit.node_plugin.config import validate_parameters  # noqa: PLC0415

    try:
        cls = resolve_backend_class(spec)
        model = cls.config_model
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None
    except Exception as exc:  # a LazyConfigModel whose module fails to import, ...
        raise ConfigError(
            f"--backend {spec!r}: cannot read config_model: {type(exc).__name__}: {exc}"
        ) from None
    import pydantic  # noqa: PLC0415

    if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
        raise ConfigError(
            f"--backend {spec!r}: {cls.__name__}.config_model must be a pydantic model class "
            f"(a class attribute or LazyConfigModel), got {type(model).__name__}"
        )
    return lambda params: validate_parameters(model, params)


def _dns_name(flag: str, value: str | None, limit: int) -> str:
    if not value or len(value) > limit or not _DNS_SUBDOMAIN.match(value):
        raise ConfigError(
            f"{flag} {value!r} is not a DNS subdomain of at most {limit} characters "
            "(lowercase letters, digits, '-' and '.')"
        )
    return value


def _secret_name(value: str | None) -> tuple[str, str] | None:
    """``--ca-secret NAMESPACE/NAME`` as (namespace, name); None when unset."""
    if not value:
        return None
    namespace, slash, name = value.partition("/")
    if not slash or "." in namespace:
        raise ConfigError(f"--ca-secret {value!r} must be NAMESPACE/NAME")
    return (
        _dns_name("--ca-secret namespace", namespace, _DRIVER_NAME_MAX),
        _dns_name("--ca-secret name", name, _DNS_NAME_MAX),
    )


def _ip(flag: str, value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ConfigError(f"{flag} {value!r} is not an IP address") from None


def _port(value: object) -> int:
    port = check_number("--port", value, int, 1)
    if port > 65535:
        raise ConfigError(f"--port must be at most 65535, got {value}")
    return port


def run(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
        validate = load_validator(config.backend)
    except ConfigError as exc:
        print(f"drakit webhook: {exc}", file=sys.stderr)
        return EXIT_INVALID
    from drakit.kubeapi.errors import ConfigError as ClientConfigError  # noqa: PLC0415
    from drakit.webhook import main  # noqa: PLC0415

    configure_logging(args.log_format, args.log_level)
    try:
        return main.run(config, validate)
    except (OSError, ImportError, ClientConfigError) as exc:  # port taken, no cryptography, ...
        print(f"drakit webhook: cannot start: {exc}", file=sys.stderr)
        return EXIT_FAILED
